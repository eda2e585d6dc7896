// The guarantees of fastclock on the real machine, against the real kernel.
// Linked against the shared library as shipped; ctest runs this binary
// twice: with the background calibrator and with FASTCLOCK_CALIBRATOR=lazy.
#include <gtest/gtest.h>

#include <cinttypes>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sched.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fastclock.h"
#include "fastclock_inline.h"
#include "test_util.h"

using namespace fctest;

namespace {

// The mode this run forces (FASTCLOCK_MODE=percpu: tsc-percpu; system:
// system, where only Inline.* runs; otherwise tsc): the guarantees are
// tested in each.
std::string wanted_mode()
{
    const char *v = getenv("FASTCLOCK_MODE");
    if (v && std::string(v) == "system")
        return "system"; // the inline reads' run (tests/CMakeLists.txt)
    return v && std::string(v) == "percpu" ? "tsc-percpu" : "tsc";
}

// Tests of a counter-based mode cannot run where the machine refuses it;
// they report SKIPPED (ctest shows them as skipped, not passed), naming what
// is missing.  A mode that differs for any other reason (the request
// ignored, a fall back) fails them.
#define REQUIRE_MODE(want)                                                                \
    do {                                                                                  \
        std::string coarse_;                                                              \
        if (counter_too_coarse(&coarse_))                                                 \
            GTEST_SKIP() << coarse_;                                                      \
        struct fastclock_status st_;                                                      \
        fastclock_status(&st_);                                                           \
        if (st_.mode != std::string(want) && !getenv("FASTCLOCK_MODE")) /* the auto run */ \
            GTEST_SKIP() << "this test is about mode " << (want) << "; auto chose " << st_.mode \
                         << ": " << st_.reason;                                           \
        if (st_.mode != std::string(want))                                                \
            GTEST_SKIP() << fctest::skip_unless_refused((want), st_.mode, st_.reason);    \
    } while (0)
#define REQUIRE_TSC() REQUIRE_MODE("tsc")
#define REQUIRE_COUNTER() REQUIRE_MODE(wanted_mode())

// Monotonicity must hold whatever the counter is like, through a fall back
// to the kernel included: these tests run on a coarse counter too.
#define REQUIRE_COUNTER_EVEN_COARSE()                                                     \
    do {                                                                                  \
        struct fastclock_status st_;                                                      \
        fastclock_status(&st_);                                                           \
        std::string coarse_;                                                              \
        if (st_.mode != wanted_mode() && counter_too_coarse(&coarse_))                    \
            GTEST_SKIP() << coarse_ << " (the mode left the counter: " << st_.reason << ")"; \
        if (st_.mode != wanted_mode())                                                    \
            GTEST_SKIP() << fctest::skip_unless_refused(wanted_mode(), st_.mode, st_.reason); \
    } while (0)

bool lazy_run()
{
    const char *v = getenv("FASTCLOCK_CALIBRATOR");
    return v && std::string(v) == "lazy";
}

} // namespace

TEST(Mode, DecidedWithAReason)
{
    struct fastclock_status st;
    ASSERT_EQ(fastclock_status(&st), 0);
    ASSERT_NE(st.reason, nullptr);
    EXPECT_GT(strlen(st.reason), 20u) << st.reason;
    EXPECT_TRUE(std::string(st.mode) == "tsc" || std::string(st.mode) == "tsc-percpu" ||
                std::string(st.mode) == "system");
    std::printf("mode %s (%s calibrator): %s\n", st.mode, st.calibrator, st.reason);
    EXPECT_EQ(fastclock_status(nullptr), -1);
    EXPECT_EQ(errno, EFAULT);
}

// The struct grows at its end only, and the library writes no more than the
// caller's size: an older (smaller) caller is never overrun, a newer
// (larger) one gets zeros for what this library lacks.
TEST(Mode, StatusIsSizedByItsCaller)
{
    struct fastclock_status full;
    ASSERT_EQ(fastclock_status(&full), 0);
    size_t old_size = offsetof(struct fastclock_status, read_ns); // as if built before read_ns
    unsigned char buf[sizeof(struct fastclock_status) + 64];
    memset(buf, 0xA5, sizeof buf);
    ASSERT_EQ(fastclock_status_sized(reinterpret_cast<struct fastclock_status *>(buf), old_size), 0);
    for (size_t i = old_size; i < sizeof buf; i++)
        ASSERT_EQ(buf[i], 0xA5) << "byte " << i << " written past the caller's struct";
    EXPECT_STREQ(reinterpret_cast<struct fastclock_status *>(buf)->mode, full.mode);
    memset(buf, 0xA5, sizeof buf);
    ASSERT_EQ(fastclock_status_sized(reinterpret_cast<struct fastclock_status *>(buf), sizeof buf), 0);
    for (size_t i = sizeof(struct fastclock_status); i < sizeof buf; i++)
        ASSERT_EQ(buf[i], 0) << "byte " << i << ": fields this library lacks must read as zero";
    EXPECT_EQ(fastclock_status_sized(nullptr, sizeof full), -1);
    EXPECT_EQ(errno, EFAULT);
}

