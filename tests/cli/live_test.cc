// The live probes on this machine.  Assertions hold on any Linux machine:
// where the answer depends on the clocksource, the test reads it first.
#include <cstring>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <sys/auxv.h>
#include <time.h>
#include <unistd.h>

#include "cli_test_util.h"

extern "C" {
#include "sources.h"
}

namespace {

TEST(Seccomp, CpuClocksAlwaysEnterTheKernelCoarseOnesNever)
{
    static doctor_facts f;
    facts_init(&f);
    measure_seccomp(&f);
    if (f.seccomp_ok != TRI_YES && strstr(f.seccomp_err, "PR_SET_SECCOMP"))
        GTEST_SKIP() << "seccomp filters unavailable here (qemu-user does not emulate them): " << f.seccomp_err;
    ASSERT_EQ(f.seccomp_ok, TRI_YES) << f.seccomp_err;
    // The CPU-time clocks are never served by the vDSO.
    EXPECT_EQ(f.call[facts_call_index("CLOCK_PROCESS_CPUTIME_ID")].enters_kernel, TRI_YES);
    EXPECT_EQ(f.call[facts_call_index("CLOCK_THREAD_CPUTIME_ID")].enters_kernel, TRI_YES);
    if (getauxval(AT_SYSINFO_EHDR)) {
        // With a vDSO the coarse clocks never need the clocksource.
        EXPECT_EQ(f.call[facts_call_index("CLOCK_MONOTONIC_COARSE")].enters_kernel, TRI_NO);
        EXPECT_EQ(f.call[facts_call_index("CLOCK_REALTIME_COARSE")].enters_kernel, TRI_NO);
    }
    // The fine clocks follow the clocksource.
    doctor_facts cs;
    facts_init(&cs);
    probe_files(&cs, "");
    if (cs.cs_current_err == 0 && getauxval(AT_SYSINFO_EHDR)) {
        int mono = f.call[facts_call_index("CLOCK_MONOTONIC")].enters_kernel;
        if (cs.cs_vdso == VDSO_CAP_YES) {
            EXPECT_EQ(mono, TRI_NO) << "clocksource " << cs.cs_current;
        } else if (cs.cs_vdso == VDSO_CAP_NO) {
            EXPECT_EQ(mono, TRI_YES) << "clocksource " << cs.cs_current;
        }
    }
}

TEST(Granularity, CoarseClockStepsByItsResolution)
{
    struct timespec res;
    ASSERT_EQ(clock_getres(CLOCK_MONOTONIC_COARSE, &res), 0);
    double res_ns = res.tv_sec * 1e9 + res.tv_nsec;
    int idx = -1;
    for (int i = 0; i < src_nclocks; i++)
        if (src_clocks[i].id == CLOCK_MONOTONIC_COARSE)
            idx = i;
    ASSERT_GE(idx, 0);
    source s;
    src_clock_gettime(&s, idx);
    // 25 ticks: the smallest step is one tick even if a busy machine
    // preempts the reader across a few of them -- or a few, where the host
    // held this guest's vCPU across ticks for the whole watch (its kernel
    // then advances the clock several ticks at once: 2 under a CPU hog, 4
    // and 6 with builds beside it).  Still a whole number of ticks.
    src_step(&s, 25 * res_ns, 0);
    ASSERT_FALSE(std::isnan(s.step_ns)) << "no tick seen in " << 25 * res_ns / 1e6 << " ms";
    double ticks = std::round(s.step_ns / res_ns);
    EXPECT_GE(ticks, 1) << s.step_ns << " ns";
    EXPECT_NEAR(s.step_ns, ticks * res_ns, res_ns * 0.1);
    EXPECT_GE(s.step_changes, 1);
}

// A reader that misses every other tick for the first six changes (a busy
// machine): the step is still the clock's own, because a clock that moves
// only a few times in the window is watched for more changes.
namespace {
int64_t g_fake_start;
int64_t fake_busy_coarse(long)
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t changes = (ts.tv_sec * 1000000000LL + ts.tv_nsec - g_fake_start) / 4000000;
    return changes <= 6 ? changes * 8000000 : 6 * 8000000 + (changes - 6) * 4000000;
}
} // namespace

