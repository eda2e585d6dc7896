package io.fastclock.adapters;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.fastclock.FastClock;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.logging.log4j.Level;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.apache.logging.log4j.core.LogEvent;
import org.apache.logging.log4j.core.LoggerContext;
import org.apache.logging.log4j.core.appender.AbstractAppender;
import org.apache.logging.log4j.core.config.Configuration;
import org.apache.logging.log4j.core.config.Property;
import org.apache.logging.log4j.core.time.MutableInstant;
import org.apache.logging.log4j.core.util.ClockFactory;
import org.junit.jupiter.api.Test;

/**
 * Log4j 2 (log4j-core from Maven Central) with -Dlog4j2.clock=io.fastclock.adapters.Log4jClock,
 * as the build's failsafe configuration sets it: Log4j picks the clock, and a logged
 * event carries fastclock's time at nanosecond precision.
 */
class Log4jClockTest {
    static final class Capture extends AbstractAppender {
        final List<LogEvent> events = new CopyOnWriteArrayList<>();

        Capture() {
            super("capture", null, null, true, Property.EMPTY_ARRAY);
        }

        @Override
        public void append(LogEvent e) {
            events.add(e.toImmutable());
        }
    }

    static long epochNs(Instant i) {
        return i.getEpochSecond() * 1_000_000_000L + i.getNano();
    }

    @Test
    void log4jSelectsTheClockByProperty() {
        assertEquals(Log4jClock.class.getName(), System.getProperty("log4j2.clock"),
                "the build sets log4j2.clock for this test");
        assertInstanceOf(Log4jClock.class, ClockFactory.getClock());
    }

    @Test
    void loggedEventsCarryFastclocksTimeInNanoseconds() {
        LoggerContext ctx = (LoggerContext) LogManager.getContext(false);
        Configuration cfg = ctx.getConfiguration();
        Capture capture = new Capture();
        capture.start();
        cfg.getRootLogger().addAppender(capture, Level.ALL, null);
        cfg.getRootLogger().setLevel(Level.ALL);
        ctx.updateLoggers();
        try {
            Logger log = LogManager.getLogger(Log4jClockTest.class);
            int subMilli = 0;
            for (int i = 0; i < 200; i++) {
                long before = epochNs(Instant.now());
                log.info("event {}", i);
                long after = epochNs(Instant.now());
                LogEvent e = capture.events.get(capture.events.size() - 1);
                long ns = e.getInstant().getEpochSecond() * 1_000_000_000L + e.getInstant().getNanoOfSecond();
                assertTrue(ns >= before - 1000 && ns <= after + 1000, before + " " + ns + " " + after);
                if (e.getInstant().getNanoOfMillisecond() != 0)
                    subMilli++;
            }
            // A millisecond clock would give 0 sub-ms nanoseconds every time.
            assertTrue(subMilli > 100, subMilli + " of 200 events had sub-millisecond precision");
        } finally {
            cfg.getRootLogger().removeAppender("capture");
            ctx.updateLoggers();
            capture.stop();
        }
    }

    /**
     * Log4j reads currentTimeMillis() beside events' instants (rollover, the
     * non-precise path): it comes from the instants' clock, so a millisecond read
     * between two event stamps lies between theirs.  (Here the line keeps within
     * ~20 ns of the kernel, less than the gap between two reads, and the old
     * routing -- FastClock.currentTimeMillis(), the JDK's on JDK 17 -- passed too.)
     */
    @Test
    void itsMillisecondsComeFromTheEventsClock() {
        Log4jClock clock = new Log4jClock();
        MutableInstant a = new MutableInstant(), b = new MutableInstant();
        long outside = 0, n = 0;
        long end = System.nanoTime() + 500_000_000L;
        while (System.nanoTime() - end < 0) {
            for (int i = 0; i < 10_000; i++, n++) {
                clock.init(a);
                long m = clock.currentTimeMillis();
                clock.init(b);
                if (m < a.getEpochMillisecond() || m > b.getEpochMillisecond())
                    outside++;
            }
        }
        assertTrue(n > 100_000, "only " + n + " reads");
        assertEquals(0, outside, outside + " of " + n + " millisecond reads outside the events around them");
    }

    /**
     * Log4jClock keeps the second of the last event to skip a division: across
     * second boundaries, and with two threads replacing it, every value must still
     * be fastclock's own, split right.
     */
    @Test
    void theSecondCacheSplitsRightAcrossSecondsAndThreads() throws Exception {
        Log4jClock clock = new Log4jClock();
        long[] boundaries = new long[2];
        Throwable[] failure = new Throwable[2];
        Thread[] threads = new Thread[2];
        for (int t = 0; t < 2; t++) {
            int me = t;
            threads[t] = new Thread(() -> {
                try {
                    MutableInstant mi = new MutableInstant();
                    long end = System.nanoTime() + 1_300_000_000L, lastSec = -1;
                    while (System.nanoTime() < end) {
                        long before = FastClock.currentTimeNanos();
                        clock.init(mi);
                        long after = FastClock.currentTimeNanos();
                        long nano = mi.getNanoOfSecond();
                        assertTrue(nano >= 0 && nano < 1_000_000_000L, "nano " + nano);
                        long ns = mi.getEpochSecond() * 1_000_000_000L + nano;
                        assertTrue(ns >= before && ns <= after, before + " <= " + ns + " <= " + after);
                        if (lastSec >= 0 && mi.getEpochSecond() != lastSec)
                            boundaries[me]++;
                        lastSec = mi.getEpochSecond();
                    }
                } catch (Throwable e) {
                    failure[me] = e;
                }
            });
            threads[t].start();
        }
        for (Thread t : threads)
            t.join();
        for (Throwable f : failure)
            if (f != null)
                throw new AssertionError(f);
        assertTrue(boundaries[0] >= 1 && boundaries[1] >= 1, "1.3 s of reads in each thread crossed a second");
    }
}
