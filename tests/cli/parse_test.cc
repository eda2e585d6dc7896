// Parsers of what the kernel publishes about time, on fixture files in the
// real formats (/proc/cpuinfo, /dev/kmsg and dmesg lines, DMI, comm) and on
// single lines quoted from real kernels.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_test_util.h"

extern "C" {
#include "benchrun.h"
#include "json.h"
#include "kernel.h"
#include "util.h"
}

using clitest::fixture;
using clitest::slurp;

// ---- /proc/cpuinfo ---------------------------------------------------------

TEST(CpuinfoParse, IntelServerFirstBlockAndCount)
{
    cpuinfo ci;
    std::string text = slurp(fixture("tsc-warp/proc/cpuinfo"));
    ASSERT_FALSE(text.empty());
    cpuinfo_parse(text.c_str(), &ci);
    EXPECT_EQ(ci.processors, 16);
    EXPECT_STREQ(ci.vendor_id, "GenuineIntel");
    EXPECT_STREQ(ci.model_name, "Intel(R) Xeon(R) CPU E5-2630 v3 @ 2.40GHz");
    EXPECT_FALSE(ci.is_arm);
    EXPECT_TRUE(fc_word_in_list(ci.flags, "constant_tsc"));
    EXPECT_TRUE(fc_word_in_list(ci.flags, "nonstop_tsc"));
    EXPECT_FALSE(fc_word_in_list(ci.flags, "tsc_reliable"));
}

TEST(CpuinfoParse, CapturedKvmGuest)
{
    cpuinfo ci;
    cpuinfo_parse(slurp(fixture("kvm-tsc/proc/cpuinfo")).c_str(), &ci);
    EXPECT_EQ(ci.processors, 2);
    EXPECT_STREQ(ci.vendor_id, "AuthenticAMD");
    EXPECT_TRUE(fc_word_in_list(ci.flags, "tsc_known_freq"));
    EXPECT_TRUE(fc_word_in_list(ci.flags, "hypervisor"));
}

TEST(CpuinfoParse, Arm64NamesTheCoreFromMidr)
{
    cpuinfo ci;
    cpuinfo_parse(slurp(fixture("arm64/proc/cpuinfo")).c_str(), &ci);
    EXPECT_TRUE(ci.is_arm);
    EXPECT_EQ(ci.processors, 4);
    EXPECT_EQ(ci.implementer, 0x41u);
    EXPECT_EQ(ci.part, 0xd0cu);
    EXPECT_STREQ(ci.model_name, "ARM Neoverse-N1");
    EXPECT_TRUE(fc_word_in_list(ci.flags, "asimd"));

    cpuinfo unknown;
    cpuinfo_parse("processor\t: 0\nCPU implementer\t: 0x99\nCPU part\t: 0x123\n", &unknown);
    EXPECT_STREQ(unknown.model_name, "arm64 implementer 0x99 part 0x123");
}

TEST(CpuinfoParse, EmptyAndGarbageGiveNothing)
{
    cpuinfo ci;
    cpuinfo_parse("", &ci);
    EXPECT_EQ(ci.processors, 0);
    EXPECT_STREQ(ci.flags, "");
    cpuinfo_parse("no colons here\n\n:::\nflags\n", &ci);
    EXPECT_EQ(ci.processors, 0);
    EXPECT_STREQ(ci.flags, "");
}

// An x86 cpuinfo without a flags line (a trimmed capture) leaves the flags
// unknown: never "no invariant TSC, no hypervisor" from a missing line.
TEST(CpuinfoParse, NoFlagsLineLeavesTheFlagsUnknown)
{
    char dir[] = "/tmp/fc-cpuinfo-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    std::string proc = std::string(dir) + "/proc";
    ASSERT_EQ(mkdir(proc.c_str(), 0700), 0);
    std::string path = proc + "/cpuinfo";
    FILE *out = fopen(path.c_str(), "w");
    ASSERT_NE(out, nullptr);
    fputs("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)\n\n", out);
    fclose(out);
    static doctor_facts f;
    facts_init(&f);
    probe_files(&f, dir);
    EXPECT_EQ(f.cpuinfo_err, ENODATA);
    for (int i = 0; i < 6; i++)
        EXPECT_EQ(f.flag[i], TRI_UNKNOWN) << i;
    unlink(path.c_str());
    rmdir(proc.c_str());
    rmdir(dir);
}

