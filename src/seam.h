/* The test seam's description (plain C, includable from C++ tests). */
#ifndef FC_SEAM_H
#define FC_SEAM_H

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

struct fc_cpu_info;

/* Tests replace the counter and the kernel clock with simulated ones.  When
 * a counter is injected every line is published with fast_span 0, so all
 * reads take the slow path, which reads the injected counter and evaluates
 * the same line with the same code. */
struct fc_seam {
    uint64_t (*counter)(void);                           /* NULL: hardware */
    int (*kernel_gettime)(clockid_t, struct timespec *); /* NULL: vDSO/syscall */
    const struct fc_cpu_info *cpu;                       /* NULL: CPUID */
    const char *sysroot;                                 /* NULL: the live /sys */
    int skip_speed_check;
};

#ifdef __cplusplus
}
#endif
#endif
