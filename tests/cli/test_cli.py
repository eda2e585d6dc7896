#!/usr/bin/env python3
"""End-to-end tests of the `fastclock` command: doctor and bench run as a
user would run them, their JSON is checked against the documented schemas
(docs/*.schema.json), and bad input must give a clear message and exit 2.

Environment (set by tests/cli/CMakeLists.txt):
  FASTCLOCK_BIN       the fastclock binary
  FASTCLOCK_DOCS      the docs directory (schemas)
  FASTCLOCK_FIXTURES  tests/cli/fixtures
"""
import csv
import io
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET

try:
    import jsonschema
except ImportError:  # a missing dependency is a failure, never a skip
    sys.exit("python3-jsonschema is missing: run scripts/ensure-deps.sh cli")

BIN = os.environ["FASTCLOCK_BIN"]
DOCS = os.environ["FASTCLOCK_DOCS"]
FIXTURES = os.environ["FASTCLOCK_FIXTURES"]
CLOCK_MONOTONIC_COARSE = 6  # Linux; Python's time module does not name it
# No progress line and no colours, whatever the terminal.
ENV = dict(os.environ, FASTCLOCK_NO_PROGRESS="1", NO_COLOR="1")


def run(*args, user=None, timeout=120):
    cmd = [BIN, *args]
    if user is not None:
        pw = pwd.getpwnam(user)
        cmd = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", *cmd]
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=timeout)
    p.elapsed = time.monotonic() - start
    return p


def schema(name):
    with open(os.path.join(DOCS, name)) as f:
        s = json.load(f)
    jsonschema.Draft7Validator.check_schema(s)
    return s


DOCTOR_SCHEMA = schema("doctor.schema.json")
BENCH_SCHEMA = schema("bench.schema.json")


