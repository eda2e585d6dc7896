/* What the CPU says about its time-stamp counter (CPUID).  Shared by the
 * library's mode decision and by `fastclock doctor`. */
#ifndef FC_CPU_H
#define FC_CPU_H

#include <stdint.h>

struct fc_cpu_info {
    int has_cpuid;
    char vendor[13];          /* "GenuineIntel", "AuthenticAMD", ... */
    char brand[49];
    unsigned family, model, stepping;
    int has_tsc;              /* CPUID.1:EDX[4] */
    int invariant_tsc;        /* CPUID.80000007H:EDX[8] */
    int has_rdtscp;           /* CPUID.80000001H:EDX[27] */
    int hypervisor;           /* CPUID.1:ECX[31] */
    char hypervisor_sig[13];  /* CPUID.40000000H: "KVMKVMKVM", "XenVMMXenVMM", "Microsoft Hv", ... */
    uint32_t hypervisor_max_leaf;
    double tsc_hz;            /* nominal frequency from CPUID, 0 if CPUID does not say */
    const char *tsc_hz_source;/* which leaf gave tsc_hz, or "" */
    uint32_t crystal_hz;      /* CPUID.15H:ECX, 0 if absent */
    int lfence_always_serializing; /* AMD: CPUID.80000021H:EAX[2] (tests: through the seam's CPU) */
};

/* Fills *info from CPUID; on a CPU without it every field is zero/empty.
 * Costs a dozen CPUID instructions, each of which traps to the hypervisor in
 * a VM (several microseconds): for doctor and the CLI, not for start-up. */
void fc_cpu_probe(struct fc_cpu_info *info);

/* Just what the mode decision needs: invariant_tsc (and so has_tsc), with
 * two CPUID instructions. */
void fc_cpu_probe_trust(struct fc_cpu_info *info);
/* CPUID.80000001H:EDX[27], asked only when rdtscp matters (one CPUID). */
int fc_cpu_has_rdtscp(void);

/* Whether lfence keeps rdtsc behind every earlier instruction on this CPU
 * (vendor, family and CPUID 8000_0021h EAX[2], LfenceAlwaysSerializing):
 * always on Intel; on AMD and Hygon only in families 0Fh and 11h or where
 * that bit says so -- elsewhere (10h, 12h-17h, Hygon's 18h, and later
 * families without the bit) only once the kernel has set DE_CFG[1], which
 * a hypervisor may not honour and user space cannot see.  There rdtscp
 * orders the read. */
int fc_cpu_lfence_orders_rdtsc_for(const char *vendor, unsigned family, int lfence_always_serializing);
/* AMD, or Hygon (AMD's Zen under licence): the vendors whose lfence rule differs. */
int fc_cpu_vendor_is_amd(const char *vendor);
/* The same for this CPU (one CPUID on Intel, four on AMD; 1 on arm64,
 * whose ordered read is isb).  *amd, where non-NULL: the vendor is AMD or
 * Hygon (counter.c: there rdtscp is the dearer ordered read). */
int fc_cpu_lfence_orders_rdtsc(int *amd);

/* arm64: the CPU has CNTVCTSS_EL0, the self-synchronised counter view
 * (FEAT_ECV, getauxval(AT_HWCAP2) & HWCAP2_ECV); 0 elsewhere. */
int fc_cpu_counter_self_synced(void);

/* Human name for a hypervisor signature ("KVM", "Xen", "Hyper-V", "VMware", ...), or NULL. */
const char *fc_hypervisor_name(const char *sig);

#endif
