// The findings engine on captures of every kind of machine the doctor
// knows: each recommendation path runs deterministically here, without
// that hardware.  The expectations name the finding ids in rank order and
// check that the numbers of the capture reach the message.
#include <gtest/gtest.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <string>

#include "cli_test_util.h"

extern "C" {
#include "report.h"
}

using clitest::fixture;
using clitest::ids;
using clitest::load;

namespace {

struct Expect {
    const char *fixture;
    const char *findings;   // "severity:id ..." in rank order
    int exit_status;        // 1 when a finding is a problem
};

const Expect kExpect[] = {
    {"kvm-tsc", "warning:clock-unsynchronized ok:fastclock-gain", 0},
    {"baremetal-tsc", "info:cmdline-tsc-reliable ok:fastclock-gain", 0},
    {"hpet", "problem:clocksource-syscall warning:cmdline-clocksource info:fastclock-gain", 1},
    {"xen-hvm", "problem:clocksource-syscall info:fastclock-gain", 1},
    {"xen-pv",
     "problem:clocksource-syscall warning:tsc-unavailable warning:tsc-not-invariant warning:clock-unsynchronized "
     "info:fastclock-system",
     1},
    {"kvm-clock", "info:leap-pending info:watchdog-skipped info:clocksource-paravirt ok:fastclock-gain", 0},
    {"kvm-noinvtsc", "warning:tsc-not-invariant warning:tsc-frequency-mismatch warning:sync-maxerror info:fastclock-system",
     0},
    {"tsc-unstable", "problem:clocksource-syscall problem:tsc-unstable info:fastclock-system", 1},
    {"tsc-warp",
     "problem:tsc-warp problem:clocksource-syscall problem:tsc-unstable warning:clocksource-skew info:tsc-adjust "
     "info:fastclock-system",
     1},
    {"arm64", "info:counter-resolution ok:fastclock-gain", 0},
    {"arm64-erratum", "problem:clocksource-syscall warning:timer-erratum info:counter-resolution info:fastclock-system",
     1},
    {"container-minimal",
     "info:clocksource-unknown info:seccomp-unavailable info:fastclock-system info:kernel-log-unreadable", 0},
    {"no-vdso", "problem:no-vdso info:fastclock-gain", 1},
};

// Names the parameter in test output (instead of a byte dump).
void PrintTo(const Expect &e, std::ostream *os) { *os << e.fixture; }

class EveryFixture : public ::testing::TestWithParam<Expect> {};

TEST_P(EveryFixture, FindingsInRankOrder)
{
    const Expect &e = GetParam();
    static doctor_facts f;
    ASSERT_EQ(load(fixture(e.fixture), &f), "");
    static findings fs;
    findings_compute(&f, &fs);
    EXPECT_EQ(ids(fs), e.findings);
    EXPECT_EQ(findings_worst(&fs) == SEV_PROBLEM ? 1 : 0, e.exit_status);
    for (int i = 0; i < fs.n; i++) {
        EXPECT_GT(strlen(fs.f[i].message), 20u) << fs.f[i].id;
        // Every warning and problem says what to do.
        if (fs.f[i].severity >= SEV_WARNING) {
            EXPECT_GT(strlen(fs.f[i].fix), 20u) << fs.f[i].id;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Captures, EveryFixture, ::testing::ValuesIn(kExpect),
                         [](const ::testing::TestParamInfo<Expect> &p) {
                             std::string n = p.param.fixture;
                             for (auto &c : n)
                                 if (c == '-')
                                     c = '_';
                             return n;
                         });

// ---- what the messages say -------------------------------------------------

struct Loaded {
    doctor_facts f;
    findings fs;
    const finding *get(const char *id) const { return findings_get(&fs, id); }
};

static Loaded *run(const char *name)
{
    static Loaded l;
    EXPECT_EQ(load(fixture(name), &l.f), "");
    findings_compute(&l.f, &l.fs);
    return &l;
}

static bool has(const char *text, const char *needle) { return strstr(text, needle) != nullptr; }

// The text report of l, its rows unwrapped: one space for each run of blanks.
static std::string report_flat(Loaded *l)
{
    char *text = nullptr;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    EXPECT_NE(out, nullptr);
    if (!out)
        return "";
    report_text(out, &l->f, &l->fs, 0);
    fclose(out);
    std::string flat;
    for (const char *c = text; *c; c++)
        if (!isspace((unsigned char)*c) || flat.empty() || flat.back() != ' ')
            flat += isspace((unsigned char)*c) ? ' ' : *c;
    free(text);
    return flat;
}

TEST(Findings, HpetWithTscAvailableSaysSwitchAndPersist)
{
    Loaded *l = run("hpet");
    const finding *x = l->get("clocksource-syscall");
    ASSERT_NE(x, nullptr);
    EXPECT_TRUE(has(x->message, "clocksource is hpet while tsc is available and invariant")) << x->message;
    EXPECT_TRUE(has(x->message, "costs 563 ns instead of ~20 ns")) << x->message;
    EXPECT_TRUE(has(x->fix, "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource")) << x->fix;
    EXPECT_TRUE(has(x->fix, "`clocksource=tsc` on the kernel command line")) << x->fix;
    EXPECT_TRUE(has(x->fix, "currently forces `clocksource=hpet`")) << x->fix;
    EXPECT_TRUE(has(x->fix, "CLOCK_MONOTONIC_COARSE")) << x->fix;
    EXPECT_FALSE(has(x->fix, "Xen")) << x->fix;
    const finding *g = l->get("fastclock-gain");
    ASSERT_NE(g, nullptr);
    EXPECT_TRUE(has(g->message, "16.8 ns per call instead of 563 ns")) << g->message;
    EXPECT_TRUE(has(g->message, "(34x)")) << g->message;
}

// hpet pinned on the command line, tsc listed and invariant: the switch is
// advised -- unless something here says the TSC cannot be trusted.  Then no
// finding tells the admin to switch or to remove the pin, and the syscall
// finding says why tsc is no remedy.
TEST(Findings, NoSwitchToTscWhereTheTscIsNotToBeTrusted)
{
    struct Case {
        const char *what;
        void (*set)(doctor_facts *);
        const char *why;
    };
    const Case cases[] = {
        {"warp measured here", [](doctor_facts *f) { f->warp_ran = 1, f->warp_max_cycles = 2480; },
         "switching to tsc is no remedy: the CPUs' TSCs disagree by 2480 cycles"},
        {"kernel log: marked unstable", [](doctor_facts *f) { f->klog.tsc_unstable = 1; },
         "the kernel marked the TSC unstable"},
        {"kernel log: watchdog", [](doctor_facts *f) { f->klog.watchdog_tsc = 1; }, "the kernel marked the TSC unstable"},
        {"notsc", [](doctor_facts *f) { f->p_notsc = 1; }, "(`notsc`)"},
        {"tsc=unstable", [](doctor_facts *f) { snprintf(f->p_tsc, sizeof f->p_tsc, "unstable"); }, "(`tsc=unstable`)"},
    };
    for (const Case &k : cases) {
        Loaded *l = run("hpet");
        k.set(&l->f);
        findings_compute(&l->f, &l->fs);
        const finding *x = l->get("clocksource-syscall");
        ASSERT_NE(x, nullptr) << k.what;
        EXPECT_TRUE(has(x->message, k.why)) << k.what << ": " << x->message;
        EXPECT_FALSE(has(x->message, "available and invariant")) << k.what << ": " << x->message;
        EXPECT_FALSE(has(x->fix, "echo tsc")) << k.what << ": " << x->fix;
        const finding *c = l->get("cmdline-clocksource");
        ASSERT_NE(c, nullptr) << k.what;
        EXPECT_EQ(c->severity, SEV_INFO) << k.what;
        EXPECT_FALSE(has(c->fix, "Remove")) << k.what << ": " << c->fix;
    }
    // None of them: the switch is advised (the capture as it is).
    Loaded *l = run("hpet");
    EXPECT_TRUE(has(l->get("clocksource-syscall")->fix, "echo tsc"));
    EXPECT_EQ(l->get("cmdline-clocksource")->severity, SEV_WARNING);
}

// The current clocksource unreadable (a container hiding /sys) while reads
// enter the kernel: the finding says it does not know which, and names no
// finding that is not there.
TEST(Findings, AnUnknownClocksourceIsNotCalledUnusable)
{
    Loaded *l = run("hpet");
    l->f.cs_current_err = EACCES;
    l->f.cs_current[0] = 0;
    findings_compute(&l->f, &l->fs);
    const finding *x = l->get("clocksource-syscall");
    ASSERT_NE(x, nullptr);
    EXPECT_TRUE(has(x->message, "which clocksource the kernel uses is unknown here")) << x->message;
    EXPECT_FALSE(has(x->message, "no usable")) << x->message;
    EXPECT_FALSE(has(x->fix, "tsc-* findings")) << x->fix;
    EXPECT_TRUE(has(x->fix, "current_clocksource: if it is not tsc")) << x->fix;
    EXPECT_NE(l->get("clocksource-unknown"), nullptr);
}

TEST(Findings, XenWithoutStableBitCarriesTheMigrationCaveat)
{
    Loaded *l = run("xen-hvm");
    const finding *x = l->get("clocksource-syscall");
    ASSERT_NE(x, nullptr);
    EXPECT_TRUE(has(x->message, "no PVCLOCK_TSC_STABLE_BIT")) << x->message;
    EXPECT_TRUE(has(x->message, "642 ns")) << x->message;
    EXPECT_TRUE(has(x->fix, "echo tsc >")) << x->fix;
    EXPECT_TRUE(has(x->fix, "Caveat on Xen")) << x->fix;
    EXPECT_TRUE(has(x->fix, "live-migrates")) << x->fix;
    EXPECT_STREQ(l->f.cloud, "AWS EC2 (Xen)");
    EXPECT_STREQ(l->f.hv_name, "Xen");
}

TEST(Findings, XenPvWithoutTscGetsCoarseAdvice)
{
    Loaded *l = run("xen-pv");
    const finding *x = l->get("clocksource-syscall");
    ASSERT_NE(x, nullptr);
    EXPECT_TRUE(has(x->message, "switching to tsc is no remedy: the kernel offers no tsc clocksource (available: xen)"))
        << x->message;
    EXPECT_FALSE(has(x->fix, "echo tsc")) << x->fix;
    EXPECT_TRUE(has(x->fix, "CLOCK_MONOTONIC_COARSE or CLOCK_REALTIME_COARSE: 4.4 ns per call")) << x->fix;
    EXPECT_TRUE(has(x->fix, "in steps of 4.00 ms")) << x->fix;
    EXPECT_TRUE(has(l->get("clock-unsynchronized")->message, "no time daemon is running"));
}

TEST(Findings, WatchdogFalseAlarmSuggestsTscReliableWithEvidence)
{
    Loaded *l = run("tsc-unstable");
    const finding *x = l->get("tsc-unstable");
    ASSERT_NE(x, nullptr);
    EXPECT_EQ(x->severity, SEV_PROBLEM);
    EXPECT_TRUE(has(x->message, "\"clocksource watchdog\", 9811.4 s after boot")) << x->message;
    EXPECT_TRUE(has(x->message, "Since then the kernel uses hpet, read through a system call")) << x->message;
    EXPECT_TRUE(has(x->fix, "invariant (it is here)")) << x->fix;
    EXPECT_TRUE(has(x->fix, "(0 cycles measured here)")) << x->fix;
    EXPECT_TRUE(has(x->fix, "`tsc=reliable`")) << x->fix;
    EXPECT_STREQ(l->f.fc_mode, "system");
}

TEST(Findings, WarpForbidsTscReliable)
{
    Loaded *l = run("tsc-warp");
    const finding *u = l->get("tsc-unstable");
    ASSERT_NE(u, nullptr);
    EXPECT_TRUE(has(u->message, "2480 cycles apart (CPU#0 -> CPU#8)")) << u->message;
    EXPECT_TRUE(has(u->fix, "Do not force `tsc=reliable`")) << u->fix;
    const finding *w = l->get("tsc-warp");
    ASSERT_NE(w, nullptr);
    EXPECT_TRUE(has(w->message, "CPU 0 and CPU 8")) << w->message;
    EXPECT_TRUE(has(w->message, "2480 cycles (1035 ns)")) << w->message;
    EXPECT_TRUE(has(w->message, "9120 backward steps in 19223100 reads")) << w->message;
}

// The warp finding asks programs to run in mode system only where fastclock
// itself still trusts one line (mode tsc); where its own check stepped back
// already (the capture's mode system), it says so instead.
TEST(Findings, TheWarpsFixNamesModeSystemOnlyWhereFastclockRunsTsc)
{
    Loaded *l = run("tsc-warp");
    ASSERT_STREQ(l->f.fc_mode, "system");
    const finding *w = l->get("tsc-warp");
    ASSERT_NE(w, nullptr);
    EXPECT_FALSE(has(w->fix, "FASTCLOCK_MODE=system")) << w->fix;
    EXPECT_TRUE(has(w->fix, "fastclock already keeps to what it can trust here")) << w->fix;
    copy_str(l->f.fc_mode, sizeof l->f.fc_mode, "tsc");
    findings_compute(&l->f, &l->fs);
    w = l->get("tsc-warp");
    ASSERT_NE(w, nullptr);
    EXPECT_TRUE(has(w->fix, "run programs with FASTCLOCK_MODE=system")) << w->fix;
    // fastclock's own state unknown (no status): the advice stands.
    copy_str(l->f.fc_mode, sizeof l->f.fc_mode, "system");
    l->f.fc_known = 0;
    findings_compute(&l->f, &l->fs);
    w = l->get("tsc-warp");
    ASSERT_NE(w, nullptr);
    EXPECT_TRUE(has(w->fix, "run programs with FASTCLOCK_MODE=system")) << w->fix;
}

// A warp under a nanosecond's cycles is KVM's per-vCPU counter offsets
// (1 cycle seen on an EPYC guest): in step, as fastclock's own check counts
// it, not a problem with a fix to boot with tsc=unstable.
TEST(Findings, AWarpUnderANanosecondIsInStep)
{
    for (int64_t cycles : {int64_t(1), int64_t(2), int64_t(3), int64_t(2480)}) {
        Loaded *l = run("kvm-tsc");
        l->f.tsc_hz = 2.6e9;
        l->f.warp_ran = 1;
        l->f.warp_max_cycles = cycles;
        l->f.warp_pairs = 1;
        l->f.warp_pairs_skipped = 0;
        findings_compute(&l->f, &l->fs);
        bool found = cycles > 2;
        EXPECT_EQ(warp_found(&l->f), found) << cycles;
        EXPECT_EQ(l->get("tsc-warp") != nullptr, found) << cycles << " cycles";
        std::string flat = report_flat(l);
        EXPECT_EQ(has(flat.c_str(), "under a nanosecond, in step"), !found) << flat;
        EXPECT_EQ(has(flat.c_str(), ": the TSCs disagree"), found) << flat;
    }
}

// A warp check that found nothing but could not compare every pair (busy
// CPUs; the cross-socket pair, perhaps) does not say "in step".
TEST(Findings, AWarpCheckThatSkippedPairsDoesNotSayInStep)
{
    for (int skipped : {0, 2}) {
        Loaded *l = run("kvm-tsc");
        l->f.warp_ran = 1;
        l->f.warp_max_cycles = 0;
        l->f.warp_pairs = 2;
        l->f.warp_pairs_skipped = skipped;
        std::string flat = report_flat(l);
        EXPECT_TRUE(has(flat.c_str(), "0 cycles over 2 CPU pairs (")) << flat;
        EXPECT_EQ(has(flat.c_str(), ": in step"), skipped == 0) << flat;
        EXPECT_EQ(has(flat.c_str(), "none seen, but 2 pairs could not be compared"), skipped != 0) << flat;
    }
    // Nor does the tsc=reliable finding call the TSC synchronised then.
    Loaded *l = run("baremetal-tsc");
    l->f.warp_ran = 1;
    l->f.warp_max_cycles = 0;
    l->f.warp_pairs_skipped = 2;
    findings_compute(&l->f, &l->fs);
    const finding *x = l->get("cmdline-tsc-reliable");
    ASSERT_NE(x, nullptr);
    EXPECT_TRUE(has(x->message, "could not compare 2 CPU pairs")) << x->message;
    EXPECT_FALSE(has(x->message, "looks synchronised")) << x->message;
}

// tsc-percpu, as fastclock_status reports it in a program: per-CPU lines, or
// the kernel's clock where it still reads the TSC.
TEST(Findings, PerCpuModeIsExplainedEitherWay)
{
    for (const char *counter : {"rdtscp", "clock_gettime (the cheaper read here)"}) {
        Loaded *l = run("kvm-tsc");
        snprintf(l->f.fc_mode, sizeof l->f.fc_mode, "tsc-percpu");
        snprintf(l->f.fc_counter, sizeof l->f.fc_counter, "%s", counter);
        snprintf(l->f.fc_reason, sizeof l->f.fc_reason, "the TSCs of CPU 0 and CPU 1 disagree by 5000 cycles");
        findings_compute(&l->f, &l->fs);
        const finding *x = l->get("fastclock-percpu");
        ASSERT_NE(x, nullptr) << counter;
        EXPECT_EQ(x->severity, SEV_INFO);
        EXPECT_TRUE(has(x->message, "disagree by 5000 cycles")) << x->message;
        if (counter[0] == 'r')
            EXPECT_TRUE(has(x->message, "calibrated separately and read with rdtscp")) << x->message;
        else
            EXPECT_TRUE(has(x->message, "its clock is the cheaper read")) << x->message;
        EXPECT_TRUE(has(x->fix, "one TSC offset per VM")) << x->fix; // the capture is a KVM guest
        EXPECT_EQ(l->get("fastclock-gain"), nullptr);
        EXPECT_EQ(l->get("fastclock-system"), nullptr);
    }
}

// tsc-percpu because the kernel dropped the TSC (here its watchdog, on a
// VM: usually a false alarm), with no warp measured by the doctor, the
// kernel at boot or the library: the fix does not say the counters
// disagree, nor send the reader to the firmware or the host.
TEST(Findings, PerCpuWithoutAMeasuredWarpDoesNotBlameTheCounters)
{
    Loaded *l = run("kvm-tsc");
    snprintf(l->f.fc_mode, sizeof l->f.fc_mode, "tsc-percpu");
    snprintf(l->f.fc_counter, sizeof l->f.fc_counter, "rdtscp");
    snprintf(l->f.fc_reason, sizeof l->f.fc_reason,
             "the kernel does not trust the TSC: tsc is not among the available clocksources (kvm-clock acpi_pm)");
    l->f.warp_ran = 1;
    l->f.warp_max_cycles = 0;
    l->f.klog.warp_cycles = 0;
    findings_compute(&l->f, &l->fs);
    const finding *x = l->get("fastclock-percpu");
    ASSERT_NE(x, nullptr);
    EXPECT_FALSE(has(x->fix, "disagree")) << x->fix;
    EXPECT_FALSE(has(x->fix, "one TSC offset per VM")) << x->fix;
    EXPECT_TRUE(has(x->fix, "No warp between the CPUs' counters was measured")) << x->fix;
    // The same with a warp the doctor measured: the counters are blamed.
    l->f.warp_max_cycles = 5000;
    findings_compute(&l->f, &l->fs);
    x = l->get("fastclock-percpu");
    ASSERT_NE(x, nullptr);
    EXPECT_TRUE(has(x->fix, "disagree")) << x->fix;
}

// A mode FASTCLOCK_MODE forced is not the machine's doing: the finding says
// so, and its fix is to unset the variable, not the firmware or the host.
TEST(Findings, AForcedModeIsNotDiagnosedAsTheMachines)
{
    for (const char *mode : {"tsc-percpu", "system"}) {
        Loaded *l = run("kvm-tsc");
        snprintf(l->f.fc_mode, sizeof l->f.fc_mode, "%s", mode);
        snprintf(l->f.fc_counter, sizeof l->f.fc_counter, "rdtscp");
        snprintf(l->f.fc_reason, sizeof l->f.fc_reason, "FASTCLOCK_MODE=%s asks for it", mode);
        l->f.fc_forced = 1;
        findings_compute(&l->f, &l->fs);
        const finding *x = l->get(mode[0] == 't' ? "fastclock-percpu" : "fastclock-system");
        ASSERT_NE(x, nullptr) << mode;
        EXPECT_TRUE(has(x->fix, "FASTCLOCK_MODE chose this mode, not the machine")) << x->fix;
        EXPECT_FALSE(has(x->fix, "disagree")) << x->fix;
        EXPECT_FALSE(has(x->fix, "findings above")) << x->fix;
        if (mode[0] == 't') {
            EXPECT_FALSE(has(x->message, "trusts each CPU's counter but not")) << x->message;
        }
    }
}

TEST(Findings, KvmClockReadByTheVdsoIsOnlyInformation)
{
    Loaded *l = run("kvm-clock");
    const finding *x = l->get("clocksource-paravirt");
    ASSERT_NE(x, nullptr);
    EXPECT_EQ(x->severity, SEV_INFO);
    EXPECT_TRUE(has(x->message, "clocksource is kvm-clock, which the vDSO reads without a system call (36 ns per call)"))
        << x->message;
    EXPECT_TRUE(has(x->fix, "Google Compute Engine")) << x->fix;
    EXPECT_STREQ(l->f.cloud, "Google Compute Engine");
    EXPECT_TRUE(has(l->get("leap-pending")->message, "repeat a second"));
    EXPECT_EQ(l->f.klog.watchdog_skips, 2);
    // The capture predates the measurement of fastclock_gettime: the gain is
    // fastclock_mono_ns()'s, to be had by linking, and `fastclock run` is
    // not promised it.
    char summary[512];
    report_verdict(&l->f, &l->fs, summary, sizeof summary);
    EXPECT_STREQ(summary, "this machine's time is fine; fastclock_mono_ns() gives a further 2.0x (link libfastclock)");
}

// `fastclock run` gives a program clock_gettime at fastclock_gettime's cost,
// not fastclock_mono_ns()'s: the verdict and the fix promise the shim the
// gain measured on its own path, and only where there is one.
TEST(Findings, TheRunAdviceUsesWhatClockGettimeCostsThroughTheShim)
{
    struct Case {
        double gettime_ns;
        const char *summary, *fix;
    } cases[] = {
        {10.0, "this machine's time is fine; fastclock gives a further 2.0x (`fastclock run -- your-program`)",
         "`fastclock run -- your-program` gives clock_gettime 10.0 ns (2.0x)"},
        {19.5, "this machine's time is fine; fastclock_mono_ns() gives a further 2.0x (link libfastclock)",
         "`fastclock run` would not speed up clock_gettime itself here (19.5 ns through fastclock against 20 ns)"},
    };
    for (const Case &k : cases) {
        Loaded *l = run("kvm-clock");
        l->f.call[1].libc_ns = 20.0;
        l->f.fc_ns = 10.0;
        l->f.fc_gettime_ns = k.gettime_ns;
        findings_compute(&l->f, &l->fs);
        const finding *g = l->get("fastclock-gain");
        ASSERT_NE(g, nullptr);
        EXPECT_TRUE(has(g->fix, k.fix)) << g->fix;
        char summary[512];
        report_verdict(&l->f, &l->fs, summary, sizeof summary);
        EXPECT_STREQ(summary, k.summary);
    }
}

// One run's ratio near 1 is noise: neither the finding nor the verdict calls it
// a gain, and a ratio below 1 is called slower, not "0.9x faster".
TEST(Findings, ARatioNearOneIsNoGain)
{
    struct Case {
        double fc_ns;
        const char *says;
        bool gain;
    } cases[] = {{10.0, "(2.0x faster)", true}, {19.5, "(about as fast)", false},
                 {22.2, "(1.11x its cost: slower in this run)", false}};
    for (const Case &k : cases) {
        Loaded *l = run("kvm-clock"); // no warning: the verdict speaks of the gain
        l->f.call[1].libc_ns = 20.0;
        l->f.fc_ns = k.fc_ns;
        findings_compute(&l->f, &l->fs);
        const finding *g = l->get("fastclock-gain");
        ASSERT_NE(g, nullptr) << k.fc_ns;
        EXPECT_TRUE(has(g->message, k.says)) << g->message;
        EXPECT_EQ(has(g->fix, "fastclock_mono_ns()"), k.gain) << g->fix;
        char summary[512];
        report_verdict(&l->f, &l->fs, summary, sizeof summary);
        EXPECT_EQ(has(summary, "gives a further"), k.gain) << summary;
    }
}

// With jiffies listed (the tick in periodic mode) the kernel lists every
// clocksource, a TSC it marked unstable too: the doctor, like the library
// (src/mode.c), does not take "tsc is listed" for trust.
TEST(Findings, AnUnfilteredClocksourceListIsNotTakenForTrust)
{
    Loaded *l = run("kvm-clock");
    const finding *x = l->get("clocksource-paravirt");
    ASSERT_NE(x, nullptr);
    EXPECT_FALSE(has(x->message, "unfiltered")) << x->message;
    EXPECT_TRUE(has(x->fix, "`fastclock run -- your-program` reads the TSC")) << x->fix;

    snprintf(l->f.cs_available, sizeof l->f.cs_available, "kvm-clock tsc acpi_pm jiffies");
    snprintf(l->f.fc_mode, sizeof l->f.fc_mode, "system");
    findings_compute(&l->f, &l->fs);
    x = l->get("clocksource-paravirt");
    ASSERT_NE(x, nullptr);
    EXPECT_TRUE(has(x->message, "unfiltered (jiffies is listed")) << x->message;
    EXPECT_FALSE(has(x->fix, "`fastclock run -- your-program` reads the TSC")) << x->fix;
    EXPECT_TRUE(has(x->fix, "`FASTCLOCK_MODE=tsc fastclock run -- your-program`")) << x->fix;

    l = run("hpet");
    snprintf(l->f.cs_available, sizeof l->f.cs_available, "hpet tsc acpi_pm refined-jiffies jiffies");
    findings_compute(&l->f, &l->fs);
    x = l->get("clocksource-syscall");
    ASSERT_NE(x, nullptr);
    EXPECT_TRUE(has(x->fix, "First make sure the kernel has not marked the TSC unstable")) << x->fix;
    EXPECT_TRUE(has(x->fix, "clocksource=tsc")) << x->fix;
    const finding *c = l->get("cmdline-clocksource");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->severity, SEV_INFO) << c->message;
    EXPECT_FALSE(has(c->message, "although tsc is available")) << c->message;
}

TEST(Findings, HiddenInvariantTscAndMigratedFrequency)
{
    Loaded *l = run("kvm-noinvtsc");
    const finding *x = l->get("tsc-not-invariant");
    ASSERT_NE(x, nullptr);
    EXPECT_TRUE(has(x->message, "which hypervisors often hide")) << x->message;
    EXPECT_TRUE(has(x->fix, "-cpu host,+invtsc")) << x->fix;
    const finding *m = l->get("tsc-frequency-mismatch");
    ASSERT_NE(m, nullptr);
    EXPECT_TRUE(has(m->message, "2194.796 MHz")) << m->message;
    EXPECT_TRUE(has(m->message, "nominal frequency (kernel log, detected at boot) is 2199.998 MHz (-2365 ppm)")) << m->message;
    EXPECT_TRUE(has(l->get("sync-maxerror")->message, "254.00 ms"));
}

// Where the kernel log is unreadable (dmesg_restrict) and CPUID 0x15 names no
// crystal, CPUID 0x16's base frequency is the only nominal figure left: it is
// not the TSC's rate, so no mismatch is claimed against it.
TEST(Findings, ABaseFrequencyAloneRaisesNoFrequencyMismatch)
{
    Loaded *l = run("baremetal-tsc");
    l->f.klog_readable = 0;
    memset(&l->f.klog, 0, sizeof l->f.klog);
    facts_choose_frequency(&l->f);
    EXPECT_STREQ(l->f.tsc_hz_source, "cpuid 0x16 (base frequency)");
    EXPECT_DOUBLE_EQ(l->f.tsc_hz, 2500e6);
    findings_compute(&l->f, &l->fs);
    EXPECT_EQ(l->get("tsc-frequency-mismatch"), nullptr);
}

TEST(Findings, BaseFrequencyIsNotMistakenForTheTscRate)
{
    // Skylake-SP: CPUID 0x16 says 2500 MHz, the TSC runs at 2494.14 MHz.  The
    // kernel's "MHz TSC" line wins, so no false frequency-mismatch warning.
    Loaded *l = run("baremetal-tsc");
    EXPECT_DOUBLE_EQ(l->f.tsc_hz, 2494.140e6);
    EXPECT_STREQ(l->f.tsc_hz_source, "kernel log, TSC frequency");
    EXPECT_EQ(l->get("tsc-frequency-mismatch"), nullptr);
    EXPECT_STREQ(l->f.daemons, "chronyd");
    EXPECT_EQ(l->f.synchronized, TRI_YES);
}

TEST(Findings, Arm64TimerErratumExplainsTheSyscall)
{
    Loaded *l = run("arm64-erratum");
    const finding *x = l->get("clocksource-syscall");
    ASSERT_NE(x, nullptr);
    EXPECT_TRUE(has(x->message, "works around a timer erratum")) << x->message;
    EXPECT_TRUE(has(l->get("counter-resolution")->message, "24.00 MHz")) << l->get("counter-resolution")->message;
    EXPECT_TRUE(has(l->get("counter-resolution")->message, "steps of 42 ns"));
    EXPECT_STREQ(l->f.arch, "aarch64");
    EXPECT_EQ(l->f.invariant_tsc, TRI_YES);
    EXPECT_STREQ(l->f.invariant_source, "architecture (generic timer)");
}

// The same machine with its kernel log unreadable (Debian's
// dmesg_restrict=1 for a non-root user): the erratum is still known, from
// the CPU part in /proc/cpuinfo (Cortex-A73), as the library knows it.  It
// was blamed on "a ptrace or seccomp tracer ... LD_PRELOAD wrapper", with
// the advice to run the program elsewhere.
TEST(Findings, Arm64TimerErratumIsKnownWithoutTheKernelLog)
{
    Loaded *l = run("arm64-erratum");
    EXPECT_EQ(l->f.counter_erratum, 1) << "the capture's cpuinfo names a Cortex-A73";
    l->f.klog_readable = 0;
    memset(&l->f.klog, 0, sizeof l->f.klog);
    findings_compute(&l->f, &l->fs);
    const finding *x = l->get("clocksource-syscall");
    ASSERT_NE(x, nullptr);
    EXPECT_TRUE(has(x->message, "works around a timer erratum")) << x->message;
    EXPECT_FALSE(has(x->message, "LD_PRELOAD")) << x->message;
    const finding *e = l->get("timer-erratum");
    ASSERT_NE(e, nullptr);
    EXPECT_TRUE(has(e->message, "ARM erratum 858921 (Cortex-A73)")) << e->message;
    // An x86 capture names no erratum.
    EXPECT_EQ(run("kvm-tsc")->f.counter_erratum, 0);
}

TEST(Findings, NoVdsoPointsAtTheCommandLine)
{
    Loaded *l = run("no-vdso");
    const finding *x = l->get("no-vdso");
    ASSERT_NE(x, nullptr);
    EXPECT_TRUE(has(x->message, "182 ns each")) << x->message;
    EXPECT_TRUE(has(x->fix, "Remove `vdso=0`")) << x->fix;
    // The clocksource itself is fine: no separate clocksource finding.
    EXPECT_EQ(l->get("clocksource-syscall"), nullptr);
}

TEST(Findings, UnknownsAreReportedNotGuessed)
{
    Loaded *l = run("container-minimal");
    EXPECT_NE(l->f.cs_current_err, 0);
    EXPECT_EQ(l->f.klog_readable, 0);
    EXPECT_EQ(l->f.call[1].enters_kernel, TRI_UNKNOWN);
    EXPECT_EQ(l->get("clocksource-syscall"), nullptr);
    char summary[512];
    report_verdict(&l->f, &l->fs, summary, sizeof summary);
    EXPECT_STREQ(summary, "no problem found, but some facts are unknown here (see the info findings)");
    EXPECT_TRUE(has(l->get("seccomp-unavailable")->message, "Operation not permitted"));
}

// ---- branches no capture reaches: the same facts, one fact changed --------

TEST(Findings, VdsoCapableClocksourceThatStillEntersTheKernel)
{
    Loaded *l = run("kvm-tsc");
    l->f.call[1].enters_kernel = TRI_YES;
    l->f.call[1].libc_ns = 450;
    findings_compute(&l->f, &l->fs);
    const finding *x = l->get("clocksource-syscall");
    ASSERT_NE(x, nullptr);
    EXPECT_TRUE(has(x->message, "although clocksource tsc can be read by the vDSO")) << x->message;
    EXPECT_EQ(l->get("fastclock-gain")->severity, SEV_INFO);
}

TEST(Findings, WithoutSeccompTheVerdictIsInferredFromTiming)
{
    Loaded *l = run("hpet");
    l->f.call[1].enters_kernel = TRI_UNKNOWN;
    l->f.cs_vdso = VDSO_CAP_UNKNOWN;   // an unfamiliar clocksource name
    findings_compute(&l->f, &l->fs);
    const finding *x = l->get("clocksource-syscall");
    ASSERT_NE(x, nullptr) << ids(l->fs);
    EXPECT_TRUE(has(x->message, "(inferred: the seccomp check could not run)")) << x->message;

    l->f.call[1].libc_ns = 20;        // cheap against a 601 ns syscall: the vDSO
    findings_compute(&l->f, &l->fs);
    EXPECT_EQ(l->get("clocksource-syscall"), nullptr) << ids(l->fs);
}

TEST(Findings, TscDisabledOnTheCommandLine)
{
    Loaded *l = run("tsc-unstable");
    snprintf(l->f.p_tsc, sizeof l->f.p_tsc, "unstable");
    findings_compute(&l->f, &l->fs);
    const finding *x = l->get("cmdline-tsc-disabled");
    ASSERT_NE(x, nullptr);
    EXPECT_EQ(x->severity, SEV_WARNING);   // invariant and warp-free: a pity
    EXPECT_TRUE(has(x->message, "although it is invariant")) << x->message;

    l->f.warp_max_cycles = 500;            // now it is justified
    findings_compute(&l->f, &l->fs);
    EXPECT_EQ(l->get("cmdline-tsc-disabled")->severity, SEV_INFO);
}

// The kernel marks the TSC unstable at the user's word (tsc=unstable or
// notsc: "due to boot parameter"): that is the command line's finding, not
// a problem with a fix to look for a cause or to force tsc=reliable.
TEST(Findings, ATscMarkedUnstableAtTheUsersWordIsTheCommandLinesFinding)
{
    Loaded *l = run("tsc-unstable");
    l->f.klog.watchdog_tsc = 0;
    l->f.klog.tsc_unstable = 1;
    snprintf(l->f.klog.tsc_unstable_reason, sizeof l->f.klog.tsc_unstable_reason, "boot parameter");
    l->f.p_notsc = 1;
    findings_compute(&l->f, &l->fs);
    EXPECT_EQ(l->get("tsc-unstable"), nullptr);
    ASSERT_NE(l->get("cmdline-tsc-disabled"), nullptr);
    EXPECT_TRUE(has(l->get("cmdline-tsc-disabled")->message, "`notsc`")) << l->get("cmdline-tsc-disabled")->message;

    // The command line unreadable: the log's reason alone names the
    // parameter, so the finding stays (nothing else would say it), with a
    // fix about the parameter, not a cause to look for or tsc=reliable.
    l->f.p_notsc = 0;
    l->f.cmdline_err = 1;
    findings_compute(&l->f, &l->fs);
    const finding *x = l->get("tsc-unstable");
    ASSERT_NE(x, nullptr);
    EXPECT_TRUE(has(x->fix, "A kernel boot parameter asked for it")) << x->fix;
    EXPECT_TRUE(has(x->fix, "unreadable here")) << x->fix;
    EXPECT_FALSE(has(x->fix, "tsc=reliable")) << x->fix;
}

// Where the kernel left the TSC, the finding says what fastclock does: the
// mode it chose (it may still read the counter, per CPU), not "neither".
TEST(Findings, WhereTheKernelLeftTheTscTheFindingSaysWhatFastclockDoes)
{
    struct Case { const char *mode; const char *says; } cases[] = {
        {"tsc-percpu", "fastclock still reads the TSC, with a line per CPU (mode tsc-percpu)"},
        {"tsc", "fastclock still reads the TSC (mode tsc)"},
        {"system", "fastclock stays on the kernel's clocks (mode system)"},
    };
    for (const Case &k : cases) {
        Loaded *l = run("tsc-unstable");
        snprintf(l->f.fc_mode, sizeof l->f.fc_mode, "%s", k.mode);
        findings_compute(&l->f, &l->fs);
        const finding *x = l->get("tsc-unstable");
        ASSERT_NE(x, nullptr) << k.mode;
        EXPECT_TRUE(has(x->message, k.says)) << x->message;
        EXPECT_FALSE(has(x->message, "does not use the TSC either")) << x->message;
    }
    for (const char *unknown : {"initializing", "unknown"}) {
        Loaded *l = run("tsc-unstable");
        snprintf(l->f.fc_mode, sizeof l->f.fc_mode, "%s", unknown);
        findings_compute(&l->f, &l->fs);
        EXPECT_TRUE(has(l->get("tsc-unstable")->message, "decides at start-up")) << l->get("tsc-unstable")->message;
    }
    Loaded *l = run("tsc-unstable");
    l->f.fc_known = 0;
    findings_compute(&l->f, &l->fs);
    EXPECT_TRUE(has(l->get("tsc-unstable")->message, "decides at start-up")) << l->get("tsc-unstable")->message;
}

// A kernel log whose oldest record is past the first second lost the boot's
// records: whether the TSC was marked unstable (or warped at boot) is then
// unknown, not "never" (text) or false and 0 (JSON).
TEST(Findings, ARotatedKernelLogSaysUnknownNotNever)
{
    Loaded *l = run("kvm-tsc");
    ASSERT_TRUE(l->f.klog_readable);
    l->f.klog.tsc_unstable = 0;
    l->f.klog.watchdog_tsc = 0;
    l->f.klog.warp_cycles = 0;
    l->f.klog.first_s = 0.0;
    findings_compute(&l->f, &l->fs);
    EXPECT_TRUE(has(report_flat(l).c_str(), "TSC never marked unstable")) << report_flat(l);
    l->f.klog.first_s = 5000.0;
    findings_compute(&l->f, &l->fs);
    std::string text = report_flat(l);
    EXPECT_FALSE(has(text.c_str(), "never marked unstable")) << text;
    EXPECT_TRUE(has(text.c_str(), "not marked unstable in the records kept")) << text;
    char *json = nullptr;
    size_t size = 0;
    FILE *out = open_memstream(&json, &size);
    ASSERT_NE(out, nullptr);
    report_json(out, &l->f, &l->fs);
    fclose(out);
    EXPECT_TRUE(has(json, "\"tsc_marked_unstable\": null")) << json;
    EXPECT_TRUE(has(json, "\"boot_warp_cycles\": null")) << json;
    free(json);
}

// Text from the machine (a DMI string, the CPU model) may hold any byte:
// no escape sequence reaches the terminal through the text report.
TEST(Findings, TheTextReportPrintsNoControlBytes)
{
    Loaded *l = run("kvm-tsc");
    snprintf(l->f.model, sizeof l->f.model, "EPYC\x1b]0;pwned\x07\x1b[31mred\x7f");
    findings_compute(&l->f, &l->fs);
    std::string text = report_flat(l);
    EXPECT_NE(text.find("EPYC?]0;pwned??[31mred?"), std::string::npos) << text;
    for (char c : text)
        EXPECT_FALSE((unsigned char)c < 0x20 && c != ' ' && c != '\n') << int(c);
}

TEST(Findings, TscReliableWithMeasuredWarpIsAWarning)
{
    Loaded *l = run("baremetal-tsc");
    EXPECT_EQ(l->get("cmdline-tsc-reliable")->severity, SEV_INFO);
    l->f.warp_max_cycles = 1200;
    findings_compute(&l->f, &l->fs);
    EXPECT_EQ(l->get("cmdline-tsc-reliable")->severity, SEV_WARNING);
    EXPECT_NE(l->get("tsc-warp"), nullptr);
}

TEST(Findings, LiveKernelLogPermissionAdvice)
{
    Loaded *l = run("kvm-tsc");
    l->f.live = 1;
    l->f.klog_readable = 0;
    l->f.klog_err = EPERM;
    findings_compute(&l->f, &l->fs);
    const finding *x = l->get("kernel-log-unreadable");
    ASSERT_NE(x, nullptr);
    EXPECT_TRUE(has(x->message, "operation not permitted")) << x->message;
    EXPECT_TRUE(has(x->fix, "kernel.dmesg_restrict=0")) << x->fix;
}

}  // namespace