class DoctorLive(unittest.TestCase):
    """The doctor on this machine."""

    def check_report(self, p, quick):
        self.assertIn(p.returncode, (0, 1), p.stderr)
        d = json.loads(p.stdout)
        jsonschema.validate(d, DOCTOR_SCHEMA)
        self.assertEqual(d["source"], "live")
        self.assertEqual(d["quick"], quick)
        self.assertEqual(d["verdict"]["exit_status"], p.returncode)
        self.assertEqual(p.returncode == 1, any(f["severity"] == "problem" for f in d["findings"]))
        # What this machine says must appear as it is.
        # FASTCLOCK_SYSROOT: where the emulator of a cross build looks first
        # (cmake/cross-run.cmake's stand-in), so the doctor saw that file.
        path = "/sys/devices/system/clocksource/clocksource0/current_clocksource"
        root = os.environ.get("FASTCLOCK_SYSROOT", "")
        if root and os.path.exists(root + path):
            path = root + path
        with open(path) as f:
            self.assertEqual(d["clocksource"]["current"], f.read().strip())
        self.assertEqual(d["system"]["cpus"], os.cpu_count())
        clocks = d["vdso"]["clocks"]
        self.assertEqual(set(clocks), {
            "CLOCK_REALTIME", "CLOCK_MONOTONIC", "CLOCK_PROCESS_CPUTIME_ID", "CLOCK_THREAD_CPUTIME_ID",
            "CLOCK_MONOTONIC_RAW", "CLOCK_REALTIME_COARSE", "CLOCK_MONOTONIC_COARSE", "CLOCK_BOOTTIME",
            "CLOCK_REALTIME_ALARM", "CLOCK_BOOTTIME_ALARM", "CLOCK_TAI", "gettimeofday", "time"})
        for name, c in clocks.items():
            # A call that fails here (CLOCK_*_ALARM without an RTC) has no verdict on the kernel.
            if c["supported"] is False:
                self.assertIsNone(c["enters_kernel"], name)
        mono = clocks["CLOCK_MONOTONIC"]
        self.assertGreater(mono["libc_ns"], 0)
        self.assertGreater(mono["syscall_ns"], 0)
        if not d["vdso"]["seccomp_verdict"] and "PR_SET_SECCOMP" in (d["vdso"]["seccomp_error"] or ""):
            # qemu-user emulates no seccomp: the verdicts are unknown, and say so.
            self.assertIsNone(mono["enters_kernel"])
        else:
            self.assertIn(mono["enters_kernel"], (True, False))
            self.assertEqual(clocks["CLOCK_PROCESS_CPUTIME_ID"]["enters_kernel"], True)
        self.assertEqual(clocks["CLOCK_MONOTONIC"]["resolution_ns"],
                         time.clock_getres(time.CLOCK_MONOTONIC) * 1e9)
        self.assertIn(d["fastclock"]["mode"], ("tsc", "system"))
        self.assertGreater(d["fastclock"]["ns_per_call"], 0)
        if os.cpu_count() > 1:
            self.assertIsNotNone(d["tsc"]["max_warp_cycles"])  # a pair to compare: the check ran
        else:
            self.assertIsNone(d["tsc"]["max_warp_cycles"])  # one CPU: no pair, no figure
        return d

    def test_under_the_shim_it_runs_again_without_it(self):
        # A container's ENV (docs/shim.md) or `fastclock run -- fastclock doctor`
        # preloads the shim: its clock_gettime must not be measured as libc's.
        shim = os.environ.get("FASTCLOCK_SHIM")
        if not shim:
            self.skipTest("this build has no preload shim")
        if os.environ.get("FASTCLOCK_SYSROOT"):
            self.skipTest("under qemu-user a program that runs itself again leaves the emulator's "
                          "settings (its -L root) behind")
        env = dict(ENV, LD_PRELOAD=shim)
        p = subprocess.run([BIN, "doctor", "--quick", "--json"], capture_output=True, text=True, env=env,
                           timeout=120)
        p.elapsed = 0
        notes = [l for l in p.stderr.splitlines() if "preload shim" in l]
        self.assertEqual(notes, ["fastclock: running again without the preload shim, whose clock_gettime "
                                 "would stand in for libc's"], p.stderr)
        self.check_report(p, quick=True)

    def test_quick_json_within_two_seconds(self):
        p = run("doctor", "--quick", "--json")
        self.check_report(p, quick=True)
        self.assertLess(p.elapsed, 2.0, "doctor --quick took %.2f s" % p.elapsed)

    def test_full_json_within_fifteen_seconds(self):
        p = run("doctor", "--json")
        d = self.check_report(p, quick=False)
        self.assertLess(p.elapsed, 15.0, "doctor took %.2f s" % p.elapsed)
        self.assertIsNotNone(d["vdso"]["clocks"]["time"]["observed_step_ns"])

    def test_the_counter_rate_is_shown_only_where_a_counter_is_read(self):
        # Mode system's status gives fastclock_ticks()' unit (1e9), not a counter's rate.
        env = dict(ENV, FASTCLOCK_MODE="system")
        p = subprocess.run([BIN, "doctor", "--quick", "--json"], capture_output=True, text=True, env=env, timeout=120)
        d = json.loads(p.stdout)
        self.assertEqual(d["fastclock"]["mode"], "system", p.stderr)
        self.assertIsNone(d["fastclock"]["counter_hz"])
        p = subprocess.run([BIN, "doctor", "--quick"], capture_output=True, text=True, env=env, timeout=120)
        self.assertNotIn("MHz", [l for l in p.stdout.splitlines() if l.strip().startswith("mode ")][0])

    def test_text_report_has_a_verdict_and_every_section(self):
        p = run("doctor", "--quick")
        self.assertIn(p.returncode, (0, 1), p.stderr)
        lines = p.stdout.splitlines()
        self.assertTrue(lines[0].startswith("fastclock doctor "), lines[0])
        self.assertRegex(lines[1], r"^verdict: (OK|WARNING|PROBLEM) - ")
        counter = "Counter (generic timer, cntvct_el0)" if ", aarch64\n" in p.stdout else "Counter (TSC)"
        for section in ("Machine", counter, "Clocksource and kernel", "Clocks", "Synchronisation",
                        "fastclock", "Findings (most important first)"):
            self.assertIn("\n" + section + "\n", p.stdout)
        self.assertNotIn("\033[", p.stdout, "colours on a pipe")
        self.assertEqual(p.stderr, "", "a progress line on a pipe")
        self.assertTrue(all(len(l) <= 110 for l in lines if "`" not in l), "unwrapped lines")
        # The ordered read is described with the instruction this process chose, the one the mode
        # row names (it used to say lfence;rdtsc where rdtscp ran).
        m = re.search(r"counter (rdtscp|lfence;rdtsc) at", p.stdout)
        if re.search(r"\n  mode +tsc ", p.stdout):  # the counter answers: the mode row names its read
            self.assertRegex(p.stdout, r"counter \S.* at [0-9.]+ MHz")
        if m:
            ordered = re.search(r"ordered read .*?\(([^)]*)\)", p.stdout.replace("\n", " "))
            self.assertIsNotNone(ordered, p.stdout)
            self.assertEqual(ordered.group(1), m.group(1))

    def test_ordinary_user(self):
        """What it cannot read it reports as unknown, with the reason, and carries on."""
        user = "nobody" if os.geteuid() == 0 else None
        p = run("doctor", "--quick", "--json", user=user)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        d = json.loads(p.stdout)
        jsonschema.validate(d, DOCTOR_SCHEMA)
        log = d["kernel"]["log"]
        if not log["readable"]:
            self.assertTrue(log["error"])
            self.assertIn("kernel-log-unreadable", [f["id"] for f in d["findings"]])
            # What an unread log would say is unknown: null, not "no".
            for key in ("records", "tsc_marked_unstable", "boot_warp_cycles"):
                self.assertIsNone(log[key], key)
        with open("/proc/sys/kernel/dmesg_restrict") as f:
            if user and f.read().strip() == "1":
                self.assertFalse(log["readable"])
                self.assertEqual(log["error"], "operation not permitted")
        # The seccomp verdict needs no privilege.
        if not d["vdso"]["seccomp_verdict"] and "PR_SET_SECCOMP" in (d["vdso"]["seccomp_error"] or ""):
            self.skipTest("seccomp filters unavailable here (qemu-user does not emulate them): "
                          + d["vdso"]["seccomp_error"])
        self.assertTrue(d["vdso"]["seccomp_verdict"], d["vdso"]["seccomp_error"])