// A line longer than the parser's buffer is cut, not split: its tail is
// never read as a line of its own.
TEST(CpuinfoParse, AnOverlongLineIsCutNotSplit)
{
    std::string flags = "flags\t: " + std::string(4300, 'x');
    flags.replace(4200, 13, "processor\t: 9"); // where a split would start the next "line"
    std::string text = "processor\t: 0\n" + flags + "\nmodel name\t: Example CPU\n";
    cpuinfo ci;
    cpuinfo_parse(text.c_str(), &ci);
    EXPECT_EQ(ci.processors, 1);
    EXPECT_STREQ(ci.model_name, "Example CPU");
    EXPECT_EQ(ci.flags[0], 'x');
}

// ---- kernel log --------------------------------------------------------------

static klog parse(const std::string &text)
{
    klog k;
    klog_parse(text.c_str(), &k);
    return k;
}

TEST(KlogParse, KmsgRecordsWithTimestampsAndContinuations)
{
    klog k = parse(slurp(fixture("kvm-tsc/dev/kmsg")));
    EXPECT_GT(k.records, 20);
    EXPECT_STREQ(k.last_switch, "tsc");
    EXPECT_NEAR(k.last_switch_s, 0.149568, 1e-9);
    EXPECT_EQ(k.tsc_unstable, 0);
    EXPECT_DOUBLE_EQ(k.detected_hz, 2599.996e6);
    EXPECT_EQ(k.detected_is_tsc, 0);
    // The " DEVICE=+platform:rtc_cmos" continuation line is not a record.
    for (int i = 0; i < k.nevents; i++)
        EXPECT_NE(k.ev[i].text[0], ' ');
    int switches = 0;
    for (int i = 0; i < k.nevents; i++)
        switches += k.ev[i].kind == KLOG_SWITCH;
    EXPECT_EQ(switches, 2);
}

TEST(KlogParse, DmesgLinesWatchdogMarksTsc)
{
    klog k = parse(slurp(fixture("tsc-unstable/dev/kmsg")));
    EXPECT_EQ(k.tsc_unstable, 1);
    EXPECT_STREQ(k.tsc_unstable_reason, "clocksource watchdog");
    EXPECT_NEAR(k.tsc_unstable_s, 9811.442734, 1e-6);
    EXPECT_EQ(k.watchdog_tsc, 1);
    EXPECT_STREQ(k.last_switch, "hpet");
    EXPECT_DOUBLE_EQ(k.refined_hz, 2394.455e6);
}

TEST(KlogParse, BootTimeWarpWithCpuPair)
{
    klog k = parse(slurp(fixture("tsc-warp/dev/kmsg")));
    EXPECT_EQ(k.warp_cycles, 2480);
    EXPECT_EQ(k.warp_cpu_a, 0);
    EXPECT_EQ(k.warp_cpu_b, 8);
    EXPECT_STREQ(k.tsc_unstable_reason, "check_tsc_sync_source failed");
    EXPECT_EQ(k.tsc_adjust, 2);
    EXPECT_EQ(k.skew, 1);
}

TEST(KlogParse, OldFormatsFromThe2000s)
{
    // 2.6-era lines: "Marking TSC unstable due to: ... ." and the old watchdog line.
    klog k = parse("[   14.006258] Measured 3976891932 cycles TSC warp between CPUs, turning off TSC clock.\n"
                   "[   14.006263] Marking TSC unstable due to: check_tsc_sync_source failed.\n"
                   "[  120.000001] Clocksource tsc unstable (delta = -95090544 ns)\n");
    EXPECT_EQ(k.warp_cycles, 3976891932LL);
    EXPECT_EQ(k.warp_cpu_a, -1);
    EXPECT_STREQ(k.tsc_unstable_reason, "check_tsc_sync_source failed");
    EXPECT_EQ(k.watchdog_tsc, 1);
}

