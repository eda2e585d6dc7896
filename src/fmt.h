/* Async-signal-safe string building (snprintf may allocate or take locale
 * locks; these never do).  Output is always NUL-terminated and truncated
 * to the buffer. */
#ifndef FC_FMT_H
#define FC_FMT_H

#include <stddef.h>
#include <stdint.h>

struct fc_buf {
    char *p;
    size_t size, len;
};

static inline void fc_buf_init(struct fc_buf *b, char *p, size_t size)
{
    b->p = p;
    b->size = size;
    b->len = 0;
    if (size)
        p[0] = 0;
}

static inline void fc_buf_str(struct fc_buf *b, const char *s)
{
    if (!s)
        s = "(null)";
    while (*s && b->len + 1 < b->size)
        b->p[b->len++] = *s++;
    if (b->size)
        b->p[b->len] = 0;
}

static inline void fc_buf_u64(struct fc_buf *b, uint64_t v)
{
    char tmp[21];
    int n = 0;
    do tmp[n++] = (char)('0' + v % 10), v /= 10;
    while (v);
    char out[22];
    for (int i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = 0;
    fc_buf_str(b, out);
}

static inline void fc_buf_i64(struct fc_buf *b, int64_t v)
{
    if (v < 0) {
        fc_buf_str(b, "-");
        fc_buf_u64(b, (uint64_t)0 - (uint64_t)v);
    } else {
        fc_buf_u64(b, (uint64_t)v);
    }
}

/* v with `decimals` digits after the point, rounded. */
static inline void fc_buf_fixed(struct fc_buf *b, double v, int decimals)
{
    if (v != v) {
        fc_buf_str(b, "nan");
        return;
    }
    if (v < 0) {
        fc_buf_str(b, "-");
        v = -v;
    }
    uint64_t scale = 1;
    for (int i = 0; i < decimals; i++)
        scale *= 10;
    if (v > 1.8e19 / (double)scale) {
        fc_buf_str(b, "inf");
        return;
    }
    uint64_t x = (uint64_t)(v * (double)scale + 0.5);
    fc_buf_u64(b, x / scale);
    if (decimals > 0) {
        char frac[24];
        uint64_t f = x % scale;
        for (int i = decimals - 1; i >= 0; i--) {
            frac[i] = (char)('0' + f % 10);
            f /= 10;
        }
        frac[decimals] = 0;
        fc_buf_str(b, ".");
        fc_buf_str(b, frac);
    }
}

#endif
