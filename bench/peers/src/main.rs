//! Rust's counter clocks beside fastclock's, in one process (make bench-peers).
//!
//! Each source runs in ~1 ms batches, interleaved round by round with every
//! other source, so a noisy neighbour on a shared VM weighs on all of them
//! alike; the medians over the rounds are compared, each with the libc call
//! and the fastclock read that do the same job:
//!   quanta `Clock::now`      an unfenced rdtsc scaled to ns: fastclock_mono_ns_unordered
//!   quanta `Clock::raw`      the bare counter:               fastclock_ticks
//!   quanta `Instant::recent` a value its upkeep thread
//!                            publishes (1 ms here):          fastclock_mono_coarse_ns
//!   minstant `Instant::now`  the bare counter:               fastclock_ticks
//!   minstant + `as_unix_nanos` the counter as UTC ns:        fastclock_real_ns_unordered
//! fastclock is linked statically (build.rs): its calls are direct, as the
//! peers' are; libc's go through the PLT.

use std::hint::black_box;
use std::sync::OnceLock;
use std::time::Duration;

#[repr(C)]
struct Timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

const CLOCK_REALTIME: i32 = 0;
const CLOCK_MONOTONIC: i32 = 1;

extern "C" {
    fn clock_gettime(id: i32, ts: *mut Timespec) -> i32;
    fn fastclock_mono_ns() -> i64;
    fn fastclock_mono_ns_unordered() -> i64;
    fn fastclock_real_ns_unordered() -> i64;
    fn fastclock_mono_coarse_ns() -> i64;
    fn fastclock_ticks() -> u64;
    fn fastclock_version() -> *const std::os::raw::c_char;
    fn fastclock_status_sized(out: *mut FastclockStatusHead, size: usize) -> i32;
}

/// The first fields of `struct fastclock_status` (fastclock.h): the sized call
/// writes only what fits, so these four are all this program asks for.
#[repr(C)]
struct FastclockStatusHead {
    mode: *const std::os::raw::c_char,
    reason: *const std::os::raw::c_char,
    calibrator: *const std::os::raw::c_char,
    counter: *const std::os::raw::c_char,
}

/// "machine: CPU model, VM or not, N CPUs, clocksource (available), Linux release", as the C benches print it.
fn machine_line() -> String {
    let first = |p: &str| std::fs::read_to_string(p).ok().and_then(|s| s.lines().next().map(str::to_string));
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown CPU".to_string());
    let vm = cpuinfo.lines().any(|l| (l.starts_with("flags") && l.contains(" hypervisor")) || l.starts_with("Hypervisor"));
    // Online CPUs, as sysconf(_SC_NPROCESSORS_ONLN) counts them ("0-3,6"), not this process's affinity.
    let cpus: usize = first("/sys/devices/system/cpu/online")
        .unwrap_or_default()
        .split(',')
        .filter_map(|r| match r.trim().split_once('-') {
            Some((a, b)) => Some(b.parse::<usize>().ok()? - a.parse::<usize>().ok()? + 1),
            None => r.trim().parse::<usize>().ok().map(|_| 1),
        })
        .sum();
    let cs = "/sys/devices/system/clocksource/clocksource0/";
    format!(
        "machine: {cpu}, {}, {cpus} CPUs, clocksource {} (available: {}), Linux {}",
        if vm { "virtual machine" } else { "no hypervisor seen" },
        first(&(cs.to_string() + "current_clocksource")).unwrap_or_else(|| "unknown".into()),
        first(&(cs.to_string() + "available_clocksource")).unwrap_or_else(|| "unknown".into()).trim(),
        first("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into())
    )
}

/// fastclock's mode and counter: the rows compare a counter read with
/// fastclock's only where fastclock reads the counter too.
fn fastclock_mode() -> String {
    let mut h = FastclockStatusHead {
        mode: std::ptr::null(),
        reason: std::ptr::null(),
        calibrator: std::ptr::null(),
        counter: std::ptr::null(),
    };
    let s = |p: *const std::os::raw::c_char| {
        if p.is_null() { "?".to_string() } else { unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned() }
    };
    if unsafe { fastclock_status_sized(&mut h, std::mem::size_of::<FastclockStatusHead>()) } != 0 {
        return "unknown (fastclock_status failed)".to_string();
    }
    format!("mode {}, counter {}", s(h.mode), s(h.counter))
}

fn libc_ns(id: i32) -> u64 {
    let mut ts = Timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn quanta_clock() -> &'static quanta::Clock {
    static C: OnceLock<quanta::Clock> = OnceLock::new();
    C.get_or_init(quanta::Clock::new)
}

fn minstant_anchor() -> &'static minstant::Anchor {
    static A: OnceLock<minstant::Anchor> = OnceLock::new();
    A.get_or_init(minstant::Anchor::new)
}