TEST(Mode, ThisMachineRunsTsc)
{
    // This project's CI machines (KVM, invariant TSC, clocksource tsc) must
    // get the fast mode: if they do not, the decision logic regressed.
    struct fastclock_status st;
    fastclock_status(&st);
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/available_clocksource", "r");
    char avail[256] = "";
    if (f) {
        if (!fgets(avail, sizeof avail, f))
            avail[0] = 0;
        fclose(f);
    }
#if defined(__aarch64__)
    // arm64: the generic timer runs at a fixed rate by definition; the
    // kernel's trust is arch_sys_counter among its clocksources.
    if (!strstr(avail, "arch_sys_counter"))
        GTEST_SKIP() << "the kernel does not offer arch_sys_counter here: " << avail;
    std::string coarse;
    if (counter_too_coarse(&coarse))
        GTEST_SKIP() << coarse << " (the mode may have left the counter already)";
    EXPECT_EQ(st.forced, getenv("FASTCLOCK_MODE") ? 1 : 0);
    EXPECT_EQ(st.mode, wanted_mode()) << st.reason;
    EXPECT_STREQ(st.calibrator, lazy_run() ? "lazy" : "thread");
    EXPECT_GT(st.counter_hz, 1e6); // 1 MHz (old boards) .. 1 GHz (ARMv8.6 and later)
    EXPECT_LT(st.counter_hz, 2e9);
    return;
#endif
    if (!strstr(avail, "tsc"))
        GTEST_SKIP() << "the kernel does not offer tsc here: " << avail;
    std::string flags;
    if (FILE *c = fopen("/proc/cpuinfo", "r")) {
        char line[8192];
        while (fgets(line, sizeof line, c))
            if (strncmp(line, "flags", 5) == 0) {
                flags = line;
                break;
            }
        fclose(c);
    }
    if (flags.find(" constant_tsc") == std::string::npos || flags.find(" nonstop_tsc") == std::string::npos)
        GTEST_SKIP() << "the CPU reports no invariant TSC (constant_tsc and nonstop_tsc)";
    // Trust alone decides the mode: no cost comparison may send it to system.
    EXPECT_EQ(st.forced, getenv("FASTCLOCK_MODE") ? 1 : 0);
    EXPECT_EQ(st.mode, wanted_mode()) << st.reason;
    EXPECT_STREQ(st.calibrator, lazy_run() ? "lazy" : "thread");
    EXPECT_GT(st.counter_hz, 1e8);
    EXPECT_LT(st.counter_hz, 1e10);
    // Ordered wall clocks: the line, unless the kernel's clocksource is the
    // TSC and its REALTIME was timed cheaper than the line's with the first
    // line (src/wall.h; the rule is tested in faults_test's WallChoice).
    char cur[64] = "";
    if (FILE *c = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r")) {
        if (!fgets(cur, sizeof cur, c))
            cur[0] = 0;
        fclose(c);
    }
    // (Mode tsc with the line answering the ordered reads: elsewhere the kernel
    // or the per-CPU lines decide who answers, and nothing is timed.)
    const bool line_reads = strcmp(st.mode, "tsc") == 0 && strncmp(st.counter, "clock_gettime", 13) != 0;
    if (strncmp(cur, "tsc\n", 4) != 0) {
        if (line_reads) {
            EXPECT_STREQ(st.real_source, "line") << "clocksource " << cur;
        }
        EXPECT_EQ(st.real_line_ratio, 0.0) << "timed where the kernel's clock does not read the counter";
    } else if (line_reads && getauxval(AT_SYSINFO_EHDR) != 0) { // (no vDSO: nothing to time against)
        // Timed with the first line: the line where the kernel's REALTIME cost
        // 1.04x its read or more (twice; real_line_ratio is the nearer).
        EXPECT_GT(st.real_line_ratio, 0.0) << "not timed";
        EXPECT_EQ(strcmp(st.real_source, "line") == 0, st.real_line_ratio >= 1.04)
            << st.real_source << " at " << st.real_line_ratio;
    }
    std::printf("clocksource %.*s: ordered REALTIME from the %s\n", (int)strcspn(cur, "\n"), cur, st.real_source);
    // What the reads do says who answers: the vDSO's values lie inside the
    // kernel's brackets, the line's within its bound of them.
    long outside = 0, inexact = 0;
    struct fastclock_status now;
    for (int i = 0; i < 20000; i++) {
        struct timespec a, b;
        clock_gettime(CLOCK_REALTIME, &a);
        int64_t v = fastclock_real_ns();
        clock_gettime(CLOCK_REALTIME, &b);
        int64_t lo = a.tv_sec * 1000000000LL + a.tv_nsec, hi = b.tv_sec * 1000000000LL + b.tv_nsec;
        if (i % 1000 == 0)
            fastclock_status(&now);
        int64_t slack = 2 * now.error_bound_ns + 1000;
        inexact += v < lo || v > hi;
        outside += v < lo - slack || v > hi + slack;
    }
    EXPECT_EQ(outside, 0) << "fastclock_real_ns outside the kernel's brackets by more than its bound";
    if (strcmp(st.real_source, "vdso") == 0) {
        EXPECT_EQ(inexact, 0) << "real_source says the vDSO answers, yet reads left the kernel's brackets";
    }
    std::printf("fastclock_real_ns outside the kernel's brackets: %ld of 20000\n", inexact);
}

TEST(Mode, WarpCheckRunsWithEitherCalibrator)
{
    REQUIRE_TSC();
    if (online_cpus() < 2)
        GTEST_SKIP() << "needs two CPUs";
    // The calibrator thread runs check_tsc_warp a few ms after the decision;
    // the lazy calibrator compares its own samples as readers take them on
    // different CPUs -- so read from a thread pinned to a CPU drawn at
    // random each round, after a random pause.  (Taking the CPUs in turn,
    // 5 ms apart, phase-locked with the 0.5 s lines about once in 50 runs:
    // every calibration fell on the same CPU for the whole 7.5 s.)
    struct fastclock_status st;
    auto cpus = allowed_cpus();
    std::minstd_rand pick(12345);
    for (int round = 0; round < 1500; round++) { // lazy lines last up to 0.5 s: a few s at most
        fastclock_status(&st);
        if (st.max_warp_cycles >= 0)
            break;
        int cpu = cpus[pick() % cpus.size()];
        std::thread t([&] {
            pin_to_cpu(cpu);
            for (int i = 0; i < 2000; i++)
                fastclock_mono_ns();
        });
        t.join();
        usleep(3000 + pick() % 4000);
    }
    EXPECT_GE(st.max_warp_cycles, 0) << "no warp check ran (" << st.calibrator << " calibrator)";
    std::printf("warp check (%s calibrator): largest disagreement %lld cycles; mode %s\n", st.calibrator,
                (long long)st.max_warp_cycles, st.mode);
    if (std::string(st.mode) == "tsc-percpu" || std::string(st.reason).find("disagree by") != std::string::npos) {
        // Counters that really disagree here: the check ran and acted on it.
        EXPECT_NE(std::string(st.reason).find("disagree by"), std::string::npos) << st.reason;
        return;
    }
    // Within what each check lets pass (beyond that the mode would have left
    // tsc): the thread's ordered reads taken in turn, under a nanosecond
    // (warp.h fc_warp_sub_ns_cycles: KVM's per-vCPU offsets); the lazy
    // check's sample brackets, 2 us (calibration.c WARP_FOUND_NS).
    if (lazy_run())
        EXPECT_LE(double(st.max_warp_cycles) * 1e9 / st.counter_hz, 2000.0) << "the CPUs' counters are in step";
    else
        EXPECT_LE(st.max_warp_cycles, std::max<int64_t>(1, int64_t(st.counter_hz / 1e9)))
            << "the CPUs' counters are in step";
    EXPECT_STREQ(st.mode, "tsc") << st.reason;
}

TEST(Bounds, RealBoundedContainsTheKernelsRealtime)
{
    int64_t lo, hi;
    struct fastclock_status before;
    fastclock_status(&before);
    int64_t k1 = kernel_ns(CLOCK_REALTIME);
    int r = fastclock_real_bounded(&lo, &hi);
    int64_t k2 = kernel_ns(CLOCK_REALTIME);
    struct fastclock_status st;
    fastclock_status(&st);
    // maxerror is re-read between the calls; the interval must cover the
    // smaller of the two readings (it only grows between polls, to 16 s).
    st.kernel_maxerror_ns = std::min(st.kernel_maxerror_ns, before.kernel_maxerror_ns);
    ASSERT_GE(r, 0);
    EXPECT_EQ(r, st.kernel_synchronized == 1 ? 0 : 1);
    EXPECT_LE(lo, k2);
    EXPECT_GE(hi, k1);
    EXPECT_GE(hi - lo, 2 * st.kernel_maxerror_ns);
    EXPECT_GE(st.real_error_bound_ns, st.kernel_maxerror_ns);
    std::printf("kernel synchronised: %d, maxerror %lld ns; fastclock bound %lld ns; real bound %lld ns\n",
                st.kernel_synchronized, (long long)st.kernel_maxerror_ns, (long long)st.error_bound_ns,
                (long long)st.real_error_bound_ns);
}

// n reads of each flavour, interleaved in one thread: the steps back of each.
template <class Ordered, class Unordered>
static void expect_monotonic_within_a_thread(Ordered ordered, Unordered unordered, int n)
{
    int64_t prev_o = ordered(), prev_u = unordered();
    long back_o = 0, back_u = 0;
    for (int i = 0; i < n; i++) {
        int64_t o = ordered();
        int64_t u = unordered();
        back_o += o < prev_o;
        back_u += u < prev_u;
        prev_o = o;
        prev_u = u;
    }
    EXPECT_EQ(back_o, 0);
    EXPECT_EQ(back_u, 0);
}

TEST(Monotonic, WithinAThread)
{
    REQUIRE_COUNTER_EVEN_COARSE();
    expect_monotonic_within_a_thread(fastclock_mono_ns, fastclock_mono_ns_unordered, 5000000);
}

