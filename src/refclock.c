/*
 * The reference: the kernel's own clocks.
 *
 * Reached through the vDSO's exported functions (found by walking its ELF
 * symbol table) or a raw system call; never through the clock_gettime
 * symbol, which the preload shim interposes and which would recurse.
 * Everything here is async-signal-safe.
 */
#define _GNU_SOURCE
#include "refclock.h"

#include "base.h"
#include "seam.h"

#include <stdatomic.h>

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define FC_VDSO_GETTIME "__vdso_clock_gettime"
#define FC_VDSO_GTOD "__vdso_gettimeofday"
#define FC_VDSO_VERSION "LINUX_2.6"
#elif defined(__aarch64__)
#define FC_VDSO_GETTIME "__kernel_clock_gettime"
#define FC_VDSO_GTOD "__kernel_gettimeofday"
#define FC_VDSO_VERSION "LINUX_2.6.39"
#else
#define FC_VDSO_GETTIME ""
#define FC_VDSO_GTOD ""
#define FC_VDSO_VERSION ""
#endif


static _Atomic(fc_gettime_fn) vdso_gettime;
static _Atomic(fc_gettimeofday_fn) vdso_gtod;
static _Atomic int refclock_ready;

/* Does version index `ndx` of the vDSO name `want`? */
static int version_matches(const ElfW(Verdef) *def, ElfW(Half) ndx, const char *strtab, const char *want)
{
    ndx &= 0x7fff;
    for (;;) {
        if (!(def->vd_flags & VER_FLG_BASE) && (def->vd_ndx & 0x7fff) == ndx) {
            const ElfW(Verdaux) *aux = (const ElfW(Verdaux) *)((const char *)def + def->vd_aux);
            return strcmp(strtab + aux->vda_name, want) == 0;
        }
        if (!def->vd_next)
            return 0;
        def = (const ElfW(Verdef) *)((const char *)def + def->vd_next);
    }
}

void *fc_vdso_sym(const char *name, const char *version)
{
    /* Without a vDSO (vdso=0, qemu-user) getauxval sets errno to ENOENT: a
     * successful clock read must leave errno alone. */
    int saved = errno;
    uintptr_t base = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
    errno = saved;
    if (!base || !*name)
        return 0;
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)base;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0)
        return 0;
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(base + eh->e_phoff);
    const ElfW(Dyn) *dyn = 0;
    uintptr_t bias = 0;
    int have_load = 0;
    for (int i = 0; i < eh->e_phnum; i++) {
        if (ph[i].p_type == PT_LOAD && !have_load) {
            bias = base + ph[i].p_offset - ph[i].p_vaddr;
            have_load = 1;
        } else if (ph[i].p_type == PT_DYNAMIC) {
            dyn = (const ElfW(Dyn) *)(base + ph[i].p_offset);
        }
    }
    if (!dyn || !have_load)
        return 0;

    const ElfW(Sym) *symtab = 0;
    const char *strtab = 0;
    const Elf32_Word *hash = 0;
    const Elf32_Word *gnu_hash = 0;
    const ElfW(Half) *versym = 0;
    const ElfW(Verdef) *verdef = 0;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        uintptr_t p = bias + dyn->d_un.d_ptr;
        switch (dyn->d_tag) {
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)p; break;
        case DT_STRTAB: strtab = (const char *)p; break;
        case DT_HASH: hash = (const Elf32_Word *)p; break;
        case DT_GNU_HASH: gnu_hash = (const Elf32_Word *)p; break;
        case DT_VERSYM: versym = (const ElfW(Half) *)p; break;
        case DT_VERDEF: verdef = (const ElfW(Verdef) *)p; break;
        }
    }
    if (!symtab || !strtab)
        return 0;

    /* Number of symbols: nchain of the SysV hash, or the end of the last
     * GNU hash chain. */
    size_t nsym = 0;
    if (hash) {
        nsym = hash[1];
    } else if (gnu_hash) {
        uint32_t nbuckets = gnu_hash[0], symoffset = gnu_hash[1], bloom_size = gnu_hash[2];
        const Elf32_Word *buckets = gnu_hash + 4 + bloom_size * (sizeof(ElfW(Addr)) / 4);
        const Elf32_Word *chain = buckets + nbuckets;
        uint32_t last = 0;
        for (uint32_t b = 0; b < nbuckets; b++)
            if (buckets[b] > last) last = buckets[b];
        if (last >= symoffset) {
            while (!(chain[last - symoffset] & 1)) last++;
            nsym = last + 1;
        }
    }

    for (size_t i = 0; i < nsym; i++) {
        const ElfW(Sym) *s = &symtab[i];
        int type = ELF64_ST_TYPE(s->st_info), bind = ELF64_ST_BIND(s->st_info);
        if (type != STT_FUNC || (bind != STB_GLOBAL && bind != STB_WEAK) || s->st_shndx == SHN_UNDEF)
            continue;
        if (strcmp(strtab + s->st_name, name) != 0)
            continue;
        if (version && versym && verdef && !version_matches(verdef, versym[i], strtab, version))
            continue;
        return (void *)(bias + s->st_value);
    }
    return 0;
}

