package io.fastclock;

/**
 * The JNI entry points of libfastclock_jni.so (java/native/fastclock_jni.c).
 * Used directly on Java 17-21, and on 22+ for everything but the hot reads
 * (and for those too with -Dfastclock.ffm=false).
 */
final class Jni {
    private Jni() {}

    static native long monoNs();

    static native long monoNsUnordered();

    static native long realNs();

    static native long realNsUnordered();

    static native long monoCoarseNs();

    static native long realCoarseNs();

    /** Does nothing: the cost of a JNI call, for the benchmarks. */
    static native long noop();

    static native int abi();

    /** fastclock_status() as "key=value" lines. */
    static native String status();

    /**
     * The core's published coarse clocks ({@code fastclock_coarse_v1}): 16 bytes,
     * MONOTONIC ns at 0 (0 while nobody ticks) and REALTIME ns at 8, native order.
     */
    static native java.nio.ByteBuffer coarseBlock();

    /** The address of that block (8-byte aligned, valid while the library is loaded: it is never unloaded). */
    static native long coarseAddress();

    /** fastclock_real_bounded into out[0..1]; 0 synchronised, 1 not, -1 error. */
    static native int realBounded(long[] out);

    /**
     * Measured in C in this process, 15 interleaved batches: out[0..5] ns per call
     * (the cheapest batch) of fastclock_mono_ns, _mono_ns_unordered, _real_ns,
     * _real_ns_unordered, and libc's clock_gettime MONOTONIC and REALTIME (what the
     * JDK calls); out[6..9] the median, over the batches, of each fastclock read's
     * time over its kernel counterpart's in the same batch; out[10] the same median
     * of _mono_ns_unordered over the bare counter read, no line (the control that
     * tells a measurement taken off the reads' steady path); out[11] that bare
     * read's cheapest batch, ns per call.  out has COST_FIGURES elements.
     */
    static native void costs(double[] out);

    /** The length of costs' array. */
    static final int COST_FIGURES = 12;
}