# Exit status and finding ids per capture: the doctor's binary end to end.
EXPECTED = {
    "kvm-tsc": (0, ["clock-unsynchronized", "fastclock-gain"]),
    "baremetal-tsc": (0, ["cmdline-tsc-reliable", "fastclock-gain"]),
    "hpet": (1, ["clocksource-syscall", "cmdline-clocksource", "fastclock-gain"]),
    "xen-hvm": (1, ["clocksource-syscall", "fastclock-gain"]),
    "xen-pv": (1, ["clocksource-syscall", "tsc-unavailable", "tsc-not-invariant", "clock-unsynchronized",
                   "fastclock-system"]),
    "kvm-clock": (0, ["leap-pending", "watchdog-skipped", "clocksource-paravirt", "fastclock-gain"]),
    "kvm-noinvtsc": (0, ["tsc-not-invariant", "tsc-frequency-mismatch", "sync-maxerror", "fastclock-system"]),
    "tsc-unstable": (1, ["clocksource-syscall", "tsc-unstable", "fastclock-system"]),
    "tsc-warp": (1, ["tsc-warp", "clocksource-syscall", "tsc-unstable", "clocksource-skew", "tsc-adjust",
                     "fastclock-system"]),
    "arm64": (0, ["counter-resolution", "fastclock-gain"]),
    "arm64-erratum": (1, ["clocksource-syscall", "timer-erratum", "counter-resolution", "fastclock-system"]),
    "container-minimal": (0, ["clocksource-unknown", "seccomp-unavailable", "fastclock-system",
                              "kernel-log-unreadable"]),
    "no-vdso": (1, ["no-vdso", "fastclock-gain"]),
}