TEST(KlogParse, SyslogPrefixAndNoTimestamp)
{
    klog k = parse("<6>[    0.149568] clocksource: Switched to clocksource tsc\n"
                   "clocksource: Switched to clocksource hpet\r\n");
    ASSERT_EQ(k.nevents, 2);
    EXPECT_NEAR(k.ev[0].time_s, 0.149568, 1e-9);
    EXPECT_STREQ(k.ev[0].value, "tsc");
    EXPECT_EQ(k.ev[1].time_s, -1);
    EXPECT_STREQ(k.last_switch, "hpet");
}

TEST(KlogParse, TscFrequencyLinePrefersTheTscOverTheProcessor)
{
    klog both = parse("6,1,0,-;tsc: Detected 2494.140 MHz TSC\n6,2,0,-;tsc: Detected 2500.000 MHz processor\n");
    EXPECT_DOUBLE_EQ(both.detected_hz, 2494.140e6);
    EXPECT_EQ(both.detected_is_tsc, 1);
    klog only = parse("6,2,0,-;tsc: Detected 2500.000 MHz processor\n");
    EXPECT_DOUBLE_EQ(only.detected_hz, 2500e6);
    EXPECT_EQ(only.detected_is_tsc, 0);
}

TEST(KlogParse, Arm64TimerFrequencyAndErratum)
{
    klog k = parse(slurp(fixture("arm64-erratum/dev/kmsg")));
    EXPECT_DOUBLE_EQ(k.counter_hz, 24e6);
    EXPECT_EQ(k.timer_erratum, 1);
    klog plain = parse(slurp(fixture("arm64/dev/kmsg")));
    EXPECT_DOUBLE_EQ(plain.counter_hz, 25e6);
    EXPECT_EQ(plain.timer_erratum, 0);
}

TEST(KlogParse, WatchdogSkipsAreCountedButKeptFew)
{
    std::string text;
    for (int i = 0; i < 10; i++)
        text += "4," + std::to_string(i) + ",1000,-;clocksource: Long readout interval, skipping watchdog check: "
                "cs_nsec: 1617330196 wd_nsec: 1617301040\n";
    text += "4,11,1000,-;clocksource: wd-tsc-wd read-back delay of 181880ns, clock-skew test skipped!\n";
    klog k = parse(text);
    EXPECT_EQ(k.watchdog_skips, 11);
    EXPECT_EQ(k.nevents, 3);
}

TEST(KlogParse, EventOverflowIsCounted)
{
    std::string text;
    for (int i = 0; i < KLOG_MAX_EVENTS + 5; i++)
        text += "clocksource: Switched to clocksource tsc\n";
    klog k = parse(text);
    EXPECT_EQ(k.nevents, KLOG_MAX_EVENTS);
    EXPECT_EQ(k.dropped, 5);
}

// ---- DMI, daemons, clocksources ------------------------------------------

static std::string cloud(const char *vendor, const char *product, const char *bios_version = "",
                         const char *asset = "")
{
    dmi d;
    memset(&d, 0, sizeof d);
    snprintf(d.sys_vendor, sizeof d.sys_vendor, "%s", vendor);
    snprintf(d.product_name, sizeof d.product_name, "%s", product);
    snprintf(d.bios_version, sizeof d.bios_version, "%s", bios_version);
    snprintf(d.chassis_asset_tag, sizeof d.chassis_asset_tag, "%s", asset);
    char name[64], ev[160];
    cloud_detect(&d, name, sizeof name, ev, sizeof ev);
    return name;
}

TEST(CloudDetect, FromDmiStrings)
{
    EXPECT_EQ(cloud("Amazon EC2", "c6i.large"), "AWS EC2 (Nitro)");
    EXPECT_EQ(cloud("Xen", "HVM domU", "4.2.amazon"), "AWS EC2 (Xen)");
    EXPECT_EQ(cloud("Google", "Google Compute Engine"), "Google Compute Engine");
    EXPECT_EQ(cloud("Microsoft Corporation", "Virtual Machine", "", "7783-7084-3265-9085-8269-3286-77"),
              "Microsoft Azure");
    EXPECT_EQ(cloud("Microsoft Corporation", "Virtual Machine"), "Hyper-V");
    EXPECT_EQ(cloud("Hetzner", "vServer"), "Hetzner Cloud");
    EXPECT_EQ(cloud("Supermicro", "X10DRi"), "");
    EXPECT_EQ(cloud("", ""), "");
}

