#include "json.h"

#include <inttypes.h>
#include <math.h>

#include "util.h"

void json_init(struct json *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->count[0] = 0;
}

/* Strings from sysfs, DMI, CPUID and the kernel log may hold any bytes: the
 * document stays valid UTF-8, each byte that starts no character becoming
 * U+FFFD. */
void json_write_escaped(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        case '\b': fputs("\\b", f); break;
        case '\f': fputs("\\f", f); break;
        default:
            if (*p < 0x20 || *p == 0x7f) {
                fprintf(f, "\\u%04x", *p);
            } else if (*p < 0x80) {
                fputc(*p, f);
            } else {
                int n = utf8_char_length(p);
                if (n == 0) {
                    fputs("\\ufffd", f);
                } else {
                    fwrite(p, 1, (size_t)n, f);
                    p += n - 1;
                }
            }
        }
    }
    fputc('"', f);
}

/* Comma, newline and indentation before a value, then its key. */
static void prefix(struct json *j, const char *key)
{
    if (j->depth > 0) {
        if (j->count[j->depth]++)
            fputc(',', j->f);
        fputc('\n', j->f);
        for (int i = 0; i < j->depth; i++)
            fputs("  ", j->f);
    }
    if (key) {
        json_write_escaped(j->f, key);
        fputs(": ", j->f);
    }
}

static void open_level(struct json *j, const char *key, char c)
{
    prefix(j, key);
    fputc(c, j->f);
    if (j->depth + 1 < JSON_MAX_DEPTH)
        j->depth++;
    j->count[j->depth] = 0;
}

static void close_level(struct json *j, char c)
{
    int had = j->count[j->depth];
    if (j->depth > 0)
        j->depth--;
    if (had) {
        fputc('\n', j->f);
        for (int i = 0; i < j->depth; i++)
            fputs("  ", j->f);
    }
    fputc(c, j->f);
}

void json_begin_object(struct json *j, const char *key) { open_level(j, key, '{'); }
void json_end_object(struct json *j) { close_level(j, '}'); }
void json_begin_array(struct json *j, const char *key) { open_level(j, key, '['); }
void json_end_array(struct json *j) { close_level(j, ']'); }

void json_string(struct json *j, const char *key, const char *v)
{
    prefix(j, key);
    if (v)
        json_write_escaped(j->f, v);
    else
        fputs("null", j->f);
}

void json_int(struct json *j, const char *key, int64_t v)
{
    prefix(j, key);
    fprintf(j->f, "%" PRId64, v);
}

void json_uint(struct json *j, const char *key, uint64_t v)
{
    prefix(j, key);
    fprintf(j->f, "%" PRIu64, v);
}

void json_double(struct json *j, const char *key, double v, int decimals)
{
    prefix(j, key);
    if (!isfinite(v))
        fputs("null", j->f);
    else
        fprintf(j->f, "%.*f", decimals, v);
}

void json_bool(struct json *j, const char *key, int v)
{
    prefix(j, key);
    fputs(v ? "true" : "false", j->f);
}

void json_tri(struct json *j, const char *key, int v)
{
    prefix(j, key);
    fputs(v < 0 ? "null" : v ? "true" : "false", j->f);
}

void json_null(struct json *j, const char *key)
{
    prefix(j, key);
    fputs("null", j->f);
}

void json_finish(struct json *j)
{
    fputc('\n', j->f);
    fflush(j->f);
}