class DoctorCaptures(unittest.TestCase):
    """The doctor on captures of other machines (--root)."""

    def test_every_fixture_is_tested(self):
        self.assertEqual(set(os.listdir(FIXTURES)) - {"README.md"}, set(EXPECTED))

    def test_json_validates_and_findings_match(self):
        for name, (status, ids) in sorted(EXPECTED.items()):
            with self.subTest(fixture=name):
                p = run("doctor", "--json", "--root", os.path.join(FIXTURES, name))
                self.assertEqual(p.returncode, status, p.stderr)
                d = json.loads(p.stdout)
                jsonschema.validate(d, DOCTOR_SCHEMA)
                self.assertEqual(d["source"], "capture")
                self.assertEqual([f["id"] for f in d["findings"]], ids)
                self.assertEqual(d["verdict"]["exit_status"], status)
                self.assertLess(p.elapsed, 1.0, "a capture measures nothing")
                if not d["kernel"]["log"]["readable"]:  # unknown, not "no"
                    self.assertIsNone(d["kernel"]["log"]["tsc_marked_unstable"])

    def test_text_reports(self):
        for name, (status, ids) in sorted(EXPECTED.items()):
            with self.subTest(fixture=name):
                p = run("doctor", "--root", os.path.join(FIXTURES, name))
                self.assertEqual(p.returncode, status, p.stderr)
                for i in ids:
                    self.assertIn(i, p.stdout)
                self.assertIn("capture " + os.path.join(FIXTURES, name), p.stdout)

    def test_hpet_report_shows_the_fix(self):
        p = run("doctor", "--json", "--root", os.path.join(FIXTURES, "hpet"))
        d = json.loads(p.stdout)
        self.assertEqual(d["clocksource"]["current"], "hpet")
        self.assertEqual(d["clocksource"]["available"], ["tsc", "hpet", "acpi_pm"])
        self.assertEqual(d["clocksource"]["vdso_capable"], "no")
        self.assertEqual(d["kernel"]["cmdline"]["clocksource"], "hpet")
        self.assertTrue(d["vdso"]["clocks"]["CLOCK_MONOTONIC"]["enters_kernel"])
        top = d["findings"][0]
        self.assertEqual(top["severity"], "problem")
        self.assertIn("echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource", top["fix"])
        self.assertEqual(d["tsc"]["frequency_source"], "kernel log, refined calibration")
        self.assertEqual(d["tsc"]["frequency_hz"], 2394455000)

    def test_capture_round_trip(self):
        """--capture writes what --root reads back: the same facts and findings."""
        if os.environ.get("FASTCLOCK_SYSROOT"):
            self.skipTest("under qemu-user /proc/cpuinfo is the host's (x86-64): the arm64 doctor reads it live, "
                          "but a capture of an aarch64 machine cannot carry it back")
        tmp = tempfile.mkdtemp(prefix="fastclock-capture-")
        try:
            live = run("doctor", "--quick", "--json", "--capture", tmp)
            self.assertIn(live.returncode, (0, 1), live.stderr)
            back = run("doctor", "--json", "--root", tmp)
            self.assertEqual(back.returncode, live.returncode, back.stderr)
            a, b = json.loads(live.stdout), json.loads(back.stdout)
            for key in ("clocksource", "tsc", "hypervisor", "cpu", "sync"):
                self.assertEqual(a[key], b[key], key)
            self.assertEqual([f["id"] for f in a["findings"]], [f["id"] for f in b["findings"]])
            for name, c in a["vdso"]["clocks"].items():
                self.assertEqual(c["enters_kernel"], b["vdso"]["clocks"][name]["enters_kernel"], name)
                if c["libc_ns"] is not None:
                    # The capture keeps 3 decimals, the JSON prints 2: one rounding step apart at most.
                    self.assertAlmostEqual(c["libc_ns"], b["vdso"]["clocks"][name]["libc_ns"], delta=0.0101)
        finally:
            shutil.rmtree(tmp)


