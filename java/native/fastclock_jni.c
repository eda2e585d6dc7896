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
#include <stdlib.h>
#include <time.h>

#include "fastclock.h"
#include "fastclock_inline.h"

#include "calibrator.h"
#include "counter.h"

#define EXPORT __attribute__((visibility("default")))

/* Bumped when the Java side's expectations of this library change: a stale
 * libfastclock_jni.so found on java.library.path is then refused. */
#define FASTCLOCK_JAVA_ABI 2

/* The JVM unloads a library when the class loader that loaded it is
 * collected (an application server's redeploy), but -z nodelete keeps this
 * copy mapped, its calibrator thread running, and the next class loader
 * extracts and loads a copy of its own: stop this copy's thread, so that
 * redeploys do not pile up threads ticking every millisecond.  Nothing
 * reads this copy's clocks any more: its classes are gone. */
EXPORT JNIEXPORT void JNICALL JNI_OnUnload(JavaVM *vm, void *reserved)
{
    (void)vm;
    (void)reserved;
    fc_calibrator_stop();
}

/* The same copy loaded again by a new class loader (the same path, from
 * java.library.path: the dynamic linker hands back the copy -z nodelete
 * kept, without running its constructor): its thread, stopped by
 * JNI_OnUnload, starts again.  On a first load the constructor has started
 * it already, and this does nothing. */
EXPORT JNIEXPORT jint JNICALL JNI_OnLoad(JavaVM *vm, void *reserved)
{
    (void)vm;
    (void)reserved;
    fc_calibrator_start_if_wanted();
    return JNI_VERSION_1_8;
}

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

/* x in tenths, as digits: "12.3" whatever the process's locale. */
static void put_tenths(char *dst, size_t n, double x)
{
    long long t = x > 0 && x < 1e15 ? (long long)(x * 10 + 0.5) : 0;
    snprintf(dst, n, "%lld.%lld", t / 10, t % 10);
}

/* "key=value" lines, parsed by FastClock.nativeStatus() (every field of the
 * C status but the reserved one).  Not a hot path. */
EXPORT JNIEXPORT jstring JNICALL Java_io_fastclock_Jni_status(JNIEnv *env, jclass c)
{
    (void)c;
    struct fastclock_status st;
    char mode[64], reason[512], calibrator[64], counter[64], read_ns[32], kernel_read_ns[32], buf[2048];
    if (fastclock_status(&st) != 0)
        return (*env)->NewStringUTF(env, "mode=unknown\nreason=fastclock_status failed\n");
    put_clean(mode, sizeof mode, st.mode);
    put_clean(reason, sizeof reason, st.reason);
    put_clean(calibrator, sizeof calibrator, st.calibrator);
    put_clean(counter, sizeof counter, st.counter);
    /* In thousandths, printed as digits: a decimal comma in the JVM's locale
     * would make the Java side read 0 (truncated: 1.0396 must not print 1.040). */
    long long ratio_milli = st.real_line_ratio > 0 && st.real_line_ratio < 1e6 ? (long long)(st.real_line_ratio * 1000) : 0;
    put_tenths(read_ns, sizeof read_ns, st.read_ns);
    put_tenths(kernel_read_ns, sizeof kernel_read_ns, st.kernel_read_ns);
    snprintf(buf, sizeof buf,
             "mode=%s\nreason=%s\ncalibrator=%s\ncounter=%s\ncounter_hz=%.0f\n"
             "calibrations=%llu\nlast_calibration_age_ns=%lld\ncalibration_interval_ns=%lld\n"
             "error_bound_ns=%lld\nlast_error_ns=%lld\nmax_error_ns=%lld\nsample_width_ns=%lld\n"
             "fallback_reads=%llu\nrealtime_steps=%llu\n"
             "ordered=%d\nforced=%d\nread_ns=%s\nkernel_read_ns=%s\nreal_error_bound_ns=%lld\n"
             "kernel_synchronized=%d\ncpus_calibrated=%d\nkernel_maxerror_ns=%lld\nkernel_esterror_ns=%lld\n"
             "max_warp_cycles=%lld\nreal_source=%s\nreal_line_ratio=%lld.%03lld\nversion=%s\n",
             mode, reason, calibrator, counter, st.counter_hz, (unsigned long long)st.calibrations,
             (long long)st.last_calibration_age_ns, (long long)st.calibration_interval_ns,
             (long long)st.error_bound_ns, (long long)st.last_error_ns, (long long)st.max_error_ns,
             (long long)st.sample_width_ns, (unsigned long long)st.fallback_reads,
             (unsigned long long)st.realtime_steps, st.ordered, st.forced, read_ns, kernel_read_ns,
             (long long)st.real_error_bound_ns, st.kernel_synchronized, st.cpus_calibrated,
             (long long)st.kernel_maxerror_ns, (long long)st.kernel_esterror_ns, (long long)st.max_warp_cycles,
             st.real_source ? st.real_source : "line", ratio_milli / 1000, ratio_milli % 1000, fastclock_version());
    return (*env)->NewStringUTF(env, buf);
}

/* The coarse clocks' published block (fastclock_inline.h: {mono, real}, two
 * aligned int64 written by the calibrator thread, mono with release after
 * real), as a 16-byte direct ByteBuffer: Java reads it with acquire loads and
 * no native call.  Java never writes it (the buffer is read-only there). */
