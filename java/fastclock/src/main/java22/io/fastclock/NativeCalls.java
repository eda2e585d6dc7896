package io.fastclock;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * The hot native reads, Java 22+ edition: FFM downcalls straight to the core's
 * exported functions, marked critical (no thread-state transition: they are
 * short, lock-free and never call back into Java).  Held in static finals and
 * called with invokeExact so the JIT links them like a direct call.
 *
 * Falls back to JNI (same library) when linking fails or with
 * -Dfastclock.ffm=false; the benchmarks compare both.
 */
final class NativeCalls {
    private NativeCalls() {}

    private static final MethodHandle MONO, MONO_U, REAL, REAL_U, MONO_C, REAL_C, NOOP;
    private static final String FFM_UNAVAILABLE;
    /**
     * The core's published coarse clocks: the 16 bytes fastclock_coarse_v1 points at,
     * as a MemorySegment (a static final: the JIT folds its bounds), read with acquire
     * loads and no native call; null when unavailable.
     */
    private static final MemorySegment COARSE;
    private static final VarHandle LONG_AT = ValueLayout.JAVA_LONG.varHandle();

    static {
        String[] names = {
            "fastclock_mono_ns", "fastclock_mono_ns_unordered", "fastclock_real_ns",
            "fastclock_real_ns_unordered", "fastclock_mono_coarse_ns", "fastclock_real_coarse_ns",
            "fastclock_java_noop",
        };
        MethodHandle[] h = new MethodHandle[names.length];
        String why = null;
        if (!Props.flag("fastclock.ffm", true)) {
            why = "FFM disabled by -Dfastclock.ffm=false";
        } else {
            try {
                Linker linker = Linker.nativeLinker();
                // The library was loaded with System.load by this class loader.
                SymbolLookup lookup = SymbolLookup.loaderLookup();
                FunctionDescriptor longOfVoid = FunctionDescriptor.of(ValueLayout.JAVA_LONG);
                Linker.Option critical = Linker.Option.critical(false);
                for (int i = 0; i < names.length; i++) {
                    String name = names[i];
                    MemorySegment sym = lookup.find(name)
                            .orElseThrow(() -> new UnsatisfiedLinkError("no symbol " + name));
                    h[i] = linker.downcallHandle(sym, longOfVoid, critical);
                }
            } catch (Throwable t) {
                // IllegalCallerException when native access is denied, or an old library.
                why = "FFM linking failed (" + t + "); using JNI";
                h = new MethodHandle[names.length];
            }
        }
        MemorySegment coarse = null;
        try {
            // The block JNI hands over as a direct buffer (ofBuffer is not a restricted
            // method: this works with -Dfastclock.ffm=false and without native access too).
            java.nio.ByteBuffer b = Jni.coarseBlock();
            if (b != null && b.capacity() >= 16)
                coarse = MemorySegment.ofBuffer(b.asReadOnlyBuffer());
        } catch (Throwable t) {
            coarse = null; // an older library: a native call per read
        }
        COARSE = coarse;
        MONO = h[0];
        MONO_U = h[1];
        REAL = h[2];
        REAL_U = h[3];
        MONO_C = h[4];
        REAL_C = h[5];
        NOOP = h[6];
        FFM_UNAVAILABLE = why;
    }

    static String binding() {
        return MONO != null ? "ffm" : "jni";
    }

    static String ffmUnavailable() {
        return FFM_UNAVAILABLE;
    }

    static String coarseAccess() {
        return COARSE != null ? "MemorySegment" : null;
    }

    /** The published CLOCK_MONOTONIC ns, 0 while nobody publishes. */
    static long coarseMono() {
        return COARSE != null ? (long) LONG_AT.getAcquire(COARSE, 0L) : 0;
    }

    /** The published CLOCK_REALTIME ns: valid after coarseMono() returned non-zero. */
    static long coarseReal() {
        return (long) LONG_AT.getAcquire(COARSE, 8L);
    }

    // The catch blocks cannot run (the C functions do not throw); invokeExact
    // merely declares Throwable.  The null checks fold away: the fields are
    // static final.

    static long monoNs() {
        if (MONO != null) {
            try {
                return (long) MONO.invokeExact();
            } catch (Throwable t) {
                // fall through to JNI
            }
        }
        return Jni.monoNs();
    }

    static long monoNsUnordered() {
        if (MONO_U != null) {
            try {
                return (long) MONO_U.invokeExact();
            } catch (Throwable t) {
                // fall through to JNI
            }
        }
        return Jni.monoNsUnordered();
    }

    static long realNs() {
        if (REAL != null) {
            try {
                return (long) REAL.invokeExact();
            } catch (Throwable t) {
                // fall through to JNI
            }
        }
        return Jni.realNs();
    }

    static long realNsUnordered() {
        if (REAL_U != null) {
            try {
                return (long) REAL_U.invokeExact();
            } catch (Throwable t) {
                // fall through to JNI
            }
        }
        return Jni.realNsUnordered();
    }

    static long monoCoarseNs() {
        if (MONO_C != null) {
            try {
                return (long) MONO_C.invokeExact();
            } catch (Throwable t) {
                // fall through to JNI
            }
        }
        return Jni.monoCoarseNs();
    }

    static long realCoarseNs() {
        if (REAL_C != null) {
            try {
                return (long) REAL_C.invokeExact();
            } catch (Throwable t) {
                // fall through to JNI
            }
        }
        return Jni.realCoarseNs();
    }

    static long noop() {
        if (NOOP != null) {
            try {
                return (long) NOOP.invokeExact();
            } catch (Throwable t) {
                // fall through to JNI
            }
        }
        return Jni.noop();
    }
}
