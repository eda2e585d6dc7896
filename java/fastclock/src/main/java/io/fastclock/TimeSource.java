package io.fastclock;

import java.time.Instant;
import java.time.InstantSource;

/**
 * A clock as an object: monotonic nanoseconds, UTC nanoseconds and bounded UTC,
 * for code that takes its time from a parameter instead of calling static
 * methods, so that tests can hand it a {@link ManualTimeSource}.
 *
 * <p>Two implementations come with the library: {@link #system()} (fastclock,
 * the static methods of {@link FastClock}) and {@link ManualTimeSource} (time
 * that only moves when a test says so, like {@code Clock.fixed} or Guava's
 * {@code FakeTicker}).  As an {@link InstantSource} it plugs into java.time:
 * {@code ZonedDateTime.now(source.withZone(zone))}.
 *
 * <p>The contract of each method is that of its {@link FastClock} namesake.
 */
public interface TimeSource extends InstantSource {
    /** Nanoseconds on a monotonic timeline (for the system source: CLOCK_MONOTONIC, as System.nanoTime()). */
    long nanoTime();

    /** Nanoseconds since the Unix epoch, UTC. */
    long currentTimeNanos();

    /**
     * Fills {@code earliestLatest[0]} and {@code [1]} with an interval that contains true UTC
     * now (ns since the epoch); true when the time is known to be synchronised.
     *
     * @throws IllegalArgumentException if the array has fewer than 2 elements
     */
    boolean currentTimeBounds(long[] earliestLatest);

    /** Milliseconds since the Unix epoch, UTC. */
    default long currentTimeMillis() {
        return Math.floorDiv(currentTimeNanos(), 1_000_000L);
    }

    @Override
    default long millis() {
        return currentTimeMillis();
    }

    @Override
    default Instant instant() {
        long ns = currentTimeNanos();
        return Instant.ofEpochSecond(0, ns);
    }

    /**
     * This library's clocks: {@link FastClock}'s static methods as an object (one shared
     * instance), except that its {@link #currentTimeMillis()} and {@link #millis()} come
     * from {@link #currentTimeNanos()}'s clock, as this interface's default does, where
     * {@link FastClock#currentTimeMillis()} is routed on its own.
     */
    static TimeSource system() {
        return FastClock.timeSource();
    }
}
