/* Mode decision, initialisation, configuration and the reason string. */
#ifndef FC_MODE_H
#define FC_MODE_H

#include "internal.h"

enum fc_calibrator_pref { FC_CAL_AUTO = 0, FC_CAL_THREAD, FC_CAL_LAZY };

/* Runs the mode decision if nobody has; returns 1 if this call did it. */
FC_HIDDEN int fc_try_init(void);
/* 1 while another thread runs the mode decision (0 on that thread itself). */
FC_HIDDEN int fc_init_in_progress_elsewhere(void);
/* Records the reason for the current mode (copied; async-signal-safe). */
FC_HIDDEN void fc_set_reason(const char *reason);
FC_HIDDEN const char *fc_get_reason(void);
FC_HIDDEN int fc_mode_forced(void);
/* 1 when mode system was decided at start-up (no value ever came from the
 * counter, so the kernel's clocks may answer unclamped, e.g. libc's). */
FC_HIDDEN int fc_system_from_start(void);
/* ns per read of fastclock_mono_ns and of the kernel's clock, as measured at
 * the mode decision (0 when not measured). */
FC_HIDDEN void fc_measured_costs(double *ours, double *kernel);
FC_HIDDEN enum fc_calibrator_pref fc_calibrator_pref(void);
/* Preload shim: prefer lazy calibration unless FASTCLOCK_CALIBRATOR says
 * otherwise (weak default in defaults.c, strong override in preload.c). */
FC_HIDDEN extern const int fc_default_lazy;
/* Resets everything to "never initialised" (tests only; no reader may run). */
FC_HIDDEN void fc_reset_for_tests(void);

#endif
