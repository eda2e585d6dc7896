// What `fastclock bench` says about fastclock itself: which read path its
// fastclock rows measured (fastclock_status before and after the cost
// phase, and what changed), the floor of the ordered read, the counter rows
// it compares with, and the unit of fastclock_ticks.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

extern "C" {
#include "benchrun.h"
#include "svg.h"
#include "counter.h"
#include "cpu.h"
#include "fastclock.h"
#include "testing.h"
}
#include "bench_util.h" // bench/: the benchmarks' median, comparison and counts
#include "test_util.h"

namespace {

bench_fc_state state(const char *mode, const char *counter, const char *real_source, uint64_t fallback_reads)
{
    bench_fc_state s;
    std::memset(&s, 0, sizeof s);
    s.known = 1;
    std::snprintf(s.mode, sizeof s.mode, "%s", mode);
    std::snprintf(s.calibrator, sizeof s.calibrator, "thread");
    std::snprintf(s.counter, sizeof s.counter, "%s", counter);
    std::snprintf(s.real_source, sizeof s.real_source, "%s", real_source);
    s.fallback_reads = fallback_reads;
    return s;
}

std::string changes(const bench_fc_state &a, const bench_fc_state &b, int *n = nullptr, double reads = 0)
{
    char out[512];
    int k = bench_fc_changes(&a, &b, reads, out, sizeof out);
    if (n)
        *n = k;
    return out;
}

TEST(BenchState, RoutingComesFromTheStatusCounter)
{
    EXPECT_STREQ(bench_ordered_reads("rdtscp"), "counter");
    EXPECT_STREQ(bench_unordered_reads("rdtscp"), "counter");
    EXPECT_STREQ(bench_ordered_reads("lfence;rdtsc"), "counter");
    EXPECT_STREQ(bench_ordered_reads("isb;cntvct_el0"), "counter");
    EXPECT_STREQ(bench_ordered_reads("clock_gettime"), "kernel");
    EXPECT_STREQ(bench_unordered_reads("clock_gettime"), "kernel");
    EXPECT_STREQ(bench_ordered_reads("clock_gettime (the counter costs more here)"), "kernel");
    EXPECT_STREQ(bench_unordered_reads("clock_gettime (the counter costs more here)"), "kernel");
    EXPECT_STREQ(bench_ordered_reads("clock_gettime (ordered), rdtsc (unordered)"), "kernel");
    EXPECT_STREQ(bench_unordered_reads("clock_gettime (ordered), rdtsc (unordered)"), "counter");
    EXPECT_STREQ(bench_ordered_reads("clock_gettime (the cheaper read here)"), "kernel");
    EXPECT_STREQ(bench_ordered_reads("clock_gettime (first line pending)"), "kernel");
}

// The ratio x_ordered_floor is against the fenced read the library chose
// (rdtscp on Intel, lfence;rdtsc on AMD where lfence orders it), never a
// fixed one; none where the kernel answers the ordered reads.
TEST(BenchState, OrderedFloorIsTheFencedReadTheStatusNames)
{
    if (!FC_HAVE_COUNTER)
        GTEST_SKIP() << "no counter on this architecture";
    EXPECT_STREQ(bench_ordered_floor_key(FC_COUNTER_INSN_ALT), FC_COUNTER_INSN_ALT);
    EXPECT_STREQ(bench_ordered_floor_key(FC_COUNTER_INSN_ORDERED), FC_COUNTER_INSN_ORDERED);
    EXPECT_EQ(bench_ordered_floor_key(FC_COUNTER_INSN_UNORDERED), nullptr); // the shim's unordered default
    EXPECT_EQ(bench_ordered_floor_key("clock_gettime"), nullptr);
    EXPECT_EQ(bench_ordered_floor_key("clock_gettime (the counter costs more here)"), nullptr);
    EXPECT_EQ(bench_ordered_floor_key("clock_gettime (ordered), " FC_COUNTER_INSN_UNORDERED " (unordered)"), nullptr);
}

// The counter rows are the bare read and the two fenced reads the library
// chooses between, named as fastclock_status names them (so the floor is
// found by name), with no row twice; the alternative is unusable where the
// CPU lacks it (rdtscp; arm64: cntvctss_el0 without FEAT_ECV).
TEST(BenchState, CounterRowsAreTheReadsTheLibraryMayChoose)
{
    if (!FC_HAVE_COUNTER)
        GTEST_SKIP() << "no counter on this architecture";
    source s[3];
    for (int i = 0; i < 3; i++)
        src_counter(&s[i], i);
    EXPECT_STREQ(s[0].key, FC_COUNTER_INSN_UNORDERED);
    EXPECT_STREQ(s[1].key, FC_COUNTER_INSN_ALT);
    EXPECT_STREQ(s[2].key, FC_COUNTER_INSN_ORDERED);
    EXPECT_STRNE(s[1].key, s[2].key);
    EXPECT_TRUE(s[0].usable);
    EXPECT_TRUE(s[2].usable);
#if defined(__x86_64__) || defined(__i386__)
    EXPECT_EQ(s[1].usable, fc_cpu_has_rdtscp());
#else
    EXPECT_EQ(s[1].usable, fc_cpu_counter_self_synced());
#endif
    for (int i = 0; i < 3; i++) {
        if (!s[i].usable)
            continue;
        EXPECT_GT(s[i].read(0), 0) << s[i].key;
        src_measure(&s[i], 1, 0.01, 100e3, 5, nullptr, nullptr);
        EXPECT_GT(s[i].median, 0) << s[i].key;
    }
    src_free(s, 3);
}

TEST(BenchState, NothingChangedSaysNothing)
{
    auto a = state("tsc", "rdtscp", "line", 4);
    int n = -1;
    EXPECT_EQ(changes(a, a, &n), "");
    EXPECT_EQ(n, 0);
    bench_fc_state unknown;
    std::memset(&unknown, 0, sizeof unknown);
    EXPECT_EQ(changes(a, unknown, &n), "");
    EXPECT_EQ(n, 0);
}

TEST(BenchState, AModeChangeNamesTheModeTheCounterAndTheRouting)
{
    int n = 0;
    std::string w = changes(state("tsc", "rdtscp", "line", 0), state("system", "clock_gettime", "vdso", 0), &n);
    EXPECT_EQ(n, 5) << w;
    EXPECT_NE(w.find("mode tsc -> system"), std::string::npos) << w;
    EXPECT_NE(w.find("counter rdtscp -> clock_gettime"), std::string::npos) << w;
    EXPECT_NE(w.find("ordered reads (fastclock_mono_ns) from the counter -> the kernel"), std::string::npos) << w;
    EXPECT_NE(w.find("unordered reads from the counter -> the kernel"), std::string::npos) << w;
    EXPECT_NE(w.find("real_source line -> vdso"), std::string::npos) << w;
}

TEST(BenchState, RoutingToTheKernelInTheSameModeIsFlagged)
{
    int n = 0;
    std::string w = changes(state("tsc", "rdtscp", "vdso", 0),
                            state("tsc", "clock_gettime (ordered), rdtsc (unordered)", "vdso", 0), &n);
    EXPECT_EQ(n, 2) << w;
    EXPECT_NE(w.find("ordered reads (fastclock_mono_ns) from the counter -> the kernel"), std::string::npos) << w;
    EXPECT_EQ(w.find("unordered reads"), std::string::npos) << w;
}

TEST(BenchState, FallbackReadsAreAChangeOnlyBeyondATenthOfAPercent)
{
    int n = 0;
    // Where the phase's reads are not known (the later phases): not a change.
    std::string w = changes(state("tsc", "rdtscp", "line", 10), state("tsc", "rdtscp", "line", 13), &n);
    EXPECT_EQ(n, 0) << w;
    EXPECT_EQ(w, "");
    // 500 of 2 M reads: the design (a line ran out while another thread
    // recalibrated), not a change of read path.
    w = changes(state("tsc", "rdtscp", "line", 0), state("tsc", "rdtscp", "line", 500), &n, 2e6);
    EXPECT_EQ(n, 0) << w;
    // 5000 of 2 M: a change, with its share.
    w = changes(state("tsc", "rdtscp", "line", 0), state("tsc", "rdtscp", "line", 5000), &n, 2e6);
    EXPECT_EQ(n, 1) << w;
    EXPECT_EQ(w, "5000 reads answered by the kernel in mode tsc, 0.25% of ~2.0 M fastclock reads "
                 "(fallback_reads 0 -> 5000)");
}

// The library's own fail-safe, as it could happen between two phases of a
// bench: the change is reported, and fastclock_ticks keeps counting counter
// ticks (decided in mode tsc), which the mode alone would have called ns.
TEST(BenchLive, AFallToSystemIsFlaggedAndTicksKeepTheirUnit)
{
    setenv("FASTCLOCK_MODE", "tsc", 1); // the mode the test falls from, not auto's pick
    fc_test_reset(nullptr);
    unsetenv("FASTCLOCK_MODE");
    for (int i = 0; i < 100; i++)
        (void)fastclock_mono_ns();
    (void)fastclock_ticks();
    bench_fc_state before;
    bench_take_state(&before);
    ASSERT_TRUE(before.known);
    FCTEST_SKIP_UNLESS_TSC(before.mode, before.reason);
    struct fastclock_status st;
    ASSERT_EQ(fastclock_status(&st), 0);
    ASSERT_GT(st.counter_hz, 0);
    double per_tick = bench_ticks_ns_per_tick();
    EXPECT_NEAR(per_tick, 1e9 / st.counter_hz, 0.01 * per_tick);

    fc_test_fail_to_system("test: a fail-safe in the middle of a bench");
    bench_fc_state after;
    bench_take_state(&after);
    EXPECT_STREQ(after.mode, "system");
    char what[512];
    EXPECT_GE(bench_fc_changes(&before, &after, 0, what, sizeof what), 2) << what;
    EXPECT_NE(std::strstr(what, "mode tsc -> system"), nullptr) << what;
    EXPECT_NE(std::strstr(what, "ordered reads (fastclock_mono_ns) from the counter -> the kernel"), nullptr) << what;

    double later = bench_ticks_ns_per_tick();
    EXPECT_NE(later, 1.0) << "ticks were counter ticks: they stay so after the fall";
    EXPECT_NEAR(later, per_tick, 0.01 * per_tick);
    fc_test_reset(nullptr);
}

// bench/core_bench.c and bench/startup/startup_bench.c.
TEST(BenchUtil, MedianAveragesTheTwoMiddleValuesOfAnEvenCount)
{
    double odd[] = {5, 1, 3};
    EXPECT_EQ(bench_median(odd, 3), 3);
    double even[] = {4, 1, 3, 2};
    EXPECT_EQ(bench_median(even, 4), 2.5); // not 3, the upper middle
    EXPECT_EQ(even[0], 1);                 // sorted: min and max at the ends
    EXPECT_EQ(even[3], 4);
    double one[] = {7};
    EXPECT_EQ(bench_median(one, 1), 7);
    EXPECT_TRUE(std::isnan(bench_median(one, 0)));
}

TEST(BenchUtil, ASlowerReadIsCalledSlower)
{
    char buf[64];
    EXPECT_STREQ(bench_compare(buf, sizeof buf, 20, 24), "1.20x faster than");
    EXPECT_STREQ(bench_compare(buf, sizeof buf, 21, 20), "1.05x slower than"); // was "0.95x faster"
    EXPECT_STREQ(bench_compare(buf, sizeof buf, 20.05, 20), "as fast as");
    EXPECT_STREQ(bench_compare(buf, sizeof buf, 20, 20.05), "as fast as");
    EXPECT_STREQ(bench_compare(buf, sizeof buf, NAN, 20), "not comparable with");
}

TEST(BenchUtil, CountsAreWholeNumbersInRange)
{
    long v = -1;
    EXPECT_EQ(bench_parse_count("300", 10, 100000, &v), 0);
    EXPECT_EQ(v, 300);
    for (const char *bad : {"50x", "", " 20", "1e3", "9", "100001", "-10", "+20", "0x20"}) {
        v = -1;
        EXPECT_EQ(bench_parse_count(bad, 10, 100000, &v), -1) << "'" << bad << "'";
        EXPECT_EQ(v, -1) << "'" << bad << "'";
    }
    EXPECT_EQ(bench_parse_count(nullptr, 10, 100000, &v), -1);
}

// `--svg` with no source measured (every sample buffer failed to allocate)
// drew its log-scale grid from infinite bounds and never finished; and the
// machine's strings (a CPU name cut inside a character, control bytes)
// went into the XML as they were.
std::string svg_of(const bench_result *r)
{
    char *text = nullptr;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    EXPECT_EQ(svg_write(f, r), 0);
    std::fclose(f);
    std::string out(text, size);
    std::free(text);
    return out;
}

TEST(BenchSvg, NoMeasuredSourceStillEnds)
{
    std::unique_ptr<bench_result, decltype(&std::free)> r(
        static_cast<bench_result *>(std::calloc(1, sizeof(bench_result))), &std::free);
    r->nsrc = 1; // present, never usable
    // In a child that an alarm ends, should the chart never finish (a fork,
    // not a death test's re-exec, which qemu-user cannot do).
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(10);
        _exit(svg_of(r.get()).find("</svg>") != std::string::npos ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "status " << status << (WIFSIGNALED(status) ? " (killed: the chart never ended)" : "");
}

TEST(BenchSvg, TheMachinesStringsStayValidXml)
{
    std::unique_ptr<bench_result, decltype(&std::free)> r(
        static_cast<bench_result *>(std::calloc(1, sizeof(bench_result))), &std::free);
    // A whole two-byte character, a control byte, then a three-byte one cut short.
    std::snprintf(r->cpu, sizeof r->cpu, "CPU \xc3\xa9 a\x01" "b <&> \xe2\x82");
    std::string svg = svg_of(r.get());
    EXPECT_NE(svg.find("CPU \xc3\xa9 a&#xFFFD;b &lt;&amp;&gt; &#xFFFD;&#xFFFD;"), std::string::npos) << svg;
    for (unsigned char c : svg)
        EXPECT_FALSE(c < 0x20 && c != '\n' && c != '\t' && c != '\r') << int(c);
}

} // namespace