// A thread moved to another CPU before every read: in tsc-percpu each read
// starts with the line of the CPU the thread last ran on, and rdtscp must
// send it to the right CPU's line (percpu.h).  Every read stays monotonic
// within the thread and within the mode's bound of the kernel.  (Where the
// CPUs' counters agree, as on most machines, a read from the wrong CPU's
// line would pass too: faults_test injects per-CPU offsets for that.)
TEST(Monotonic, ThreadMovedBetweenCpusKeepsItsTime)
{
    REQUIRE_COUNTER();
    auto cpus = allowed_cpus();
    if (cpus.size() < 2)
        GTEST_SKIP() << "one CPU available: no second CPU to move to";
    cpu_set_t was;
    ASSERT_EQ(sched_getaffinity(0, sizeof was, &was), 0);
    int64_t prev = fastclock_mono_ns(), worst = 0;
    long back = 0, measured = 0;
    for (int i = 0; i < 4000; i++) {
        ASSERT_TRUE(pin_to_cpu(cpus[size_t(i) % cpus.size()]));
        int64_t err, v = fastclock_mono_ns();
        back += v < prev;
        prev = v;
        if (bracket_error(CLOCK_MONOTONIC, fastclock_mono_ns, &err)) {
            measured++;
            worst = std::max(worst, fctest::iabs(err));
        }
    }
    sched_setaffinity(0, sizeof was, &was);
    struct fastclock_status st;
    fastclock_status(&st);
    std::printf("%ld of 4000 moved reads measured against the kernel: worst |error| %lld ns (bound %lld ns)\n",
                measured, (long long)worst, (long long)st.error_bound_ns);
    EXPECT_EQ(back, 0);
    ASSERT_GT(measured, 2000) << "the machine was too busy to measure";
    EXPECT_LE(worst, 1000 + st.error_bound_ns);
}

// check_tsc_warp in user space: two threads pinned to different CPUs take a
// lock, read the clock, compare with the last value any thread read under
// the same lock, and store theirs.  Any decrease is a time warp.  Only a
// read that follows the other thread's compares anything: a run where the
// lock seldom changed hands (a CPU that takes it straight back) proved
// little, and fails here rather than pass.
static long warp_run(int64_t (*clock)(void), int reads_per_thread, int64_t *max_warp)
{
    auto cpus = allowed_cpus();
    std::mutex mu;
    int64_t last = 0;
    long warps = 0, handoffs = 0;
    int last_reader = -1;
    *max_warp = 0;
    auto body = [&](int who, int cpu) {
        pin_to_cpu(cpu);
        for (int i = 0; i < reads_per_thread; i++) {
            std::lock_guard<std::mutex> g(mu);
            int64_t now = clock();
            if (now < last) {
                warps++;
                *max_warp = std::max(*max_warp, last - now);
            }
            handoffs += last_reader >= 0 && last_reader != who;
            last_reader = who;
            last = now;
        }
    };
    std::thread a(body, 0, cpus[0]), b(body, 1, cpus[cpus.size() > 1 ? 1 : 0]);
    a.join();
    b.join();
    std::printf("%ld reads, %ld of them right after the other thread's\n", 2L * reads_per_thread, handoffs);
    if (cpus.size() > 1) { // on one CPU the threads take turns only when preempted
        // A mutex changes hands when a waiter wakes: 75,000-145,000 times in
        // 3 M reads on a quiet 2-vCPU guest, 59-192 beside a warp check
        // spinning on both CPUs.  At least some reads must have followed
        // the other thread's (the strict-turn comparison of every read is
        // the warp check's: WarpCheck.CountersApartAreFoundAtEveryTurn).
        EXPECT_GE(handoffs, 20) << "the lock hardly changed hands: no cross-thread comparison";
    }
    return warps;
}

// Mode tsc: never a step back across threads.  tsc-percpu: each CPU has its
// own line, so a step back across threads is possible, within the error
// bound the mode reports (src/percpu.c).
static void expect_cross_thread(const char *what, long warps, int64_t max_warp)
{
    if (wanted_mode() == "tsc-percpu") {
        struct fastclock_status st;
        fastclock_status(&st);
        EXPECT_LE(max_warp, st.error_bound_ns) << what << ": " << warps << " steps back across threads";
        std::printf("%s: %ld steps back across threads, largest %" PRId64 " ns (bound %" PRId64 " ns)\n", what,
                    warps, max_warp, st.error_bound_ns);
    } else {
        EXPECT_EQ(warps, 0) << what << ": largest backward step " << max_warp << " ns";
    }
}

TEST(Monotonic, AcrossThreadsUnderALock)
{
    REQUIRE_COUNTER_EVEN_COARSE();
    if (online_cpus() < 2)
        GTEST_SKIP() << "needs two CPUs";
    int64_t max_warp;
    long warps = warp_run(fastclock_mono_ns, 1500000, &max_warp);
    expect_cross_thread("fastclock_mono_ns", warps, max_warp);
    warps = warp_run(fastclock_real_ns, 500000, &max_warp);
    expect_cross_thread("fastclock_real_ns", warps, max_warp);
}

