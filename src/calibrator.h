/* The background calibrator thread (calibrator.c): the top of the house's
 * upkeep.  Readers and the mode reach it only through upkeep.h. */
#ifndef FC_CALIBRATOR_H
#define FC_CALIBRATOR_H

void fc_calibrator_start(void);       /* from a normal (non-signal) context only */
void fc_calibrator_start_if_wanted(void); /* as the library's constructor: unless FASTCLOCK_CALIBRATOR
                                             or the build (the shim) asks for lazy */
void fc_calibrator_stop(void);        /* joins the thread: tests, and the JNI library's JNI_OnUnload */
void fc_calibrator_pause(int paused); /* tests: a stalled calibrator */
void fc_calibrator_reset_for_tests(void); /* stops it, forgets the requests */
void fc_calibrator_coarse_tick(void);     /* tests: one of the thread's coarse ticks, on this thread */

#endif