class BadInput(unittest.TestCase):
    """A clear message on stderr and exit 2; nothing on stdout."""

    def check(self, *args, expect):
        p = run(*args)
        self.assertEqual(p.returncode, 2, f"{args}: {p.stdout}{p.stderr}")
        self.assertIn(expect, p.stderr, args)
        self.assertEqual(p.stdout, "", args)

    def test_doctor(self):
        self.check("doctor", "--bogus", expect="unknown option '--bogus'")
        self.check("doctor", "--root", expect="--root needs a directory")
        self.check("doctor", "--root", "--json", expect="--root needs a directory")
        self.check("doctor", "--capture=", expect="--capture needs a directory")
        self.check("doctor", "--rootx", expect="unknown option '--rootx'")
        self.check("doctor", "--json", "--json", expect="--json is given twice")
        self.check("doctor", "--root", FIXTURES + "/hpet", "--root=" + FIXTURES + "/xen-pv", expect="--root is given twice")
        self.check("doctor", "--json=1", expect="--json takes no value")
        self.check("doctor", "extra", expect="unexpected argument 'extra'")
        self.check("doctor", "-x", expect="unknown option '-x'")
        self.check("doctor", "--json", "-xh", expect="unknown option '-x'")  # in a cluster, not '--json'
        self.check("doctor", "--root", "/nonexistent/fastclock", expect="No such file or directory")
        self.check("doctor", "--root", FIXTURES + "/hpet", "--capture", "/tmp/x", expect="cannot be combined")

    def test_doctor_root_that_is_not_a_capture(self):
        # Without doctor-facts every fact would silently be "unknown".
        tmp = tempfile.mkdtemp(prefix="fastclock-nofacts-")
        try:
            shutil.copytree(os.path.join(FIXTURES, "kvm-tsc", "sys"), os.path.join(tmp, "sys"))
            self.check("doctor", "--root", tmp, expect="doctor-facts: no such file (not a capture")
        finally:
            shutil.rmtree(tmp)

    def test_unwritable_stdout_is_an_error(self):
        # A report, a usage or a version that did not reach stdout (a full
        # disk, here /dev/full) must not exit as if it had.
        cases = [(["--version"], 2), (["--help"], 2), (["doctor", "--help"], 2), (["bench", "--help"], 2),
                 (["run", "--help"], 125), (["doctor", "--root", os.path.join(FIXTURES, "kvm-tsc")], 2),
                 (["doctor", "--json", "--root", os.path.join(FIXTURES, "hpet")], 2)]
        for args, status in cases:
            with open("/dev/full", "w") as full:
                p = subprocess.run([BIN, *args], stdout=full, stderr=subprocess.PIPE, text=True, env=ENV,
                                   timeout=120)
            self.assertEqual(p.returncode, status, f"{args}: {p.stderr}")
            self.assertIn("cannot write to standard output: No space left on device", p.stderr, args)

    def test_doctor_broken_capture(self):
        tmp = tempfile.mkdtemp(prefix="fastclock-bad-")
        try:
            with open(os.path.join(tmp, "doctor-facts"), "w") as f:
                f.write("cpuid.invariant_tsc = 1\nclock.CLOCK_MONOTONIC.libc_ns = fast\n")
            self.check("doctor", "--root", tmp, expect="clock.CLOCK_MONOTONIC.libc_ns = 'fast' is not a number")
        finally:
            shutil.rmtree(tmp)

    def test_bench(self):
        self.check("bench", "--bogus", expect="unknown option '--bogus'")
        self.check("bench", "--threads", "0", expect="--threads: thread counts start at 1")
        self.check("bench", "--threads", "1,x", expect="--threads: cannot read '1,x'")
        self.check("bench", "--threads", expect="--threads needs a value")
        self.check("bench", "--seconds", "-1", expect="--seconds needs a number of seconds from 0.1 to 3600")
        self.check("bench", "--seconds", "abc", expect="(got 'abc')")
        self.check("bench", "--seconds=0", expect="--seconds needs")
        self.check("bench", "--json", "--csv", expect="--json and --csv cannot be combined")
        self.check("bench", "--json=yes", expect="--json takes no value")
        # A forgotten value is not taken from the next option, and nothing is given twice.
        self.check("bench", "--svg", "--json", expect="--svg needs a value")
        self.check("bench", "--seconds", "1", "--seconds", "2", expect="--seconds is given twice")
        self.check("bench", "--json", "--json", expect="--json is given twice")
        # An abbreviation is taken only where it names one option, and then
        # counts as that option.
        self.check("bench", "--s", "1", expect="option '--s' is ambiguous: --seconds, --svg")
        self.check("bench", "--sec=1", "--seconds", "2", expect="--seconds is given twice")
        self.check("bench", "--json", "later", expect="unexpected argument 'later'")
        self.check("bench", "--svg", "/nonexistent/dir/chart.svg", expect="cannot write --svg /nonexistent/dir/chart.svg")

    def test_unwritable_svg_is_refused_before_measuring(self):
        tmp = tempfile.mkdtemp(prefix="fastclock-svg-")
        try:
            p = run("bench", "--svg", tmp)  # a directory: unwritable even for root
            self.assertEqual(p.returncode, 2)
            self.assertIn("Is a directory", p.stderr)
            self.assertLess(p.elapsed, 1.0, "measured before checking the --svg path")
        finally:
            shutil.rmtree(tmp)

    def test_top_level(self):
        p = run("frobnicate")
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown command 'frobnicate'", p.stderr)
        self.assertEqual(run("doctor", "--help").returncode, 0)
        self.assertEqual(run("bench", "--help").returncode, 0)


