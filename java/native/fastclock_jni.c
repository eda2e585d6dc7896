/*
 * The Java binding's native side, linked into libfastclock_jni.so with the
 * whole core.
 *
 * Java 17-21 call the JNI functions below (class io.fastclock.Jni).  Java 22+
 * bind the core's own exported functions (fastclock_mono_ns, ...) directly
 * with FFM downcalls, plus fastclock_java_noop as the call-cost baseline.
 *
 * JavaCritical_* are the same functions without JNIEnv/jclass: JDK 17 with
 * -XX:+CriticalJNINatives (deprecated in 16, gone in 18) calls them with a
 * cheaper transition.  They cost nothing when unused.
 */
#include <jni.h>
#include <stdio.h>
#include <stdint.h>

#include "fastclock.h"

#define EXPORT __attribute__((visibility("default")))

/* Bumped when the Java side's expectations of this library change: a stale
 * libfastclock_jni.so found on java.library.path is then refused. */
#define FASTCLOCK_JAVA_ABI 1

/* The FFM baseline: a call that does nothing. */
EXPORT int64_t fastclock_java_noop(void) { return 0; }

#define CLOCK_FN(jname, cfn)                                                          \
    EXPORT JNIEXPORT jlong JNICALL Java_io_fastclock_Jni_##jname(JNIEnv *env, jclass c) \
    {                                                                                 \
        (void)env;                                                                    \
        (void)c;                                                                      \
        return (jlong)cfn();                                                          \
    }                                                                                 \
    EXPORT JNIEXPORT jlong JNICALL JavaCritical_io_fastclock_Jni_##jname(void)        \
    {                                                                                 \
        return (jlong)cfn();                                                          \
    }

CLOCK_FN(monoNs, fastclock_mono_ns)
CLOCK_FN(monoNsUnordered, fastclock_mono_ns_unordered)
CLOCK_FN(realNs, fastclock_real_ns)
CLOCK_FN(realNsUnordered, fastclock_real_ns_unordered)
CLOCK_FN(monoCoarseNs, fastclock_mono_coarse_ns)
CLOCK_FN(realCoarseNs, fastclock_real_coarse_ns)
CLOCK_FN(noop, fastclock_java_noop)

EXPORT JNIEXPORT jint JNICALL Java_io_fastclock_Jni_abi(JNIEnv *env, jclass c)
{
    (void)env;
    (void)c;
    return FASTCLOCK_JAVA_ABI;
}

/* NewStringUTF wants modified UTF-8: keep printable ASCII, one line per key. */
static void put_clean(char *dst, size_t n, const char *src)
{
    size_t i = 0;
    for (; src && *src && i + 1 < n; src++, i++)
        dst[i] = (*src >= 0x20 && *src < 0x7f) ? *src : ' ';
    dst[i] = 0;
}

/* "key=value" lines, parsed by io.fastclock.NativeStatus.  Not a hot path. */
EXPORT JNIEXPORT jstring JNICALL Java_io_fastclock_Jni_status(JNIEnv *env, jclass c)
{
    (void)c;
    struct fastclock_status st;
    char mode[64], reason[512], calibrator[64], counter[64], buf[1536];
    if (fastclock_status(&st) != 0)
        return (*env)->NewStringUTF(env, "mode=unknown\nreason=fastclock_status failed\n");
    put_clean(mode, sizeof mode, st.mode);
    put_clean(reason, sizeof reason, st.reason);
    put_clean(calibrator, sizeof calibrator, st.calibrator);
    put_clean(counter, sizeof counter, st.counter);
    snprintf(buf, sizeof buf,
             "mode=%s\nreason=%s\ncalibrator=%s\ncounter=%s\ncounter_hz=%.0f\n"
             "calibrations=%llu\nerror_bound_ns=%lld\nlast_error_ns=%lld\nmax_error_ns=%lld\n"
             "ordered=%d\nforced=%d\nread_ns=%.1f\nkernel_read_ns=%.1f\nversion=%s\n",
             mode, reason, calibrator, counter, st.counter_hz,
             (unsigned long long)st.calibrations, (long long)st.error_bound_ns,
             (long long)st.last_error_ns, (long long)st.max_error_ns, st.ordered, st.forced,
             st.read_ns, st.kernel_read_ns, fastclock_version());
    return (*env)->NewStringUTF(env, buf);
}
