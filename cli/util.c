#define _GNU_SOURCE
#include "util.h"

#include "counter.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int parse_double(const char *s, double *out)
{
    char *end;
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int parse_long(const char *s, long *out)
{
    char *end;
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    int base = (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) ? 16 : 10;
    long v = strtol(s, &end, base);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

void sb_init(struct sbuf *b, char *p, size_t size)
{
    b->p = p;
    b->size = size;
    b->len = 0;
    if (size)
        p[0] = 0;
}

void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    if (b->len + 1 >= b->size)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->size - b->len, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    b->len += (size_t)n;
    if (b->len >= b->size)
        b->len = b->size - 1;
}

int stdout_done(const char *who, int status, int failed)
{
    if (fflush(stdout) == 0 && !ferror(stdout))
        return status;
    fprintf(stderr, "%s: cannot write to standard output: %s\n", who, strerror(errno));
    return failed;
}

int preload_entry_is_shim(const char *entry, size_t len)
{
    const char *base = entry;
    for (size_t i = 0; i < len; i++)
        if (entry[i] == '/')
            base = entry + i + 1;
    static const char name[] = "libfastclock-preload.so";
    size_t base_len = (size_t)(entry + len - base), n = sizeof name - 1;
    /* libfastclock-preload.so, .so.0, .so.old; not libfastclock-preload.sox.so */
    return base_len >= n && strncmp(base, name, n) == 0 && (base_len == n || base[n] == '.');
}

void copy_str(char *dst, size_t size, const char *src)
{
    if (!size)
        return;
    snprintf(dst, size, "%s", src ? src : "");
}

char *trim(char *s)
{
    char *p = s;
    while (isspace((unsigned char)*p))
        p++;
    if (p != s)
        memmove(s, p, strlen(p) + 1);
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
    return s;
}

int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void format_ns(char *buf, size_t size, double ns)
{
    if (!(ns == ns))
        snprintf(buf, size, "?");
    else if (ns < 100)
        snprintf(buf, size, "%.1f ns", ns);
    else if (ns < 1e4)
        snprintf(buf, size, "%.0f ns", ns);
    else if (ns < 1e6)
        snprintf(buf, size, "%.2f us", ns / 1e3);
    else if (ns < 1e9)
        snprintf(buf, size, "%.2f ms", ns / 1e6);
    else
        snprintf(buf, size, "%.2f s", ns / 1e9);
}

int want_colour(FILE *f)
{
    const char *nc = getenv("NO_COLOR");
    const char *term = getenv("TERM");
    if (nc && *nc)
        return 0;
    if (term && strcmp(term, "dumb") == 0)
        return 0;
    return isatty(fileno(f));
}

/* One (counter, CLOCK_MONOTONIC_RAW) pair from the tightest of a few brackets. */
void counter_pair(uint64_t *tsc, int64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 15; i++) {
        uint64_t a = fc_counter_ordered();
        int64_t c = mono_raw_ns();
        uint64_t b = fc_counter_ordered();
        if (b - a < best) {
            best = b - a;
            *tsc = a + (b - a) / 2;
            *ns = c;
        }
    }
}

/* The opts entry an option's val belongs to, or -1. */
static int opt_index(const struct opt_parser *p, int val)
{
    for (int k = 0; p->opts[k].name; k++)
        if (p->opts[k].val == val)
            return k;
    return -1;
}

/* getopt_long takes an unambiguous abbreviation ("--thread"); for one that
 * is not ("--s"), says which options it could mean. */
static int ambiguous(struct opt_parser *p, const char *given)
{
    size_t len = strcspn(given + 2, "=");
    struct sbuf b;
    sb_init(&b, p->err, sizeof p->err);
    int matches = 0;
    for (int k = 0; p->opts[k].name; k++) {
        if (strncmp(p->opts[k].name, given + 2, len) != 0)
            continue;
        if (matches++ == 0)
            sb_printf(&b, "option '%.*s' is ambiguous: --%s", (int)len + 2, given, p->opts[k].name);
        else
            sb_printf(&b, ", --%s", p->opts[k].name);
    }
    return matches > 1;
}

