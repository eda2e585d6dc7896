package io.fastclock.adapters;

import io.fastclock.FastClock;
import org.apache.logging.log4j.core.time.MutableInstant;
import org.apache.logging.log4j.core.time.PreciseClock;
import org.apache.logging.log4j.core.util.Clock;

/**
 * Log4j 2's clock from fastclock: select it with
 * {@code -Dlog4j2.clock=io.fastclock.adapters.Log4jClock}.  Log events then carry
 * {@link FastClock#currentTimeNanos()} at nanosecond precision (Log4j's
 * {@link PreciseClock}), and {@link #currentTimeMillis()} is
 * {@link FastClock#currentTimeMillis()}.  Log4j creates it by name, so it always
 * uses the library's clock; no state.
 */
public final class Log4jClock implements Clock, PreciseClock {
    /** For Log4j, which instantiates the class named by log4j2.clock. */
    public Log4jClock() {}

    @Override
    public long currentTimeMillis() {
        return FastClock.currentTimeMillis();
    }

    @Override
    public void init(MutableInstant instant) {
        long ns = FastClock.currentTimeNanos();
        instant.initFromEpochSecond(Math.floorDiv(ns, 1_000_000_000L), (int) Math.floorMod(ns, 1_000_000_000L));
    }

    @Override
    public String toString() {
        return "fastclock Log4jClock";
    }
}
