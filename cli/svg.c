#define _GNU_SOURCE
#include "svg.h"

#include <math.h>
#include <string.h>

#include "fastclock.h"
#include "util.h"

#define W 980
#define LABEL_W 300
#define PLOT_X (LABEL_W + 10)
#define PLOT_W 540
#define ROW_H 20

/* Text from the machine (a CPU name cut to its buffer may split a
 * character) kept valid XML: what XML 1.0 forbids, control bytes and bytes
 * that start no UTF-8 character, becomes U+FFFD, as in the JSON. */
static void esc(FILE *o, const char *text)
{
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        switch (*p) {
        case '&': fputs("&amp;", o); break;
        case '<': fputs("&lt;", o); break;
        case '>': fputs("&gt;", o); break;
        case '"': fputs("&quot;", o); break;
        case '\t': case '\n': case '\r': fputc(*p, o); break;
        default: {
            int n = *p < 0x20 || *p == 0x7f ? 0 : utf8_char_length(p);
            if (n == 0) {
                fputs("&#xFFFD;", o);
            } else {
                fwrite(p, 1, (size_t)n, o);
                p += n - 1;
            }
        }
        }
    }
}

static const char *group_colour(enum src_group g)
{
    switch (g) {
    case GROUP_COUNTER: return "#7f7f7f";
    case GROUP_FASTCLOCK: return "#2ca02c";
    case GROUP_LIBC: return "#1f77b4";
    default: return "#d62728";
    }
}

static const char *const palette[] = {"#2ca02c", "#98df8a", "#17becf", "#7f7f7f", "#bcbd22", "#1f77b4",
                                      "#aec7e8", "#9467bd", "#ff7f0e", "#8c564b", "#d62728", "#e377c2"};

/* Log-scale position of v in [lo, hi] over `width` pixels. */
static double logpos(double v, double lo, double hi, double width)
{
    if (v < lo)
        v = lo;
    return (log10(v) - log10(lo)) / (log10(hi) - log10(lo)) * width;
}

static void decades(double min, double max, double *lo, double *hi)
{
    /* No value at all (every source failed): a decade still, not an
     * endless grid from infinite bounds. */
    if (!isfinite(min))
        min = 0;
    if (!isfinite(max))
        max = 0;
    *lo = pow(10, floor(log10(min > 0 ? min : 0.1)));
    *hi = pow(10, ceil(log10(max > 0 ? max : 1)));
    if (*hi <= *lo)
        *hi = *lo * 10;
}

static void fmt_value(char *buf, size_t size, double ns)
{
    if (ns < 10)
        snprintf(buf, size, "%.2f ns", ns);
    else if (ns < 1000)
        snprintf(buf, size, "%.1f ns", ns);
    else
        snprintf(buf, size, "%.2f us", ns / 1e3);
}