static int64_t gettime_mono(void)
{
    timespec ts;
    fastclock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

TEST(Monotonic, AcrossThreadsThroughGettime)
{
    REQUIRE_COUNTER_EVEN_COARSE();
    if (online_cpus() < 2)
        GTEST_SKIP() << "needs two CPUs";
    int64_t max_warp;
    long warps = warp_run(gettime_mono, 500000, &max_warp);
    expect_cross_thread("fastclock_gettime(CLOCK_MONOTONIC)", warps, max_warp);
}

TEST(Monotonic, UnorderedIsWhatItSays)
{
    // The unordered variant promises per-thread monotonicity only; across
    // threads it may appear to go back by as far as the bare counter read
    // can run ahead of the lock's acquisition (clock.c: usually 0-20 ns
    // through a mutex, but 952 ns in 1 of 60 local runs and 1443 ns once in
    // CI on an AMD EPYC KVM guest, where ordered reads never went back).
    // The read happens under the lock, so preemption cannot widen it: a line
    // or calibration defect shows as microseconds to milliseconds, beyond
    // 5 us (plus the CPUs' disagreement in tsc-percpu, which its bound covers).
    REQUIRE_COUNTER();
    if (online_cpus() < 2)
        GTEST_SKIP() << "needs two CPUs";
    int64_t max_warp;
    long warps = warp_run(fastclock_mono_ns_unordered, 1000000, &max_warp);
    std::printf("unordered reads across threads: %ld backward steps in 2M, largest %lld ns\n", warps,
                (long long)max_warp);
    struct fastclock_status st;
    fastclock_status(&st);
    int64_t allowed = 5000 + (wanted_mode() == "tsc-percpu" ? st.error_bound_ns : 0);
    EXPECT_LE(max_warp, allowed) << warps << " steps back across threads";
}

// ---- the inline fine reads (fastclock_inline.h) ---------------------------

static int64_t mono_inline(void) { return fastclock_mono_ns_inline(); }
static int64_t mono_unordered_inline(void) { return fastclock_mono_ns_unordered_inline(); }
// Every other read inline: the inline read and the function on one timeline.
static int64_t mono_inline_or_call(void)
{
    static thread_local unsigned i;
    return (i++ & 1) ? fastclock_mono_ns_inline() : fastclock_mono_ns();
}

// Each inline read lies between the function's reads around it (same line,
// same arithmetic), for both flavours; a wrong field, shift or bracket is
// microseconds to seconds off.  In tsc-percpu (and mode system, below) the
// inline read calls the function, and the same must hold.
template <typename Fn, typename Inl>
static void expect_bracketed(const char *what, Fn fn, Inl inl)
{
    const int n = 2000000;
    long outside = 0;
    int64_t worst = 0;
    for (int i = 0; i < n; i++) {
        int64_t a = fn();
        int64_t b = inl();
        int64_t c = fn();
        if (b < a || b > c) {
            outside++;
            worst = std::max(worst, b < a ? a - b : b - c);
        }
    }
    EXPECT_EQ(outside, 0) << what << ": largest distance outside the bracket " << worst << " ns";
}

TEST(Inline, BetweenTheFunctionsReadsAroundIt)
{
    REQUIRE_COUNTER();
    expect_bracketed("fastclock_mono_ns_inline", fastclock_mono_ns, [] { return fastclock_mono_ns_inline(); });
    expect_bracketed("fastclock_mono_ns_unordered_inline", fastclock_mono_ns_unordered,
                     [] { return fastclock_mono_ns_unordered_inline(); });
}

// In mode tsc the global line answers, so the tests above ran the inline
// arithmetic, not the call: the current line's fast_span is non-zero.  In
// the other modes it is 0, which is what sends the inline reads to the
// function (fastclock_inline.h) -- and in mode tsc where the kernel's clock
// costs less than even a bare counter read (status names that route).
TEST(Inline, TheLineAnswersOnlyInModeTsc)
{
    std::string coarse;
    if (counter_too_coarse(&coarse))
        GTEST_SKIP() << coarse;
    struct fastclock_status st;
    fastclock_status(&st);
    if (st.mode != wanted_mode()) // the mode this run forces, refused: not the other branch
        GTEST_SKIP() << "mode is " << st.mode << ": " << st.reason;
    auto span_now = [] {
        fastclock_mono_ns();
        uint64_t seq = __atomic_load_n(&fastclock_line_v1->seq, __ATOMIC_ACQUIRE);
        return __atomic_load_n(&fastclock_line_v1->line[seq & 1].fast_span, __ATOMIC_RELAXED);
    };
    auto routed_all = [&st] {
        fastclock_status(&st);
        return std::string(st.counter).find("the counter costs more") != std::string::npos;
    };
    if (st.mode == std::string("tsc") && !routed_all()) {
        bool served = false;
        for (int i = 0; i < 1000 && !served; i++) {
            served = span_now() != 0;
            if (!served)
                usleep(1000);
        }
        EXPECT_TRUE(served || routed_all()) << "no published line with a fast_span in a second of mode tsc";
    } else {
        for (int i = 0; i < 100; i++, usleep(1000))
            ASSERT_EQ(span_now(), 0u) << "mode " << st.mode << " publishes a global line the inline read would use";
    }
}

TEST(Inline, OrderedAcrossThreadsUnderALock)
{
    REQUIRE_COUNTER_EVEN_COARSE();
    if (online_cpus() < 2)
        GTEST_SKIP() << "needs two CPUs";
    int64_t max_warp;
    long warps = warp_run(mono_inline, 1000000, &max_warp);
    expect_cross_thread("fastclock_mono_ns_inline", warps, max_warp);
    warps = warp_run(mono_inline_or_call, 1000000, &max_warp);
    expect_cross_thread("fastclock_mono_ns_inline and fastclock_mono_ns", warps, max_warp);
}

TEST(Inline, WithinAThread)
{
    REQUIRE_COUNTER_EVEN_COARSE();
    // Lambdas, so that the reads are inlined into the loop as a caller's are.
    expect_monotonic_within_a_thread([] { return fastclock_mono_ns_inline(); },
                                     [] { return fastclock_mono_ns_unordered_inline(); }, 3000000);
}

// In every mode (the suite also runs with FASTCLOCK_MODE=system): each inline
// read lies between the kernel's CLOCK_MONOTONIC before and after it, give
// or take the error bound the library reports.
TEST(Inline, WithinTheKernelsBoundsInEveryMode)
{
    struct fastclock_status st;
    fastclock_status(&st);
    std::printf("mode %s: %s\n", st.mode, st.reason);
    for (int64_t (*read)(void) : {mono_inline, mono_unordered_inline}) {
        long outside = 0;
        int64_t worst = 0;
        fastclock_status(&st);
        // The bound grows with the line's age (by ppm: ns over this loop);
        // 5 us more for the unordered read's own reordering (clock.c).
        int64_t slack = st.error_bound_ns + 5000;
        for (int i = 0; i < 200000; i++) {
            int64_t k0 = kernel_ns(CLOCK_MONOTONIC);
            int64_t v = read();
            int64_t k1 = kernel_ns(CLOCK_MONOTONIC);
            if (v < k0 - slack || v > k1 + slack) {
                outside++;
                worst = std::max(worst, v < k0 ? k0 - v : v - k1);
            }
        }
        EXPECT_EQ(outside, 0) << (read == mono_inline ? "ordered" : "unordered") << ": worst " << worst
                              << " ns outside the kernel's reads (bound " << st.error_bound_ns << " ns)";
    }
}

static void accuracy(clockid_t c, int64_t (*ours)(void), double seconds)
{
    size_t unusable = 0;
    struct fastclock_status before, after;
    fastclock_status(&before);
    auto s = sample_errors(c, ours, seconds, 250, 150, &unusable);
    fastclock_status(&after);
    // The promise: within the bound the library reports (a sample's bracket
    // adds up to half its 250 ns width).  Typically far inside it: the p99.
    int64_t bound = std::max(before.error_bound_ns, after.error_bound_ns);
    std::printf("clock %d: %zu samples (%zu unusable): p50 %+lld p99 |%lld| max |%lld| ns; bound %lld ns\n", int(c),
                s.n, unusable, (long long)s.p50, (long long)s.p99, (long long)s.max_abs, (long long)bound);
    ASSERT_GT(s.n, 1000u);
    EXPECT_GT(double(s.n) / double(s.n + unusable), 0.9) << "the machine was too busy to measure";
    EXPECT_LE(s.p99, 100) << "p99 error against the kernel";
    EXPECT_LE(s.max_abs, bound + 125) << "max error against the kernel, beyond the reported bound";
}

TEST(Accuracy, MonotonicWithinBoundOverSeconds)
{
    REQUIRE_COUNTER();
    accuracy(CLOCK_MONOTONIC, fastclock_mono_ns, 4.0);
}

TEST(Accuracy, RealtimeWithinBoundOverSeconds)
{
    REQUIRE_COUNTER();
    accuracy(CLOCK_REALTIME, fastclock_real_ns, 2.0);
}

TEST(Accuracy, DoesNotDrift)
{
    // A one-shot calibration drifts linearly; ours re-anchors.  Compare the
    // error distribution at the start and after 6 s.
    REQUIRE_COUNTER();
    auto window = [](double secs) { return sample_errors(CLOCK_MONOTONIC, fastclock_mono_ns, secs, 250, 500); };
    auto first = window(0.5);
    usleep(5000000);
    auto later = window(0.5);
    std::printf("median error: first %+lld ns (%zu samples), 5.5 s later %+lld ns (%zu samples)\n",
                (long long)first.p50, first.n, (long long)later.p50, later.n);
    // Half a second at one sample per ~0.5 ms: an empty window's zeros would pass.
    ASSERT_GE(first.n, 100u) << "too few tight brackets: the machine was too busy to measure";
    ASSERT_GE(later.n, 100u) << "too few tight brackets: the machine was too busy to measure";
    EXPECT_LE(fctest::iabs(later.p50), 50);
    EXPECT_LE(fctest::iabs(later.p50 - first.p50), 50) << "the median error moved";
    EXPECT_LE(later.p99, 100);
}

TEST(Accuracy, StatusReportsAnHonestBound)
{
    REQUIRE_COUNTER();
    // Read for a while: a lazy calibrator only works when someone reads.
    int64_t until = kernel_ns(CLOCK_MONOTONIC) + 1500000000LL;
    while (kernel_ns(CLOCK_MONOTONIC) < until) {
        fastclock_mono_ns();
        usleep(1000);
    }
    struct fastclock_status st;
    fastclock_status(&st);
    EXPECT_GT(st.calibrations, 2u);
    EXPECT_GT(st.error_bound_ns, 0);
    // The bound covers what adjtimex may have done since the library last
    // looked: the largest change it permits (1/9 through the tick and 1000
    // ppm through the frequency, each half again as margin)
    // x that time.  Readers look once per millisecond of reading (either
    // calibrator), so ~0.17 ms; a late look under load adds some.
    // tsc-percpu adds the two worst CPUs' bounds.
    EXPECT_LE(st.error_bound_ns, wanted_mode() == "tsc-percpu" ? 1500000 : 750000);
    EXPECT_GE(st.last_calibration_age_ns, 0);
    EXPECT_LT(st.last_calibration_age_ns, 3LL * 1000000000LL);
    // The measured error must sit inside the bound the library reports.
    std::vector<int64_t> errs;
    for (int i = 0; i < 2000; i++) {
        int64_t e;
        if (bracket_error(CLOCK_MONOTONIC, fastclock_mono_ns, &e))
            errs.push_back(e);
    }
    auto s = stats_of(errs);
    ASSERT_GE(s.n, 500u) << "too few tight brackets of 2000: the machine was too busy to measure";
    EXPECT_LE(s.p99, st.error_bound_ns + 40) << "bound " << st.error_bound_ns;
}

// ---- gettime / gettimeofday semantics -----------------------------------

TEST(Gettime, ServedClocksMatchTheKernel)
{
    for (clockid_t c : {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME, CLOCK_TAI}) {
        timespec ours, k1, k2;
        clock_gettime(c, &k1);
        ASSERT_EQ(fastclock_gettime(c, &ours), 0) << c;
        clock_gettime(c, &k2);
        auto ns = [](const timespec &t) { return int64_t(t.tv_sec) * 1000000000LL + t.tv_nsec; };
        EXPECT_GE(ns(ours), ns(k1) - 1000) << "clock " << c;
        EXPECT_LE(ns(ours), ns(k2) + 1000) << "clock " << c;
        EXPECT_GE(ours.tv_nsec, 0);
        EXPECT_LT(ours.tv_nsec, 1000000000L);
    }
    for (clockid_t c : {CLOCK_MONOTONIC_COARSE, CLOCK_REALTIME_COARSE}) {
        timespec ours;
        ASSERT_EQ(fastclock_gettime(c, &ours), 0);
        int64_t fine = kernel_ns(c == CLOCK_MONOTONIC_COARSE ? CLOCK_MONOTONIC : CLOCK_REALTIME);
        int64_t v = int64_t(ours.tv_sec) * 1000000000LL + ours.tv_nsec;
        EXPECT_LE(v, fine + 1000);
        EXPECT_GE(v, fine - 20000000LL) << "coarse lags by at most a few ticks";
    }
}

TEST(Gettime, OtherClocksPassThroughWithTheKernelsErrno)
{
    timespec ts;
    for (clockid_t c : {CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID, CLOCK_MONOTONIC_RAW}) {
        timespec k1, k2;
        clock_gettime(c, &k1);
        ASSERT_EQ(fastclock_gettime(c, &ts), 0) << c;
        clock_gettime(c, &k2);
        auto ns = [](const timespec &t) { return int64_t(t.tv_sec) * 1000000000LL + t.tv_nsec; };
        EXPECT_GE(ns(ts), ns(k1)) << c;
        EXPECT_LE(ns(ts), ns(k2)) << c;
    }
    errno = 0;
    EXPECT_EQ(fastclock_gettime(clockid_t(12345), &ts), -1);
    EXPECT_EQ(errno, EINVAL);
    errno = 0;
    EXPECT_EQ(fastclock_gettime(clockid_t(-1000), &ts), -1);
    EXPECT_EQ(errno, EINVAL);
    // NULL: the kernel's answer (libc would crash inside the vDSO).
    errno = 0;
    EXPECT_EQ(fastclock_gettime(CLOCK_MONOTONIC, nullptr), -1);
    EXPECT_EQ(errno, EFAULT);
    errno = 0;
    EXPECT_EQ(fastclock_gettime(clockid_t(12345), nullptr), -1);
    EXPECT_EQ(errno, EINVAL);
}

TEST(Gettime, ErrnoUntouchedOnSuccess)
{
    timespec ts;
    errno = 1234;
    ASSERT_EQ(fastclock_gettime(CLOCK_MONOTONIC, &ts), 0);
    ASSERT_EQ(fastclock_gettime(CLOCK_REALTIME_COARSE, &ts), 0);
    timeval tv;
    ASSERT_EQ(fastclock_gettimeofday(&tv, nullptr), 0);
    EXPECT_EQ(errno, 1234);
}

TEST(Gettimeofday, MatchesTheKernelAndToleratesNulls)
{
    timeval ours, k1, k2;
    gettimeofday(&k1, nullptr);
    ASSERT_EQ(fastclock_gettimeofday(&ours, nullptr), 0);
    gettimeofday(&k2, nullptr);
    auto us = [](const timeval &t) { return int64_t(t.tv_sec) * 1000000 + t.tv_usec; };
    EXPECT_GE(us(ours), us(k1) - 1);
    EXPECT_LE(us(ours), us(k2) + 1);
    EXPECT_GE(ours.tv_usec, 0);
    EXPECT_LT(ours.tv_usec, 1000000);
    EXPECT_EQ(fastclock_gettimeofday(nullptr, nullptr), 0);
    struct timezone tz;
    memset(&tz, 0x55, sizeof tz);
    EXPECT_EQ(fastclock_gettimeofday(&ours, &tz), 0);
    struct timezone ktz;
    gettimeofday(&k1, &ktz);
    EXPECT_EQ(tz.tz_minuteswest, ktz.tz_minuteswest);
    EXPECT_EQ(tz.tz_dsttime, ktz.tz_dsttime);
    // The timezone alone, as gettimeofday(NULL, &tz) gives it.
    memset(&tz, 0x55, sizeof tz);
    EXPECT_EQ(fastclock_gettimeofday(nullptr, &tz), 0);
    EXPECT_EQ(tz.tz_minuteswest, ktz.tz_minuteswest);
    EXPECT_EQ(tz.tz_dsttime, ktz.tz_dsttime);
}

// ---- coarse clocks and ticks --------------------------------------------

// fastclock_inline.h reads the same published values as the functions (or
// calls them when nothing is published), and keeps their order.
TEST(Coarse, InlineHeaderReadsTheSameClock)
{
    int64_t prev = 0;
    for (int i = 0; i < 200000; i++) {
        int64_t a = fastclock_mono_coarse_ns_inline();
        int64_t b = fastclock_mono_coarse_ns();
        int64_t c = fastclock_mono_coarse_ns_inline();
        ASSERT_LE(prev, a);
        ASSERT_LE(a, b);
        ASSERT_LE(b, c);
        prev = c;
        int64_t r = fastclock_real_coarse_ns_inline(), k = kernel_ns(CLOCK_REALTIME);
        ASSERT_LE(r, k + 1000000) << "never ahead of the kernel's REALTIME beyond the bound";
        ASSERT_GE(r, k - 50000000) << "no more than a tick and the ticker's lag behind";
    }
}

TEST(Coarse, MonotonicNeverAheadAndAbout1msFresh)
{
    // Ask once, let the calibrator start ticking.
    fastclock_mono_coarse_ns();
    usleep(20000);
    int64_t prev_m = fastclock_mono_coarse_ns();
    std::vector<int64_t> lags;
    lags.reserve(1 << 20);
    long back = 0;
    int64_t until = kernel_ns(CLOCK_MONOTONIC) + 1500000000LL;
    while (kernel_ns(CLOCK_MONOTONIC) < until) {
        int64_t m = fastclock_mono_coarse_ns();
        int64_t fine = fastclock_mono_ns();
        int64_t r = fastclock_real_coarse_ns();
        int64_t rfine = fastclock_real_ns();
        // The lag is measured from a coarse read made after the fine one, so
        // that this thread's own preemption between the two cannot count.
        int64_t after = fastclock_mono_coarse_ns();
        back += m < prev_m || after < m;
        EXPECT_LE(m, fine) << "coarse ahead of fine";
        EXPECT_LE(r, rfine + 1000);
        lags.push_back(fine - after);
        prev_m = after;
        for (volatile int i = 0; i < 200; i++) {
        }
    }
    EXPECT_EQ(back, 0);
    ASSERT_GT(lags.size(), 1000u);
    std::sort(lags.begin(), lags.end());
    int64_t median = lags[lags.size() / 2], p99 = lags[lags.size() * 99 / 100], worst = lags.back();
    std::printf("coarse lag behind the fine clock: median %.3f ms, p99 %.3f ms, worst %.3f ms\n", median / 1e6,
                p99 / 1e6, worst / 1e6);
    // The ticker publishes every ~1 ms; without it the kernel's coarse clock
    // answers, about a tick behind (4 ms at HZ=250).  The median says which one answers
    // and that it keeps up; the worst case adds the calibrator thread's
    // scheduling delay, which a CPU-starved machine stretches to tens of ms
    // (measured: 33 ms in tsc-percpu, whose thread visits every CPU, with 16
    // spinning threads on 2 vCPUs), so it only has to stay under a second.
    struct fastclock_status st;
    ASSERT_EQ(fastclock_status(&st), 0);
    bool ticker = std::strcmp(st.calibrator, "thread") == 0 &&
                  (std::strcmp(st.mode, "tsc") == 0 || std::strcmp(st.mode, "tsc-percpu") == 0);
    struct timespec res;
    clock_getres(CLOCK_MONOTONIC_COARSE, &res);
    int64_t tick = res.tv_sec * 1000000000LL + res.tv_nsec;
    if (ticker)
        EXPECT_LT(median, 2000000) << "the ticker publishes every millisecond";
    else // measured here: the kernel's own lags 4.7 ms at the median, 6.7 at worst, with a 4 ms tick
        EXPECT_LT(median, 2 * tick + 1000000) << "the kernel's coarse clock, a tick of " << tick << " ns";
    EXPECT_LT(worst, 1000000000LL);
}

TEST(Ticks, ConvertToNanoseconds)
{
    // A coarse counter fails calibration a little later, and ticks then jump
    // ahead by a margin (their unit kept): not a 50 ms interval to measure.
    std::string coarse;
    if (counter_too_coarse(&coarse))
        GTEST_SKIP() << coarse << " (the mode leaves the counter during the test)";
    // Each ticks read between two kernel reads, the tightest of a few pairs:
    // a preemption between a ticks read and its kernel read is no error.
    auto paired = [](uint64_t *t, int64_t *k) {
        int64_t best = INT64_MAX;
        for (int i = 0; i < 20 && best > 2000; i++) {
            int64_t a = kernel_ns(CLOCK_MONOTONIC);
            uint64_t v = fastclock_ticks();
            int64_t b = kernel_ns(CLOCK_MONOTONIC);
            if (b - a < best) {
                best = b - a;
                *t = v;
                *k = a + (b - a) / 2;
            }
        }
        return best;
    };
    uint64_t t0 = 0, t1 = 0;
    int64_t k0 = 0, k1 = 0;
    int64_t w0 = paired(&t0, &k0);
    usleep(50000);
    int64_t w1 = paired(&t1, &k1);
    int64_t ns = fastclock_ticks_to_ns(t1 - t0);
    EXPECT_NEAR(double(ns), double(k1 - k0), double(k1 - k0) * 0.002 + 20000 + double(w0 + w1) / 2)
        << "brackets " << w0 << " and " << w1 << " ns";
    EXPECT_EQ(fastclock_ticks_to_ns(0), 0);
    // A negative difference converts to a negative duration.
    EXPECT_LT(fastclock_ticks_to_ns(t0 - t1), 0);
}

// ---- signals and fork ---------------------------------------------------

namespace sigtest {
std::atomic<int64_t> main_last{0};
volatile sig_atomic_t violations = 0;
std::atomic<long> handled{0};
std::atomic<int64_t> handler_last{0};

void handler(int)
{
    int saved = errno;
    int64_t m = fastclock_mono_ns();
    int64_t before = main_last.load(std::memory_order_relaxed);
    if (m < before || m < handler_last.load(std::memory_order_relaxed))
        violations = violations + 1;
    handler_last.store(m, std::memory_order_relaxed);
    timespec ts;
    fastclock_gettime(CLOCK_REALTIME, &ts);
    fastclock_real_ns();
    fastclock_mono_coarse_ns();
    fastclock_ticks();
    struct fastclock_status st;
    fastclock_status(&st);
    handled++;
    errno = saved;
}
} // namespace sigtest

TEST(SignalSafety, ReadsFromAHandlerInterruptingReads)
{
    using namespace sigtest;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, nullptr);
    // Deliver to this thread, often.
    timer_t timer;
    sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGALRM;
    sev._sigev_un._tid = int(syscall(SYS_gettid));
    ASSERT_EQ(timer_create(CLOCK_MONOTONIC, &sev, &timer), 0);
    // Every 23 us; without a vDSO (qemu-user) a handler's kernel reads are
    // emulated system calls, and a handler that outlasts the period never
    // lets the loop run: every 200 us there.
    std::string slow;
    long period = fctest::no_vdso(&slow) ? 200000 : 23000;
    itimerspec its{{0, period}, {0, period}};
    timer_settime(timer, 0, &its, nullptr);

    long back = 0;
    int64_t until = kernel_ns(CLOCK_MONOTONIC) + 2000000000LL;
    int64_t prev = fastclock_mono_ns();
    while (kernel_ns(CLOCK_MONOTONIC) < until) {
        // A handler that finished before this read must not be ahead of it.
        int64_t h = handler_last.load(std::memory_order_relaxed);
        int64_t v = fastclock_mono_ns();
        if (v < prev || v < h)
            back++;
        prev = v;
        main_last.store(v, std::memory_order_relaxed);
    }
    itimerspec off{};
    timer_settime(timer, 0, &off, nullptr);
    timer_delete(timer);
    signal(SIGALRM, SIG_DFL);
    std::printf("%ld signal handlers read the clock\n", handled.load());
    EXPECT_GT(handled.load(), 1000);
    EXPECT_EQ(back, 0);
    EXPECT_EQ(int(violations), 0);
}

