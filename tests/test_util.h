// Helpers shared by the C++ tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include <sched.h>
#include <sys/auxv.h>
#include <unistd.h>
#include <pthread.h>

namespace fctest {

inline int64_t iabs(int64_t v) { return v < 0 ? -v : v; }

// The finest step the hardware counter takes, in ns: the smallest nonzero
// difference between back-to-back reads.  arm64 only (cntvct_el0 at
// cntfrq_el0, 1-40 ns on hardware); 0 elsewhere (the TSC counts cycles).
// Under qemu-user the count is derived from the host's gettimeofday, so it
// moves in 1000 ns steps.
inline double counter_step_ns()
{
#if defined(__aarch64__)
    uint64_t frq, prev, v, best = UINT64_MAX;
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(frq));
    __asm__ __volatile__("isb\n\tmrs %0, cntvct_el0" : "=r"(prev));
    for (int i = 0; i < 200000 && best > 1; i++) {
        __asm__ __volatile__("isb\n\tmrs %0, cntvct_el0" : "=r"(v));
        if (v != prev && v - prev < best)
            best = v - prev;
        prev = v;
    }
    return best == UINT64_MAX || !frq ? 0 : double(best) * 1e9 / double(frq);
#else
    return 0;
#endif
}

// Without a vDSO (qemu-user maps none; vdso=0) every kernel clock read is a
// system call, under an emulator an emulated one: slow and jittery enough
// that calibration may give up in some processes and not in others.
inline bool no_vdso(std::string *why)
{
    if (getauxval(AT_SYSINFO_EHDR) != 0)
        return false;
    *why = "no vDSO here (qemu-user maps none): every kernel clock read is an emulated system call";
    return true;
}

// Where the counter is too coarse to calibrate a line that stays within its
// bound (qemu-user), the library rightly leaves the counter for the kernel
// (the rate check fails); tests of the counter mode then skip, saying so.
inline bool counter_too_coarse(std::string *why)
{
    static double step = counter_step_ns();
    if (step <= 100)
        return false;
    *why = "the counter advances in steps of " + std::to_string(int64_t(step)) +
           " ns here (qemu-user derives cntvct_el0 from the host's gettimeofday): a line needs a counter "
           "finer than 100 ns";
    return true;
}

inline int64_t kernel_ns(clockid_t c)
{
    timespec t;
    clock_gettime(c, &t);
    return int64_t(t.tv_sec) * 1000000000LL + t.tv_nsec;
}

// One measurement of (ours - kernel) with the tightest of `tries` brackets
// kernel/ours/kernel.  Returns false when no bracket was tight enough to
// measure with (the thread was preempted every time).
inline bool bracket_error(clockid_t c, const std::function<int64_t()> &ours, int64_t *err,
                          int64_t max_width = 250, int tries = 7)
{
    int64_t best = INT64_MAX;
    for (int i = 0; i < tries; i++) {
        int64_t a = kernel_ns(c);
        int64_t f = ours();
        int64_t b = kernel_ns(c);
        if (b - a < best) {
            best = b - a;
            *err = f - (a + (b - a) / 2);
        }
    }
    return best <= max_width;
}

struct ErrorStats {
    int64_t p50 = 0, p99 = 0, max_abs = 0;
    size_t n = 0;
};

inline ErrorStats stats_of(std::vector<int64_t> v)
{
    ErrorStats s;
    s.n = v.size();
    if (v.empty())
        return s;
    std::vector<int64_t> a;
    for (auto x : v)
        a.push_back(x < 0 ? -x : x);
    std::sort(a.begin(), a.end());
    std::sort(v.begin(), v.end());
    s.p50 = v[v.size() / 2];
    s.p99 = a[std::min(a.size() - 1, size_t(double(a.size()) * 0.99))];
    s.max_abs = a.back();
    return s;
}

