// Fault tests on the real kernel (issue 12): the kernel clock is disturbed
// for real -- adjtimex frequency steps and flips, tick changes, REALTIME
// steps, a clocksource switch -- while fastclock is read through its public
// API only and checked against raw clock_gettime system calls.
//
// Each ctest test runs one disturbance in a fresh process, with the
// calibrator and mode given by FASTCLOCK_CALIBRATOR / FASTCLOCK_MODE (the
// library decides both once per process).  Every test restores the kernel
// state it changed, also when it fails or is killed (kernel_state.h), and
// skips, saying what is missing, where the clock cannot be changed.
//
// Measured while disturbing:
//   - two threads read fastclock_mono_ns() under a mutex: a value below the
//     thread's own previous one is a same-thread step back; a value below
//     the last one the *other* thread read (ordered by the mutex) is a
//     cross-thread step back (in tsc-percpu mode allowed up to the error
//     bound reported just before or just after the later read, the larger);
//   - a third thread brackets fastclock_mono_ns() and fastclock_real_ns(),
//     and their unordered flavours, between raw syscall(SYS_clock_gettime) reads: the error is the distance
//     outside [kernel_before, kernel_after], compared with
//     fastclock_status().error_bound_ns read just before and just after
//     (the larger counts); also the time after each change until the error
//     stays below 1 us.
// One line per test, starting "realkernel:", carries all the numbers.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <dirent.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <unistd.h>

#include "fastclock.h"
#include "kernel_state.h"
#include "test_util.h"

namespace {

constexpr int64_t kNsPerSec = 1000000000LL;
constexpr int64_t kNsPerMs = 1000000LL;
constexpr long kPpm = 1L << 16; // adjtimex freq units per ppm
constexpr int64_t kConvergedNs = 1000;       // "back within 1 us"
constexpr int64_t kMaxBracketNs = 1000000;   // a wider bracket judges nothing

int64_t raw_ns(clockid_t c)
{
    timespec t;
    syscall(SYS_clock_gettime, c, &t);
    return rk::ts_ns(t);
}

void sleep_ns(int64_t ns)
{
    timespec t = {time_t(ns / kNsPerSec), long(ns % kNsPerSec)};
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &t, &t) == EINTR) {
    }
}

int64_t bound_now()
{
    struct fastclock_status st;
    fastclock_status(&st);
    return st.error_bound_ns;
}

std::string env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

// A test's one "realkernel:" line: printed, and appended to
// REALKERNEL_SUMMARY_FILE where set.
void summary(const std::string &line)
{
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    if (const char *f = getenv("REALKERNEL_SUMMARY_FILE")) {
        if (FILE *fp = std::fopen(f, "a")) {
            std::fprintf(fp, "%s\n", line.c_str());
            std::fclose(fp);
        }
    }
}

int count_fds()
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    while (dirent *e = readdir(d))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; // the directory's own descriptor
}

// One adjtimex setting: the frequency (ADJ_FREQUENCY) or the tick (ADJ_TICK).
bool set_timex(unsigned mode, long value)
{
    struct timex tx;
    memset(&tx, 0, sizeof tx);
    tx.modes = mode;
    (mode == ADJ_TICK ? tx.tick : tx.freq) = value;
    return adjtimex(&tx) >= 0;
}
bool set_freq(long freq) { return set_timex(ADJ_FREQUENCY, freq); }
bool set_tick(long tick) { return set_timex(ADJ_TICK, tick); }

// ---------------------------------------------------------------- measurement

struct Event {
    std::string what;
    int64_t start_mono = 0;            // raw MONOTONIC just before the change
    std::atomic<int64_t> last_bad{0};  // last sample >= 1 us off in this event's window
    std::atomic<int64_t> last_sample{0};
};

struct Stats {
    // readers
    std::atomic<uint64_t> reads{0};
    std::atomic<uint64_t> same_back{0}, cross_back{0};
    std::atomic<int64_t> same_back_max{0}, cross_back_max{0};
    std::atomic<int64_t> cross_excess_max{INT64_MIN}; // step back - bound (percpu)
    // checker
    std::atomic<uint64_t> checks{0}, wide{0}, outside{0};
    std::atomic<int64_t> worst_err_mono{0}, worst_err_real{0}, worst_excess{INT64_MIN};
    std::atomic<int64_t> max_bound{0};
    std::string worst_excess_at;
    std::string worst_cross_at; // the step back nearest to (or beyond) the bound
};

void atomic_max(std::atomic<int64_t> &a, int64_t v)
{
    int64_t cur = a.load(std::memory_order_relaxed);
    while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
    }
}

class Harness {
public:
    explicit Harness(bool percpu) : percpu_(percpu) {}

    void start()
    {
        stop_.store(false);
        for (int i = 0; i < 2; i++)
            threads_.emplace_back([this, i] { reader(i); });
        threads_.emplace_back([this] { checker(); });
    }

    void stop()
    {
        stop_.store(true);
        for (auto &t : threads_)
            t.join();
        threads_.clear();
    }