static int child_checks(int64_t before_fork)
{
    int64_t first = fastclock_mono_ns();
    if (first < before_fork)
        return 10;
    struct fastclock_status st;
    fastclock_status(&st);
    if (std::string(st.mode) == "tsc" && std::string(st.calibrator) != "lazy")
        return 11;
    // Stay accurate for longer than the parent's lines last, so that the
    // child's own (lazy) calibration is what keeps it right.
    // Each error within the bound the child reports then (1 us at least): a
    // fork during the parent's first calibrations carries a line up to ~2 us
    // off, as the parent's own reads are then (the sibling test below).
    std::vector<int64_t> errs;
    int64_t prev = first;
    int64_t until = kernel_ns(CLOCK_MONOTONIC) + 2500000000LL;
    while (kernel_ns(CLOCK_MONOTONIC) < until) {
        int64_t e;
        fastclock_status(&st);
        int64_t allowed = std::max<int64_t>(st.error_bound_ns, 1000);
        if (bracket_error(CLOCK_MONOTONIC, fastclock_mono_ns, &e)) {
            errs.push_back(e);
            if (fctest::iabs(e) > allowed) {
                std::fprintf(stderr, "child error %lld ns, bound %lld\n", (long long)e, (long long)allowed);
                return 14;
            }
        }
        int64_t v = fastclock_mono_ns();
        if (v < prev)
            return 12;
        prev = v;
        usleep(300);
    }
    auto s = stats_of(errs);
    if (s.n < 500)
        return 13;
    if (s.p99 > 100) {
        std::fprintf(stderr, "child error p99 %lld max %lld\n", (long long)s.p99, (long long)s.max_abs);
        return 14;
    }
    int64_t re;
    if (!bracket_error(CLOCK_REALTIME, fastclock_real_ns, &re, 1000, 100))
        return 16; // never a bracket under 1 us in 100 tries: nothing measured
    fastclock_status(&st);
    if (fctest::iabs(re) > std::max<int64_t>(st.error_bound_ns, 1000))
        return 15;
    return 0;
}

