package io.fastclock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** The instance-level clock: the system source tells FastClock's time; the manual one only moves when told. */
class TimeSourceTest {
    static final Instant T0 = Instant.parse("2030-01-02T03:04:05.123456789Z");

    static long epochNs(Instant i) {
        return i.getEpochSecond() * 1_000_000_000L + i.getNano();
    }

    @Test
    void theSystemSourceIsFastClock() {
        TimeSource s = TimeSource.system();
        assertSame(s, FastClock.timeSource());
        assertSame(s, FastClock.instantSource());
        long a = System.nanoTime(), v = s.nanoTime(), b = System.nanoTime();
        assertTrue(v >= a - 1000 && v <= b + 1000, a + " " + v + " " + b);
        long i0 = epochNs(Instant.now()), u = s.currentTimeNanos(), i1 = epochNs(Instant.now());
        assertTrue(u >= i0 - 1000 && u <= i1 + 1000, i0 + " " + u + " " + i1);
        long[] bounds = new long[2];
        s.currentTimeBounds(bounds);
        assertTrue(bounds[0] <= epochNs(Instant.now()) && bounds[1] >= i0, bounds[0] + " " + bounds[1]);
    }

    /**
     * The system source's milliseconds come from its nanoseconds' clock, as TimeSource's
     * default does: a millisecond read between two nanosecond readings lies between
     * theirs.  (FastClock.currentTimeMillis() is routed on its own: where it is the JDK's
     * and currentTimeNanos() the line -- JDK 17 here -- the two clocks differ by the
     * line's error, and a read at a millisecond's edge can fall outside.  Here the
     * line keeps within ~20 ns of the kernel, less than the gap between two reads,
     * and the old routing passed too; under NTP slewing the bound is microseconds.)
     */
    @Test
    void theSystemSourcesMillisecondsComeFromItsNanosecondsClock() {
        TimeSource s = TimeSource.system();
        long outside = 0, worst = 0, n = 0;
        long end = System.nanoTime() + 500_000_000L;
        while (System.nanoTime() - end < 0) {
            for (int i = 0; i < 10_000; i++, n++) {
                long a = s.currentTimeNanos(), m = s.currentTimeMillis(), b = s.currentTimeNanos();
                long lo = Math.floorDiv(a, 1_000_000L), hi = Math.floorDiv(b, 1_000_000L);
                if (m < lo || m > hi) {
                    outside++;
                    worst = Math.max(worst, Math.max(lo - m, m - hi));
                }
            }
        }
        assertTrue(n > 100_000, "only " + n + " reads");
        assertEquals(0, outside, outside + " of " + n + " millisecond reads outside their nanosecond "
                + "readings (worst by " + worst + " ms); " + FastClock.routes().answers);
    }

    @Test
    void aManualSourceStandsStill() {
        ManualTimeSource m = ManualTimeSource.at(T0, 42);
        for (int i = 0; i < 3; i++) {
            assertEquals(42, m.nanoTime());
            assertEquals(epochNs(T0), m.currentTimeNanos());
            assertEquals(T0, m.instant());
            assertEquals(T0.toEpochMilli(), m.millis());
        }
        assertEquals(ZonedDateTime.ofInstant(T0, ZoneId.of("Asia/Tokyo")), ZonedDateTime.now(m.withZone(ZoneId.of("Asia/Tokyo"))));
    }

    @Test
    void advancingMovesBothTimelinesAndNeverBack() {
        ManualTimeSource m = ManualTimeSource.at(T0);
        m.advance(Duration.ofMillis(1500)).advanceNanos(7);
        assertEquals(1_500_000_007L, m.nanoTime());
        assertEquals(T0.plusNanos(1_500_000_007L), m.instant());
        assertThrows(IllegalArgumentException.class, () -> m.advance(Duration.ofNanos(-1)));
        assertThrows(IllegalArgumentException.class, () -> m.setAutoAdvance(Duration.ofNanos(-1)));
        assertEquals(1_500_000_007L, m.nanoTime(), "a refused change changes nothing");
    }

