#include "testing.h"

#include <string.h>

#include "calibration.h"
#include "calibrator.h"
#include "clock.h"
#include "mode.h"
#include "percpu.h"
#include "wall.h"

void fc_test_reset(const struct fc_seam *seam)
{
    fc_calibrator_reset_for_tests(); /* first: no reader may run meanwhile */
    fc_reset_for_tests();
    fc_clock_reset_for_tests();
    if (seam)
        fc_seam = *seam;
    else
        memset(&fc_seam, 0, sizeof fc_seam);
    fc_wall_init();
    fc_wall_probe_tai(); /* this kernel's answer, for TAI reads before the decision */
    fc_wall_choose(0);
    fc_cal_max_interval_ns = 500000000LL;
}

void fc_test_get_routes(struct fc_test_routes *out)
{
    out->kernel_direct = (const void *)fc_kernel_route(0);
    out->kernel_ordered = (const void *)fc_kernel_route(1);
    out->wall = (const void *)fc_wall_route(FC_REAL, 1);
    out->wall_unordered = (const void *)fc_wall_route(FC_REAL, 0);
    out->wall_tv = (const void *)atomic_load(&fc_wall_direct_tv);
    out->percpu_lines = (const void *)fc_percpu_route_gettime;
}

void fc_test_start_calibrator(void)
{
    fc_calibrator_start();
}

void fc_test_stop_calibrator(void)
{
    fc_calibrator_stop();
}

static void line_from_latch(const struct fc_latch *latch, struct fc_test_line *out)
{
    uint64_t seq = atomic_load(&latch->seq);
    const struct fc_line *l = &latch->line[seq & 1];
    const struct fc_meta *m = &latch->meta[seq & 1];
    out->base_tsc = l->base_tsc;
    out->soft_span = m->soft_span;
    out->fast_span = l->fast_span;
    out->mult = l->mult;
    out->error_bound_ns = m->error_bound_ns;
    out->real_offset = l->real_offset;
    out->boot_offset = l->boot_offset;
    out->floor_ns = m->floor_ns;
    out->epoch = m->epoch;
    out->tick_us = m->tick_us;
    out->checked_mono_ns = m->checked_mono_ns;
    out->base_ns = l->base_ns;
    out->base_frac = fc_line_base_frac(l);
}

void fc_test_current_line(struct fc_test_line *out)
{
    line_from_latch(&fc_latch, out);
}

int fc_test_cpu_line(int cpu, int64_t mono_now, struct fc_test_line *out)
{
    struct fc_cpu_slot *base = atomic_load(&fc_percpu_slots);
    int n = atomic_load(&fc_percpu_nslots);
    if (!base || cpu < 0 || cpu >= n) /* slot i is CPU i's (its cpu field is -1 under the seam) */
        return -1;
    struct fc_cpu_slot *sl = &base[cpu];
    if (atomic_load(&sl->state) != FC_SLOT_OK)
        return -1;
    line_from_latch(&sl->latch, out);
    uint64_t seq = atomic_load(&sl->latch.seq);
    out->error_bound_ns = fc_meta_bound(&sl->latch.meta[seq & 1], mono_now);
    return out->mult ? 0 : -1;
}

void fc_test_percpu_maintain(int cpu)
{
    fc_percpu_maintain_cpu(cpu, 0);
}

void fc_test_percpu_recalibrate(int cpu)
{
    fc_percpu_maintain_cpu(cpu, 1);
}

int64_t fc_test_line_eval(const struct fc_test_line *l, uint64_t t)
{
    __int128 x = (__int128)(int64_t)(t - l->base_tsc) * l->mult + (__int128)l->base_frac;
    return l->base_ns + (int64_t)(x >> FC_SHIFT);
}

int64_t fc_test_line_eval_halves(const struct fc_test_line *l, uint64_t t)
{
    struct fc_line_view v = {
        .base = l->base_tsc,
        .c = l->base_frac - l->base_tsc * (uint64_t)l->mult,
        .mult = l->mult,
        .base_ns = l->base_ns,
    };
    return fc_line_view_mono_halves(&v, t & 0xffffffffu, t >> 32);
}

void fc_test_coarse_tick(void)
{
    fc_calibrator_coarse_tick();
}

void fc_test_pause_calibrator(int paused)
{
    fc_calibrator_pause(paused);
}

int fc_test_recheck_kernel_trust(void)
{
    return fc_mode_recheck_kernel_trust();
}

void fc_test_switch_to_percpu(const char *why)
{
    /* A reader or the calibrator may hold the writer's lock for a moment:
     * try again, as the calibrator's warp check does (one try lost the
     * switch in a CI run, with two threads reading meanwhile). */
    while (!fc_mode_switch_to_percpu(why))
        fc_cpu_relax();
}

void fc_test_raise_percpu_floor(int64_t floor_ns)
{
    fc_percpu_set_floor(floor_ns);
}

int fc_test_recalibrate(void)
{
    if (!fc_cal_trylock())
        return -1;
    int r = fc_mode_recalibrate();
    fc_cal_unlock();
    return r;
}

void fc_test_hold_writer_lock(int hold)
{
    if (!hold) {
        fc_cal_unlock();
        return;
    }
    while (!fc_cal_trylock())
        fc_cpu_relax();
}

void fc_test_fail_to_system(const char *why)
{
    while (!fc_cal_trylock())
        fc_cpu_relax();
    fc_mode_fail_to_system(why);
    fc_cal_unlock();
}

int64_t fc_test_fallback_noted(void)
{
    return fc_cal_fallback_noted();
}

uint64_t fc_test_warp_raw_compares(void)
{
    struct fc_cal_stats s;
    fc_cal_stats(&s);
    return s.warp_raw_compares;
}

double fc_test_percpu_seed_rate(void)
{
    return fc_percpu_seed_rate();
}

int64_t fc_test_percpu_idle_until(int64_t last_tour)
{
    return fc_percpu_idle_until(last_tour);
}

void fc_test_set_real_second_cache(int64_t sec, int64_t sec_ns)
{
    fc_sec_cache[FC_REAL].sec = sec;
    fc_sec_cache[FC_REAL].sec_ns = sec_ns;
}