    ~Harness()
    {
        if (!threads_.empty())
            stop();
    }

    // Idle: the readers and the checker stop reading the clock (within a
    // read) until resume().  Nothing reads it meanwhile, so a lazy line
    // lapses and no reader polls adjtimex: the change after it is met cold.
    void pause() { paused_.store(true); }
    void resume() { paused_.store(false); }

    // Marks the start of a change; call just before the system call.
    void event(const std::string &what)
    {
        std::lock_guard<std::mutex> g(ev_mu_);
        int n = n_events_.load(std::memory_order_relaxed);
        if (n == kMaxEvents)
            return;
        events_[size_t(n)].what = what;
        events_[size_t(n)].start_mono = raw_ns(CLOCK_MONOTONIC);
        n_events_.store(n + 1, std::memory_order_release);
    }

    // A read by the disturbing thread itself (REALTIME steps), counted for
    // the current change's convergence time.
    void note(int64_t mono_at, int64_t err)
    {
        int n = n_events_.load(std::memory_order_acquire);
        if (!n)
            return;
        Event &e = events_[size_t(n - 1)];
        e.last_sample.store(mono_at, std::memory_order_relaxed);
        if (err >= kConvergedNs)
            e.last_bad.store(mono_at, std::memory_order_relaxed);
    }

    Stats st;

    // Longest time from a change until the error stayed below 1 us (ns);
    // *unsettled: it was still >= 1 us at the end of that change's window.
    int64_t worst_convergence(std::string *which, bool *unsettled) const
    {
        int64_t worst = 0;
        *unsettled = false;
        for (int i = 0; i < n_events_.load(); i++) {
            const Event &e = events_[size_t(i)];
            int64_t lb = e.last_bad.load();
            if (!lb)
                continue;
            int64_t d = lb - e.start_mono;
            if (d > worst) {
                worst = d;
                *which = e.what;
                *unsettled = lb == e.last_sample.load();
            }
        }
        return worst;
    }

private:
    void reader(int me)
    {
        int64_t prev = INT64_MIN;
        uint64_t n = 0;
        while (!stop_.load(std::memory_order_relaxed)) {
            if (idle())
                continue;
            std::unique_lock<std::mutex> g(mu_);
            // tsc-percpu: the bound in force for this read is the one
            // reported just before it or just after it, the larger (a CPU's
            // line that was behind may be recalibrated forward in between,
            // and its bound shrinks with it).  The earlier read, whichever
            // thread made it, came before `b_before`.
            int64_t b_before = 0, k_before = 0;
            if (percpu_) {
                b_before = bound_now();
                k_before = raw_ns(CLOCK_MONOTONIC);
            }
            int64_t v = fastclock_mono_ns();
            int64_t other = last_[1 - me];
            if (v < other) {
                int64_t d = other - v;
                st.cross_back.fetch_add(1, std::memory_order_relaxed);
                atomic_max(st.cross_back_max, d);
                if (percpu_) {
                    int64_t k_after = raw_ns(CLOCK_MONOTONIC);
                    int64_t b_after = bound_now();
                    // b_before was taken a moment before the read: a bound
                    // grows by at most ~0.35 ns per ns meanwhile (sync.c).
                    int64_t slack = (k_after - k_before) / 2 + 100;
                    int64_t excess = d - std::max(b_before + slack, b_after);
                    if (excess > st.cross_excess_max.load(std::memory_order_relaxed)) {
                        std::lock_guard<std::mutex> eg(ev_mu_);
                        char at[200];
                        std::snprintf(at, sizeof at,
                                      "step back %" PRId64 " ns, bound before %" PRId64 " ns, after %" PRId64
                                      " ns, this read %" PRId64 " ns below the kernel",
                                      d, b_before, b_after, k_before - v);
                        st.worst_cross_at = at;
                    }
                    atomic_max(st.cross_excess_max, excess);
                }
            }
            last_[me] = v;
            g.unlock();
            if (v < prev) {
                st.same_back.fetch_add(1, std::memory_order_relaxed);
                atomic_max(st.same_back_max, prev - v);
            }
            prev = v;
            n++;
        }
        st.reads.fetch_add(n);
    }

