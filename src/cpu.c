/* CPUID probing.  Async-signal-safe: no allocation, no locks, no syscalls. */
#include "cpu.h"

#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static void cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4])
{
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
}

/* CPUID leaf 0's vendor string into vendor[13]; returns the largest basic leaf. */
static uint32_t cpuid_vendor(char vendor[13])
{
    uint32_t r[4];
    cpuid(0, 0, r);
    memcpy(vendor + 0, &r[1], 4);
    memcpy(vendor + 4, &r[3], 4);
    memcpy(vendor + 8, &r[2], 4);
    vendor[12] = 0;
    return r[0];
}

/* The family from CPUID leaf 1's EAX (the extended family counts from 0Fh). */
static unsigned cpuid_family(uint32_t eax)
{
    unsigned base = (eax >> 8) & 0xf;
    return base == 0xf ? base + ((eax >> 20) & 0xff) : base;
}

void fc_cpu_probe(struct fc_cpu_info *info)
{
    uint32_t r[4];
    memset(info, 0, sizeof *info);
    info->tsc_hz_source = "";
    if (!__get_cpuid_max(0, 0))
        return;
    info->has_cpuid = 1;

    uint32_t max_leaf = cpuid_vendor(info->vendor);

    cpuid(1, 0, r);
    unsigned base_family = (r[0] >> 8) & 0xf, base_model = (r[0] >> 4) & 0xf;
    info->family = cpuid_family(r[0]);
    info->model = (base_family == 0x6 || base_family == 0xf)
                      ? (((r[0] >> 16) & 0xf) << 4) + base_model
                      : base_model;
    info->stepping = r[0] & 0xf;
    info->has_tsc = (r[3] >> 4) & 1;
    info->hypervisor = (r[2] >> 31) & 1;

    uint32_t ext_max = __get_cpuid_max(0x80000000, 0);
    if (ext_max >= 0x80000001) {
        cpuid(0x80000001, 0, r);
        info->has_rdtscp = (r[3] >> 27) & 1;
    }
    if (ext_max >= 0x80000004) {
        for (uint32_t i = 0; i < 3; i++) {
            cpuid(0x80000002 + i, 0, r);
            memcpy(info->brand + 16 * i, r, 16);
        }
        info->brand[48] = 0;
        /* Trim the padding some CPUs put around the brand string. */
        char *b = info->brand;
        while (*b == ' ') b++;
        memmove(info->brand, b, strlen(b) + 1);
        size_t n = strlen(info->brand);
        while (n && info->brand[n - 1] == ' ') info->brand[--n] = 0;
    }
    if (ext_max >= 0x80000007) {
        cpuid(0x80000007, 0, r);
        info->invariant_tsc = (r[3] >> 8) & 1;
    }

    /* Intel: TSC/crystal ratio (0x15) gives the exact frequency when the
     * crystal is enumerated; 0x16 gives the base frequency in MHz, which on
     * those parts is the TSC frequency to within a few hundred ppm. */
    if (max_leaf >= 0x15) {
        cpuid(0x15, 0, r);
        if (r[0] && r[1] && r[2]) {
            info->crystal_hz = r[2];
            info->tsc_hz = (double)r[2] * r[1] / r[0];
            info->tsc_hz_source = "cpuid 0x15 (crystal ratio)";
        }
    }
    if (info->tsc_hz == 0 && max_leaf >= 0x16) {
        cpuid(0x16, 0, r);
        if (r[0] & 0xffff) {
            info->tsc_hz = (double)(r[0] & 0xffff) * 1e6;
            info->tsc_hz_source = "cpuid 0x16 (base frequency)";
        }
    }

    if (info->hypervisor) {
        cpuid(0x40000000, 0, r);
        info->hypervisor_max_leaf = r[0];
        memcpy(info->hypervisor_sig + 0, &r[1], 4);
        memcpy(info->hypervisor_sig + 4, &r[2], 4);
        memcpy(info->hypervisor_sig + 8, &r[3], 4);
        info->hypervisor_sig[12] = 0;
        /* The VMware-defined timing leaf, also offered by KVM and others:
         * EAX = TSC frequency in kHz.  Preferred over bare-metal leaves,
         * which a guest may see unscaled. */
        if (r[0] >= 0x40000010) {
            cpuid(0x40000010, 0, r);
            if (r[0]) {
                info->tsc_hz = (double)r[0] * 1e3;
                info->tsc_hz_source = "hypervisor leaf 0x40000010";
            }
        }
    }
}

/* The largest extended leaf (CPUID 0x80000000), asked once: the decision
 * asks it for two answers, and in a VM each CPUID traps to the hypervisor
 * (1.3 us measured on a KVM guest, Intel Xeon 0xcf). */
static _Atomic uint32_t max_extended_leaf_plus1; /* 0: not asked yet */

static uint32_t max_extended_leaf(void)
{
    uint32_t m = atomic_load_explicit(&max_extended_leaf_plus1, memory_order_relaxed);
    if (m)
        return m - 1;
    uint32_t r[4];
    cpuid(0x80000000, 0, r);
    atomic_store_explicit(&max_extended_leaf_plus1, r[0] + 1, memory_order_relaxed);
    return r[0];
}

