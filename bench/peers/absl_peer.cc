// Abseil's clock beside fastclock's, in one process (make bench-peers).
//
// absl::GetCurrentTimeNanos() is UTC from the cycle counter read unfenced,
// recalibrated against the kernel's clock every ~2 s (absl/time/clock.cc,
// up to the 2023 releases; later ones call clock_gettime unless built
// otherwise: the output says which this build does, from its cost); its
// counterpart is fastclock_real_ns_unordered, also unfenced.
// Same method as the Rust peers: ~1 ms batches, every source interleaved
// round by round, medians compared.  fastclock is linked statically.
#include <absl/time/clock.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <time.h>
#include <vector>

#include "../bench_util.h" // bench_print_machine
#include "fastclock.h"

namespace {

uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

template <class F> __attribute__((noinline)) uint64_t run_batch(F f, uint64_t n)
{
    uint64_t acc = 0;
    for (uint64_t i = 0; i < n; i++)
        acc += uint64_t(f());
    return acc;
}

struct Source {
    const char *group, *name, *counterpart;
    uint64_t (*batch)(uint64_t n);
};

#define SOURCE(group, name, counterpart, expr)                                              \
    Source { group, name, counterpart, [](uint64_t n) { return run_batch([] { return expr; }, n); } }

const Source sources[] = {
    SOURCE("libc", "clock_gettime(CLOCK_REALTIME)", nullptr, clock_ns(CLOCK_REALTIME)),
    SOURCE("libc", "clock_gettime(CLOCK_MONOTONIC)", nullptr, clock_ns(CLOCK_MONOTONIC)),
    SOURCE("fastclock", "fastclock_real_ns", nullptr, fastclock_real_ns()),
    SOURCE("fastclock", "fastclock_real_ns_unordered", nullptr, fastclock_real_ns_unordered()),
    SOURCE("abseil", "absl::GetCurrentTimeNanos", "fastclock_real_ns_unordered", absl::GetCurrentTimeNanos()),
    SOURCE("abseil", "absl::Now", "fastclock_real_ns_unordered", absl::ToUnixNanos(absl::Now())),
};
const int nsources = int(sizeof sources / sizeof sources[0]);

double median_of(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

} // namespace

int main(int argc, char **argv)
{
    double seconds = 3;
    for (int i = 1; i < argc; i++) {
        char *end = nullptr;
        if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc &&
            (seconds = std::strtod(argv[i + 1], &end), end != argv[i + 1] && *end == 0 && seconds > 0 &&
                                                           seconds <= 600)) {
            i++;
            continue;
        }
        std::fprintf(stderr, "fastclock-bench-absl: usage: fastclock-bench-absl [--seconds S], S in (0, 600]\n");
        return 2;
    }
    // Warm: abseil's first call calibrates, fastclock's builds its first line.
    for (const Source &s : sources)
        s.batch(1000);
    struct timespec nap = {0, 100000000};
    nanosleep(&nap, nullptr);
    std::vector<uint64_t> batch(nsources);
    for (int k = 0; k < nsources; k++) {
        uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
        sources[k].batch(10000);
        double dt = double(std::max<uint64_t>(clock_ns(CLOCK_MONOTONIC) - t0, 1)) / 10000;
        batch[k] = std::clamp<uint64_t>(uint64_t(1e6 / dt), 1000, 10000000);
    }
    struct fastclock_status before;
    std::string mode_before =
        fastclock_status(&before) == 0 ? std::string(before.mode) + ", counter " + before.counter : "?";
    int rounds = std::clamp(int(seconds * 1e3 / nsources), 5, 10001) | 1;
    std::vector<std::vector<double>> per_call(nsources);
    volatile uint64_t sink = 0;
    for (int r = 0; r < rounds; r++)
        for (int k = 0; k < nsources; k++) {
            uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
            sink = sink + sources[k].batch(batch[k]);
            uint64_t t1 = clock_ns(CLOCK_MONOTONIC);
            per_call[k].push_back(double(t1 - t0) / double(batch[k]));
        }
    std::vector<double> med(nsources);
    for (int k = 0; k < nsources; k++)
        med[k] = median_of(per_call[k]);
    auto by_name = [&](const char *n) {
        for (int k = 0; k < nsources; k++)
            if (std::strcmp(sources[k].name, n) == 0)
                return med[k];
        return 0.0;
    };
    double clock_gt = by_name("clock_gettime(CLOCK_REALTIME)");
    std::printf("fastclock %s beside Abseil (absl::GetCurrentTimeNanos, Debian's libabsl-dev)\n",
                fastclock_version());
    bench_print_machine(stdout);
    struct fastclock_status st;
    if (fastclock_status(&st) == 0) {
        std::string mode_after = std::string(st.mode) + ", counter " + st.counter;
        std::printf("fastclock: mode %s\n", mode_after.c_str());
        if (mode_after != mode_before)
            std::printf("WARNING: fastclock's mode or counter changed during the run (%s -> %s): rows not "
                        "comparable\n",
                        mode_before.c_str(), mode_after.c_str());
    }
    std::printf("%d interleaved rounds of ~1 ms batches per source; ns per call, median over rounds\n\n", rounds);
    std::printf("  %-34s %9s %11s  %s\n", "source", "ns/call", "x clock_gt", "against fastclock's counterpart");
    const char *group = "";
    for (int k = 0; k < nsources; k++) {
        const Source &s = sources[k];
        if (std::strcmp(s.group, group) != 0)
            std::printf("  %s\n", group = s.group);
        std::string vs;
        if (s.counterpart) {
            char b[96];
            std::snprintf(b, sizeof b, "%.2fx %s", med[k] / by_name(s.counterpart), s.counterpart);
            vs = b;
        }
        std::printf("    %-32s %9.2f %11.2f  %s\n", s.name, med[k], med[k] / clock_gt, vs.c_str());
    }
    std::printf("\n  x clock_gt: median over the median of clock_gettime(CLOCK_REALTIME) in this run;\n"
                "  against fastclock's counterpart: the peer's median over fastclock_real_ns_unordered's\n"
                "  (above 1: the peer costs more).\n");
    if (by_name("absl::GetCurrentTimeNanos") < 0.8 * clock_gt)
        std::printf("  This Abseil reads the cycle counter (cheaper than clock_gettime here): unfenced,\n"
                    "  and it asks the kernel again only every ~2 s, so a clock step (date -s, a\n"
                    "  daemon's step) shows up to then; fastclock's REALTIME reads see a step at the\n"
                    "  next read (a check of the kernel's coarse REALTIME on every read).\n");
    else
        std::printf("  This Abseil calls clock_gettime on every read (no cheaper than it here).\n");
    return sink == 42 ? 1 : 0;
}
