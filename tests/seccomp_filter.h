/* A seccomp filter for the tests (C and C++): calls nr_a and nr_b are
 * answered with `action`, every other call, and every call of another
 * architecture, is let through.  Used as
 *   struct sock_filter code[] = FC_TEST_FILTER_TWO_CALLS(nr_a, nr_b, action);
 * (env_test.cc's probe under systemd-like filters; status_probe.c's worker
 * that installs one on itself). */
#ifndef FC_TEST_SECCOMP_FILTER_H
#define FC_TEST_SECCOMP_FILTER_H

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>

#if defined(__x86_64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

#define FC_TEST_FILTER_TWO_CALLS(nr_a, nr_b, action)                                  \
    {                                                                                 \
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),      \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_AUDIT_ARCH, 1, 0),                 \
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),                                 \
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),        \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)(nr_a), 1, 0),                  \
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)(nr_b), 0, 1),                  \
        BPF_STMT(BPF_RET | BPF_K, (action)),                                          \
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),                                 \
    }

#endif
