// Deterministic fault injection through the test seam: a simulated counter
// and a simulated kernel, so slews, steps, warps, suspends and untrusted
// TSCs happen exactly when the test says, and every outcome is asserted.
#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>

#include <sys/stat.h>
#include <sys/timex.h>
#include <unistd.h>

#include "testing.h"
#include "test_util.h"

namespace {

// The world: `tick` is the counter's true progress (never backwards) and
// drives the kernel's clocks; the counter the library sees is
// tick + ctr_offset, so a counter fault does not move kernel time.
struct Sim {
    uint64_t tick = 5000000000000ULL;
    int64_t ctr_offset = 0;
    // Per-CPU counters: counter_c = tick * (1 + cpu_rate[c]) + cpu_offset[c] + ctr_offset.
    int cpu = 0;
    int64_t cpu_offset[8] = {0};
    double cpu_rate[8] = {0};
    bool counter_frozen = false;   // suspended with a counter that stops
    uint64_t frozen_at = 0;
    // adjtimex as a time daemon would leave it.
    bool synced = false;
    long freq_scaled = 0;          // ppm << 16
    long maxerror_us = 16000000, esterror_us = 16000000;
    uint64_t true_tick_of_last_read = 0;
    uint64_t per_read = 52;     // counter advance per counter read (20 ns at 2.6 GHz)
    uint64_t kernel_cost = 52;  // counter advance per kernel read
    double rate = 1.0 / 2.6;    // kernel ns per tick
    uint64_t anchor_tick = 5000000000000ULL;
    double anchor_ns = 1000.0 * 1e9; // MONOTONIC at anchor_tick: 1000 s of uptime
    int64_t real_off = 1700000000LL * 1000000000LL;
    int64_t boot_off = 0;
    int64_t tai_off = 37LL * 1000000000LL;
    uint64_t last_counter = 0;  // last value handed to the library
    long kernel_reads = 0;
};
Sim sim;

uint64_t counter_on(int cpu, uint64_t tick)
{
    double scaled = double(tick) * sim.cpu_rate[cpu];
    return tick + uint64_t(int64_t(scaled)) + uint64_t(sim.cpu_offset[cpu]) + uint64_t(sim.ctr_offset);
}

uint64_t sim_counter()
{
    sim.tick += sim.per_read;
    sim.true_tick_of_last_read = sim.tick;
    sim.last_counter = counter_on(sim.cpu, sim.counter_frozen ? sim.frozen_at : sim.tick);
    return sim.last_counter;
}

uint64_t sim_counter_aux(uint32_t *aux)
{
    *aux = uint32_t(sim.cpu);
    return sim_counter();
}

int sim_adjtimex(struct timex *tx)
{
    int modes = tx->modes;
    memset(tx, 0, sizeof *tx);
    if (modes == ADJ_OFFSET_SS_READ)
        return TIME_OK;
    tx->status = sim.synced ? STA_PLL : STA_UNSYNC;
    tx->freq = sim.freq_scaled;
    tx->tick = 10000;
    tx->maxerror = sim.maxerror_us;
    tx->esterror = sim.esterror_us;
    tx->tai = 37;
    return sim.synced ? TIME_OK : TIME_ERROR;
}

double sim_mono_at(uint64_t tick) { return sim.anchor_ns + double(int64_t(tick - sim.anchor_tick)) * sim.rate; }
int64_t sim_mono() { return int64_t(sim_mono_at(sim.tick)); }

int sim_gettime(clockid_t id, timespec *ts)
{
    if (!ts) {
        errno = EFAULT;
        return -1;
    }
    sim.kernel_reads++;
    sim.tick += sim.kernel_cost / 2;
    int64_t m = sim_mono(), v;
    sim.tick += sim.kernel_cost - sim.kernel_cost / 2;
    switch (id) {
    case CLOCK_MONOTONIC: v = m; break;
    case CLOCK_MONOTONIC_COARSE: v = m - m % 4000000; break;
    case CLOCK_REALTIME: v = m + sim.real_off; break;
    case CLOCK_REALTIME_COARSE: v = m - m % 4000000 + sim.real_off; break;
    case CLOCK_BOOTTIME: v = m + sim.boot_off; break;
    case CLOCK_TAI: v = m + sim.real_off + sim.tai_off; break;
    default: errno = EINVAL; return -1;
    }
    ts->tv_sec = v / 1000000000LL;
    ts->tv_nsec = v % 1000000000LL;
    return 0;
}

void sim_set_rate(double r)
{
    sim.anchor_ns = sim_mono_at(sim.tick);
    sim.anchor_tick = sim.tick;
    sim.rate = r;
}

void sim_advance_ns(double ns) { sim.tick += uint64_t(ns / sim.rate); }

// A fake /sys tree with the given clocksources.
std::string sysroot(const char *current, const char *available)
{
    char tmpl[] = "/tmp/fc-sysfs-XXXXXX";
    std::string root = mkdtemp(tmpl);
    std::string dir = root + "/sys/devices/system/clocksource/clocksource0";
    std::string cmd = "mkdir -p " + dir;
    EXPECT_EQ(system(cmd.c_str()), 0);
    FILE *f = fopen((dir + "/current_clocksource").c_str(), "w");
    fprintf(f, "%s\n", current);
    fclose(f);
    f = fopen((dir + "/available_clocksource").c_str(), "w");
    fprintf(f, "%s \n", available);
    fclose(f);
    return root;
}

struct fc_cpu_info good_cpu()
{
    struct fc_cpu_info c;
    memset(&c, 0, sizeof c);
    c.has_cpuid = 1;
    c.has_tsc = 1;
    c.invariant_tsc = 1;
    c.has_rdtscp = 1;
    c.tsc_hz_source = "";
    strcpy(c.vendor, "AuthenticAMD");
    return c;
}

class Faults : public ::testing::Test {
protected:
    struct fc_cpu_info cpu = good_cpu();
    std::string root;