TEST(SyncDaemons, CommNamesIncludingTruncation)
{
    EXPECT_STREQ(sync_daemon_name("chronyd"), "chronyd");
    EXPECT_STREQ(sync_daemon_name("systemd-timesyn"), "systemd-timesyncd");
    EXPECT_STREQ(sync_daemon_name("ptp4l"), "ptp4l");
    EXPECT_EQ(sync_daemon_name("chrony"), nullptr);
    EXPECT_EQ(sync_daemon_name("bash"), nullptr);
}

TEST(ClocksourceCapability, VdsoOrSyscall)
{
    EXPECT_EQ(clocksource_vdso_cap("tsc"), VDSO_CAP_YES);
    EXPECT_EQ(clocksource_vdso_cap("arch_sys_counter"), VDSO_CAP_YES);
    EXPECT_EQ(clocksource_vdso_cap("hyperv_clocksource_tsc_page"), VDSO_CAP_YES);
    EXPECT_EQ(clocksource_vdso_cap("kvm-clock"), VDSO_CAP_IF_STABLE);
    EXPECT_EQ(clocksource_vdso_cap("xen"), VDSO_CAP_IF_STABLE);
    EXPECT_EQ(clocksource_vdso_cap("hpet"), VDSO_CAP_NO);
    EXPECT_EQ(clocksource_vdso_cap("acpi_pm"), VDSO_CAP_NO);
    EXPECT_EQ(clocksource_vdso_cap("jiffies"), VDSO_CAP_NO);
    EXPECT_EQ(clocksource_vdso_cap("something-new"), VDSO_CAP_UNKNOWN);
    EXPECT_EQ(clocksource_vdso_cap(""), VDSO_CAP_UNKNOWN);
}

// ---- fixture key files -------------------------------------------------------

TEST(KvParse, CommentsSpacesAndLaterKeysWin)
{
    kv_file kv;
    char err[200];
    ASSERT_EQ(kv_parse("# comment\n\n a = 1 \nb=two words\na = 3\n", &kv, err, sizeof err), 0) << err;
    EXPECT_EQ(kv.n, 2);
    EXPECT_STREQ(kv_get(&kv, "a"), "3");
    EXPECT_STREQ(kv_get(&kv, "b"), "two words");
    EXPECT_EQ(kv_get(&kv, "c"), nullptr);
}

TEST(KvParse, MalformedLinesAreErrorsWithTheLineNumber)
{
    kv_file kv;
    char err[200];
    EXPECT_NE(kv_parse("a = 1\nno equals sign\n", &kv, err, sizeof err), 0);
    EXPECT_NE(std::string(err).find("line 2"), std::string::npos) << err;
    EXPECT_NE(kv_parse(" = value\n", &kv, err, sizeof err), 0);
    EXPECT_NE(std::string(err).find("empty key"), std::string::npos) << err;
}

TEST(FixtureLoad, BadKeysAndValuesAreRefused)
{
    char dir[] = "/tmp/fastclock-cli-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    std::string facts = std::string(dir) + "/doctor-facts";
    doctor_facts f;

    FILE *out = fopen(facts.c_str(), "w");
    fputs("cpuid.invariant_tsc = maybe\n", out);
    fclose(out);
    std::string err = clitest::load(dir, &f);
    EXPECT_NE(err.find("cpuid.invariant_tsc = 'maybe' is not 0, 1 or unknown"), std::string::npos) << err;

    out = fopen(facts.c_str(), "w");
    fputs("clock.CLOCK_MONOTONIC.libc_ns = fast\n", out);
    fclose(out);
    err = clitest::load(dir, &f);
    EXPECT_NE(err.find("is not a number"), std::string::npos) << err;

    out = fopen(facts.c_str(), "w");
    fputs("cpuid.invarient_tsc = 1\n", out);
    fclose(out);
    err = clitest::load(dir, &f);
    EXPECT_NE(err.find("unknown key 'cpuid.invarient_tsc'"), std::string::npos) << err;

    // An empty capture is valid: everything is unknown, with reasons.
    out = fopen(facts.c_str(), "w");
    fclose(out);
    EXPECT_EQ(clitest::load(dir, &f), "");
    EXPECT_EQ(f.cs_current_err, ENOENT);
    EXPECT_EQ(f.cpuinfo_err, ENOENT);
    EXPECT_EQ(f.invariant_tsc, TRI_UNKNOWN);
    EXPECT_EQ(f.sync_known, 0);
    remove(facts.c_str());
    rmdir(dir);

    EXPECT_NE(clitest::load("/nonexistent/fastclock/capture", &f).find("No such file"), std::string::npos);
}

