package io.fastclock;

/**
 * The hot native reads, Java 17-21 edition: JNI.  The jar's
 * META-INF/versions/22 holds the FFM edition of this class, which replaces it
 * on Java 22+.  Only used after the library has loaded.
 */
final class NativeCalls {
    private NativeCalls() {}

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
