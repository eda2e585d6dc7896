package io.fastclock.adapters;

import io.fastclock.TimeSource;
import java.util.Objects;
import org.agrona.concurrent.EpochClock;
import org.agrona.concurrent.EpochNanoClock;
import org.agrona.concurrent.NanoClock;

/**
 * Agrona's clock interfaces from a {@link TimeSource}.  Agrona's {@code NanoClock} and
 * {@code EpochNanoClock} both name their method {@code nanoTime()} with different meanings
 * (monotonic vs ns since the epoch), so each is its own object:
 * {@code AgronaClocks.nanoClock(TimeSource.system())} for a {@link NanoClock},
 * {@link #epochNanoClock} and {@link #epochClock} for UTC.
 */
public final class AgronaClocks {
    private AgronaClocks() {}

    /** Monotonic ns: the source's nanoTime(). */
    public static NanoClock nanoClock(TimeSource source) {
        Objects.requireNonNull(source, "source");
        return source::nanoTime;
    }

    /** ns since the epoch, UTC: the source's currentTimeNanos(). */
    public static EpochNanoClock epochNanoClock(TimeSource source) {
        Objects.requireNonNull(source, "source");
        return source::currentTimeNanos;
    }

    /** ms since the epoch, UTC: the source's currentTimeMillis(). */
    public static EpochClock epochClock(TimeSource source) {
        Objects.requireNonNull(source, "source");
        return source::currentTimeMillis;
    }
}