int opt_next(struct opt_parser *p, int argc, char **argv, const char **value)
{
    char shorts[32];
    /* "+": stop at the first operand (run's command keeps its own options);
     * ":": report a missing value as ':', and print nothing ourselves. */
    snprintf(shorts, sizeof shorts, "+:%s", p->shorts ? p->shorts : "");
    if (!p->started) {
        p->started = 1;
        optind = 0; /* glibc and musl: a fresh scan */
        opterr = 0;
    }
    *value = NULL;
    p->err[0] = 0;
    p->unknown = 0;
    /* The argument getopt reads now (optind moves on only at the end of a
     * cluster such as "-hx"); optopt cleared, which older musl leaves as it
     * was for an unknown long option. */
    const char *given = argv[optind > 0 ? optind : 1];
    optopt = 0;
    int c = getopt_long(argc, argv, shorts, p->opts, NULL);
    if (c == -1)
        return -1;
    int k = opt_index(p, c == ':' || c == '?' ? optopt : c);
    const char *name = k >= 0 ? p->opts[k].name : NULL;
    const char *needs = k >= 0 && p->needs && p->needs[k] ? p->needs[k] : "a value";
    if (c == ':') {
        snprintf(p->err, sizeof p->err, "--%s needs %s", name ? name : "?", needs);
        return '?';
    }
    if (c == '?') {
        if (k >= 0 && strncmp(given, "--", 2) == 0) {
            snprintf(p->err, sizeof p->err, "--%s takes no value", name);
        } else {
            p->unknown = 1;
            if (optopt && strncmp(given, "--", 2) != 0)
                snprintf(p->err, sizeof p->err, "unknown option '-%c'", optopt);
            else if (!ambiguous(p, given))
                snprintf(p->err, sizeof p->err, "unknown option '%s'", given);
        }
        return '?';
    }
    /* A value that is the next argument (not "--opt=value"), and an option. */
    if (optarg && optarg == argv[optind - 1] && strncmp(optarg, "--", 2) == 0) {
        snprintf(p->err, sizeof p->err, "--%s needs %s", name, needs);
        return '?';
    }
    if (k >= 0 && k < 32) {
        if (p->seen & 1u << k) {
            snprintf(p->err, sizeof p->err, "--%s is given twice", name);
            return '?';
        }
        p->seen |= 1u << k;
    }
    *value = optarg;
    return c;
}

/* The length of the well-formed UTF-8 sequence at p (1 to 4 bytes), or 0
 * where none starts there: a stray continuation byte, an overlong form, a
 * surrogate, a value past U+10FFFF, or a sequence cut short (by the string's
 * end, or a fixed-size copy that split a character). */
int utf8_char_length(const unsigned char *p)
{
    /* The well-formed lead bytes, their lengths and the range of the second
     * byte (Unicode, table 3-7); later bytes are 0x80-0xbf. */
    static const struct {
        unsigned char first, last, n, lo, hi;
    } leads[] = {
        {0xc2, 0xdf, 2, 0x80, 0xbf}, {0xe0, 0xe0, 3, 0xa0, 0xbf}, {0xe1, 0xec, 3, 0x80, 0xbf},
        {0xed, 0xed, 3, 0x80, 0x9f}, {0xee, 0xef, 3, 0x80, 0xbf}, {0xf0, 0xf0, 4, 0x90, 0xbf},
        {0xf1, 0xf3, 4, 0x80, 0xbf}, {0xf4, 0xf4, 4, 0x80, 0x8f},
    };
    if (p[0] < 0x80)
        return 1;
    for (size_t k = 0; k < sizeof leads / sizeof leads[0]; k++) {
        if (p[0] < leads[k].first || p[0] > leads[k].last)
            continue;
        if (p[1] < leads[k].lo || p[1] > leads[k].hi)
            return 0;
        for (int i = 2; i < leads[k].n; i++) /* stops at the string's NUL, which is no continuation */
            if (p[i] < 0x80 || p[i] > 0xbf)
                return 0;
        return leads[k].n;
    }
    return 0;
}
