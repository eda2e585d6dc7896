/* Filling struct doctor_facts: from files under a root (the live system or
 * a capture), from the running machine (CPUID, auxv, adjtimex, the kernel
 * log device, measurements), or from a capture's doctor-facts file. */
#ifndef FASTCLOCK_CLI_PROBE_H
#define FASTCLOCK_CLI_PROBE_H

#include <stddef.h>

#include "facts.h"

/* The name of the key file in a capture directory. */
#define FIXTURE_FACTS_FILE "/doctor-facts"

/* Everything that comes from files: /proc/cpuinfo, clocksource, cmdline,
 * osrelease, DMI, /proc/PID/comm.  root "" is the live system. */
void probe_files(struct doctor_facts *f, const char *root);

/* What only the running machine can say: CPUID, AT_SYSINFO_EHDR,
 * adjtimex, the kernel log (/dev/kmsg or syslog(2)), the CPU count. */
void probe_live(struct doctor_facts *f);

/* Whether libc's clock calls enter the kernel: a forked child with a
 * seccomp filter that fails the clock system calls with a marker errno.
 * Fills seccomp_ok/seccomp_err and call[].enters_kernel/verdict. */
void measure_seccomp(struct doctor_facts *f);

/* Measurements on the running machine (measure.c). */
void measure_live(struct doctor_facts *f, int quick, void (*progress)(const char *what, void *ctx), void *ctx);

/* A capture: root/doctor-facts (CPUID facts, adjtimex, measurements) and
 * root/dev/kmsg (the kernel log as text).  Returns 0, or -1 with a message. */
int fixture_load(struct doctor_facts *f, const char *root, char *err, size_t esize);

/* Fills the sync fields from adjtimex's answer (state = its return value). */
struct timex;
void facts_set_adjtimex(struct doctor_facts *f, const struct timex *tx, int state);

/* The running kernel's log as text: /dev/kmsg records, else syslog(2).
 * Returns a malloc'd buffer, or NULL with *err = the errno of /dev/kmsg. */
char *klog_read_live(int *err, char *source, size_t ssize);

/* Picks the best nominal counter frequency and says where it came from. */
void facts_choose_frequency(struct doctor_facts *f);

/* Writes a capture of this machine into dir (created if missing): the files
 * probe_files reads, the kernel log, and doctor-facts from f.  Returns 0, or
 * -1 with a message. */
int capture_write(const struct doctor_facts *f, const char *dir, char *err, size_t esize);

#endif