/// One source: `run(n)` makes n calls (the closure inlined into its loop)
/// and returns something that depends on every one of them.
struct Source {
    name: &'static str,
    group: &'static str,
    run: fn(u64) -> u64,
}

macro_rules! source {
    ($group:expr, $name:expr, $read:expr) => {
        Source {
            name: $name,
            group: $group,
            run: {
                fn run(n: u64) -> u64 {
                    let mut acc = 0u64;
                    for _ in 0..n {
                        acc = acc.wrapping_add($read);
                    }
                    acc
                }
                run
            },
        }
    };
}

fn sources() -> Vec<Source> {
    vec![
        source!("libc", "clock_gettime(CLOCK_MONOTONIC)", libc_ns(CLOCK_MONOTONIC)),
        source!("libc", "clock_gettime(CLOCK_REALTIME)", libc_ns(CLOCK_REALTIME)),
        source!("libc", "std::time::Instant::now", {
            black_box(std::time::Instant::now());
            1
        }),
        source!("fastclock", "fastclock_mono_ns", unsafe { fastclock_mono_ns() } as u64),
        source!("fastclock", "fastclock_mono_ns_unordered", unsafe { fastclock_mono_ns_unordered() } as u64),
        source!("fastclock", "fastclock_real_ns_unordered", unsafe { fastclock_real_ns_unordered() } as u64),
        source!("fastclock", "fastclock_mono_coarse_ns", unsafe { fastclock_mono_coarse_ns() } as u64),
        source!("fastclock", "fastclock_ticks", unsafe { fastclock_ticks() }),
        source!("quanta", "quanta Clock::now", {
            black_box(quanta_clock().now());
            1
        }),
        source!("quanta", "quanta Clock::raw", quanta_clock().raw()),
        source!("quanta", "quanta Instant::recent", {
            black_box(quanta::Instant::recent());
            1
        }),
        source!("minstant", "minstant Instant::now", {
            black_box(minstant::Instant::now());
            1
        }),
        source!("minstant", "minstant now + as_unix_nanos", minstant::Instant::now().as_unix_nanos(minstant_anchor())),
    ]
}