    // One bracketed read; returns its error (-1: the bracket judges nothing)
    // and the raw clock after it in *k_after.
    int64_t check_one(clockid_t c, int64_t (*ours)(), const char *name, Event *ev, int64_t *k_after)
    {
        int64_t b0 = bound_now();
        int64_t k0 = raw_ns(c);
        int64_t v = ours();
        int64_t k1 = raw_ns(c);
        int64_t b1 = bound_now();
        *k_after = k1;
        st.checks.fetch_add(1, std::memory_order_relaxed);
        if (k1 < k0 || k1 - k0 > kMaxBracketNs) { // preempted, or REALTIME stepped in between
            st.wide.fetch_add(1, std::memory_order_relaxed);
            return -1;
        }
        int64_t err = v < k0 ? k0 - v : v > k1 ? v - k1 : 0;
        int64_t bound = std::max(b0, b1);
        atomic_max(st.max_bound, bound);
        atomic_max(c == CLOCK_MONOTONIC ? st.worst_err_mono : st.worst_err_real, err);
        if (err > bound) {
            st.outside.fetch_add(1, std::memory_order_relaxed);
            if (err - bound > st.worst_excess.load()) {
                st.worst_excess.store(err - bound);
                // At once, before anything moves: the unordered MONOTONIC
                // line read against the kernel's, and REALTIME - MONOTONIC
                // from the kernel's coarse pair (what a wall read adds to the
                // line) against the fine one: which of the two was off.
                int64_t m0 = raw_ns(CLOCK_MONOTONIC);
                int64_t mu = fastclock_mono_ns_unordered();
                int64_t m1 = raw_ns(CLOCK_MONOTONIC);
                timespec rc, mc;
                clock_gettime(CLOCK_MONOTONIC_COARSE, &mc);
                clock_gettime(CLOCK_REALTIME_COARSE, &rc);
                int64_t fm0 = raw_ns(CLOCK_MONOTONIC), fr = raw_ns(CLOCK_REALTIME), fm1 = raw_ns(CLOCK_MONOTONIC);
                int64_t mono_off = mu < m0 ? mu - m0 : mu > m1 ? mu - m1 : 0;
                int64_t coarse_vs_fine = (rk::ts_ns(rc) - rk::ts_ns(mc)) - (fr - (fm0 + fm1) / 2);
                // Named after the latest change now (ev may be older if one
                // happened during this check).
                std::lock_guard<std::mutex> g(ev_mu_);
                int n = n_events_.load(std::memory_order_acquire);
                const Event *last = n ? &events_[size_t(n - 1)] : nullptr;
                char at[384];
                // Which read, and where it fell against the bracket: enough
                // to tell a stale offset from a kernel that moved.
                std::snprintf(at, sizeof at,
                              "%s (%s = kernel before %+" PRId64 " ns, bracket %" PRId64 " ns; just after: "
                              "fastclock_mono_ns_unordered off by %+" PRId64 " ns, the kernel's coarse "
                              "offset off its fine one by %+" PRId64 " ns), err %" PRId64
                              " ns, bound %" PRId64 " ns, %.3f ms after ",
                              c == CLOCK_MONOTONIC ? "mono" : "real", name, v - k0, k1 - k0, mono_off, coarse_vs_fine,
                              err, bound, last ? double(raw_ns(CLOCK_MONOTONIC) - last->start_mono) / 1e6 : 0.0);
                st.worst_excess_at = at + (last ? last->what : std::string("start"));
            }
        }
        return err;
    }

    void checker()
    {
        while (!stop_.load(std::memory_order_relaxed)) {
            if (idle())
                continue;
            int n = n_events_.load(std::memory_order_acquire);
            Event *ev = n ? &events_[size_t(n - 1)] : nullptr;
            int64_t mono_at, real_at;
            int64_t em = check_one(CLOCK_MONOTONIC, fastclock_mono_ns, "fastclock_mono_ns", ev, &mono_at);
            // The unordered flavour reads the line even where the ordered one
            // is the kernel's (tsc-percpu on a tsc clocksource: its age then
            // counts on the kernel's clock, sync.c).
            em = std::max(em, check_one(CLOCK_MONOTONIC, fastclock_mono_ns_unordered, "fastclock_mono_ns_unordered",
                                        ev, &mono_at));
            int64_t er = check_one(CLOCK_REALTIME, fastclock_real_ns, "fastclock_real_ns", ev, &real_at);
            // Unordered wall reads always come from the line (ordered ones may
            // be the kernel's own, where its clocksource is the TSC).
            er = std::max(er, check_one(CLOCK_REALTIME, fastclock_real_ns_unordered, "fastclock_real_ns_unordered", ev, &real_at));
            // Times on the MONOTONIC timeline; a check that overlapped the next
            // change belongs to neither.
            if (ev && (em >= 0 || er >= 0) && n_events_.load(std::memory_order_acquire) == n) {
                ev->last_sample.store(mono_at, std::memory_order_relaxed);
                if (std::max(em, er) >= kConvergedNs)
                    ev->last_bad.store(mono_at, std::memory_order_relaxed);
            }
        }
    }

    // While paused: wait without reading the clock (1: a wait was made).
    bool idle()
    {
        if (!paused_.load(std::memory_order_acquire))
            return false;
        sleep_ns(100000);
        return true;
    }

    bool percpu_;
    std::atomic<bool> stop_{false}, paused_{false};
    std::vector<std::thread> threads_;
    std::mutex mu_;
    int64_t last_[2] = {INT64_MIN, INT64_MIN};
    mutable std::mutex ev_mu_;
    static constexpr int kMaxEvents = 64;
    std::array<Event, kMaxEvents> events_;
    std::atomic<int> n_events_{0};
};

// ---------------------------------------------------------------- fixture