TEST(Granularity, FewChangesInTheWindowAreWatchedLonger)
{
    source s;
    std::memset(&s, 0, sizeof s);
    s.read = fake_busy_coarse;
    s.unit = UNIT_NS;
    s.usable = 1;
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    g_fake_start = ts.tv_sec * 1000000000LL + ts.tv_nsec;
    src_step(&s, 25e6, 0); // six changes in the window, all two ticks wide
    EXPECT_EQ(s.step_ns, 4e6);
    EXPECT_GE(s.step_changes, 8);
}

TEST(Granularity, GettimeofdayStepsByMicroseconds)
{
    source s;
    src_gettimeofday(&s, 0);
    src_step(&s, 20e6, 0);
    EXPECT_EQ(s.step_native, 1);   // one microsecond: it changes every us we watch
    EXPECT_EQ(s.step_ns, 1000);
}

TEST(Measure, InterleavedBatchesGiveOrderedStatistics)
{
    source s[3];
    src_clock_gettime(&s[0], 1);
    src_syscall_clock_gettime(&s[1], 1);
    src_clock_gettime(&s[2], 8);   // CLOCK_REALTIME_ALARM: may be unsupported
    src_measure(s, 3, 0.05, 100e3, 5, nullptr, nullptr);
    // The alarm clock is measured like the others where the kernel has it
    // (an RTC), and left out with its error where it has not.
    struct timespec ts;
    EXPECT_EQ(s[2].usable, clock_gettime(CLOCK_REALTIME_ALARM, &ts) == 0);
    for (int i = 0; i < 3; i++) {
        if (!s[i].usable) {
            EXPECT_EQ(s[i].count, 0) << s[i].key;
            EXPECT_TRUE(std::isnan(s[i].median)) << s[i].key;
            EXPECT_NE(s[i].err, 0) << s[i].key;
            continue;
        }
        EXPECT_GE(s[i].count, 5) << s[i].key;
        EXPECT_LE(s[i].min, s[i].median) << s[i].key;
        EXPECT_LE(s[i].median, s[i].max) << s[i].key;
        EXPECT_GT(s[i].min, 0) << s[i].key;
    }
    EXPECT_TRUE(s[0].usable && s[1].usable);
    src_free(s, 3);
}

TEST(Scale, EveryThreadCountsCalls)
{
    int cpus[1024];
    int n = src_allowed_cpus(cpus, 1024);
    ASSERT_GE(n, 1);
    source s;
    src_fastclock(&s, FC_SRC_MONO_COARSE);
    scale_sample x;
    ASSERT_EQ(src_scale(&s, 3, cpus, n, 5e6, &x), 0);
    EXPECT_GT(x.ns_per_call, 0);
    EXPECT_GT(x.calls_per_s, 0);
    EXPECT_GT(x.wall_calls_per_s, 0);
    // Capacity is counted for at most as many threads as there are CPUs.
    EXPECT_NEAR(x.calls_per_s, (3 < n ? 3 : n) * 1e9 / x.ns_per_call, 1);
}

TEST(LiveProbe, FilesAndKernelAgree)
{
    static doctor_facts f;
    facts_init(&f);
    probe_files(&f, "");
    probe_live(&f);
    EXPECT_GT(f.cpus, 0);
    EXPECT_EQ(f.cpus, sysconf(_SC_NPROCESSORS_ONLN));
    EXPECT_NE(f.arch[0], 0);
    EXPECT_EQ(f.vdso_present, getauxval(AT_SYSINFO_EHDR) ? TRI_YES : TRI_NO);
    EXPECT_EQ(f.sync_known, 1) << f.sync_err;
    if (f.klog_readable) {
        EXPECT_GT(f.klog.records, 0);
    } else {
        EXPECT_NE(f.klog_err, 0);
    }
}

}  // namespace
