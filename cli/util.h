/* Small helpers shared by the `fastclock` subcommands: strict number
 * parsing, a growing-free string builder, clocks for timing the tool itself,
 * and terminal detection. */
#ifndef FASTCLOCK_CLI_UTIL_H
#define FASTCLOCK_CLI_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <getopt.h>

/* A fact we may not know: yes, no, or unknown (with a reason elsewhere). */
enum tri { TRI_UNKNOWN = -1, TRI_NO = 0, TRI_YES = 1 };

/* Whole-string parses: leading/trailing junk, overflow and NaN are errors.
 * Return 0 on success, -1 otherwise (out untouched). */
int parse_double(const char *s, double *out);
int parse_long(const char *s, long *out);   /* decimal or 0x hex */

/* A subcommand's options, read with getopt_long and checked alike in every
 * subcommand: the first operand or "--" ends them; each option is given at
 * most once (given twice, the last would win silently: a typo's symptom);
 * a value is never taken from the next option ("--svg --json" is a
 * forgotten value, not a file named --json: write --svg=--json to mean
 * that; "--seconds -1" is a value, refused by its own check).
 * Usage: a zeroed struct with opts and shorts set, then opt_next until -1. */
struct opt_parser {
    const struct option *opts; /* getopt_long's table, ended by a zero entry */
    const char *shorts;        /* short options, getopt's letters ("h") */
    const char *const *needs;  /* per opts entry: what its value must be
                                  ("a directory"); NULL or a NULL entry:
                                  "a value" */
    int unknown;               /* set with '?' for an option nobody knows */
    char err[256];             /* set with '?': what was wrong */
    /* private */
    unsigned seen;
    int started;
};

/* The next option's val (its value in *value, NULL for none), -1 after the
 * last option (optind then indexes the first operand), or '?' on an error
 * described in p->err. */
int opt_next(struct opt_parser *p, int argc, char **argv, const char **value);

/* Fixed-size string builder: always NUL-terminated, silently truncates. */
struct sbuf {
    char *p;
    size_t size, len;
};
void sb_init(struct sbuf *b, char *p, size_t size);
void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* snprintf into a fixed array: copy_str(dst, sizeof dst, src). */
void copy_str(char *dst, size_t size, const char *src);

/* The length of the well-formed UTF-8 character at p (1 to 4 bytes), or 0
 * where none starts there (a split or malformed sequence): for writers of
 * documents that must stay valid UTF-8 (JSON, SVG). */
int utf8_char_length(const unsigned char *p);

/* Trims leading and trailing whitespace in place; returns s. */
char *trim(char *s);

int64_t clock_ns(clockid_t id);
static inline int64_t mono_raw_ns(void) { return clock_ns(CLOCK_MONOTONIC_RAW); }

/* One (counter, CLOCK_MONOTONIC_RAW) pair from the tightest of a few
 * brackets: two of them, seconds apart, give the counter's real rate. */
void counter_pair(uint64_t *tsc, int64_t *ns);

/* Human number of nanoseconds: "17.2 ns", "1.05 us", "4.00 ms", "1.00 s". */
void format_ns(char *buf, size_t size, double ns);

/* Flushes stdout: `status` if everything written reached it, otherwise
 * says so on stderr (as `who`) and returns `failed` (a full disk, a closed
 * pipe: a report that was not written must not pass for one). */
int stdout_done(const char *who, int status, int failed);

/* 1 for an LD_PRELOAD entry (`len` bytes at `entry`) that names the preload
 * shim: libfastclock-preload.so, in any directory, of any version
 * (libfastclock-preload.so.N...). */
int preload_entry_is_shim(const char *entry, size_t len);

/* 1 if colours should be used on this stream: a TTY, NO_COLOR unset, TERM not dumb. */
int want_colour(FILE *f);

#endif