struct RealtimeFollow {
    int steps = 0;
    int first_outside = 0;          // first reads after clock_settime outside the bound
    int64_t first_err_max = 0;      // their largest error
    int64_t off_max_ns = 0;         // longest time a read stayed outside the bound
};

class RealKernel : public ::testing::Test {
protected:
    void SetUp() override
    {
        std::string why;
        if (!rk::save_kernel_state(&why))
            GTEST_SKIP() << why;
        fastclock_mono_ns(); // decide the mode now, before anything is disturbed
        struct fastclock_status st;
        fastclock_status(&st);
        mode_ = st.mode;
        calibrator_ = st.calibrator;
        std::string want_mode = env_or("FASTCLOCK_MODE", "auto");
        if (want_mode == "tsc" && mode_ != "tsc")
            GTEST_SKIP() << fctest::skip_unless_refused("tsc", mode_, st.reason);
        if (want_mode == "percpu" && mode_ != "tsc-percpu")
            GTEST_SKIP() << fctest::skip_unless_refused("tsc-percpu", mode_, st.reason);
        if (mode_ != "tsc" && mode_ != "tsc-percpu")
            GTEST_SKIP() << "mode is " << mode_ << " (the kernel's own clocks): " << st.reason;
        if (g_saved_warned++ == 0 && (rk::g_saved.freq != 0 || rk::g_saved.tick != 10000))
            std::printf("note: the kernel starts at freq %ld (%.3f ppm), tick %ld; that is what is restored\n",
                        rk::g_saved.freq, double(rk::g_saved.freq) / kPpm, rk::g_saved.tick);
        if (!(rk::g_saved.status & STA_UNSYNC))
            std::printf("note: the kernel is synchronised (a time daemon runs); it may fight these changes\n");
        sleep_ns(300 * kNsPerMs); // let the first calibrations settle
    }

    bool percpu() const { return mode_ == "tsc-percpu"; }
    bool thread_calibrator() const { return calibrator_ == "thread"; }

    // The verdict common to every disturbance, and the summary line.
    void report(const char *disturbance, Harness &h, const RealtimeFollow *rt = nullptr, int fds_before = -1,
                int fds_after = -1)
    {
        Stats &s = h.st;
        std::string which;
        bool unsettled = false;
        int64_t conv = h.worst_convergence(&which, &unsettled);
        int64_t excess = std::max<int64_t>(0, s.worst_excess.load());
        int64_t cross_excess = s.cross_excess_max.load();
        char line[1024];
        int n = std::snprintf(
            line, sizeof line,
            "realkernel: %s calibrator=%s mode=%s | steps back same=%" PRIu64 " (max %" PRId64
            " ns) cross=%" PRIu64 " (max %" PRId64 " ns) | worst err mono=%" PRId64 " ns real=%" PRId64
            " ns | worst excess over bound=%" PRId64 " ns, reads outside bound=%" PRIu64 "/%" PRIu64
            " (largest bound %" PRId64 " ns) | back within 1 us after %.3f ms%s%s%s",
            disturbance, calibrator_.c_str(), mode_.c_str(), s.same_back.load(), s.same_back_max.load(),
            s.cross_back.load(), s.cross_back_max.load(), s.worst_err_mono.load(), s.worst_err_real.load(), excess,
            s.outside.load(), s.checks.load() - s.wide.load(), s.max_bound.load(), double(conv) / 1e6,
            unsettled ? " (NOT settled at end of window)" : "", conv ? " (worst: " : "",
            conv ? (which + ")").c_str() : "");
        std::string out(line, size_t(n < 0 ? 0 : std::min<int>(n, sizeof line - 1)));
        struct fastclock_status end;
        fastclock_status(&end);
        if (mode_ != end.mode)
            out += std::string(" | mode at the end: ") + end.mode + " (" + end.reason + ")";
        if (excess > 0)
            out += " [worst excess: " + s.worst_excess_at + "]";
        if (percpu() && s.cross_back.load())
            out += " | cross-thread: largest step back - bound " + std::to_string(cross_excess) + " ns (" +
                   s.worst_cross_at + ")";
        if (rt) {
            char b[256];
            std::snprintf(b, sizeof b,
                          " | realtime steps=%d, first read after clock_settime outside bound=%d (max err %" PRId64
                          " ns), off for up to %.3f ms",
                          rt->steps, rt->first_outside, rt->first_err_max, double(rt->off_max_ns) / 1e6);
            out += b;
        }
        if (fds_before >= 0) {
            char b[64];
            std::snprintf(b, sizeof b, " | fds %d -> %d", fds_before, fds_after);
            out += b;
        }
        summary(out);

        EXPECT_EQ(s.same_back.load(), 0u) << "same-thread steps back, largest " << s.same_back_max.load() << " ns";
        if (percpu())
            EXPECT_LE(cross_excess, 0) << "tsc-percpu: cross-thread steps back beyond the reported bound ("
                                       << s.cross_back.load() << " steps back, largest " << s.cross_back_max.load()
                                       << " ns; worst against its bound: " << s.worst_cross_at << ")";
        else
            EXPECT_EQ(s.cross_back.load(), 0u) << "cross-thread steps back, largest " << s.cross_back_max.load()
                                               << " ns";
        EXPECT_EQ(s.outside.load(), 0u) << "reads outside the reported bound, largest excess " << excess << " ns ("
                                        << s.worst_excess_at << ")";
        EXPECT_GT(s.checks.load() - s.wide.load(), 1000u) << "too few usable brackets to judge";
    }

