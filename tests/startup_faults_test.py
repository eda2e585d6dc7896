#!/usr/bin/env python3
"""A process that reads the time once touches few pages of fastclock's.

Two checks.  The layout, which decides it: in libfastclock.so every small
writable object (under 1 KB: the state that loading and a first read touch)
lies on one page or two, with no large object among them -- the large
zeroed ones are kept apart (src/base.h, FC_LARGE_BSS).  And the effect, in
page faults rather than time (a fault costs ~1-2 us in a VM; the count is
the same in every run, where wall time is noise): each variant's minor
faults (ru_minflt of the reaped child, median of several runs) against its
floor in the same run -- the library linked (lazy calibrator) against an
empty library preloaded into the plain program, libfastclock.a linked
statically against the plain program.  With the large objects among the
small state, a one-read process took 11 faults more than its floor linked
and 9 static (AMD EPYC 1Ah guest); 3 and 4 apart.

usage: startup_faults_test.py PLAIN LINKED LIBRARY EMPTY_SO STATIC
"""
import os
import resource
import statistics
import subprocess
import sys

RUNS = 15
EXTRA_ALLOWED = 6
SMALL = 1024
PAGE = 4096


def faults(argv, env):
    counts = []
    for _ in range(RUNS):
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
        subprocess.run(argv, env=env, check=True)
        counts.append(resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before)
    return statistics.median(counts)


def sections(library):
    """name -> (address, size) of the library's sections (readelf -SW)."""
    out = subprocess.run(["readelf", "-SW", library], check=True, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        f = line.replace("[ ", "[").split()
        if len(f) > 5 and f[0].startswith("[") and f[1].startswith("."):
            found[f[1]] = (int(f[3], 16), int(f[5], 16))
    return found


def layout_problems(library):
    """Small writable objects on at most two pages, no large one among them."""
    sec = sections(library)
    if ".data" not in sec or ".bss" not in sec:
        return ["no .data or .bss section found (readelf)"]
    start, end = sec[".data"][0], sec[".bss"][0] + sec[".bss"][1]
    if ".lbss" in sec:
        end = max(end, sec[".lbss"][0] + sec[".lbss"][1])
    out = subprocess.run(["nm", "-S", "--defined-only", library], check=True, capture_output=True,
                         text=True).stdout
    objs = []
    for line in out.splitlines():
        f = line.split()
        # .data, .bss and .lbss only (TLS symbols show their offsets in the TLS block)
        if len(f) == 4 and f[2] in "bBdD" and start <= int(f[0], 16) < end:
            objs.append((int(f[0], 16), int(f[1], 16), f[3]))
    small = [o for o in objs if o[1] < SMALL]
    if not small:
        return ["no small writable objects found (nm)"]
    lo, hi = min(o[0] for o in small), max(o[0] + o[1] for o in small)
    bad = []
    pages = (hi - 1) // PAGE - lo // PAGE + 1
    if pages > 2:
        bad.append(f"the small state spans {pages} pages ({lo:#x}-{hi:#x})")
    for a, size, name in objs:
        if size >= SMALL and a < hi and a + size > lo:
            bad.append(f"{name} ({size} bytes at {a:#x}) lies among the small state")
    print(f"layout: {len(small)} small writable objects on {pages} page(s), {lo:#x}-{hi:#x}")
    return bad


def needs_libpthread(path):
    """glibc before 2.34: the library pulls in libpthread, which the floors
    must load too, or its faults count against fastclock."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "libpthread.so" in line and "=>" in line:
            return line.split("=>")[1].split("(")[0].strip()
    return None


def main():
    plain, linked, library, empty, static = sys.argv[1:6]
    bad = layout_problems(library)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FASTCLOCK_", "LD_"))}
    env["FASTCLOCK_CALIBRATOR"] = "lazy"
    pthread = needs_libpthread(library)
    floor_env = dict(env, LD_PRELOAD=pthread) if pthread else env
    base = faults([plain], floor_env)
    floor = faults([plain], dict(env, LD_PRELOAD=" ".join(p for p in (pthread, empty) if p)))
    lib = faults([linked], dict(env, LD_PRELOAD=library))
    stat = faults([static], env)
    print(f"minor faults, median of {RUNS}: plain {base}, empty library {floor}, "
          f"linked (lazy) {lib} (+{lib - floor}), static (lazy) {stat} (+{stat - base})")
    if lib - floor > EXTRA_ALLOWED:
        bad.append(f"linked: {lib - floor} faults beyond an empty library's (allowed {EXTRA_ALLOWED})")
    if stat - base > EXTRA_ALLOWED:
        bad.append(f"static: {stat - base} faults beyond the plain program's (allowed {EXTRA_ALLOWED})")
    for b in bad:
        print("FAIL " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