    @Test
    void advancingPastTheLastRepresentableUtcIsRefusedNotWrapped() {
        ManualTimeSource m = ManualTimeSource.at(T0);
        // 233 years on from 2030 is past 2262, the last ns since the epoch a long holds.
        assertThrows(ArithmeticException.class, () -> m.advance(Duration.ofDays(365L * 233)));
        assertEquals(0, m.nanoTime(), "a refused advance changes nothing");
        assertEquals(T0, m.instant());
        // Auto-advance carries it there one read at a time: the read whose step would
        // carry UTC past the end throws, for either clock, and moves nothing.
        long toTheEnd = Long.MAX_VALUE - epochNs(T0);
        m.advanceNanos(toTheEnd - 30).setAutoAdvance(Duration.ofNanos(20));
        assertEquals(Long.MAX_VALUE - 30, m.currentTimeNanos());
        assertThrows(ArithmeticException.class, m::currentTimeNanos);
        assertThrows(ArithmeticException.class, m::nanoTime);
        assertEquals(Long.MAX_VALUE - 10, m.setAutoAdvance(Duration.ZERO).currentTimeNanos());
    }

    @Test
    void autoAdvanceNeverWrapsMonotonicTime() {
        // Monotonic time near the end of a long (UTC far back, so UTC itself fits):
        // the read whose step would carry the clock past a long throws (it wrapped
        // to a negative time before), and the clock stays where it was.
        ManualTimeSource m = ManualTimeSource.at(Instant.EPOCH, Long.MAX_VALUE - 15).setAutoAdvance(Duration.ofNanos(10));
        assertEquals(Long.MAX_VALUE - 15, m.nanoTime());
        assertThrows(ArithmeticException.class, m::nanoTime);
        assertThrows(ArithmeticException.class, m::nanoTime);
        m.setAutoAdvance(Duration.ZERO);
        assertEquals(Long.MAX_VALUE - 5, m.nanoTime());
    }

    @Test
    void boundsWiderThanALongSaturate() {
        ManualTimeSource m = ManualTimeSource.at(T0).setBounds(Duration.ofNanos(Long.MAX_VALUE), true);
        long[] b = new long[2];
        m.currentTimeBounds(b);
        assertEquals(epochNs(T0) - Long.MAX_VALUE, b[0]);
        assertEquals(Long.MAX_VALUE, b[1], "the latest saturates, never wraps below the earliest");
    }

    @Test
    void utcStepsLeaveMonotonicTimeAlone() {
        ManualTimeSource m = ManualTimeSource.at(T0, 100);
        Instant back = T0.minusSeconds(3600);
        m.setInstant(back);
        assertEquals(back, m.instant());
        assertEquals(100, m.nanoTime());
        m.advanceNanos(5);
        assertEquals(back.plusNanos(5), m.instant());
    }

    @Test
    void autoAdvanceMovesOnEveryRead() {
        ManualTimeSource m = ManualTimeSource.at(T0).setAutoAdvance(Duration.ofNanos(10));
        assertEquals(0, m.nanoTime());
        assertEquals(10, m.nanoTime());
        assertEquals(epochNs(T0) + 20, m.currentTimeNanos());
        m.setAutoAdvance(Duration.ZERO);
        assertEquals(30, m.nanoTime());
        assertEquals(30, m.nanoTime());
    }

    @Test
    void boundsAreWhatTheTestSays() {
        ManualTimeSource m = ManualTimeSource.at(T0);
        long[] b = new long[2];
        assertTrue(m.currentTimeBounds(b));
        assertEquals(epochNs(T0), b[0]);
        assertEquals(epochNs(T0), b[1]);
        m.setBounds(Duration.ofMillis(2), false);
        assertFalse(m.currentTimeBounds(b));
        assertEquals(epochNs(T0) - 2_000_000, b[0]);
        assertEquals(epochNs(T0) + 2_000_000, b[1]);
        assertThrows(IllegalArgumentException.class, () -> m.currentTimeBounds(new long[1]));
    }

    @Test
    void startingAtAnotherSourceFreezesItsTime() {
        long before = System.nanoTime();
        ManualTimeSource m = ManualTimeSource.startingAt(TimeSource.system());
        long after = System.nanoTime();
        assertTrue(m.nanoTime() >= before - 1000 && m.nanoTime() <= after + 1000);
        assertEquals(m.nanoTime(), m.nanoTime());
    }

    @Test
    void concurrentReadersNeverSeeMonotonicTimeGoBack() throws InterruptedException {
        ManualTimeSource m = ManualTimeSource.at(T0).setAutoAdvance(Duration.ofNanos(1));
        List<Thread> threads = new ArrayList<>();
        boolean[] ok = new boolean[4];
        for (int t = 0; t < 4; t++) {
            int id = t;
            Thread th = new Thread(() -> {
                long last = Long.MIN_VALUE;
                boolean good = true;
                for (int i = 0; i < 100_000; i++) {
                    long v = m.nanoTime();
                    good &= v > last; // auto-advance hands every read its own value
                    last = v;
                }
                ok[id] = good;
            });
            threads.add(th);
            th.start();
        }
        for (Thread th : threads)
            th.join();
        for (boolean b : ok)
            assertTrue(b);
        assertEquals(400_000, m.nanoTime());
    }

