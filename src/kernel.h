/* What the kernel says about its clocks: sysfs and procfs, read with
 * async-signal-safe calls only (open/read/close), so the library may ask
 * from its lazy initialisation.  Paths are resolved under `root` ("" for the
 * live system) so tests and `fastclock doctor` fixtures can supply a fake tree. */
#ifndef FC_KERNEL_H
#define FC_KERNEL_H

#include <stddef.h>

#define FC_CLOCKSOURCE_DIR "/sys/devices/system/clocksource/clocksource0"

/* Reads at most size-1 bytes of a file into buf, NUL-terminated, trailing
 * whitespace removed.  Returns the length, or -errno (errno itself is left
 * as it was). */
int fc_read_text(const char *root, const char *path, char *buf, size_t size);

struct fc_clocksource_info {
    char current[64];
    char available[512];
    int current_errno;    /* 0, or why current could not be read */
    int available_errno;
};
void fc_clocksource_read(const char *root, struct fc_clocksource_info *cs);

/* 1 if `word` is one of the space-separated words of `list`. */
int fc_word_in_list(const char *list, const char *word);
/* Whether an available_clocksource list is unfiltered: the kernel leaves out
 * clocksources unfit for high resolution -- jiffies, and a counter its
 * watchdog marked unstable -- only while the tick is in one-shot mode
 * (highres or nohz); jiffies listed means it lists everything, so a counter
 * listed there is no sign of the kernel's trust, nor one missing of its
 * distrust. */
int fc_clocksource_list_unfiltered(const char *available);

/* Value of a kernel command-line parameter "name=value" (last one wins), copied
 * into out; returns 1 if present, 0 if not. */
int fc_cmdline_param(const char *cmdline, const char *name, char *out, size_t size);

/* arm64: a generic-timer erratum that Linux works around by trapping every
 * user-space counter read (and turning its vDSO's counter off).  Found as the
 * kernel finds it: the device tree's timer node (fsl,erratum-a008585,
 * hisilicon,erratum-161010101, allwinner,erratum-unknown1), or a Cortex-A73
 * in /proc/cpuinfo (ARM erratum 858921).  Returns 1 and says which in why.
 * Not seen: HiSilicon's erratum on ACPI machines (matched against the GTDT,
 * which only root may read); there too the kernel traps the reads, so they
 * stay correct, at a trap's cost. */
int fc_counter_erratum(const char *root, char *why, size_t size);

/* 1 where a child forked by this thread now starts in another time namespace
 * than the thread's own -- it called unshare(CLONE_NEWTIME) -- so that there
 * CLOCK_MONOTONIC and CLOCK_BOOTTIME lie on another timeline:
 * /proc/thread-self/ns/time and .../time_for_children name different
 * namespaces.  0 where they agree or cannot be read (no /proc, a kernel
 * without time namespaces).  Async-signal-safe (readlink); errno kept. */
int fc_kernel_children_change_timens(void);

/* What a child asked under a filter said, for the next thread to ask
 * under as many filters (Seccomp_filters:): (filters << 1) | kills, 0 none. */
struct fc_adjtimex_memo {
    long word; /* __atomic builtins, relaxed: the header is C++'s too */
};

/* 1 where adjtimex would kill the calling thread or its process: a seccomp
 * filter whose action for it is to kill, not to refuse -- systemd's
 * SystemCallFilter=@system-service (it leaves out @clock, adjtimex's group)
 * or =~@clock without SystemCallErrorNumber=, a sandbox's allow-list.  A
 * filter is a thread's own (unless installed with TSYNC): the answer is the
 * calling thread's.  Read from its /proc status (Seccomp: 2, a filter; a
 * child asks too where the field is missing) and, under a filter, tried in
 * a child that can harm nothing (a raw clone
 * of this thread, with its own copy of the memory, SIGSYS blocked in it,
 * not dumpable): 0.17 ms for a small process, 2.7 ms at 100 MB resident;
 * over 512 MB resident the child is not made (1).  A thread under as many
 * filters as the one whose child `memo` remembers takes that answer
 * (threads made after a filter was installed share it; not seen: two
 * threads that installed different filters, as many each).  0 with no
 * filter or where the call answers or returns an error; 1 also where no
 * child can be made to tell.  *seen: what the answer holds for (the filter
 * count, 0: none; -1 not counted: Linux before 5.9 has no Seccomp_filters:,
 * or no procfs), which fc_kernel_seccomp_grew compares; with no filter,
 * prctl(PR_GET_SECCOMP) is asked once, so that an allow-list traced from
 * the process has the call the re-check makes.  Async-signal-safe; errno kept; callers
 * serialise (a static buffer). */
struct fc_seccomp_seen {
    long filters;      /* the calling thread's seccomp filters then (0: none; -1 not counted) */
    int prctl_answers; /* with none, prctl(PR_GET_SECCOMP) answered 0 then */
};
int fc_kernel_adjtimex_kills(struct fc_adjtimex_memo *memo, struct fc_seccomp_seen *seen);

/* Whether the calling thread may have more seccomp filters than `seen` says
 * (an answer of fc_kernel_adjtimex_kills): one installed since, on this
 * thread or on every thread with TSYNC (libseccomp's way in a threaded
 * process), after the thread asked.  With none then, prctl(PR_GET_SECCOMP)
 * says (~170 ns, asked once then too): any answer but 0 is a change.
 * Under filters, its /proc status again (~6-10 us, the calls the first
 * answer made): a changed count, or a status that cannot be read (but for
 * want of descriptors or memory, a moment's), is a change.  Not seen where
 * the count is not known (-1: Linux before 5.9, a filter only prctl saw).
 * These are the calls the re-check adds to a poll: a filter that kills
 * prctl or openat (but not adjtimex) installed later would now kill the
 * poll.  Async-signal-safe; errno kept; callers serialise. */
int fc_kernel_seccomp_grew(const struct fc_seccomp_seen *seen);

/* strerror without locale or allocation (async-signal-safe). */
const char *fc_errno_text(int e);

#endif
