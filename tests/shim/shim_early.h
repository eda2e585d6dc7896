#ifndef SHIM_EARLY_H
#define SHIM_EARLY_H
#include <stdint.h>

struct shim_early_record {
    int ran;
    int shim_state;     /* fastclock_preload_state() then; -1: no shim */
    int ret, errno_after;
    int64_t k0, value, k1;
    int null_ret, null_errno;
};
extern struct shim_early_record shim_early_record;

#endif