TEST(Fork, ChildKeepsCorrectTime)
{
    REQUIRE_COUNTER();
    int64_t before = fastclock_mono_ns();
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0)
        _exit(child_checks(before));
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "child check failed (see child_checks codes)";
}

// A fork child has no calibrator thread: its coarse clocks become the
// kernel's, held at the last value the parent's ticker served, and -- once
// the kernel's coarse MONOTONIC has passed that -- straight from the vDSO,
// as in a process that never had a ticker (through the held path they cost
// 1.8x the kernel's).  The inline header's block shows the direct route.
TEST(Fork, ChildsCoarseClocksGoStraightToTheKernel)
{
    for (int i = 0; i < 50; i++) { // a calibrator thread, if any, decides and ticks
        fastclock_mono_ns();
        fastclock_mono_coarse_ns();
        usleep(1000);
    }
    struct fastclock_status st;
    ASSERT_EQ(fastclock_status(&st), 0);
    if (std::strcmp(st.calibrator, "thread") == 0 &&
        (std::strcmp(st.mode, "tsc") == 0 || std::strcmp(st.mode, "tsc-percpu") == 0)) {
        // The ticker's first tick may wait for its thread's turn (up to ~200 ms loaded).
        for (int i = 0; i < 1000 && __atomic_load_n(&fastclock_coarse_v1->mono, __ATOMIC_ACQUIRE) == 0; i++) {
            fastclock_mono_coarse_ns();
            usleep(1000);
        }
        ASSERT_NE(__atomic_load_n(&fastclock_coarse_v1->mono, __ATOMIC_ACQUIRE), 0) << "the ticker does not tick";
    }
    int64_t before = fastclock_mono_coarse_ns();
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(5);
        int code = 0;
        int64_t prev = before, until = kernel_ns(CLOCK_MONOTONIC) + 1000000000;
        do { // at least one read, however late this child runs
            int64_t v = fastclock_mono_coarse_ns();
            code |= v < prev ? 1 : 0;
            prev = v;
            usleep(100);
        } while (__atomic_load_n(&fastclock_coarse_v1->kernel_gettime, __ATOMIC_RELAXED) == nullptr &&
                 kernel_ns(CLOCK_MONOTONIC) < until);
        code |= __atomic_load_n(&fastclock_coarse_v1->kernel_gettime, __ATOMIC_RELAXED) == nullptr ? 2 : 0;
        for (int i = 0; i < 1000; i++) {
            int64_t v = fastclock_mono_coarse_ns_inline();
            code |= v < prev ? 4 : 0;
            prev = v;
        }
        _exit(code);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "child: 1 a coarse read went back before the route, 2 no direct route "
                                         "within 1 s, 4 a read went back after it";
}

