#!/usr/bin/env python3
"""Benchmark of the preload shim: the same C and Java loops run plain (the
kernel's vDSO) and under `fastclock run`, ordered, --unordered and --mode
system, interleaved round by round in one run.  Prints Markdown tables of
median ns per call and the speed-up over the plain run.

usage: bench/shim/run.py [--build DIR] [--rounds N] [--clocksource NAME] [--no-java]

--clocksource switches the kernel's clocksource for the run (root only) and
always restores the previous one.
"""
import argparse
import glob
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CS_DIR = "/sys/devices/system/clocksource/clocksource0"


def read(path, default="?"):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def machine():
    model = "?"
    hyper = "bare metal"
    for line in read("/proc/cpuinfo", "").splitlines():
        if line.startswith("model name") and model == "?":
            model = line.split(":", 1)[1].strip()
        if line.startswith("flags") and " hypervisor" in line:
            hyper = "VM"
    if shutil.which("systemd-detect-virt"):
        vm = subprocess.run(["systemd-detect-virt", "--vm"], capture_output=True, text=True).stdout.strip()
        ct = subprocess.run(["systemd-detect-virt", "--container"], capture_output=True, text=True).stdout.strip()
        if vm and vm != "none":
            hyper = vm.upper() + " guest"
        if ct and ct != "none":
            hyper += f" ({ct} container)"
    libc = " ".join(platform.libc_ver())
    return (f"{model}, {hyper}, {os.cpu_count()} vCPUs, Linux {platform.release()}, {libc}, "
            f"clocksource `{read(CS_DIR + '/current_clocksource')}` "
            f"(available: {read(CS_DIR + '/available_clocksource')})")


def parse(out):
    res = {}
    for line in out.splitlines():
        if line.startswith("# shim "):  # shim_bench.c: whether the shim answered, and how
            res["# shim"] = line[len("# shim "):].strip()
            continue
        if line.startswith("#") or not line.strip():
            continue
        name, value = line.rsplit(" ", 1)
        res[name] = float(value)
    return res


def run(cmd, env_extra):
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "FASTCLOCK_MODE", "FASTCLOCK_CALIBRATOR", "FASTCLOCK_UNORDERED"):
        env.pop(k, None)
    env.update(env_extra)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"benchmark failed: {' '.join(cmd)}\n{p.stderr}")
    return parse(p.stdout)


def table(title, configs, results, sources):
    base = configs[0][0]
    print(f"\n{title}\n")
    head = "| call | " + " | ".join(
        f"{name} ns" + ("" if name == base else f" | × vs {base}") for name, _ in configs) + " |"
    print(head)
    print("|---" * (1 + 2 * len(configs) - 1) + "|")
    for src in sources:
        cells = []
        b = statistics.median(results[base][src])
        for name, _ in configs:
            v = statistics.median(results[name][src])
            cells.append(f"{v:.1f}")
            if name != base:
                cells.append(f"**{b / v:.2f}×**" if v > 0 else "-")
        print(f"| {src} | " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--clocksource")
    ap.add_argument("--no-java", action="store_true")
    args = ap.parse_args()

    build = os.path.abspath(args.build)
    fc = os.path.join(build, "bin", "fastclock")
    cbench = os.path.join(build, "bin", "fastclock-bench-shim")
    for f in (fc, cbench):
        if not os.access(f, os.X_OK):
            sys.exit(f"{f} is missing: build first (make build BUILD={args.build})")

    previous_cs = None
    if args.clocksource:
        previous_cs = read(CS_DIR + "/current_clocksource")
        with open(CS_DIR + "/current_clocksource", "w") as f:
            f.write(args.clocksource)
    try:
        bench(args, fc, cbench)
    finally:
        if previous_cs:
            with open(CS_DIR + "/current_clocksource", "w") as f:
                f.write(previous_cs)
            print(f"\n(clocksource restored to {read(CS_DIR + '/current_clocksource')})")


def bench(args, fc, cbench):
    print(f"Machine: {machine()}")
    print(f"Rounds: {args.rounds}, interleaved; each value is the median over rounds of a "
          f"per-process median of 41 batches.")
    shim = [fc, "run", "--"]
    c_configs = [
        ("plain", []),
        ("shim", shim),
        ("shim --unordered", [fc, "run", "--unordered", "--"]),
        ("shim --mode system", [fc, "run", "--mode", "system", "--"]),
    ]
    jdks = []
    if not args.no_java and shutil.which("javac"):
        for j in ["java"] + sorted(glob.glob("/usr/lib/jvm/temurin-25-jdk-*/bin/java"))[:1]:
            if shutil.which(j):
                ver = subprocess.run([j, "-version"], capture_output=True, text=True).stderr.splitlines()[0]
                jdks.append((j, ver))
    classes = tempfile.mkdtemp()
    try:
        if jdks:
            subprocess.run(["javac", "--release", "17", "-d", classes, os.path.join(HERE, "ShimBench.java")],
                           check=True)
        c_res = {name: {} for name, _ in c_configs}
        j_res = {}
        # What shim_bench.c must find in each configuration: a "shim" column
        # measured without the shim would show plain vDSO numbers as its own.
        shim_state = {"plain": "absent", "shim": "ordered", "shim --unordered": "unordered",
                      "shim --mode system": "ordered"}
        for r in range(args.rounds):
            for name, prefix in c_configs:
                out = run(prefix + [cbench], {})
                state = out.pop("# shim", "not said")
                if state != shim_state[name]:
                    sys.exit(f"benchmark {name!r}: the shim is {state}, expected {shim_state[name]}")
                for k, v in out.items():
                    c_res[name].setdefault(k, []).append(v)
            for java, ver in jdks:
                for name, prefix in c_configs[:3]:
                    out = run(prefix + [java, "-cp", classes, "ShimBench"], {})
                    state = out.pop("# shim", "not said")
                    if state != ("absent" if name == "plain" else "present"):
                        sys.exit(f"benchmark {name!r} ({ver}): the shim is {state} in the JVM")
                    for k, v in out.items():
                        j_res.setdefault(ver, {}).setdefault(name, {}).setdefault(k, []).append(v)
            print(f"  round {r + 1}/{args.rounds} done", file=sys.stderr)
        sources = list(next(iter(c_res.values())).keys())
        table("C, through libc's symbols (bench/shim/shim_bench.c), median ns per call:",
              c_configs, c_res, sources)
        sc = "syscall(SYS_clock_gettime, MONOTONIC)"
        mono = "clock_gettime(CLOCK_MONOTONIC)"
        if sc in c_res["plain"]:
            k = statistics.median(c_res["plain"][sc])
            o = statistics.median(c_res["shim"][mono])
            u = statistics.median(c_res["shim --unordered"][mono])
            print(f"\nWhere the vDSO falls back to a system call (clocksource hpet, acpi_pm, or xen without a "
                  f"stable TSC), clock_gettime costs at least the raw system call, {k:.1f} ns here (plus the "
                  f"clocksource read itself); the shim's ordered MONOTONIC read, measured here on clocksource "
                  f"{read(CS_DIR + '/current_clocksource')}, is {k / o:.1f}× faster than that, unordered {k / u:.1f}×: an extrapolation, "
                  f"which holds where fastclock keeps its counter there (`fastclock doctor` on that machine says).")
        for java, ver in jdks:
            res = j_res[ver]
            table(f"Java, {ver} (bench/shim/ShimBench.java), median ns per call:",
                  c_configs[:3], res, list(next(iter(res.values())).keys()))
    finally:
        shutil.rmtree(classes, ignore_errors=True)


if __name__ == "__main__":
    main()