    // Steps REALTIME by delta and measures the reads that follow it: the
    // first one that starts after clock_settime returns, and how long reads
    // stay outside the bound.
    void realtime_step(Harness &h, int64_t delta, RealtimeFollow *rt)
    {
        h.event(delta > 0 ? "REALTIME +1 s" : "REALTIME -1 s");
        ASSERT_TRUE(rk::step_realtime(delta)) << "clock_settime: " << strerror(errno);
        int64_t set_at = raw_ns(CLOCK_MONOTONIC);
        rt->steps++;
        {
            // The unordered flavour always reads the line (plus the kernel's
            // offset), even where ordered wall reads go to the kernel.
            int64_t k0 = raw_ns(CLOCK_REALTIME);
            int64_t v = fastclock_real_ns_unordered();
            int64_t k1 = raw_ns(CLOCK_REALTIME);
            int64_t err = v < k0 ? k0 - v : v > k1 ? v - k1 : 0;
            if (err > bound_now()) {
                rt->first_outside++;
                rt->first_err_max = std::max(rt->first_err_max, err);
            }
        }
        for (int i = 0;; i++) {
            int64_t k0 = raw_ns(CLOCK_REALTIME);
            int64_t v = fastclock_real_ns();
            int64_t k1 = raw_ns(CLOCK_REALTIME);
            int64_t b = bound_now();
            int64_t err = v < k0 ? k0 - v : v > k1 ? v - k1 : 0;
            if (i == 0 && err > b) {
                rt->first_outside++;
                rt->first_err_max = std::max(rt->first_err_max, err);
            }
            int64_t at = raw_ns(CLOCK_MONOTONIC);
            h.note(at, err);
            if (err <= b) { // off until this read (0: the first read was right)
                if (i > 0)
                    rt->off_max_ns = std::max(rt->off_max_ns, at - set_at);
                break;
            }
            if (at - set_at > 3 * kNsPerSec) {
                rt->off_max_ns = std::max(rt->off_max_ns, at - set_at);
                break;
            }
        }
    }

    std::string mode_, calibrator_;
    static inline int g_saved_warned = 0;
};

// (a) +500 ppm, then -500 ppm (a 1000 ppm drop at once), then back.
TEST_F(RealKernel, FrequencyStep)
{
    rk::RestoreGuard guard;
    Harness h(percpu());
    h.start();
    sleep_ns(300 * kNsPerMs);
    h.event("+500 ppm");
    ASSERT_TRUE(set_freq(500 * kPpm));
    sleep_ns(1200 * kNsPerMs);
    h.event("-500 ppm");
    ASSERT_TRUE(set_freq(-500 * kPpm));
    sleep_ns(1200 * kNsPerMs);
    h.event("freq restored");
    ASSERT_TRUE(set_freq(rk::g_saved.freq));
    sleep_ns(800 * kNsPerMs);
    h.stop();
    rk::restore_kernel();
    report("frequency +500 then -500 ppm", h);
}

// (b) flips of +-500 ppm every 0.2-0.5 s for about 3 s.
TEST_F(RealKernel, FrequencyFlips)
{
    rk::RestoreGuard guard;
    Harness h(percpu());
    std::mt19937 rng(12);
    std::uniform_int_distribution<int> gap_ms(200, 500);
    h.start();
    sleep_ns(200 * kNsPerMs);
    long sign = 1;
    int flips = 0;
    int64_t t0 = raw_ns(CLOCK_MONOTONIC);
    while (raw_ns(CLOCK_MONOTONIC) - t0 < 3 * kNsPerSec) {
        h.event(sign > 0 ? "flip to +500 ppm" : "flip to -500 ppm");
        ASSERT_TRUE(set_freq(sign * 500 * kPpm));
        flips++;
        sign = -sign;
        sleep_ns(gap_ms(rng) * kNsPerMs);
    }
    h.event("freq restored");
    ASSERT_TRUE(set_freq(rk::g_saved.freq));
    sleep_ns(600 * kNsPerMs);
    h.stop();
    rk::restore_kernel();
    std::string what = "frequency flips +-500 ppm (" + std::to_string(flips) + " flips)";
    report(what.c_str(), h);
}

