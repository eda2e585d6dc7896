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
}