void fc_refclock_init(void)
{
    if (atomic_load_explicit(&refclock_ready, memory_order_acquire))
        return;
    atomic_store_explicit(&vdso_gettime, (fc_gettime_fn)fc_vdso_sym(FC_VDSO_GETTIME, FC_VDSO_VERSION),
                          memory_order_relaxed);
    atomic_store_explicit(&vdso_gtod, (fc_gettimeofday_fn)fc_vdso_sym(FC_VDSO_GTOD, FC_VDSO_VERSION),
                          memory_order_relaxed);
    atomic_store_explicit(&refclock_ready, 1, memory_order_release);
}

fc_gettime_fn fc_refclock_vdso_gettime(void)
{
    fc_refclock_init();
    return atomic_load_explicit(&vdso_gettime, memory_order_relaxed);
}

static int syscall_gettime(clockid_t id, struct timespec *ts)
{
    long r = syscall(SYS_clock_gettime, id, ts);
    return r == 0 ? 0 : -errno;
}

fc_gettime_fn fc_refclock_direct(void)
{
    fc_gettime_fn f = fc_refclock_vdso_gettime();
    return f ? f : syscall_gettime;
}

fc_gettime_fn fc_refclock_answering(void)
{
    return fc_seam.kernel_gettime ? fc_seam.kernel_gettime : fc_refclock_direct();
}

int fc_answering_result(int r)
{
    if (r == 0)
        return 0;
    if (!fc_seam.kernel_gettime)
        errno = -r;
    return -1;
}

fc_gettimeofday_fn fc_refclock_vdso_gettimeofday(void)
{
    fc_refclock_init();
    return atomic_load_explicit(&vdso_gtod, memory_order_relaxed);
}

int fc_kernel_gettime(clockid_t id, struct timespec *ts)
{
    if (FC_UNLIKELY(fc_seam.kernel_gettime != 0))
        return fc_seam.kernel_gettime(id, ts);
    if (FC_UNLIKELY(!atomic_load_explicit(&refclock_ready, memory_order_acquire)))
        fc_refclock_init();
    fc_gettime_fn f = atomic_load_explicit(&vdso_gettime, memory_order_relaxed);
    if (FC_LIKELY(f != 0)) {
        /* The vDSO follows the raw syscall convention: -errno, errno untouched. */
        return fc_vdso_result(f(id, ts));
    }
    return (int)syscall(SYS_clock_gettime, id, ts);
}

int fc_kernel_gettimeofday(struct timeval *tv, void *tz)
{
    if (FC_UNLIKELY(fc_seam.kernel_gettime != 0) && tv) { /* the simulated kernel's REALTIME (tests) */
        struct timespec ts;
        int r = fc_seam.kernel_gettime(CLOCK_REALTIME, &ts);
        if (r != 0)
            return r;
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = (suseconds_t)(ts.tv_nsec / 1000);
        if (!tz)
            return 0;
        tv = 0; /* the time zone from the real kernel, below */
    }
    if (FC_UNLIKELY(!atomic_load_explicit(&refclock_ready, memory_order_acquire)))
        fc_refclock_init();
    fc_gettimeofday_fn f = atomic_load_explicit(&vdso_gtod, memory_order_relaxed);
    if (FC_LIKELY(f != 0)) {
        return fc_vdso_result(f(tv, tz));
    }
    return (int)syscall(SYS_gettimeofday, tv, tz);
}

int64_t fc_kernel_ns(clockid_t id)
{
    struct timespec ts;
    if (fc_kernel_gettime(id, &ts) != 0)
        return 0;
    return fc_ts_to_ns(&ts);
}