// --capture writes what --root reads back: the CPU pair a warp was seen
// between, whether FASTCLOCK_MODE forced the mode, and a reason as long as
// the library writes (up to 511 bytes).
TEST(FixtureLoad, ACaptureCarriesTheWarpPairTheForcingAndTheWholeReason)
{
    char dir[] = "/tmp/fastclock-cli-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    doctor_facts f;
    facts_init(&f);
    f.has_cpuid = 1; // its tri-states unknown: written as --root reads them
    f.warp_ran = 1;
    f.warp_max_cycles = 5000;
    f.warp_pairs = 1;
    f.warp_cpu_a = 3;
    f.warp_cpu_b = 5;
    snprintf(f.warp_insn, sizeof f.warp_insn, "lfence;rdtsc");
    f.fc_known = 1;
    snprintf(f.fc_mode, sizeof f.fc_mode, "tsc-percpu");
    std::string reason(500, 'r');
    reason += " the end";
    snprintf(f.fc_reason, sizeof f.fc_reason, "%s", reason.c_str());
    f.fc_forced = 1;
    char err[256] = "";
    ASSERT_EQ(capture_write(&f, dir, err, sizeof err), 0) << err;
    doctor_facts back;
    EXPECT_EQ(clitest::load(dir, &back), "");
    EXPECT_EQ(back.warp_cpu_a, 3);
    EXPECT_EQ(back.warp_cpu_b, 5);
    EXPECT_STREQ(back.warp_insn, "lfence;rdtsc");
    EXPECT_EQ(back.fc_forced, 1);
    EXPECT_EQ(std::string(back.fc_reason), reason);
    EXPECT_EQ(back.call[0].supported, TRI_UNKNOWN);
    EXPECT_EQ(system((std::string("rm -rf '") + dir + "'").c_str()), 0);
}

// A warp check that found no verdict (pairs skipped on busy CPUs) keeps its
// reason through a capture: --root shows what the live run showed.
TEST(FixtureLoad, ACaptureCarriesWhyTheWarpCheckFoundNoVerdict)
{
    char dir[] = "/tmp/fastclock-cli-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    doctor_facts f;
    facts_init(&f);
    f.warp_ran = 0;
    f.warp_pairs = 0;
    f.warp_pairs_skipped = 3;
    f.warp_pairs_unpinned = 1;
    snprintf(f.warp_err, sizeof f.warp_err, "3 CPU pairs could not be compared (%s)", warp_skip_why(&f));
    char err[256] = "";
    ASSERT_EQ(capture_write(&f, dir, err, sizeof err), 0) << err;
    doctor_facts back;
    EXPECT_EQ(clitest::load(dir, &back), "");
    EXPECT_EQ(back.warp_ran, 0);
    EXPECT_STREQ(back.warp_err, f.warp_err);
    EXPECT_EQ(back.warp_pairs_skipped, 3);
    EXPECT_EQ(back.warp_pairs_unpinned, 1);
    EXPECT_STREQ(warp_skip_why(&back), "some threads could not be pinned, other CPUs were busy");
    EXPECT_EQ(system((std::string("rm -rf '") + dir + "'").c_str()), 0);
}

// ---- small parsers -----------------------------------------------------------

TEST(Numbers, StrictParsing)
{
    double d;
    long l;
    EXPECT_EQ(parse_double("1.5", &d), 0);
    EXPECT_DOUBLE_EQ(d, 1.5);
    EXPECT_EQ(parse_double("-1", &d), 0);
    EXPECT_DOUBLE_EQ(d, -1);
    EXPECT_NE(parse_double("", &d), 0);
    EXPECT_NE(parse_double("1.5s", &d), 0);
    EXPECT_NE(parse_double(" 1", &d), 0);
    EXPECT_NE(parse_double("nan", &d), 0);
    EXPECT_NE(parse_double("inf", &d), 0);
    EXPECT_EQ(parse_long("0x40000001", &l), 0);
    EXPECT_EQ(l, 0x40000001);
    EXPECT_EQ(parse_long("-12", &l), 0);
    EXPECT_EQ(l, -12);
    EXPECT_NE(parse_long("12abc", &l), 0);
    EXPECT_NE(parse_long("99999999999999999999999", &l), 0);
}