EXPORT JNIEXPORT jobject JNICALL Java_io_fastclock_Jni_coarseBlock(JNIEnv *env, jclass c)
{
    (void)c;
    return (*env)->NewDirectByteBuffer(env, (void *)fastclock_coarse_v1, 16);
}

/* The same block's address, for Java 17-21's Unsafe reads (no buffer checks). */
EXPORT JNIEXPORT jlong JNICALL Java_io_fastclock_Jni_coarseAddress(JNIEnv *env, jclass c)
{
    (void)env;
    (void)c;
    return (jlong)(intptr_t)fastclock_coarse_v1;
}

/* fastclock_real_bounded into out[0] (earliest) and out[1] (latest); returns
 * its result (0 synchronised, 1 not, -1 error).  No Java allocation. */
EXPORT JNIEXPORT jint JNICALL Java_io_fastclock_Jni_realBounded(JNIEnv *env, jclass c, jlongArray out)
{
    (void)c;
    int64_t lo = 0, hi = 0;
    int r = fastclock_real_bounded(&lo, &hi);
    jlong v[2] = {(jlong)lo, (jlong)hi};
    (*env)->SetLongArrayRegion(env, out, 0, 2, v);
    return r;
}

/* ---------------------------------------------------------------- costs
 *
 * What the Java side's never-slower decision compares, measured in this
 * process: each of fastclock's fine reads against the clock_gettime the JDK
 * itself calls for System.nanoTime() (MONOTONIC) and currentTimeMillis() /
 * Instant.now() (REALTIME).  Through libc's symbol on purpose: that is what
 * the JVM calls (under `fastclock run` it is the shim, and then the JDK's
 * clocks are fastclock's too).  The statistic is the cheapest of several
 * batches (a preempted batch only ever costs more), and the functions are
 * interleaved batch by batch so a noisy neighbour shifts them alike. */
typedef int64_t (*fc_read_fn)(void);

static int64_t kernel_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t kernel_real(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The bare counter read, no line: the control that tells a measurement
 * taken while fastclock's reads were off their steady path (the line's
 * unordered read is this plus a load and a multiply) from a slow machine,
 * which slows both alike. */
static int64_t bare_counter(void)
{
    return (int64_t)fc_counter_unordered();
}

#define COST_FNS 7 /* the six compared, then the control */
#define COST_FIGURES 12
#define COST_BATCHES 15
#define COST_CALLS 300

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* fn f's cheapest batch, ns per call. */
static double cheapest_batch(double per[][COST_FNS], int f)
{
    double best = per[0][f];
    for (int b = 1; b < COST_BATCHES; b++)
        if (per[b][f] < best)
            best = per[b][f];
    return best;
}

/* The median over the batches of fn a's time over fn b's in the same batch. */
static double paired_median(double per[][COST_FNS], int a, int b)
{
    double ratios[COST_BATCHES];
    for (int i = 0; i < COST_BATCHES; i++)
        ratios[i] = per[i][b] > 0 ? per[i][a] / per[i][b] : 0;
    qsort(ratios, COST_BATCHES, sizeof ratios[0], cmp_double);
    return ratios[COST_BATCHES / 2];
}

/* out[0..5]: ns per call, the cheapest batch, of fastclock_mono_ns,
 * _mono_ns_unordered, _real_ns, _real_ns_unordered, clock_gettime MONOTONIC,
 * REALTIME.  out[6..9]: for each of the four fastclock reads, the median over
 * the batches of its time divided by its kernel counterpart's in the same
 * batch (MONOTONIC for the mono reads, REALTIME for the real ones): both ran
 * within microseconds of each other, so a neighbour's load cancels out of the
 * ratio where it does not out of two separate minima.  out[10]: the same
 * median of _mono_ns_unordered over the bare counter read (bare_counter);
 * out[11]: the bare counter read's cheapest batch, ns per call. */
EXPORT JNIEXPORT void JNICALL Java_io_fastclock_Jni_costs(JNIEnv *env, jclass c, jdoubleArray out)
{
    (void)c;
    static fc_read_fn const fns[COST_FNS] = {
        fastclock_mono_ns, fastclock_mono_ns_unordered, fastclock_real_ns,
        fastclock_real_ns_unordered, kernel_mono, kernel_real, bare_counter,
    };
    static const int kernel_of[4] = {4, 4, 5, 5};
    double per[COST_BATCHES][COST_FNS], res[COST_FIGURES];
    volatile int64_t sink = 0;
    for (int f = 0; f < COST_FNS; f++)
        for (int i = 0; i < 64; i++) /* warm: caches, branch predictors, lazy binding */
            sink += fns[f]();
    for (int b = 0; b < COST_BATCHES; b++) {
        for (int f = 0; f < COST_FNS; f++) {
            fc_read_fn fn = fns[f];
            int64_t t0 = now_ns();
            for (int i = 0; i < COST_CALLS; i++)
                sink += fn();
            per[b][f] = (double)(now_ns() - t0) / COST_CALLS;
        }
    }
    (void)sink;
    for (int f = 0; f < 6; f++)
        res[f] = cheapest_batch(per, f);
    for (int f = 0; f < 4; f++)
        res[6 + f] = paired_median(per, f, kernel_of[f]);
    res[10] = paired_median(per, 1, 6);
    res[11] = cheapest_batch(per, 6);
    (*env)->SetDoubleArrayRegion(env, out, 0, COST_FIGURES, res);
}