/// What each peer is compared with: the fastclock read that does its job.
fn counterpart(name: &str) -> Option<&'static str> {
    Some(match name {
        "quanta Clock::now" => "fastclock_mono_ns_unordered",
        "quanta Clock::raw" | "minstant Instant::now" => "fastclock_ticks",
        "quanta Instant::recent" => "fastclock_mono_coarse_ns",
        "minstant now + as_unix_nanos" => "fastclock_real_ns_unordered",
        "std::time::Instant::now" => "fastclock_mono_ns",
        _ => return None,
    })
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let mut seconds = 3.0f64;
    let args: Vec<String> = std::env::args().collect();
    let mut i = 1;
    while i < args.len() {
        match args[i].as_str() {
            "--seconds" if i + 1 < args.len() => {
                seconds = match args[i + 1].parse::<f64>() {
                    Ok(s) if s > 0.0 && s <= 600.0 => s,
                    _ => {
                        eprintln!("fastclock-bench-peers: --seconds takes a number in (0, 600], not '{}'", args[i + 1]);
                        std::process::exit(2);
                    }
                };
                i += 2;
            }
            a => {
                eprintln!("fastclock-bench-peers: unknown argument '{a}'\nusage: fastclock-bench-peers [--seconds S]");
                std::process::exit(2);
            }
        }
    }

    // Everything warmed and calibrated before the first round: quanta's
    // clock (up to 200 ms), its upkeep thread at 1 ms (the coarse tick
    // fastclock's calibrator thread uses), minstant's anchor, fastclock's
    // first line and coarse ticks.
    let _upkeep = quanta::Upkeep::new(Duration::from_millis(1)).start().expect("quanta upkeep thread");
    let _ = quanta_clock().now();
    let _ = minstant_anchor();
    let src = sources();
    for s in &src {
        black_box((s.run)(1000));
    }
    std::thread::sleep(Duration::from_millis(100));

    // Calls per ~1 ms batch, from a first timing of each source.
    let batch: Vec<u64> = src
        .iter()
        .map(|s| {
            let t0 = libc_ns(CLOCK_MONOTONIC);
            black_box((s.run)(10_000));
            let dt = (libc_ns(CLOCK_MONOTONIC) - t0).max(1) as f64 / 10_000.0;
            ((1e6 / dt) as u64).clamp(1000, 10_000_000)
        })
        .collect();
    let mode_before = fastclock_mode();
    let rounds = ((seconds * 1e9 / 1e6 / src.len() as f64) as usize).clamp(5, 10_001) | 1;
    let mut per_call: Vec<Vec<f64>> = vec![Vec::with_capacity(rounds); src.len()];
    for _ in 0..rounds {
        for (k, s) in src.iter().enumerate() {
            let t0 = libc_ns(CLOCK_MONOTONIC);
            black_box((s.run)(batch[k]));
            let t1 = libc_ns(CLOCK_MONOTONIC);
            per_call[k].push((t1 - t0) as f64 / batch[k] as f64);
        }
    }
    let med: Vec<f64> = per_call.iter_mut().map(|v| median(v)).collect();
    let by_name = |n: &str| src.iter().position(|s| s.name == n).map(|k| med[k]);
    let clock_gt = by_name("clock_gettime(CLOCK_MONOTONIC)").unwrap();

    let version = unsafe { std::ffi::CStr::from_ptr(fastclock_version()) }.to_string_lossy().into_owned();
    let quanta_source = format!("{:?}", quanta_clock());
    println!("fastclock {version} beside Rust's quanta and minstant (Cargo.lock has their versions)");
    println!("{}", machine_line());
    let mode_after = fastclock_mode();
    println!("fastclock: {mode_after}");
    if mode_after != mode_before {
        println!("WARNING: fastclock's mode changed during the run ({mode_before} -> {mode_after}): rows not comparable");
    }
    println!(
        "quanta's clock: {}; minstant's: {}",
        if quanta_source.contains("Counter") { "the TSC (calibrated)" } else { "the OS clock (no usable TSC)" },
        if minstant::is_tsc_available() {
            "the TSC"
        } else {
            "CLOCK_MONOTONIC_COARSE (it found no usable TSC: its rows are not counter reads)"
        }
    );
    println!(
        "{rounds} interleaved rounds of ~1 ms batches per source; ns per call, median over rounds\n"
    );
    println!(
        "  {:<34} {:>9} {:>11}  {}",
        "source", "ns/call", "x clock_gt", "against fastclock's counterpart"
    );
    let mut group = "";
    for (k, s) in src.iter().enumerate() {
        if s.group != group {
            group = s.group;
            println!("  {group}");
        }
        let vs = match counterpart(s.name).and_then(|c| by_name(c).map(|m| (c, m))) {
            Some((c, m)) => format!("{:.2}x {c}", med[k] / m),
            None => String::new(),
        };
        println!("    {:<32} {:>9.2} {:>11.2}  {}", s.name, med[k], med[k] / clock_gt, vs);
    }
    println!(
        "\n  x clock_gt: median over the median of clock_gettime(CLOCK_MONOTONIC) in this run;\n  \
         against fastclock's counterpart: the peer's median over the fastclock read that does its job\n  \
         (above 1: the peer costs more).\n  \
         Not the same promise everywhere: quanta's and minstant's reads are unfenced (no order\n  \
         across threads: compare them with fastclock's unordered reads); minstant's UTC is the\n  \
         counter from one anchor, which never sees a clock step or the kernel's slewing, while\n  \
         fastclock_real_ns_unordered checks for a step on every read."
    );
}