static std::string threads(const char *s, int *n)
{
    int out[BENCH_MAX_THREADS];
    char err[160] = "";
    *n = bench_parse_threads(s, out, BENCH_MAX_THREADS, err, sizeof err);
    if (*n < 0)
        return std::string("error: ") + err;
    std::string r;
    for (int i = 0; i < *n; i++)
        r += (i ? "," : "") + std::to_string(out[i]);
    return r;
}

TEST(ThreadList, ListsRangesAndErrors)
{
    int n;
    EXPECT_EQ(threads("1,2,4", &n), "1,2,4");
    EXPECT_EQ(threads("4,1,2,2", &n), "1,2,4");
    EXPECT_EQ(threads("1-4", &n), "1,2,3,4");
    EXPECT_EQ(threads("1,8-10", &n), "1,8,9,10");
    EXPECT_NE(threads("0", &n).find("start at 1"), std::string::npos);
    EXPECT_NE(threads("1,0", &n).find("start at 1"), std::string::npos);
    EXPECT_LT(n, 0);
    for (const char *bad : {"", "a", "1,", ",1", "1,,2", "1-", "-1", "2-1", "1025", "1.5", "1 2"}) {
        std::string r = threads(bad, &n);
        EXPECT_LT(n, 0) << "'" << bad << "' gave " << r;
        EXPECT_EQ(r.rfind("error: --threads", 0), 0u) << r;
    }
    int out[BENCH_MAX_THREADS];
    char err[160];
    EXPECT_LT(bench_parse_threads("1-70", out, BENCH_MAX_THREADS, err, sizeof err), 0);
    EXPECT_NE(std::string(err).find("at most"), std::string::npos) << err;
}

TEST(Json, EscapesAndNulls)
{
    char *buf = nullptr;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct json j;
    json_init(&j, f);
    json_begin_object(&j, nullptr);
    json_string(&j, "s", "a\"b\\c\nd\x01");
    json_string(&j, "n", nullptr);
    json_double(&j, "nan", NAN, 2);
    json_tri(&j, "t", TRI_UNKNOWN);
    json_begin_array(&j, "empty");
    json_end_array(&j);
    json_end_object(&j);
    json_finish(&j);
    fclose(f);
    EXPECT_STREQ(buf, "{\n  \"s\": \"a\\\"b\\\\c\\nd\\u0001\",\n  \"n\": null,\n  \"nan\": null,\n  \"t\": null,\n"
                      "  \"empty\": []\n}\n");
    free(buf);
}

// Strings from sysfs, DMI, CPUID and the kernel log may hold any bytes, or a
// character cut by a fixed-size copy: the document stays valid UTF-8 (each
// bad byte becomes U+FFFD), and good UTF-8 passes through as it is.
TEST(Json, InvalidUtf8BecomesReplacementCharacters)
{
    char *buf = nullptr;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    json_write_escaped(f, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x95\x92|" // good: 2, 3 and 4 bytes
                          "\xff|\xc3|\xe2\x82|\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\x80"); // bad
    fclose(f);
    EXPECT_STREQ(buf, "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x95\x92|"
                      "\\ufffd|\\ufffd|\\ufffd\\ufffd|\\ufffd\\ufffd|\\ufffd\\ufffd\\ufffd|"
                      "\\ufffd\\ufffd\\ufffd\\ufffd|\\ufffd\"");
    free(buf);
}

TEST(FormatNs, Units)
{
    char b[32];
    format_ns(b, sizeof b, 17.25);
    EXPECT_STREQ(b, "17.2 ns");
    format_ns(b, sizeof b, 563);
    EXPECT_STREQ(b, "563 ns");
    format_ns(b, sizeof b, 4e6);
    EXPECT_STREQ(b, "4.00 ms");
    format_ns(b, sizeof b, 16e9);
    EXPECT_STREQ(b, "16.00 s");
}