// (c) ADJ_TICK +5% then -5%, then the limits adjtimex allows, +10% and -10%
// (chrony slews through the tick up to 8.3%), restored.
TEST_F(RealKernel, TickChange)
{
    rk::RestoreGuard guard;
    Harness h(percpu());
    h.start();
    sleep_ns(300 * kNsPerMs);
    for (long tick : {10500L, 9500L, 11000L, 9000L}) {
        h.event("tick " + std::to_string(tick));
        ASSERT_TRUE(set_tick(tick));
        sleep_ns(700 * kNsPerMs);
    }
    h.event("tick restored");
    ASSERT_TRUE(set_tick(rk::g_saved.tick));
    sleep_ns(700 * kNsPerMs);
    h.stop();
    rk::restore_kernel();
    report("tick 10000 -> 10500 -> 9500 -> 11000 -> 9000 -> 10000 us", h);
}

// (c1) Changes met cold: nothing reads the clock for half a second before
// each (a lazy line has lapsed by then), and the reads start the moment
// adjtimex returns.  Half of them are undone before anyone reads: with the
// lazy calibrator no poll sees them (the thread's polls, every 10 ms, do),
// and the slope across them is up to 8% off, as a counter's own rate
// change would be; the counter kept its rate against MONOTONIC_RAW, so that
// is the kernel's doing and the mode must stay.
TEST_F(RealKernel, TickChangeWhileIdle)
{
    rk::RestoreGuard guard;
    Harness h(percpu());
    h.start();
    sleep_ns(300 * kNsPerMs);
    struct Change {
        long tick;
        long undone_to; // 0: seen; else set back to this after 0.4 s, before any read
    } changes[] = {{11000, 10000}, {9000, 0}, {11000, 9000}, {10000, 0}, {9000, 10000}, {11000, 0}, {9000, 0}};
    for (const Change &c : changes) {
        h.pause();
        sleep_ns(100 * kNsPerMs);
        std::string what = "tick " + std::to_string(c.tick);
        if (c.undone_to) {
            ASSERT_TRUE(set_tick(c.tick));
            sleep_ns(400 * kNsPerMs);
            what += " for 0.4 s, unseen, then " + std::to_string(c.undone_to);
            h.event(what);
            ASSERT_TRUE(set_tick(c.undone_to));
        } else {
            sleep_ns(400 * kNsPerMs);
            h.event(what + " after 0.5 s idle");
            ASSERT_TRUE(set_tick(c.tick));
        }
        h.resume();
        sleep_ns(150 * kNsPerMs);
    }
    h.stop();
    rk::restore_kernel();
    report("tick changes after 0.5 s without reads, some undone unseen", h);
    struct fastclock_status st;
    fastclock_status(&st);
    EXPECT_EQ(std::string(st.mode), mode_) << "the mode changed: " << st.reason;
}

