package io.fastclock;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The hot native reads, Java 17-21 edition: JNI.  The jar's
 * META-INF/versions/22 holds the FFM edition of this class, which replaces it
 * on Java 22+.  Only used after the library has loaded.
 */
final class NativeCalls {
    private NativeCalls() {}

    /*
     * The core's published coarse clocks (fastclock_coarse_v1: MONOTONIC ns at 0,
     * 0 while nobody publishes; REALTIME ns at 8), read in place with no native
     * call.  Java 17-21 have no MemorySegment: sun.misc.Unsafe's volatile load at
     * the block's address costs one instruction (a direct ByteBuffer's VarHandle
     * measured 1.7 and 3.3 ns per coarse read here, bounds and alignment checks
     * on every access); the buffer remains for a JDK without jdk.unsupported.
     * The JIT treats a volatile load as an acquire: no later load moves above it.
     */
    private static final sun.misc.Unsafe UNSAFE;
    private static final long COARSE_ADDRESS;
    private static final ByteBuffer COARSE;
    private static final VarHandle LONG_AT = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());

    static {
        sun.misc.Unsafe u = null;
        long address = 0;
        ByteBuffer b = null;
        try {
            b = Jni.coarseBlock();
            b = b != null && b.capacity() >= 16 ? b.asReadOnlyBuffer().order(ByteOrder.nativeOrder()) : null;
            address = b != null ? Jni.coarseAddress() : 0;
            java.lang.reflect.Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
            f.setAccessible(true);
            u = (sun.misc.Unsafe) f.get(null);
            // One load now: a JDK that denies Unsafe's memory access (JDK 23+ with
            // --sun-misc-unsafe-memory-access=deny, this class loaded from a jar that
            // lost its Multi-Release manifest) throws here, not in a clock method.
            if (address != 0 && (address & 7) == 0)
                u.getLongVolatile(null, address);
        } catch (Throwable t) {
            u = null; // no jdk.unsupported, or an older library: the buffer, or a native call
        }
        try {
            // One acquire load through the buffer now: one it refuses (a block not
            // 8-byte aligned) throws here, and the coarse clocks make a native call.
            if (b != null)
                LONG_AT.getAcquire(b, 8);
        } catch (RuntimeException e) {
            b = null;
        }
        COARSE = b;
        UNSAFE = b != null && address != 0 && (address & 7) == 0 ? u : null;
        COARSE_ADDRESS = UNSAFE != null ? address : 0;
    }

    /** How the coarse clocks reach the published memory, or null when they make a native call. */
    static String coarseAccess() {
        return UNSAFE != null ? "Unsafe volatile load" : COARSE != null ? "direct ByteBuffer" : null;
    }

    /** The published CLOCK_MONOTONIC ns, 0 while nobody publishes. */
    static long coarseMono() {
        if (UNSAFE != null)
            return UNSAFE.getLongVolatile(null, COARSE_ADDRESS);
        return COARSE != null ? (long) LONG_AT.getAcquire(COARSE, 0) : 0;
    }

    /** The published CLOCK_REALTIME ns: valid after coarseMono() returned non-zero. */
    static long coarseReal() {
        if (UNSAFE != null)
            return UNSAFE.getLongVolatile(null, COARSE_ADDRESS + 8);
        return (long) LONG_AT.getAcquire(COARSE, 8);
    }

    /** "jni" or "ffm". */
    static String binding() {
        return "jni";
    }

    /** Why FFM is not in use, or null when it is. */
    static String ffmUnavailable() {
        return "FFM downcalls need Java 22+";
    }

    static long monoNs() {
        return Jni.monoNs();
    }

    static long monoNsUnordered() {
        return Jni.monoNsUnordered();
    }

    static long realNs() {
        return Jni.realNs();
    }

    static long realNsUnordered() {
        return Jni.realNsUnordered();
    }

    static long monoCoarseNs() {
        return Jni.monoCoarseNs();
    }

    static long realCoarseNs() {
        return Jni.realCoarseNs();
    }

    static long noop() {
        return Jni.noop();
    }
}