// A child forked after unshare(CLONE_NEWTIME) starts in the new time
// namespace: CLOCK_MONOTONIC and CLOCK_BOOTTIME jump by its offsets.  The
// lines it inherits are on the parent's timeline; every flavour must follow
// the child's kernel from its first read on, and never go back in the child
// (before the fix: an hour ahead for seconds, or an hour behind).
static int64_t gettime_ns(clockid_t id)
{
    timespec ts;
    fastclock_gettime(id, &ts);
    return int64_t(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}
static int64_t mono_gettime() { return gettime_ns(CLOCK_MONOTONIC); }
static int64_t boot_gettime() { return gettime_ns(CLOCK_BOOTTIME); }

static int timens_grandchild(uint64_t ticks_at_fork, int64_t real_at_fork)
{
    struct Flavour {
        clockid_t kernel;
        int64_t (*read)();
        int64_t slack_ns; // beyond the error bound: the coarse clocks lag by a tick
    } flavours[] = {
        {CLOCK_MONOTONIC, fastclock_mono_ns, 0},
        {CLOCK_MONOTONIC, fastclock_mono_ns_unordered, 0},
        {CLOCK_MONOTONIC, mono_gettime, 0},
        {CLOCK_MONOTONIC, [] { return fastclock_mono_ns_inline(); }, 0},
        {CLOCK_BOOTTIME, boot_gettime, 0},
        {CLOCK_MONOTONIC, fastclock_mono_coarse_ns, 20000000},
    };
    int code = 0;
    int64_t prev[6] = {0, 0, 0, 0, 0, 0};
    int64_t until = kernel_ns(CLOCK_MONOTONIC) + 300000000;
    do {
        struct fastclock_status st;
        fastclock_status(&st);
        for (int f = 0; f < 6; f++) {
            int64_t k0 = kernel_ns(flavours[f].kernel), v = flavours[f].read(), k1 = kernel_ns(flavours[f].kernel);
            int64_t slack = st.error_bound_ns + flavours[f].slack_ns + 1000;
            if (v < k0 - slack || v > k1 + slack) {
                std::fprintf(stderr, "flavour %d: %lld outside [%lld, %lld] +- %lld\n", f, (long long)v, (long long)k0,
                             (long long)k1, (long long)slack);
                code |= 1;
            }
            if (v < prev[f])
                code |= 2;
            prev[f] = v;
        }
        usleep(1000);
    } while (kernel_ns(CLOCK_MONOTONIC) < until);
    // Ticks keep their unit across the fork: the interval from the parent's
    // tick to now is the time that passed (REALTIME: the namespace leaves it).
    int64_t ticked = fastclock_ticks_to_ns(fastclock_ticks() - ticks_at_fork);
    int64_t passed = kernel_ns(CLOCK_REALTIME) - real_at_fork;
    if (ticked < passed - 5000000 || ticked > passed + 5000000) {
        std::fprintf(stderr, "ticks say %lld ns, REALTIME %lld ns\n", (long long)ticked, (long long)passed);
        code |= 4;
    }
    struct fastclock_status st;
    fastclock_status(&st);
    if (std::strstr(st.reason, "time namespace") == nullptr) {
        std::fprintf(stderr, "mode %s: %s\n", st.mode, st.reason);
        code |= 8;
    }
    return code;
}

TEST(Fork, ChildInANewTimeNamespaceFollowsItsClocks)
{
    REQUIRE_COUNTER();
    for (int i = 0; i < 2000; i++) // lines and a ticker, if any, to inherit
        fastclock_mono_ns(), fastclock_mono_coarse_ns(), boot_gettime();
    usleep(20000);
    // Ahead, and behind by half the uptime at most (MONOTONIC cannot go below
    // 0); and ahead again from a thread that is not the main one
    // (unshare(CLONE_NEWTIME) is the calling thread's, and so is its fork).
    int64_t uptime_s = kernel_ns(CLOCK_MONOTONIC) / 1000000000LL;
    struct Case {
        int64_t offset;
        bool from_thread;
    } cases[] = {{3600, false}, {-std::min<int64_t>(3600, uptime_s / 2), false}, {3600, true}};
    for (Case c : cases) {
        int64_t offset = c.offset;
        if (offset == 0)
            continue;
        pid_t mid = fork(); // unshares there: this process's later children stay here
        ASSERT_GE(mid, 0);
        if (mid == 0) {
            alarm(10);
            int code = 0;
            auto unshare_and_fork = [&] {
                if (unshare(CLONE_NEWTIME) != 0) {
                    code = errno == EPERM ? 100 : 101;
                    return;
                }
                char line[96];
                int n = std::snprintf(line, sizeof line, "monotonic %lld 0\nboottime %lld 0\n", (long long)offset,
                                      (long long)offset);
                char path[64]; // the thread's own: /proc/TID (a thread's, not listed, still opens)
                std::snprintf(path, sizeof path, "/proc/%ld/timens_offsets", (long)syscall(SYS_gettid));
                int fd = open(path, O_WRONLY);
                if (fd < 0 || write(fd, line, size_t(n)) != n) {
                    code = 102;
                    return;
                }
                close(fd);
                for (int i = 0; i < 1000; i++)
                    fastclock_mono_ns();
                uint64_t t0 = fastclock_ticks();
                int64_t r0 = kernel_ns(CLOCK_REALTIME);
                pid_t child = fork();
                if (child == 0)
                    _exit(timens_grandchild(t0, r0));
                int status = 0;
                waitpid(child, &status, 0);
                code = WIFEXITED(status) ? WEXITSTATUS(status) : 0x40;
            };
            if (c.from_thread)
                std::thread(unshare_and_fork).join();
            else
                unshare_and_fork();
            _exit(code);
        }
        int status = 0;
        ASSERT_EQ(waitpid(mid, &status, 0), mid);
        ASSERT_TRUE(WIFEXITED(status));
        int code = WEXITSTATUS(status);
        if (code == 100)
            GTEST_SKIP() << "a time namespace needs CAP_SYS_ADMIN (unshare(CLONE_NEWTIME): EPERM)";
        if (code == 101)
            GTEST_SKIP() << "this kernel has no time namespaces (CONFIG_TIME_NS; unshare(CLONE_NEWTIME) failed)";
        EXPECT_EQ(code, 0) << "offset " << offset << " s" << (c.from_thread ? " from a thread" : "") << ": 1 a read outside the kernel's clock, 2 a read went back, "
                           << "4 ticks lost their unit, 8 the reason does not say why, 102 offsets not written";
    }
}

TEST(Fork, ManyForksWhileCalibrating)
{
    // Fork at random points, including during a calibration; no child may
    // hang or read a wrong time.
    REQUIRE_COUNTER();
    std::atomic<bool> stop{false};
    std::thread reader([&] {
        while (!stop)
            fastclock_mono_ns();
    });
    const int forks = 150;
    int back = 0, off = 0, died = 0, unmeasured = 0;
    for (int i = 0; i < forks; i++) {
        int64_t before = fastclock_mono_ns();
        pid_t pid = fork();
        if (pid == 0) {
            alarm(5);
            int64_t v = fastclock_mono_ns();
            int64_t e;
            if (v < before)
                _exit(1);
            if (!bracket_error(CLOCK_MONOTONIC, fastclock_mono_ns, &e, 1000))
                _exit(3); /* no bracket under 1 us: counted, not passed */
            /* Within the bound the child reports (1 us at least): a fork
             * during the first calibrations (a bound of 10-90 us) carries a
             * line up to ~2 us off, as the parent's own reads are then
             * (measured 1.3-1.9 us in 5 of 80 runs, before and after this
             * session's changes; a fixed 1 us failed CI once). */
            struct fastclock_status st;
            fastclock_status(&st);
            int64_t allowed = st.error_bound_ns > 1000 ? st.error_bound_ns : 1000;
            _exit(fctest::iabs(e) > allowed ? 2 : 0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        back += code == 1;
        off += code == 2;
        unmeasured += code == 3;
        died += code < 0 || code > 3;
        usleep(i % 7 * 100);
    }
    stop = true;
    reader.join();
    EXPECT_EQ(back, 0) << "children whose first read went below the parent's last";
    EXPECT_EQ(off, 0) << "children off the kernel by more than their bound (1 us at least)";
    EXPECT_EQ(died, 0) << "children killed or hung";
    // Seven tries at a 1 us bracket each: missed by a child preempted every
    // time (a busy machine); enough must be measured for the test to say anything.
    EXPECT_GE(forks - unmeasured, 30) << unmeasured << " of " << forks << " children could not be measured";
}

// Daemons close every descriptor and reuse the numbers.  The calibrator
// must never read or write a file that took its place, and must go on.
TEST(Descriptors, ClosedAndReusedDescriptorsAreNotTouched)
{
    REQUIRE_COUNTER();
    fastclock_mono_ns();
    usleep(100000); // the calibrator is up, with its timerfd
    // Close everything but stdio, as a daemon would.
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    char path[] = "/tmp/fc-fd-XXXXXX";
    int keep = mkstemp(path);
    ASSERT_GE(keep, 0);
    unlink(path);
    std::vector<int> fds;
    for (int i = 0; i < 20; i++) {
        int fd = dup(keep);
        ASSERT_GE(fd, 0);
        fds.push_back(fd);
    }
    const char text[] = "the program's own data";
    ASSERT_EQ(pwrite(keep, text, sizeof text, 0), (ssize_t)sizeof text);
    ASSERT_EQ(lseek(keep, 5, SEEK_SET), 5);
    struct fastclock_status st;
    fastclock_status(&st);
    uint64_t before = st.calibrations;
    int64_t until = kernel_ns(CLOCK_MONOTONIC) + 1200000000LL;
    while (kernel_ns(CLOCK_MONOTONIC) < until) {
        fastclock_mono_ns();
        usleep(1000);
    }
    char back[sizeof text] = {0};
    ASSERT_EQ(pread(keep, back, sizeof back, 0), (ssize_t)sizeof back);
    EXPECT_STREQ(back, text);
    EXPECT_EQ(lseek(keep, 0, SEEK_CUR), 5) << "someone read from the program's file";
    struct stat sb;
    ASSERT_EQ(fstat(keep, &sb), 0);
    EXPECT_EQ(sb.st_size, (off_t)sizeof text) << "someone wrote to the program's file";
    fastclock_status(&st);
    EXPECT_GT(st.calibrations, before) << "calibration must go on";
    int64_t e = 0;
    ASSERT_TRUE(bracket_error(CLOCK_MONOTONIC, fastclock_mono_ns, &e, 250, 100))
        << "no kernel read bracket under 250 ns in 100 tries: nothing measured";
    EXPECT_LE(iabs(e), 1000);
    for (int fd : fds)
        close(fd);
    close(keep);
}