// (c2) The kernel's coarse clocks a second ahead.  Linux 6.15 and later
// update the coarse clocks' nanoseconds only when a tick accumulates time,
// so an adjtimex that lowers the rate just after a second boundary, with
// the last tick just before it, carries the second over and leaves both
// coarse clocks about a second ahead of the fine ones until the next tick
// (on 6.18: +997 ms, every time).  Here REALTIME is stepped by under a tick
// so that the coarse clock's ticks, which count from the step, put one
// 250 us before a second boundary; ADJ_TICK goes 10000 -> 9000 3 ms after
// it (before the next: that one would accumulate, not carry); the fine
// reads that follow must stay within their bound
// (the kernel's coarse REALTIME is a floor under fine REALTIME, src/wall.h,
// but not a jump like this one).  The line says whether the kernel jumped;
// on a kernel that does not, the same reads are checked all the same.
TEST_F(RealKernel, CoarseClocksJumpAhead)
{
    rk::RestoreGuard guard;
    timespec res;
    clock_getres(CLOCK_REALTIME_COARSE, &res);
    const int64_t tick = rk::ts_ns(res);
    if (tick < 3500000 || tick > 20 * kNsPerMs)
        GTEST_SKIP() << "CLOCK_REALTIME_COARSE's resolution is " << tick
                     << " ns: not a scheduler tick between 3.5 and 20 ms, the range this test can place a change in";
    constexpr int kRounds = 3;
    fastclock_mono_coarse_ns(); // the thread calibrator, if any, ticks from now on
    sleep_ns(20 * kNsPerMs);
    int fired = 0, jumped = 0;
    int64_t jump_max = 0, err_max = 0, excess_max = INT64_MIN, coarse_ahead_max = INT64_MIN;
    long judged = 0; // fine reads inside a kernel bracket narrow enough to judge them
    std::string worst;
    for (int round = 0; round < kRounds; round++) {
        ASSERT_TRUE(set_tick(10000));
        // The coarse clock counts its ticks from the step and shows each at
        // the scheduler's next tick: step 3/4 of a tick after one, so that
        // each shows ~1/4 tick after it is due.
        int64_t c0 = raw_ns(CLOCK_REALTIME_COARSE);
        while (raw_ns(CLOCK_REALTIME_COARSE) == c0) {
        }
        for (int64_t seen = raw_ns(CLOCK_MONOTONIC); raw_ns(CLOCK_MONOTONIC) < seen + tick * 3 / 4;) {
        }
        int64_t now = raw_ns(CLOCK_REALTIME);
        int64_t d = (((kNsPerSec - 250000) - now) % tick + tick) % tick;
        ASSERT_TRUE(rk::step_realtime(d)) << "clock_settime: " << strerror(errno);
        // Just after a second boundary, 3 ms or more after the last tick
        // before it, and late enough that the rate drop (10% of the time
        // since that tick, added to the coarse nanoseconds) carries the
        // second; before the next tick (that one would accumulate instead).
        bool at = false;
        for (int64_t until = raw_ns(CLOCK_MONOTONIC) + 3 * kNsPerSec; raw_ns(CLOCK_MONOTONIC) < until;) {
            int64_t rc = raw_ns(CLOCK_REALTIME_COARSE), rf = raw_ns(CLOCK_REALTIME);
            if (rf / kNsPerSec > rc / kNsPerSec && rf - rc >= 3000000 && rf - rc < tick - 200000 &&
                kNsPerSec - rc % kNsPerSec < (rf - rc) / 10 - 20000) {
                at = true;
                break;
            }
        }
        if (!at)
            continue; // the ticks did not land where asked: the line counts the rounds placed
        int64_t b0 = bound_now();
        ASSERT_TRUE(set_tick(9000));
        int64_t slow_from = raw_ns(CLOCK_MONOTONIC);
        fired++;
        int64_t kernel_jump = 0;
        for (int64_t until = raw_ns(CLOCK_MONOTONIC) + 2 * tick; raw_ns(CLOCK_MONOTONIC) < until;) {
            kernel_jump = std::max(kernel_jump, raw_ns(CLOCK_REALTIME_COARSE) - raw_ns(CLOCK_REALTIME));
            struct Read {
                const char *name;
                clockid_t id;
                int64_t (*fn)();
            } reads[] = {
                {"fastclock_real_ns_unordered", CLOCK_REALTIME, fastclock_real_ns_unordered},
                {"fastclock_real_ns", CLOCK_REALTIME, fastclock_real_ns},
                {"fastclock_mono_ns", CLOCK_MONOTONIC, fastclock_mono_ns},
                {"fastclock_mono_ns_unordered", CLOCK_MONOTONIC, fastclock_mono_ns_unordered},
            };
            for (const Read &r : reads) {
                // The bound reported just before the read or just after it,
                // the larger (as check_one): a lazy reader may replace the
                // line in between, and the new one's bound is its own.
                int64_t before = bound_now();
                int64_t k0 = raw_ns(r.id), v = r.fn(), k1 = raw_ns(r.id);
                if (k1 < k0 || k1 - k0 > kMaxBracketNs)
                    continue;
                judged++;
                int64_t err = v < k0 ? k0 - v : v > k1 ? v - k1 : 0;
                int64_t excess = err - std::max(before, bound_now());
                err_max = std::max(err_max, err);
                if (excess > excess_max) {
                    excess_max = excess;
                    worst = std::string(r.name) + " off by " + std::to_string(v < k0 ? v - k0 : v - k1) + " ns";
                }
            }
            // The thread's coarse clocks are the fine clock's (without it: the
            // kernel's own), read on its CPU: in tsc-percpu, ahead of this
            // CPU's by at most the bound (the mode's cross-thread guarantee).
            if (thread_calibrator()) {
                // Each read after the one before (an expression's operands
                // may be read in any order).
                int64_t bound = std::max(b0, bound_now());
                int64_t coarse = fastclock_mono_coarse_ns();
                int64_t fine = fastclock_mono_ns();
                coarse_ahead_max = std::max(coarse_ahead_max, coarse - fine - (percpu() ? bound : 0));
                // Its coarse REALTIME likewise: never the kernel's jump.
                int64_t coarse_real = fastclock_real_coarse_ns();
                int64_t kernel_real = raw_ns(CLOCK_REALTIME);
                coarse_ahead_max = std::max(coarse_ahead_max, coarse_real - kernel_real - bound);
            }
        }
        if (kernel_jump > 100 * kNsPerMs)
            jumped++;
        jump_max = std::max(jump_max, kernel_jump);
        // As long 10% fast as it ran 10% slow: the clocks end where they would.
        int64_t slow_for = raw_ns(CLOCK_MONOTONIC) - slow_from;
        ASSERT_TRUE(set_tick(11000));
        sleep_ns(slow_for);
    }
    rk::restore_kernel();
    char line[512];
    std::snprintf(line, sizeof line,
                  "realkernel: coarse clocks jump ahead calibrator=%s mode=%s | %d of %d changes placed, the kernel's "
                  "coarse REALTIME jumped ahead after %d (largest %+.3f ms) | worst fine error %" PRId64
                  " ns, worst excess over bound %" PRId64 " ns%s%s",
                  calibrator_.c_str(), mode_.c_str(), fired, kRounds, jumped, double(jump_max) / 1e6, err_max,
                  excess_max == INT64_MIN ? 0 : excess_max, worst.empty() ? "" : " (", worst.empty() ? "" : (worst + ")").c_str());
    summary(line);
    if (fired == 0)
        GTEST_SKIP() << "the kernel's coarse clock never showed a tick where the step put it (" << kRounds
                     << " tries: a time daemon or a frequency offset moves its grid, or its ticks come late): no "
                        "change could be placed";
    EXPECT_GT(judged, 0) << "no fine read was judged: every kernel bracket was wider than " << kMaxBracketNs << " ns";
    EXPECT_LE(excess_max, 0) << "a fine read outside its bound after the change: " << worst;
    if (thread_calibrator()) {
        EXPECT_LE(coarse_ahead_max, 0) << "the thread's coarse clocks " << coarse_ahead_max
                                       << " ns ahead of the fine ones"
                                       << (percpu() ? " beyond the bound" : " (REALTIME: beyond the bound)");
    }
}

