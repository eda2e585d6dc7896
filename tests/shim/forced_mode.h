/*
 * A shim test run with FASTCLOCK_MODE=tsc or =percpu is about that mode.
 * Where the library refused it at the decision (this machine's counter
 * cannot be trusted: the reason names the missing feature), what ran was
 * mode system: the run is a skip that says why, not a pass.  A forced mode
 * the library took and then left (other than tsc for tsc-percpu, which the
 * warp check may choose) is a failure: the run did not test what it names.
 * Call after the test's reads; returns 0 (held, or no mode forced), 77
 * (refused: skip) or 1 (left).
 */
#ifndef SHIM_FORCED_MODE_H
#define SHIM_FORCED_MODE_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fastclock.h"

static int forced_mode_verdict(void)
{
    const char *want = getenv("FASTCLOCK_MODE");
    if (!want || (strcmp(want, "tsc") != 0 && strcmp(want, "percpu") != 0))
        return 0;
    int (*status)(struct fastclock_status *) =
        (int (*)(struct fastclock_status *))dlsym(RTLD_DEFAULT, "fastclock_status");
    struct fastclock_status s;
    memset(&s, 0, sizeof s);
    if (!status || status(&s) != 0) {
        fprintf(stderr, "FAIL: FASTCLOCK_MODE=%s, and no fastclock_status to say what ran\n", want);
        return 1;
    }
    int held = strcmp(want, "percpu") == 0 ? strcmp(s.mode, "tsc-percpu") == 0
                                           : strcmp(s.mode, "tsc") == 0 || strcmp(s.mode, "tsc-percpu") == 0;
    if (held)
        return 0;
    if (strncmp(s.reason, "FASTCLOCK_MODE=", 15) == 0 && strstr(s.reason, " refused: ")) {
        printf("SKIP: the reads above ran in mode %s, not the one asked for: %s\n", s.mode, s.reason);
        return 77;
    }
    fprintf(stderr, "FAIL: FASTCLOCK_MODE=%s was taken, then left during the run: mode %s (%s)\n", want, s.mode,
            s.reason);
    return 1;
}

#endif