void fc_cpu_probe_trust(struct fc_cpu_info *info)
{
    memset(info, 0, sizeof *info);
    info->tsc_hz_source = "";
    info->has_cpuid = 1;
    uint32_t r[4];
    uint32_t max_ext = max_extended_leaf();
    if (max_ext >= 0x80000007 && max_ext < 0x8000ffff) {
        cpuid(0x80000007, 0, r);
        info->invariant_tsc = (r[3] >> 8) & 1;
    }
    /* An invariant TSC is a TSC (CPUID.1:EDX[4] would cost one more CPUID;
     * AT_HWCAP does not carry it: glibc replaces it on x86-64). */
    info->has_tsc = info->invariant_tsc;
}

int fc_cpu_has_rdtscp(void)
{
    uint32_t r[4];
    uint32_t max_ext = max_extended_leaf();
    if (max_ext < 0x80000001 || max_ext >= 0x8000ffff)
        return 0;
    cpuid(0x80000001, 0, r);
    return (r[3] >> 27) & 1;
}

int fc_cpu_lfence_orders_rdtsc(int *amd)
{
    uint32_t r[4];
    char vendor[13];
    uint32_t max_leaf = cpuid_vendor(vendor);
    if (amd)
        *amd = fc_cpu_vendor_is_amd(vendor);
    if (!fc_cpu_vendor_is_amd(vendor))
        return 1; /* one CPUID: the rule needs no more */
    unsigned family = 0;
    if (max_leaf >= 1) {
        cpuid(1, 0, r);
        family = cpuid_family(r[0]);
    }
    int always = 0;
    uint32_t max_ext = max_extended_leaf();
    if (max_ext >= 0x80000021 && max_ext < 0x8000ffff) {
        cpuid(0x80000021, 0, r);
        always = (r[0] >> 2) & 1; /* LfenceAlwaysSerializing */
    }
    return fc_cpu_lfence_orders_rdtsc_for(vendor, family, always);
}

int fc_cpu_counter_self_synced(void)
{
    return 0;
}

#elif defined(__aarch64__)
#include <errno.h>
#include <sys/auxv.h>
#ifndef HWCAP2_ECV
#define HWCAP2_ECV (1UL << 19)
#endif

/* arm64: no CPUID.  The generic timer is the counter: CNTFRQ_EL0 gives its
 * frequency (firmware sets it; the kernel uses the same register), and the
 * architecture defines it to run at a fixed rate, in step across cores. */
void fc_cpu_probe(struct fc_cpu_info *info)
{
    uint64_t frq;
    memset(info, 0, sizeof *info);
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(frq));
    memcpy(info->vendor, "ARM", 4);
    info->has_tsc = 1;       /* the counter: always there for EL0 on Linux */
    info->invariant_tsc = 1; /* fixed rate by definition */
    info->tsc_hz = (double)frq;
    info->tsc_hz_source = "CNTFRQ_EL0";
}

void fc_cpu_probe_trust(struct fc_cpu_info *info)
{
    fc_cpu_probe(info);
}

int fc_cpu_has_rdtscp(void)
{
    return 0; /* no instruction reads the counter and names the CPU */
}

int fc_cpu_lfence_orders_rdtsc(int *amd)
{
    if (amd)
        *amd = 0;
    return 1; /* the ordered read is isb;mrs (or the self-synchronised view) */
}

int fc_cpu_counter_self_synced(void)
{
    int saved = errno; /* getauxval sets ENOENT where the kernel gives no AT_HWCAP2 */
    int ecv = (getauxval(AT_HWCAP2) & HWCAP2_ECV) != 0;
    errno = saved;
    return ecv;
}

#else

void fc_cpu_probe(struct fc_cpu_info *info)
{
    memset(info, 0, sizeof *info);
    info->tsc_hz_source = "";
}

void fc_cpu_probe_trust(struct fc_cpu_info *info)
{
    fc_cpu_probe(info);
}

int fc_cpu_has_rdtscp(void)
{
    return 0;
}

int fc_cpu_lfence_orders_rdtsc(int *amd)
{
    if (amd)
        *amd = 0;
    return 1;
}

int fc_cpu_counter_self_synced(void)
{
    return 0;
}

#endif

int fc_cpu_vendor_is_amd(const char *vendor)
{
    return strcmp(vendor, "AuthenticAMD") == 0 || strcmp(vendor, "HygonGenuine") == 0;
}

int fc_cpu_lfence_orders_rdtsc_for(const char *vendor, unsigned family, int lfence_always_serializing)
{
    if (!fc_cpu_vendor_is_amd(vendor))
        return 1; /* Intel's lfence waits for every earlier instruction */
    return family == 0xf || family == 0x11 || lfence_always_serializing;
}

const char *fc_hypervisor_name(const char *sig)
{
    static const struct { const char *sig, *name; } known[] = {
        {"KVMKVMKVM", "KVM"},      {"XenVMMXenVMM", "Xen"},   {"Microsoft Hv", "Hyper-V"},
        {"VMwareVMware", "VMware"}, {"TCGTCGTCGTCG", "QEMU TCG"}, {"ACRNACRNACRN", "ACRN"},
        {"bhyve bhyve ", "bhyve"},  {" lrpepyh  vr", "Parallels"}, {"VBoxVBoxVBox", "VirtualBox"},
        {"QNXQVMBSQG", "QNX"},     {"EVMMEVMMEVMM", "Intel EVMM"}, {"Linux KVM Hv", "KVM (Hyper-V emulation)"},
    };
    if (!sig || !*sig)
        return 0;
    for (unsigned i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strncmp(sig, known[i].sig, 12) == 0)
            return known[i].name;
    return 0;
}