// (d) REALTIME +1 s, then -1 s (net ~0), twice.
TEST_F(RealKernel, RealtimeStep)
{
    rk::RestoreGuard guard;
    Harness h(percpu());
    RealtimeFollow rt;
    h.start();
    sleep_ns(300 * kNsPerMs);
    for (int i = 0; i < 2; i++) {
        realtime_step(h, kNsPerSec, &rt);
        sleep_ns(500 * kNsPerMs);
        realtime_step(h, -kNsPerSec, &rt);
        sleep_ns(500 * kNsPerMs);
    }
    h.stop();
    rk::restore_kernel();
    report("REALTIME +-1 s steps", h, &rt);
    // Either calibrator: every wall read checks the kernel's offset (src/wall.h).
    EXPECT_EQ(rt.first_outside, 0) << "the first read after clock_settime returned was " << rt.first_err_max
                                   << " ns off, outside the bound";
    EXPECT_EQ(rt.off_max_ns, 0) << "REALTIME reads stayed off the kernel's after a step";
}

// (e) clocksource switch to another one and back.
TEST_F(RealKernel, ClocksourceSwitch)
{
    char avail[256] = {0}, cur[64] = {0};
    std::string dir = rk::kClocksourceDir;
    if (!rk::read_small((dir + "available_clocksource").c_str(), avail, sizeof avail) ||
        !rk::read_small((dir + "current_clocksource").c_str(), cur, sizeof cur))
        GTEST_SKIP() << "cannot read " << dir << "{available,current}_clocksource";
    std::string other;
    for (char *tok = std::strtok(avail, " "); tok; tok = std::strtok(nullptr, " "))
        if (other.empty() && std::string(tok) != cur)
            other = tok;
    if (other.empty())
        GTEST_SKIP() << "no clocksource other than " << cur << " is available (" << dir << "available_clocksource)";
    if (access((dir + "current_clocksource").c_str(), W_OK) != 0)
        GTEST_SKIP() << dir << "current_clocksource is not writable here: " << strerror(errno);
    rk::RestoreGuard guard;
    Harness h(percpu());
    h.start();
    sleep_ns(300 * kNsPerMs);
    h.event("clocksource " + other);
    rk::g_clocksource_touched.store(true);
    ASSERT_TRUE(rk::write_clocksource(other.c_str())) << "switch to " << other << ": " << strerror(errno);
    sleep_ns(1200 * kNsPerMs);
    h.event(std::string("clocksource ") + cur);
    ASSERT_TRUE(rk::write_clocksource(cur)) << "switch back to " << cur << ": " << strerror(errno);
    rk::g_clocksource_touched.store(false);
    sleep_ns(1000 * kNsPerMs);
    h.stop();
    rk::restore_kernel();
    struct fastclock_status st;
    fastclock_status(&st);
    std::string what = std::string("clocksource ") + cur + " -> " + other + " -> " + cur;
    report(what.c_str(), h);
    EXPECT_EQ(mode_, st.mode) << "the mode changed: " << st.reason;
}

// 10 REALTIME steps must not leak descriptors (the calibrator's timerfd).
TEST_F(RealKernel, NoFdLeakOnRealtimeSteps)
{
    if (!thread_calibrator())
        GTEST_SKIP() << "the descriptor check needs the thread calibrator (calibrator is " << calibrator_ << ")";
    rk::RestoreGuard guard;
    int before = count_fds();
    ASSERT_GT(before, 0);
    Harness h(percpu());
    RealtimeFollow rt;
    h.start();
    for (int i = 0; i < 5; i++) {
        realtime_step(h, kNsPerSec, &rt);
        sleep_ns(60 * kNsPerMs);
        realtime_step(h, -kNsPerSec, &rt);
        sleep_ns(60 * kNsPerMs);
    }
    sleep_ns(200 * kNsPerMs);
    h.stop();
    rk::restore_kernel();
    int after = count_fds();
    report("10 REALTIME steps (fd check)", h, &rt, before, after);
    EXPECT_EQ(after, before) << "descriptors leaked across 10 REALTIME steps";
}

} // namespace