    /** Runs body in a thread until stop is set; returns the thread, started. */
    static Thread loop(AtomicBoolean stop, Runnable body) {
        Thread t = new Thread(() -> {
            while (!stop.get())
                body.run();
        });
        t.setDaemon(true);
        t.start();
        return t;
    }

    /**
     * A read is one state of the clock.  A writer advances by 1 ns and steps UTC back to T0,
     * over and over: UTC is only ever T0 or T0 + 1 ns.  A read that took the UTC offset of
     * one state and the monotonic time of a later one saw T0 + 2 ns or more: a time the
     * clock never held.
     */
    @Test
    void aReadNeverMixesTwoStatesOfTheClock() throws InterruptedException {
        ManualTimeSource m = ManualTimeSource.at(T0);
        long t0 = epochNs(T0);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicReference<String> torn = new AtomicReference<>();
        AtomicLong reads = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        threads.add(loop(stop, () -> m.advanceNanos(1).setInstant(T0)));
        for (int r = 0; r < 2; r++)
            threads.add(loop(stop, () -> {
                for (int i = 0; i < 1000; i++) {
                    long u = m.currentTimeNanos();
                    if (u != t0 && u != t0 + 1)
                        torn.compareAndSet(null, "UTC at T0 + " + (u - t0) + " ns");
                }
                reads.addAndGet(1000);
            }));
        long end = System.nanoTime() + 2_000_000_000L;
        while (torn.get() == null && System.nanoTime() < end)
            Thread.sleep(10);
        stop.set(true);
        for (Thread t : threads)
            t.join();
        assertEquals(null, torn.get(), "after " + reads.get() + " reads: a time the clock never held");
    }

    /**
     * A step is applied at the monotonic time it finds, atomically: an advance that a reader
     * saw before the step (the step not yet visible) is not added on top of the step's target.
     * One thread steps UTC between two targets far apart, one advances, one reads consistent
     * (nanoTime, UTC) pairs: each new UTC offset says at which monotonic time its step was
     * applied (target - offset), and that is never below a monotonic time read under the
     * previous offset.  (The old two-field clock broke this only when the stepping thread
     * lost its CPU between its two accesses: about once in 10 s here, so this guards the
     * one-state design rather than reliably catching that race; the test above does.)
     */
    @Test
    void aStepIsNeverAppliedToAnEarlierMonotonicTimeThanReadersSaw() throws InterruptedException {
        ManualTimeSource m = ManualTimeSource.at(T0);
        Instant far = T0.plus(Duration.ofDays(1000));
        long x0 = epochNs(T0), x1 = epochNs(far), mid = x0 + (x1 - x0) / 2;
        AtomicBoolean stop = new AtomicBoolean();
        AtomicReference<String> bad = new AtomicReference<>();
        AtomicLong pairs = new AtomicLong();
        List<Thread> threads = new ArrayList<>();
        boolean[] which = new boolean[1];
        threads.add(loop(stop, () -> m.setInstant((which[0] = !which[0]) ? far : T0)));
        threads.add(loop(stop, () -> m.advanceNanos(1)));
        threads.add(loop(stop, new Runnable() {
            long lastOffset = Long.MIN_VALUE, seenUnderIt = Long.MIN_VALUE;

            @Override
            public void run() {
                for (int i = 0; i < 1000; i++) {
                    long n1 = m.nanoTime(), u = m.currentTimeNanos(), n2 = m.nanoTime();
                    if (n1 != n2)
                        continue; // not one state
                    long offset = u - n1;
                    if (offset != lastOffset) {
                        long appliedAt = (offset > mid ? x1 : x0) - offset;
                        if (appliedAt < seenUnderIt)
                            bad.compareAndSet(null, "a step applied at nanoTime " + appliedAt
                                    + " after a read saw nanoTime " + seenUnderIt + " under the previous offset");
                        lastOffset = offset;
                        seenUnderIt = n1;
                    } else {
                        seenUnderIt = Math.max(seenUnderIt, n1);
                    }
                }
                pairs.addAndGet(1000);
            }
        }));
        long end = System.nanoTime() + 1_000_000_000L;
        while (bad.get() == null && System.nanoTime() < end)
            Thread.sleep(10);
        stop.set(true);
        for (Thread t : threads)
            t.join();
        assertEquals(null, bad.get(), "after " + pairs.get() + " reads");
    }
}
