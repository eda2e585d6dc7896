package io.fastclock.adapters;

import io.fastclock.FastClock;
import org.apache.logging.log4j.core.time.MutableInstant;
import org.apache.logging.log4j.core.time.PreciseClock;
import org.apache.logging.log4j.core.util.Clock;

/**
 * Log4j 2's clock from fastclock: select it with
 * {@code -Dlog4j2.clock=io.fastclock.adapters.Log4jClock}.  Log events then carry
 * {@link FastClock#currentTimeNanos()} at nanosecond precision (Log4j's
 * {@link PreciseClock}), and {@link #currentTimeMillis()} comes from the same clock
 * ({@link FastClock#timeSource()}'s: {@link FastClock#currentTimeMillis()} is routed on
 * its own, and could put a millisecond read after an event's stamp below it).  Log4j
 * creates it by name, so it always
 * uses the library's clock.  Its one piece of state is a cache of the current
 * second (below), which allocates one small object per second, not per event.
 * Where the start-up measurement gives UTC to the JDK ({@link FastClock#status()}'s
 * {@code answers=}), each event's read is {@code Instant.now()}'s, whose Instant the JIT
 * removes once the call is inlined, and not before.
 */
public final class Log4jClock implements Clock, PreciseClock {
    /** For Log4j, which instantiates the class named by log4j2.clock. */
    public Log4jClock() {}

    @Override
    public long currentTimeMillis() {
        return SOURCE.currentTimeMillis();
    }

    private static final io.fastclock.TimeSource SOURCE = FastClock.timeSource();

    @Override
    public void init(MutableInstant instant) {
        long ns = FastClock.currentTimeNanos();
        Second s = second;
        long nano = ns - s.startNs;
        if (nano >= 0 && nano < NANOS_PER_SECOND) {
            instant.initFromEpochSecond(s.epochSecond, (int) nano);
            return;
        }
        long sec = Math.floorDiv(ns, NANOS_PER_SECOND);
        second = new Second(sec);
        instant.initFromEpochSecond(sec, (int) (ns - sec * NANOS_PER_SECOND));
    }

    private static final long NANOS_PER_SECOND = 1_000_000_000L;

    /**
     * The second the last event fell in.  Splitting the epoch ns into seconds and
     * nanos takes a 64-bit division (~5 ns, measured: as much as the clock's whole
     * lead over Instant.now()); events in the same second skip it.  Immutable, so a
     * reader sees either the old second or the new one, whole; threads that race
     * to replace it each store a correct one.
     */
    private static final class Second {
        final long epochSecond;
        final long startNs;

        Second(long epochSecond) {
            this.epochSecond = epochSecond;
            this.startNs = epochSecond * NANOS_PER_SECOND;
        }
    }

    private static Second second = new Second(0);

    @Override
    public String toString() {
        return "fastclock Log4jClock";
    }
}
