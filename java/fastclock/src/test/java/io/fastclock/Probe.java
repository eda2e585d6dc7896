package io.fastclock;

import java.time.Instant;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;

/**
 * Run in a child JVM by the tests (see Jvm): prints what FastClock chose and
 * how its clocks compare with the JDK's, as key=value lines.
 */
public final class Probe {
    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("coarse-lazy")) {
            coarseLazy();
            return;
        }
        if (args.length > 0 && args[0].equals("interrupted")) {
            // Class initialisation on a thread already interrupted (a cancelled task).
            Thread.currentThread().interrupt();
            FastClock.nanoTime();
            System.out.println("still_interrupted=" + Thread.interrupted());
        }
        System.out.println("native=" + FastClock.isNative());
        System.out.println("mode=" + FastClock.mode());
        System.out.println("binding=" + FastClock.binding());
        System.out.println("reason=" + oneLine(FastClock.reason()));
        System.out.println("detail=" + oneLine(FastClock.loadDetail()));
        System.out.println("answers=" + FastClock.routes().answers);
        System.out.println("answers_why=" + FastClock.routes().costs);
        if (FastClock.isNative()) {
            java.util.Map<String, String> st = FastClock.nativeStatus();
            System.out.println("counter=" + st.get("counter"));
            // What the core was doing by then, for a decision that differs between JVMs.
            System.out.println("core=calibrations " + st.get("calibrations") + ", fallback_reads "
                    + st.get("fallback_reads") + ", max_warp_cycles " + st.get("max_warp_cycles") + ", counter "
                    + st.get("counter"));
        }
        if (args.length > 0 && args[args.length - 1].equals("answers"))
            return;
        long worstMono = 0, worstReal = 0;
        for (int i = 0; i < 2000; i++) {
            long a = System.nanoTime(), f = FastClock.nanoTime(), b = System.nanoTime();
            worstMono = Math.max(worstMono, outside(a, f, b));
            Instant i0 = Instant.now();
            long r = FastClock.currentTimeNanos();
            Instant i1 = Instant.now();
            worstReal = Math.max(worstReal, outside(epochNs(i0), r, epochNs(i1)));
        }
        // A java.time Clock's millis() is its instant().toEpochMilli(): read between two
        // instants, it lies between theirs (ms beyond them, at worst).
        java.time.Clock utc = FastClock.clock(ZoneOffset.UTC);
        long worstMillis = 0;
        for (int i = 0; i < 2000; i++) {
            long i0 = utc.instant().toEpochMilli(), m = utc.millis(), i1 = utc.instant().toEpochMilli();
            worstMillis = Math.max(worstMillis, outside(i0, m, i1));
        }
        System.out.println("clock_millis_outside_ms=" + worstMillis);
        System.out.println("worst_mono_ns=" + worstMono);
        System.out.println("worst_real_ns=" + worstReal);
        // Every entry point answers, in whichever implementation runs.
        long sum = FastClock.nanoTimeUnordered() + FastClock.currentTimeNanosUnordered()
                + FastClock.currentTimeMicros() + FastClock.currentTimeMillis() + FastClock.coarseNanoTime()
                + FastClock.coarseCurrentTimeMillis();
        ZonedDateTime z = ZonedDateTime.now(FastClock.clock(ZoneOffset.UTC));
        System.out.println("all_calls=" + (sum != 0 && z.getYear() >= 2024 && FastClock.instantSource().millis() > 0));
        long[] bounds = new long[2];
        long before = epochNs(Instant.now());
        boolean synced = FastClock.currentTimeBounds(bounds);
        long after = epochNs(Instant.now());
        System.out.println("bounds_synchronized=" + synced);
        System.out.println("bounds_contain_now=" + (bounds[0] <= after && bounds[1] >= before));
        System.out.println("bounds_width_ns=" + (bounds[1] - bounds[0]));
        System.out.println("status=" + oneLine(FastClock.status()));
        if (args.length > 0 && args[args.length - 1].equals("pingpong")) {
            // The ordered clocks across two threads taking turns (MonotonicTest's check),
            // with the slack the core promises in this mode.
            long slack = MonotonicTest.tolerance();
            long[] mono = MonotonicTest.pingPong(FastClock::nanoTime, slack);
            long[] real = MonotonicTest.pingPong(FastClock::currentTimeNanos, slack);
            System.out.println("slack_ns=" + slack);
            System.out.println("nanotime_handoffs=" + mono[0]);
            System.out.println("nanotime_back=" + mono[1]);
            System.out.println("nanotime_worst_ns=" + mono[2]);
            System.out.println("real_handoffs=" + real[0]);
            System.out.println("real_back=" + real[1]);
            System.out.println("real_worst_ns=" + real[2]);
            System.out.println("error_bound_ns=" + FastClock.nativeStatus().getOrDefault("error_bound_ns", "0"));
            // The core may leave the forced mode while these run (a warp check, a fail-safe).
            System.out.println("mode_after=" + FastClock.mode());
            System.out.println("reason_after=" + oneLine(FastClock.reason()));
        }
    }

    /**
     * Reads only the fine clocks for a while, then the coarse ones: whether the core ticked
     * the coarse clocks before anyone read them, and how the first coarse reads behave.
     */
    private static void coarseLazy() throws InterruptedException {
        long end = System.nanoTime() + 100_000_000L;
        while (System.nanoTime() < end) { // fine reads only, well past the core's mode decision
            FastClock.nanoTime();
            FastClock.currentTimeNanos();
            Thread.sleep(1);
        }
        System.out.println("native=" + FastClock.isNative());
        System.out.println("mode=" + FastClock.mode());
        System.out.println("ticking_before_a_coarse_read=" + FastClock.coarseFromMemory());
        // The first coarse reads: served before the first tick, then from the memory.
        long prev = Long.MIN_VALUE, ahead = 0, back = 0, reads = 0;
        long deadline = System.nanoTime() + 2_000_000_000L;
        boolean fromMemory = false;
        while (System.nanoTime() < deadline && !(fromMemory && reads > 10_000)) {
            long c = FastClock.coarseNanoTime();
            long f = FastClock.nanoTime();
            long cm = FastClock.coarseCurrentTimeMillis();
            long fm = FastClock.currentTimeNanos();
            if (c > f)
                ahead = Math.max(ahead, c - f);
            if (cm * 1_000_000L > fm)
                ahead = Math.max(ahead, cm * 1_000_000L - fm);
            if (c < prev)
                back = Math.max(back, prev - c);
            prev = c;
            reads++;
            fromMemory = FastClock.coarseFromMemory();
        }
        System.out.println("ticking_after_a_coarse_read=" + fromMemory);
        System.out.println("coarse_reads=" + reads);
        System.out.println("coarse_ahead_ns=" + ahead);
        System.out.println("coarse_back_ns=" + back);
        // The memory moves on by itself: the calibrator ticks about every millisecond.
        long v0 = FastClock.coarseNanoTime(), m0 = FastClock.coarseCurrentTimeMillis();
        Thread.sleep(30);
        long v1 = FastClock.coarseNanoTime(), m1 = FastClock.coarseCurrentTimeMillis();
        System.out.println("coarse_moved_ns=" + (v1 - v0));
        System.out.println("coarse_moved_ms=" + (m1 - m0));
        System.out.println("coarse_not_ahead=" + (v1 <= FastClock.nanoTime()));
        System.out.println("reason=" + oneLine(FastClock.reason()));
        System.out.println("status=" + oneLine(FastClock.status()));
    }

    static long epochNs(Instant i) {
        return i.getEpochSecond() * 1_000_000_000L + i.getNano();
    }

    /** How far v lies outside [lo, hi]; 0 inside. */
    static long outside(long lo, long v, long hi) {
        return v < lo ? lo - v : v > hi ? v - hi : 0;
    }

    private static String oneLine(String s) {
        return s == null ? "null" : s.replace('\n', '|');
    }
}
