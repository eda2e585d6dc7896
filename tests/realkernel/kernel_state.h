// Save and restore the kernel clock state that the real-kernel fault tests
// disturb: adjtimex frequency, tick and status, the current clocksource, and
// any REALTIME step not yet undone.
//
// The restore runs at the end of every test (an RAII guard, so also after a
// failed ASSERT), at exit, and from a handler for SIGINT, SIGTERM, SIGABRT,
// SIGHUP, SIGQUIT, SIGSEGV, SIGBUS and SIGFPE, which then re-raises the
// signal.  Everything in the restore path is async-signal-safe: system calls
// only (adjtimex, clock_gettime, clock_settime, open, write, close).
//
// REALTIME is never set to a saved absolute value (that would lose the time
// that passed).  A step is recorded as a relative amount and undone relative
// to the then-current time, so the net change is the few microseconds between
// reading the clock and setting it.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <signal.h>
#include <sys/timex.h>
#include <time.h>
#include <unistd.h>

namespace rk {

constexpr const char *kClocksourceDir = "/sys/devices/system/clocksource/clocksource0/";

struct SavedState {
    bool valid = false;
    long freq = 0;
    long tick = 0;
    int status = 0;
    char clocksource[64] = {0};
};

inline SavedState g_saved;
inline std::atomic<int64_t> g_realtime_pending_ns{0}; // steps applied, not yet undone
inline std::atomic<bool> g_clocksource_touched{false};

inline int64_t ts_ns(const timespec &t) { return int64_t(t.tv_sec) * 1000000000LL + t.tv_nsec; }

// Read a small sysfs file into buf (no trailing newline).  Signal-safe.
inline bool read_small(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = 0;
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = 0;
    return true;
}

inline bool write_clocksource(const char *name)
{
    char path[128];
    strcpy(path, kClocksourceDir);
    strcat(path, "current_clocksource");
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = write(fd, name, strlen(name));
    close(fd);
    return n == ssize_t(strlen(name));
}

// Step REALTIME by delta_ns relative to its current value; the step is
// recorded so that restore_kernel() can undo it.
inline bool step_realtime(int64_t delta_ns)
{
    timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t target = ts_ns(now) + delta_ns;
    timespec t = {time_t(target / 1000000000LL), long(target % 1000000000LL)};
    if (clock_settime(CLOCK_REALTIME, &t) != 0)
        return false;
    g_realtime_pending_ns.fetch_add(delta_ns);
    return true;
}

// Async-signal-safe; idempotent.
inline void restore_kernel()
{
    if (!g_saved.valid)
        return;
    int64_t pending = g_realtime_pending_ns.exchange(0);
    if (pending != 0) {
        timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        int64_t target = ts_ns(now) - pending;
        timespec t = {time_t(target / 1000000000LL), long(target % 1000000000LL)};
        clock_settime(CLOCK_REALTIME, &t);
    }
    struct timex cur;
    memset(&cur, 0, sizeof cur);
    if (adjtimex(&cur) >= 0) {
        struct timex tx;
        memset(&tx, 0, sizeof tx);
        if (cur.freq != g_saved.freq) {
            tx.modes |= ADJ_FREQUENCY;
            tx.freq = g_saved.freq;
        }
        if (cur.tick != g_saved.tick) {
            tx.modes |= ADJ_TICK;
            tx.tick = g_saved.tick;
        }
        if ((cur.status & ~STA_RONLY) != (g_saved.status & ~STA_RONLY)) {
            tx.modes |= ADJ_STATUS;
            tx.status = g_saved.status;
        }
        if (tx.modes)
            adjtimex(&tx);
    }
    if (g_clocksource_touched.exchange(false) && g_saved.clocksource[0])
        write_clocksource(g_saved.clocksource);
}

inline void restore_and_reraise(int sig)
{
    restore_kernel();
    signal(sig, SIG_DFL);
    raise(sig);
}

// Save the state once per process (the first test to run) and install the
// exit and signal handlers.  Returns false with *why when the clock cannot
// be changed here.
inline bool save_kernel_state(std::string *why)
{
    static bool installed = false;
    struct timex tx;
    memset(&tx, 0, sizeof tx);
    if (adjtimex(&tx) < 0) {
        *why = std::string("adjtimex cannot be read: ") + strerror(errno);
        return false;
    }
    // A no-op change tells whether we may change it at all (CAP_SYS_TIME,
    // and not a container that forbids it).
    struct timex probe;
    memset(&probe, 0, sizeof probe);
    probe.modes = ADJ_FREQUENCY;
    probe.freq = tx.freq;
    if (adjtimex(&probe) < 0) {
        *why = std::string("needs CAP_SYS_TIME to change the kernel clock (adjtimex ADJ_FREQUENCY: ") +
               strerror(errno) + ")";
        return false;
    }
    if (!installed) {
        g_saved.freq = tx.freq;
        g_saved.tick = tx.tick;
        g_saved.status = tx.status;
        char path[128];
        strcpy(path, kClocksourceDir);
        strcat(path, "current_clocksource");
        if (!read_small(path, g_saved.clocksource, sizeof g_saved.clocksource))
            g_saved.clocksource[0] = 0;
        g_saved.valid = true;
        installed = true;
        atexit(restore_kernel);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = restore_and_reraise;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;
        for (int sig : {SIGINT, SIGTERM, SIGABRT, SIGHUP, SIGQUIT, SIGSEGV, SIGBUS, SIGFPE})
            sigaction(sig, &sa, nullptr);
    }
    return true;
}

// Restores on scope exit: the normal end of a test and a failed ASSERT.
struct RestoreGuard {
    RestoreGuard() = default;
    RestoreGuard(const RestoreGuard &) = delete;
    RestoreGuard &operator=(const RestoreGuard &) = delete;
    ~RestoreGuard() { restore_kernel(); }
};

} // namespace rk
