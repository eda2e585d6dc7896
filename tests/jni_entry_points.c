/* The jar's native library without a JVM: loaded with dlopen, as
 * System.load does, and every JNI entry point called and checked against
 * the kernel's clocks.  In the arm64 tree this runs under qemu-aarch64
 * (CMAKE_CROSSCOMPILING_EMULATOR): the jar's linux-aarch64 library is run
 * nowhere else here, as no arm64 JVM is installed.
 *
 * The entry points that use their JNIEnv (status, coarseBlock, realBounded,
 * costs) get one whose function table holds just the function each calls;
 * any other call through it would crash the test.  JNI_OnLoad and
 * JNI_OnUnload are called as the JVM would (they use no JavaVM: the
 * calibrator thread's start and stop), the unload last.
 *
 * usage: jni_entry_points LIBRARY ABI    (ABI: NativeLoader.ABI, what the jar expects) */
#include <dlfcn.h>
#include <jni.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Generous: the core's error bound is microseconds; a wrong clock, unit or
 * epoch is off by seconds or years.  Coarse clocks lag by up to a tick of
 * the calibrator thread, which a loaded machine may hold up. */
#define FINE_SLACK_NS 5000000LL
#define COARSE_AHEAD_NS 1000000LL
#define COARSE_LAG_NS 250000000LL
#define MONO_READS 200000

static int failures;
#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                      \
            printf(__VA_ARGS__);                                                             \
            printf("\n");                                                                    \
            failures++;                                                                      \
        }                                                                                    \
    } while (0)

static void *lib;

static void *sym(const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        printf("FAIL: %s is not exported (%s)\n", name, dlerror());
        exit(1);
    }
    return p;
}

typedef jlong (*jni_long_fn)(JNIEnv *, jclass);
typedef jlong (*critical_long_fn)(void);

static jni_long_fn jni_long(const char *name)
{
    jni_long_fn f;
    void *p = sym(name);
    memcpy(&f, &p, sizeof f); /* ISO C has no object-to-function pointer cast */
    return f;
}

static critical_long_fn critical_long(const char *name)
{
    critical_long_fn f;
    void *p = sym(name);
    memcpy(&f, &p, sizeof f);
    return f;
}