class Bench(unittest.TestCase):
    """A short bench, once, in each output format."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="fastclock-bench-")
        cls.svg = os.path.join(cls.tmp, "chart.svg")
        cls.p = run("bench", "--json", "--seconds", "0.4", "--threads", "1,2", "--svg", cls.svg)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_json(self):
        self.assertEqual(self.p.returncode, 0, self.p.stderr)
        d = json.loads(self.p.stdout)
        jsonschema.validate(d, BENCH_SCHEMA)
        self.assertEqual(d["config"]["threads"], [1, 2])
        src = {s["name"]: s for s in d["sources"]}
        counters = ({"cntvct_el0", "cntvctss_el0", "isb;cntvct_el0"} if "cntvct_el0" in src
                    else {"rdtsc", "rdtscp", "lfence;rdtsc"})
        expected = counters | {"fastclock_mono_ns", "fastclock_mono_ns_unordered",
                    "fastclock_real_ns", "fastclock_real_ns_unordered", "fastclock_mono_coarse_ns",
                    "fastclock_real_coarse_ns", "fastclock_ticks", "fastclock_mono_ns_inline",
                    "fastclock_mono_ns_unordered_inline", "fastclock_mono_coarse_ns_inline", "gettimeofday", "time",
                    "syscall(clock_gettime, CLOCK_MONOTONIC)", "clock_gettime(CLOCK_MONOTONIC)",
                    "clock_gettime(CLOCK_REALTIME)", "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)",
                    "clock_gettime(CLOCK_MONOTONIC_COARSE)", "clock_gettime(CLOCK_TAI)"}
        self.assertTrue(expected <= set(src), expected - set(src))
        for s in d["sources"]:
            if s["usable"]:
                self.assertLessEqual(s["min_ns"], s["median_ns"], s["name"])
                self.assertLessEqual(s["median_ns"], s["max_ns"], s["name"])
                self.assertGreaterEqual(s["batches"], 5, s["name"])
            else:
                self.assertTrue(s["error"], s["name"])
        # The ratios are against the references' own medians.
        bare = "cntvct_el0" if "cntvct_el0" in src else "rdtsc"  # the bare counter read: the unit
        self.assertEqual(src[bare]["x_rdtsc"], 1.0)
        self.assertEqual(src["clock_gettime(CLOCK_MONOTONIC)"]["x_clock_gettime_monotonic"], 1.0)
        ratio = src["syscall(clock_gettime, CLOCK_MONOTONIC)"]["median_ns"] / src[bare]["median_ns"]
        self.assertAlmostEqual(src["syscall(clock_gettime, CLOCK_MONOTONIC)"]["x_rdtsc"], ratio, places=2)
        # What the fastclock rows measured: the status before the cost phase,
        # after it and at the end, and a warning for every change between them.
        fc = d["fastclock"]
        self.assertEqual(fc["linkage"], "static")
        self.assertIn(fc["ordered_reads"], ("counter", "kernel"))
        self.assertIn(fc["real_source"], ("line", "vdso"))
        for later in (fc["after_cost"], fc["at_end"]):
            self.assertGreaterEqual(later["fallback_reads"], fc["fallback_reads"])
        # A change of read path: mode, counter, who answers REALTIME, or
        # fallback reads beyond 0.1% of the phase's fastclock reads (a few
        # are the design where a line ran out while the calibrator was late:
        # a busy machine).
        reads = sum(s.get("batches", 0) * s.get("calls_per_batch", 0) for s in d["sources"]
                    if s["group"] == "fastclock")
        fell_back = fc["after_cost"]["fallback_reads"] - fc["fallback_reads"]
        changed = (any(fc["after_cost"][k] != fc[k] for k in ("mode", "counter", "real_source"))
                   or fell_back > 1e-3 * reads)
        self.assertEqual(changed, any(w.startswith("changed during the cost phase") for w in fc["warnings"]),
                         fc["warnings"])
        self.assertEqual(changed, "fastclock changed during the cost phase" in self.p.stderr, self.p.stderr)
        # The ordered floor: the fenced read the status names, or none where
        # the kernel answers the ordered reads.
        if fc["counter"] in counters - {bare}:
            self.assertEqual(fc["ordered_floor"], fc["counter"])
            self.assertEqual(src[fc["counter"]]["x_ordered_floor"], 1.0)
            ratio = src["fastclock_mono_ns"]["median_ns"] / src[fc["counter"]]["median_ns"]
            self.assertAlmostEqual(src["fastclock_mono_ns"]["x_ordered_floor"], ratio, places=2)
        else:
            self.assertIsNone(fc["ordered_floor"])
            self.assertTrue(all(s["x_ordered_floor"] is None for s in d["sources"]))
        if fc["ordered_reads"] == "kernel":
            self.assertTrue(fc["counter"].startswith("clock_gettime"), fc["counter"])
        # fastclock_ticks: its step in ns through the library's own conversion.
        ticks = src["fastclock_ticks"]
        self.assertGreater(fc["ticks_ns_per_tick"], 0)
        if ticks["step"] is not None:
            self.assertAlmostEqual(ticks["step_ns"], ticks["step"] * fc["ticks_ns_per_tick"], delta=0.1)
        # Granularity: the coarse clock moves by its resolution, time() by a second.
        coarse = src["clock_gettime(CLOCK_MONOTONIC_COARSE)"]
        res = time.clock_getres(CLOCK_MONOTONIC_COARSE) * 1e9
        # A whole number of ticks: one, or several where the host held the
        # guest's vCPU across ticks for the whole watch (its kernel then
        # advances the clock several at once: 2 under a CPU hog, 4 and 6 with
        # builds beside it).  A wrong unit or a step that is not a tick fails.
        ticks = round(coarse["step_ns"] / res)
        self.assertGreaterEqual(ticks, 1, coarse["step_ns"])
        self.assertAlmostEqual(coarse["step_ns"], ticks * res, delta=res * 0.1)
        self.assertEqual(src["time"]["step"], 1)
        self.assertEqual(src["time"]["step_unit"], "s")
        self.assertEqual(src["gettimeofday"]["step_ns"], 1000)
        # Thread scaling: every source has a point for 1 and 2 threads.
        self.assertGreater(len(d["scaling"]), 5)
        for sc in d["scaling"]:
            self.assertEqual([pt["threads"] for pt in sc["points"]], [1, 2], sc["name"])
            for pt in sc["points"]:
                self.assertGreater(pt["calls_per_s"], 0, sc["name"])
                self.assertGreater(pt["ns_per_call"], 0, sc["name"])

    def test_svg(self):
        self.assertEqual(self.p.returncode, 0, self.p.stderr)
        root = ET.parse(self.svg).getroot()
        ns = "{http://www.w3.org/2000/svg}"
        self.assertEqual(root.tag, ns + "svg")
        d = json.loads(self.p.stdout)
        usable = [s for s in d["sources"] if s["usable"]]
        bars = [r for r in root.iter(ns + "rect") if r.find(ns + "title") is not None]
        self.assertEqual(len(bars), len(usable))
        lines = list(root.iter(ns + "polyline"))
        self.assertEqual(len(lines), len(d["scaling"]))
        text = "".join(root.itertext())
        self.assertIn("Cost per call", text)
        self.assertIn("Thread scaling", text)

    def test_csv_and_text(self):
        p = run("bench", "--csv", "--seconds", "0.2", "--threads", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = list(csv.DictReader(io.StringIO(p.stdout)))
        self.assertEqual(list(rows[0]), ["section", "source", "group", "threads", "median_ns", "min_ns", "max_ns",
                                         "x_rdtsc", "x_clock_gettime_monotonic", "calls_per_s", "step_ns",
                                         "x_ordered_floor"])
        sections = {r["section"] for r in rows}
        self.assertEqual(sections, {"cost", "scaling"})
        names = {r["source"] for r in rows}
        self.assertIn("syscall(clock_gettime, CLOCK_MONOTONIC)", names)  # quoted: it has a comma
        for r in rows:
            if r["section"] == "cost":
                self.assertGreater(float(r["median_ns"]), 0)
            else:
                self.assertEqual(r["threads"], "1")
                self.assertGreater(float(r["calls_per_s"]), 0)
        t = run("bench", "--seconds", "0.2", "--threads", "1")
        self.assertEqual(t.returncode, 0, t.stderr)
        for heading in ("Cost per call", "Thread scaling", "x rdtsc", "x floor", "smallest step",
                        "fastclock reads (fastclock_status): counter ", "linkage: fastclock is linked statically",
                        "fastclock-bench-core"):
            self.assertIn(heading, t.stdout)
        # Nothing but the warnings the bench may print on a busy machine
        # (a read path that changed mid-run): no progress line on a pipe.
        others = [l for l in t.stderr.splitlines() if l and not l.startswith("fastclock bench: ")]
        self.assertEqual(others, [], "a progress line on a pipe")


if __name__ == "__main__":
    unittest.main()