static int cost_chart(FILE *o, const struct bench_result *r, int y0)
{
    double min = INFINITY, max = 0;
    int rows = 0;
    for (int i = 0; i < r->nsrc; i++) {
        const struct source *s = &r->src[i];
        if (!s->usable || isnan(s->median))
            continue;
        rows++;
        min = fmin(min, s->min);
        max = fmax(max, s->max);
    }
    double lo, hi;
    decades(min, max, &lo, &hi);
    int top = y0 + 50, bottom = top + rows * ROW_H;
    fprintf(o, "<text x=\"10\" y=\"%d\" class=\"title\">Cost per call: median ns (bar), min to max of %d batches "
               "(whisker), log scale</text>\n",
            y0 + 20, r->cost_rounds);
    fprintf(o, "<text x=\"10\" y=\"%d\" class=\"sub\">lower is better; colour: ", y0 + 38);
    static const enum src_group groups[] = {GROUP_COUNTER, GROUP_FASTCLOCK, GROUP_LIBC, GROUP_SYSCALL};
    static const char *const names[] = {"raw counter", "fastclock", "libc (vDSO or kernel)", "system call"};
    for (int g = 0; g < 4; g++)
        fprintf(o, "<tspan fill=\"%s\">&#9632; %s</tspan>  ", group_colour(groups[g]), names[g]);
    fprintf(o, "</text>\n");
    /* Decade grid. */
    for (double d = lo; d <= hi * 1.001; d *= 10) {
        double x = PLOT_X + logpos(d, lo, hi, PLOT_W);
        char label[32];
        fmt_value(label, sizeof label, d);
        fprintf(o, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"grid\"/>\n", x, top - 4, x, bottom);
        fprintf(o, "<text x=\"%.1f\" y=\"%d\" class=\"axis\" text-anchor=\"middle\">%s</text>\n", x, bottom + 14,
                label);
    }
    int row = 0;
    for (int i = 0; i < r->nsrc; i++) {
        const struct source *s = &r->src[i];
        if (!s->usable || isnan(s->median))
            continue;
        int y = top + row++ * ROW_H;
        double w = logpos(s->median, lo, hi, PLOT_W);
        double x1 = PLOT_X + logpos(s->min, lo, hi, PLOT_W), x2 = PLOT_X + logpos(s->max, lo, hi, PLOT_W);
        char value[32];
        fmt_value(value, sizeof value, s->median);
        fprintf(o, "<text x=\"%d\" y=\"%d\" class=\"label\" text-anchor=\"end\">", LABEL_W, y + 13);
        esc(o, s->key);
        fprintf(o, "</text>\n");
        fprintf(o, "<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"%s\"><title>", PLOT_X, y + 3,
                w < 1 ? 1 : w, ROW_H - 6, group_colour(s->group));
        esc(o, s->key);
        fprintf(o, ": median %s</title></rect>\n", value);
        fprintf(o, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"whisker\"/>\n", x1, y + ROW_H / 2, x2,
                y + ROW_H / 2);
        /* Values in one column at the right: outliers make whiskers long. */
        fprintf(o, "<text x=\"%d\" y=\"%d\" class=\"value\">%s</text>\n", PLOT_X + PLOT_W + 12, y + 13, value);
    }
    return bottom + 30;
}