// Errors of `ours` against the kernel's clock c, sampled for `seconds`
// with a pause between samples; samples with no tight bracket are counted
// in *unusable (when given) and left out.
inline ErrorStats sample_errors(clockid_t c, const std::function<int64_t()> &ours, double seconds,
                                int64_t max_width = 250, int pause_us = 300, size_t *unusable = nullptr)
{
    std::vector<int64_t> errs;
    size_t bad = 0;
    int64_t until = kernel_ns(CLOCK_MONOTONIC) + int64_t(seconds * 1e9);
    while (kernel_ns(CLOCK_MONOTONIC) < until) {
        int64_t e;
        if (bracket_error(c, ours, &e, max_width))
            errs.push_back(e);
        else
            bad++;
        usleep(pause_us);
    }
    if (unusable)
        *unusable = bad;
    return stats_of(errs);
}

inline bool pin_to_cpu(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

inline int online_cpus()
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 1;
    return CPU_COUNT(&set);
}

inline std::vector<int> allowed_cpus()
{
    std::vector<int> out;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int i = 0; i < CPU_SETSIZE; i++)
            if (CPU_ISSET(i, &set))
                out.push_back(i);
    return out;
}

// Mode tsc was asked for and another runs: why that is a skip (the library
// refused the counter at the decision, or its warp check found the CPUs'
// counters apart and left for per-CPU lines), or "" where it is neither: a
// failure.
inline std::string why_not_tsc(const std::string &reason)
{
    if (reason.rfind("FASTCLOCK_MODE=", 0) == 0 && reason.find(" refused: ") != std::string::npos)
        return "the counter cannot be trusted here, even when asked: " + reason;
    if (reason.find("disagree by") != std::string::npos)
        return "the CPUs' counters disagree here (the warp check left mode tsc): " + reason;
    return "";
}

// Mode `want` ("tsc" or "tsc-percpu") was asked for and another runs: why
// that is a skip (the library refused the mode when asked: FASTCLOCK_MODE=...
// refused, with the missing feature; for tsc also a warp check that found the
// CPUs apart), or "" where it is neither.
inline std::string why_not_mode(const std::string &want, const std::string &reason)
{
    if (want == "tsc")
        return why_not_tsc(reason);
    if (want != "tsc-percpu")
        return "";
    // Asked with FASTCLOCK_MODE, or a switch (a test's) refused: the lines
    // need rdtscp naming the CPU (percpu.c fc_percpu_setup).
    if (reason.rfind("FASTCLOCK_MODE=percpu refused: ", 0) == 0 || reason.find("needs rdtscp") != std::string::npos ||
        reason.find("no rdtscp to name the CPU") != std::string::npos ||
        reason.find("rdtscp does not name the CPU") != std::string::npos ||
        reason.find("rdtscp cannot name apart") != std::string::npos)
        return "per-CPU lines cannot run here, even when asked: " + reason;
    return "";
}

// For `GTEST_SKIP() << fctest::skip_unless_refused(want, mode, reason)` where
// mode `want` was asked for and `mode` runs: the skip's message, and where
// nothing refused the mode, a failure recorded as well (the test then
// reports failed, not skipped: a library that ignored the request).
inline std::string skip_unless_refused(const std::string &want, const std::string &mode, const std::string &reason)
{
    std::string why = why_not_mode(want, reason);
    if (!why.empty())
        return why;
    ADD_FAILURE() << want << " was asked for, and mode " << mode << " runs: " << reason;
    return "mode " + mode + ", not the " + want + " asked for";
}

} // namespace fctest

// In a test asked to run in mode tsc and finding `mode` instead: skip, saying
// why (fctest::why_not_tsc), or fail where it is no reason to skip.
#define FCTEST_SKIP_UNLESS_TSC(mode, reason)                                                              \
    do {                                                                                                  \
        if (std::string(mode) != "tsc")                                                                   \
            GTEST_SKIP() << fctest::skip_unless_refused("tsc", (mode), (reason));                         \
    } while (0)