static int64_t kernel(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---------------------------------------------- a JNIEnv with one function */
static struct JNINativeInterface_ table;
static JNIEnv env_value = &table;
static JNIEnv *const env = &env_value;
static char sentinel_storage; /* jobject is opaque in C: any address will do */
#define SENTINEL ((jobject)(void *)&sentinel_storage)
static char status_text[4096];
static void *buffer_address;
static jlong buffer_capacity = -1, bounds[2];
static jdouble costs[16];
static int costs_len = -1;

static jstring JNICALL new_string_utf(JNIEnv *e, const char *utf)
{
    (void)e;
    snprintf(status_text, sizeof status_text, "%s", utf);
    return (jstring)SENTINEL;
}

static jobject JNICALL new_direct_byte_buffer(JNIEnv *e, void *address, jlong capacity)
{
    (void)e;
    buffer_address = address;
    buffer_capacity = capacity;
    return SENTINEL;
}

static void JNICALL set_long_array_region(JNIEnv *e, jlongArray a, jsize start, jsize len, const jlong *buf)
{
    (void)e;
    CHECK(a == (jlongArray)SENTINEL && start == 0 && len == 2, "realBounded: SetLongArrayRegion(%d, %d)",
          (int)start, (int)len);
    if (len == 2)
        memcpy(bounds, buf, sizeof bounds);
}

static void JNICALL set_double_array_region(JNIEnv *e, jdoubleArray a, jsize start, jsize len, const jdouble *buf)
{
    (void)e;
    CHECK(a == (jdoubleArray)SENTINEL && start == 0, "costs: SetDoubleArrayRegion(start %d)", (int)start);
    costs_len = len;
    if (len > 0 && len <= (jsize)(sizeof costs / sizeof costs[0]))
        memcpy(costs, buf, (size_t)len * sizeof costs[0]);
}

/* --------------------------------------------------------------- the checks */

/* An entry point: the JNI one or its JavaCritical_ twin. */
struct reader {
    const char *name;
    jni_long_fn jni;
    critical_long_fn critical;
};

static jlong read_clock(const struct reader *r) { return r->jni ? r->jni(env, NULL) : r->critical(); }

/* One read bracketed by two of the kernel's, with the slack allowed. */
static void bracketed(const struct reader *r, clockid_t id, int64_t ahead, int64_t lag)
{
    int64_t k0 = kernel(id);
    int64_t v = read_clock(r);
    int64_t k1 = kernel(id);
    CHECK(v >= k0 - lag && v <= k1 + ahead, "%s = %lld, the kernel's %lld..%lld (%+lld ns)", r->name, (long long)v,
          (long long)k0, (long long)k1, (long long)(v < k0 ? v - k0 : v > k1 ? v - k1 : 0));
}

static void never_back(const struct reader *r)
{
    jlong prev = read_clock(r);
    for (int i = 0; i < MONO_READS; i++) {
        jlong v = read_clock(r);
        if (v < prev) {
            CHECK(0, "%s went back by %lld ns after %d reads", r->name, (long long)(prev - v), i);
            return;
        }
        prev = v;
    }
}

/* Over half a second each fine clock advances as the kernel's does: a wrong
 * rate (a counter frequency off by 1 %) fails, a preempted read does not (the
 * kernel's reads bracket each of ours).  One sleep serves all four. */
static void rates(void)
{
    static const struct {
        const char *name;
        clockid_t id;
    } fine[] = {
        {"Java_io_fastclock_Jni_monoNs", CLOCK_MONOTONIC},
        {"Java_io_fastclock_Jni_monoNsUnordered", CLOCK_MONOTONIC},
        {"Java_io_fastclock_Jni_realNs", CLOCK_REALTIME},
        {"Java_io_fastclock_Jni_realNsUnordered", CLOCK_REALTIME},
    };
    enum { N = sizeof fine / sizeof fine[0] };
    jni_long_fn f[N];
    int64_t a0[N], v0[N], b0[N];
    for (int i = 0; i < N; i++) {
        f[i] = jni_long(fine[i].name);
        a0[i] = kernel(fine[i].id), v0[i] = f[i](env, NULL), b0[i] = kernel(fine[i].id);
    }
    struct timespec half = {0, 500000000};
    nanosleep(&half, NULL);
    for (int i = 0; i < N; i++) {
        int64_t a1 = kernel(fine[i].id), v1 = f[i](env, NULL), b1 = kernel(fine[i].id);
        int64_t lo = a1 - b0[i], hi = b1 - a0[i], d = v1 - v0[i], slack = 1000000 + hi / 500;
        CHECK(d >= lo - slack && d <= hi + slack, "%s advanced %lld ns while the kernel's advanced %lld..%lld",
              fine[i].name, (long long)d, (long long)lo, (long long)hi);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s LIBRARY ABI\n", argv[0]);
        return 2;
    }
    lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        printf("FAIL: dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    jint (*on_load)(JavaVM *, void *);
    void *ol = sym("JNI_OnLoad");
    memcpy(&on_load, &ol, sizeof on_load);
    CHECK(on_load(NULL, NULL) == JNI_VERSION_1_8, "JNI_OnLoad's version");

    jint (*abi)(JNIEnv *, jclass);
    void *p = sym("Java_io_fastclock_Jni_abi");
    memcpy(&abi, &p, sizeof abi);
    CHECK(abi(env, NULL) == atoi(argv[2]), "ABI %d, the jar expects %s", (int)abi(env, NULL), argv[2]);
    CHECK(jni_long("Java_io_fastclock_Jni_noop")(env, NULL) == 0, "noop");
    CHECK(critical_long("JavaCritical_io_fastclock_Jni_noop")() == 0, "JavaCritical noop");

    static const struct {
        const char *name;
        clockid_t id;
        int coarse;
    } clocks[] = {
        {"monoNs", CLOCK_MONOTONIC, 0},          {"monoNsUnordered", CLOCK_MONOTONIC, 0},
        {"realNs", CLOCK_REALTIME, 0},           {"realNsUnordered", CLOCK_REALTIME, 0},
        {"monoCoarseNs", CLOCK_MONOTONIC, 1},    {"realCoarseNs", CLOCK_REALTIME, 1},
    };
    for (size_t i = 0; i < sizeof clocks / sizeof clocks[0]; i++) {
        char jname[96], cname[96];
        snprintf(jname, sizeof jname, "Java_io_fastclock_Jni_%s", clocks[i].name);
        snprintf(cname, sizeof cname, "JavaCritical_io_fastclock_Jni_%s", clocks[i].name);
        const struct reader jr = {jname, jni_long(jname), NULL}, cr = {cname, NULL, critical_long(cname)};
        int64_t ahead = clocks[i].coarse ? COARSE_AHEAD_NS : FINE_SLACK_NS;
        int64_t lag = clocks[i].coarse ? COARSE_LAG_NS : FINE_SLACK_NS;
        for (int round = 0; round < 3; round++) {
            bracketed(&jr, clocks[i].id, ahead, lag);
            bracketed(&cr, clocks[i].id, ahead, lag);
        }
        if (clocks[i].id == CLOCK_MONOTONIC) {
            never_back(&jr);
            never_back(&cr);
        }
    }
    rates();

    /* The coarse block: the address Java 17's Unsafe reads is the buffer Java 22+ gets. */
    table.NewDirectByteBuffer = new_direct_byte_buffer;
    jobject (*block)(JNIEnv *, jclass);
    p = sym("Java_io_fastclock_Jni_coarseBlock");
    memcpy(&block, &p, sizeof block);
    CHECK(block(env, NULL) == SENTINEL, "coarseBlock returns the buffer");
    jlong addr = jni_long("Java_io_fastclock_Jni_coarseAddress")(env, NULL);
    CHECK(addr != 0 && (void *)(intptr_t)addr == buffer_address && buffer_capacity == 16,
          "coarseAddress %#llx, coarseBlock's buffer %p of %lld bytes", (unsigned long long)addr, buffer_address,
          (long long)buffer_capacity);
    if (addr != 0) {
        const int64_t *words = (const int64_t *)(intptr_t)addr;
        int64_t k0 = kernel(CLOCK_MONOTONIC);
        int64_t m = __atomic_load_n(&words[0], __ATOMIC_ACQUIRE);
        int64_t k1 = kernel(CLOCK_MONOTONIC);
        CHECK(m == 0 || (m >= k0 - COARSE_LAG_NS && m <= k1 + COARSE_AHEAD_NS),
              "the published coarse MONOTONIC %lld, the kernel's %lld..%lld", (long long)m, (long long)k0, (long long)k1);
    }

    /* Bounded UTC: the kernel's REALTIME lies within. */
    table.SetLongArrayRegion = set_long_array_region;
    jint (*bounded)(JNIEnv *, jclass, jlongArray);
    p = sym("Java_io_fastclock_Jni_realBounded");
    memcpy(&bounded, &p, sizeof bounded);
    int64_t k0 = kernel(CLOCK_REALTIME);
    jint r = bounded(env, NULL, (jlongArray)SENTINEL);
    int64_t k1 = kernel(CLOCK_REALTIME);
    CHECK((r == 0 || r == 1) && bounds[0] <= bounds[1] && bounds[0] <= k1 && bounds[1] >= k0,
          "realBounded %d: [%lld, %lld], the kernel's %lld..%lld", (int)r, (long long)bounds[0], (long long)bounds[1],
          (long long)k0, (long long)k1);

    /* The costs behind the never-slower decision: twelve positive figures. */
    table.SetDoubleArrayRegion = set_double_array_region;
    void (*cost)(JNIEnv *, jclass, jdoubleArray);
    p = sym("Java_io_fastclock_Jni_costs");
    memcpy(&cost, &p, sizeof cost);
    cost(env, NULL, (jdoubleArray)SENTINEL);
    CHECK(costs_len == 12, "costs wrote %d figures", costs_len);
    for (int i = 0; i < costs_len && i < 12; i++)
        CHECK(isfinite(costs[i]) && costs[i] > 0, "costs[%d] = %g", i, costs[i]);

    /* status: the key=value lines NativeStatus parses. */
    table.NewStringUTF = new_string_utf;
    jstring (*status)(JNIEnv *, jclass);
    p = sym("Java_io_fastclock_Jni_status");
    memcpy(&status, &p, sizeof status);
    CHECK(status(env, NULL) == (jstring)SENTINEL, "status returns the string");
    CHECK(strncmp(status_text, "mode=", 5) == 0 && strstr(status_text, "\ncounter=") &&
              strstr(status_text, "\nversion=") && !strstr(status_text, "mode=unknown"),
          "status:\n%s", status_text);
    printf("%s", status_text);
    printf("costs (ns): mono %.1f, unordered %.1f, real %.1f, unordered %.1f; kernel %.1f, %.1f; "
           "unordered over the bare counter read %.2f (the bare read %.1f ns)\n",
           costs[0], costs[1], costs[2], costs[3], costs[4], costs[5], costs[10], costs[11]);

    void (*on_unload)(JavaVM *, void *);
    void *ou = sym("JNI_OnUnload");
    memcpy(&on_unload, &ou, sizeof on_unload);
    on_unload(NULL, NULL); /* stops the calibrator thread: must return */
    CHECK(jni_long("Java_io_fastclock_Jni_monoNs")(env, NULL) > 0, "a read after JNI_OnUnload still answers");

    if (failures) {
        printf("%d check(s) failed\n", failures);
        return 1;
    }
    printf("every JNI entry point of %s answers, and agrees with the kernel\n", argv[1]);
    return 0;
}