static int scaling_chart(FILE *o, const struct bench_result *r, int y0)
{
    if (!r->nscale || !r->nthreads)
        return y0;
    double min = INFINITY, max = 0;
    for (int k = 0; k < r->nscale; k++)
        for (int t = 0; t < r->nthreads; t++)
            if (r->point[k][t].ok) {
                min = fmin(min, r->point[k][t].calls_per_s);
                max = fmax(max, r->point[k][t].calls_per_s);
            }
    if (max <= 0)
        return y0;
    double lo, hi;
    decades(min, max, &lo, &hi);
    int top = y0 + 50, height = 320, left = 90, width = 480;
    int bottom = top + height;
    fprintf(o, "<text x=\"10\" y=\"%d\" class=\"title\">Thread scaling: total calls per second, all threads "
               "(median of %d rounds of %.0f ms), log scale</text>\n",
            y0 + 20, r->scale_rounds, r->scale_run_ns / 1e6);
    fprintf(o, "<text x=\"10\" y=\"%d\" class=\"sub\">a source that scales rises with threads; one that serialises "
               "(HPET, locks) stays flat or falls; %d CPU%s available</text>\n",
            y0 + 38, r->cpus, r->cpus == 1 ? "" : "s");
    for (double d = lo; d <= hi * 1.001; d *= 10) {
        double y = bottom - logpos(d, lo, hi, height);
        fprintf(o, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"grid\"/>\n", left, y, left + width, y);
        fprintf(o, "<text x=\"%d\" y=\"%.1f\" class=\"axis\" text-anchor=\"end\">%g M/s</text>\n", left - 6, y + 4,
                d / 1e6);
    }
    /* Threads on a linear axis. */
    int tmax = r->threads[r->nthreads - 1], tmin = r->threads[0];
    double span = tmax > tmin ? tmax - tmin : 1;
#define TX(th) (left + 30 + ((th) - tmin) / span * (width - 60))
    for (int t = 0; t < r->nthreads; t++) {
        double x = TX(r->threads[t]);
        fprintf(o, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"grid\"/>\n", x, top, x, bottom);
        fprintf(o, "<text x=\"%.1f\" y=\"%d\" class=\"axis\" text-anchor=\"middle\">%d</text>\n", x, bottom + 14,
                r->threads[t]);
    }
    fprintf(o, "<text x=\"%d\" y=\"%d\" class=\"axis\" text-anchor=\"middle\">threads</text>\n", left + width / 2,
            bottom + 30);
    for (int k = 0; k < r->nscale; k++) {
        const char *colour = palette[k % (sizeof palette / sizeof palette[0])];
        fprintf(o, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", colour);
        for (int t = 0; t < r->nthreads; t++)
            if (r->point[k][t].ok)
                fprintf(o, "%.1f,%.1f ", TX(r->threads[t]), bottom - logpos(r->point[k][t].calls_per_s, lo, hi, height));
        fprintf(o, "\"/>\n");
        for (int t = 0; t < r->nthreads; t++)
            if (r->point[k][t].ok) {
                fprintf(o, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"><title>", TX(r->threads[t]),
                        bottom - logpos(r->point[k][t].calls_per_s, lo, hi, height), colour);
                esc(o, r->src[r->scale_src[k]].key);
                fprintf(o, ", %d thread%s: %.1f M calls/s, %.1f ns per call</title></circle>\n", r->threads[t],
                        r->threads[t] == 1 ? "" : "s", r->point[k][t].calls_per_s / 1e6, r->point[k][t].ns_per_call);
            }
        /* Legend on the right, with the scaling factor. */
        int ly = top + 8 + k * 20;
        double sc = bench_scaling(r, k);
        fprintf(o, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"4\" fill=\"%s\"/>\n", left + width + 20, ly - 4,
                colour);
        fprintf(o, "<text x=\"%d\" y=\"%d\" class=\"label\">", left + width + 40, ly);
        esc(o, r->src[r->scale_src[k]].key);
        if (!isnan(sc))
            fprintf(o, " (x%.2f)", sc);
        fprintf(o, "</text>\n");
    }
#undef TX
    return bottom + 50;
}

int svg_write(FILE *o, const struct bench_result *r)
{
    /* Height: both charts, computed from the rows they draw. */
    int rows = 0;
    for (int i = 0; i < r->nsrc; i++)
        rows += r->src[i].usable && !isnan(r->src[i].median);
    int height = 60 + 50 + rows * ROW_H + 30 + (r->nscale ? 50 + 320 + 50 : 0) + 20;
    fprintf(o, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", W,
            height, W, height);
    fprintf(o, "<style>text{font-family:sans-serif;font-size:12px;fill:#222}.title{font-size:15px;font-weight:bold}"
               ".sub{font-size:12px;fill:#555}.axis{font-size:11px;fill:#555}.label{font-size:12px}"
               ".value{font-size:11px;fill:#333}.grid{stroke:#ddd;stroke-width:1}"
               ".whisker{stroke:#000;stroke-width:1;opacity:0.5}</style>\n");
    fprintf(o, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(o, "<text x=\"10\" y=\"22\" class=\"title\">fastclock %s bench: ", fastclock_version());
    esc(o, r->cpu);
    fprintf(o, ", %d CPU%s", r->cpus, r->cpus == 1 ? "" : "s");
    if (r->hypervisor[0]) {
        fprintf(o, " (");
        esc(o, r->hypervisor);
        fprintf(o, " guest)");
    }
    fprintf(o, "</text>\n<text x=\"10\" y=\"40\" class=\"sub\">clocksource ");
    esc(o, r->clocksource);
    fprintf(o, ", Linux ");
    esc(o, r->kernel);
    fprintf(o, ", fastclock mode ");
    esc(o, r->fc_mode);
    fprintf(o, "</text>\n");
    int y = cost_chart(o, r, 50);
    scaling_chart(o, r, y);
    fprintf(o, "</svg>\n");
    return ferror(o) ? -1 : 0;
}