    void SetUp() override
    {
        sim = Sim();
        unsetenv("FASTCLOCK_MODE");
        root = sysroot("tsc", "tsc hpet acpi_pm");
    }
    void TearDown() override
    {
        fc_test_reset(nullptr);
        unsetenv("FASTCLOCK_MODE");
        std::string cmd = "rm -rf " + root;
        (void)system(cmd.c_str());
    }
    void install()
    {
        struct fc_seam seam;
        memset(&seam, 0, sizeof seam);
        seam.counter = sim_counter;
        seam.counter_aux = sim_counter_aux;
        seam.kernel_gettime = sim_gettime;
        seam.adjtimex = sim_adjtimex;
        seam.ncpus = 8;
        seam.cpu = &cpu;
        seam.sysroot = root.c_str();
        seam.skip_speed_check = 1;
        fc_test_reset(&seam);
    }
    std::string mode()
    {
        struct fastclock_status st;
        fastclock_status(&st);
        return st.mode;
    }
    std::string reason()
    {
        struct fastclock_status st;
        fastclock_status(&st);
        return st.reason;
    }
    // One read; its error against the simulated kernel at the counter
    // value the library used.
    int64_t read_err(int64_t *value = nullptr)
    {
        int64_t v = fastclock_mono_ns();
        if (value)
            *value = v;
        return v - int64_t(sim_mono_at(sim.true_tick_of_last_read));
    }
};

TEST_F(Faults, SteadyClockStaysExactFor24Hours)
{
    install();
    ASSERT_EQ(mode(), "tsc") << reason();
    int64_t prev = fastclock_mono_ns(), max_err = 0;
    long back = 0;
    for (long i = 0; i < 24L * 3600 * 20; i++) { // a read every 50 ms for a day
        sim_advance_ns(50e6);
        int64_t v, e = read_err(&v);
        back += v < prev;
        prev = v;
        if (i > 100)
            max_err = std::max(max_err, fctest::iabs(e));
    }
    struct fastclock_status st;
    fastclock_status(&st);
    std::printf("24 h simulated: max |error| %lld ns after %llu calibrations\n", (long long)max_err,
                (unsigned long long)st.calibrations);
    EXPECT_EQ(back, 0);
    EXPECT_LE(max_err, 30);
}

TEST_F(Faults, SeededFromCpuidButNeverDrifts)
{
    // CPUID says 2.6 GHz, but the kernel's MONOTONIC (NTP-disciplined) runs
    // 0.125 ppm apart: a one-shot calibration drifts 125 ns per second
    // (450 us per hour); ours keeps re-anchoring.
    cpu.tsc_hz = 2.6e9;
    cpu.tsc_hz_source = "hypervisor leaf 0x40000010";
    sim.rate = 1.0 / 2.6 * (1 + 0.125e-6);
    install();
    ASSERT_EQ(mode(), "tsc");
    int64_t max_late = 0;
    for (long i = 0; i < 3600L * 10; i++) { // one hour, a read every 100 ms
        sim_advance_ns(100e6);
        int64_t e = read_err();
        if (i > 50)
            max_late = std::max(max_late, fctest::iabs(e));
    }
    double one_shot_drift = 0.125e-6 * 3600e9;
    std::printf("after 1 h: ours max |error| %lld ns; a one-shot calibration would be %.0f us off\n",
                (long long)max_late, one_shot_drift / 1e3);
    EXPECT_LE(max_late, 30);
}

TEST_F(Faults, Slews500ppmAreFollowedWithoutGoingBack)
{
    install();
    ASSERT_EQ(mode(), "tsc");
    int64_t prev = fastclock_mono_ns();
    long back = 0;
    auto run = [&](double seconds, double step_ns, int64_t *max_err) {
        *max_err = 0;
        for (double t = 0; t < seconds * 1e9; t += step_ns) {
            sim_advance_ns(step_ns);
            int64_t v, e = read_err(&v);
            back += v < prev;
            prev = v;
            *max_err = std::max(*max_err, fctest::iabs(e));
        }
    };
    int64_t err;
    run(30, 1e6, &err); // settle: intervals reach their maximum
    EXPECT_LE(err, 100);
    struct fastclock_status st;
    fastclock_status(&st);
    double interval = double(st.calibration_interval_ns);

    for (double slew : {+500e-6, -500e-6, +500e-6, -500e-6}) {
        sim_set_rate(1.0 / 2.6 * (1 + slew));
        int64_t transition, settled;
        run(3, 20e3, &transition); // read every 20 us through the change
        run(5, 1e6, &settled);
        std::printf("slew %+.0f ppm: worst %lld ns during the change (bound %.0f), %lld ns after\n",
                    slew * 1e6, (long long)transition, 500e-6 * interval * 2.1 + 200, (long long)settled);
        // Until the next calibration the line cannot know; then it converges.
        EXPECT_LE(transition, 500e-6 * interval * 2.1 + 200);
        EXPECT_LE(settled, 100);
    }
    EXPECT_EQ(back, 0) << "time went backwards across a slew";
}

TEST_F(Faults, RealtimeStepsAreFollowedWithinOneInterval)
{
    install();
    for (int i = 0; i < 200; i++) {
        sim_advance_ns(50e6);
        fastclock_mono_ns();
    }
    struct fastclock_status st;
    fastclock_status(&st);
    const double interval = double(st.calibration_interval_ns);
    for (int64_t step : {1000000000LL, -1000000000LL, 3600LL * 1000000000LL, -3600LL * 1000000000LL}) {
        int64_t mono_before = fastclock_mono_ns();
        sim.real_off += step;
        // Read through one interval (plus slack), then the step must be followed.
        int64_t mono_prev = mono_before;
        for (double t = 0; t < interval * 1.05; t += 1e6) {
            sim_advance_ns(1e6);
            int64_t m = fastclock_mono_ns();
            EXPECT_GE(m, mono_prev);
            EXPECT_LT(m - mono_prev, 2000000) << "MONOTONIC must not step with REALTIME";
            mono_prev = m;
        }
        sim_advance_ns(1e6);
        int64_t r = fastclock_real_ns();
        int64_t expected = int64_t(sim_mono_at(sim.last_counter - uint64_t(sim.ctr_offset))) + sim.real_off;
        EXPECT_LE(fctest::iabs(r - expected), 100) << "step " << step;
    }
    fastclock_status(&st);
    EXPECT_EQ(st.realtime_steps, 4u);
    EXPECT_EQ(std::string(st.mode), "tsc");
}

TEST_F(Faults, CounterJumpingBackwardsFallsBackWithoutGoingBack)
{
    install();
    for (int i = 0; i < 100; i++) {
        sim_advance_ns(10e6);
        fastclock_mono_ns();
    }
    int64_t before = fastclock_mono_ns();
    sim.ctr_offset -= 3000000000LL; // the counter loses ~1.2 s
    int64_t prev = before;
    for (int i = 0; i < 1000; i++) {
        sim_advance_ns(1e5);
        int64_t v, e = read_err(&v);
        EXPECT_GE(v, prev);
        prev = v;
        if (i > 10) {
            // Now the kernel answers; the error is against the true kernel time.
            int64_t k = sim_mono();
            EXPECT_LE(fctest::iabs(v - k), 1000) << i;
        }
        (void)e;
    }
    EXPECT_EQ(mode(), "system");
    EXPECT_NE(reason().find("backwards"), std::string::npos) << reason();
}

TEST_F(Faults, NonInvariantTscIsRefusedEvenWhenForced)
{
    cpu.invariant_tsc = 0;
    install();
    EXPECT_EQ(mode(), "system");
    EXPECT_NE(reason().find("invariant"), std::string::npos) << reason();
    int64_t k = sim_mono();
    EXPECT_LE(fctest::iabs(fastclock_mono_ns() - k), 1000);

    setenv("FASTCLOCK_MODE", "tsc", 1);
    install();
    EXPECT_EQ(mode(), "system");
    EXPECT_EQ(reason().rfind("FASTCLOCK_MODE=tsc refused", 0), 0u) << reason();
}

TEST_F(Faults, DistrustedButInvariantTscIsCalibratedPerCpu)
{
    // The kernel marked the TSC unstable (it is not offered as a
    // clocksource) but CPUID says it is invariant: each CPU gets its own line.
    root = sysroot("hpet", "hpet acpi_pm");
    install();
    EXPECT_EQ(mode(), "tsc-percpu") << reason();
    EXPECT_NE(reason().find("not among the available clocksources"), std::string::npos) << reason();
    // Forcing the global tsc mode is refused with the reason.
    setenv("FASTCLOCK_MODE", "tsc", 1);
    install();
    EXPECT_EQ(mode(), "system");
    EXPECT_NE(reason().find("refused"), std::string::npos);
    // Without rdtscp there is no per-CPU mode: the kernel's clocks.
    unsetenv("FASTCLOCK_MODE");
    cpu.has_rdtscp = 0;
    install();
    EXPECT_EQ(mode(), "system");
    EXPECT_NE(reason().find("rdtscp"), std::string::npos) << reason();
}

TEST_F(Faults, TrustedTscUsedEvenWhenTheKernelReadsHpet)
{
    root = sysroot("hpet", "tsc hpet acpi_pm");
    install();
    EXPECT_EQ(mode(), "tsc");
    EXPECT_NE(reason().find("hpet"), std::string::npos) << reason();
}

TEST_F(Faults, UnreadableSysfsIsSystemUnlessForced)
{
    root = "/nonexistent-fastclock-root";
    install();
    EXPECT_EQ(mode(), "system");
    EXPECT_NE(reason().find("unreadable"), std::string::npos) << reason();
    setenv("FASTCLOCK_MODE", "tsc", 1);
    install();
    EXPECT_EQ(mode(), "tsc") << reason();
    struct fastclock_status st;
    fastclock_status(&st);
    EXPECT_EQ(st.forced, 1);
    root = sysroot("tsc", "tsc"); // so TearDown removes a real dir
}

TEST_F(Faults, ForcedSystemIsHonoured)
{
    setenv("FASTCLOCK_MODE", "system", 1);
    install();
    EXPECT_EQ(mode(), "system");
    EXPECT_NE(reason().find("FASTCLOCK_MODE=system"), std::string::npos);
    timespec ts;
    EXPECT_EQ(fastclock_gettime(CLOCK_REALTIME, &ts), 0);
    EXPECT_LE(fctest::iabs(int64_t(ts.tv_sec) * 1000000000LL + ts.tv_nsec - (sim_mono() + sim.real_off)), 1000);
}

TEST_F(Faults, CalibrationThatCannotConvergeFallsBack)
{
    sim.kernel_cost = uint64_t(200e3 / sim.rate); // every kernel read takes 200 us
    install();
    EXPECT_EQ(mode(), "system");
    EXPECT_NE(reason().find("cannot converge"), std::string::npos) << reason();
}

TEST_F(Faults, SuspendRestartsCalibrationWithoutGoingBack)
{
    install();
    for (int i = 0; i < 100; i++) {
        sim_advance_ns(50e6);
        fastclock_mono_ns();
    }
    int64_t before = fastclock_mono_ns();
    // 30 s asleep: the counter runs on (nonstop TSC), MONOTONIC stands still,
    // BOOTTIME jumps.
    double mono_at_sleep = sim_mono_at(sim.tick);
    sim.tick += uint64_t(30e9 / sim.rate);
    sim.anchor_tick = sim.tick;
    sim.anchor_ns = mono_at_sleep;
    sim.boot_off += 30LL * 1000000000LL;
    int64_t v, e = read_err(&v);
    EXPECT_GE(v, before);
    EXPECT_LE(fctest::iabs(e), 1000) << "first read after resume";
    for (int i = 0; i < 2000; i++) {
        sim_advance_ns(1e6);
        int64_t w;
        e = read_err(&w);
        EXPECT_GE(w, v);
        v = w;
        EXPECT_LE(fctest::iabs(e), 1000);
    }
    timespec bt;
    fastclock_gettime(CLOCK_BOOTTIME, &bt);
    int64_t boot = int64_t(bt.tv_sec) * 1000000000LL + bt.tv_nsec;
    EXPECT_LE(fctest::iabs(boot - (sim_mono() + sim.boot_off)), 1000);
    EXPECT_EQ(mode(), "tsc");
}

// The pivot rule: after a recalibration, a reader on the new line never
// sees an earlier time than a reader on the old line could have (for a
// steeper and a shallower line).  Old-line readers sampled the counter no
// later than the publication plus the speculation window (and never past
// the old line's end), so those are the values to stay above.
TEST_F(Faults, NewLinesNeverUndercutOldOnes)
{
    install();
    for (int i = 0; i < 200; i++) {
        sim_advance_ns(10e6);
        fastclock_mono_ns();
    }
    for (double slew : {+300e-6, -300e-6, +2e-6, -2e-6}) {
        sim_set_rate(sim.rate * (1 + slew));
        sim_advance_ns(30e6);
        struct fc_test_line before, after;
        fc_test_current_line(&before);
        ASSERT_EQ(fc_test_recalibrate(), 0);
        uint64_t published = sim.last_counter;
        fc_test_current_line(&after);
        ASSERT_NE(before.epoch, after.epoch);
        ASSERT_NE(before.mult, after.mult);
        // Readers on the old line sampled the counter before the
        // publication plus the CPU's speculation window (5 us is generous).
        uint64_t old_last = std::min<uint64_t>(before.base_tsc + before.soft_span, published + 13000);
        for (uint64_t t = published; t < published + 40000000; t += 997) {
            int64_t o = fc_test_line_eval(&before, t < old_last ? t : old_last);
            int64_t n = fc_test_line_eval(&after, t);
            ASSERT_GE(n, o) << "slew " << slew << " at +" << (t - published) << " ticks";
        }
    }
}

// ---- the library's first read inside a signal handler ---------------------

int64_t handler_value;
void first_read_handler(int) { handler_value = fastclock_mono_ns(); }

TEST(FirstUse, InsideASignalHandler)
{
    fc_test_reset(nullptr); // the real machine, never initialised
    signal(SIGUSR1, first_read_handler);
    raise(SIGUSR1);
    signal(SIGUSR1, SIG_DFL);
    int64_t after = fastclock_mono_ns();
    EXPECT_GT(handler_value, 0);
    EXPECT_GE(after, handler_value);
    EXPECT_LE(fctest::iabs(after - fctest::kernel_ns(CLOCK_MONOTONIC)), 100000);
    fc_test_reset(nullptr);
}

TEST(FirstUse, DecisionIsQuick)
{
    fc_test_reset(nullptr);
    int64_t t0 = fctest::kernel_ns(CLOCK_MONOTONIC);
    fastclock_mono_ns();
    int64_t t1 = fctest::kernel_ns(CLOCK_MONOTONIC);
    struct fastclock_status st;
    fastclock_status(&st);
    std::printf("first read (mode decision included) took %.1f us; mode %s\n", double(t1 - t0) / 1e3, st.mode);
    // "Well under 1 ms": generous for a shared VM, but no 20 ms sleep.
    EXPECT_LT(t1 - t0, 5000000);
    fc_test_reset(nullptr);
}

} // namespace
