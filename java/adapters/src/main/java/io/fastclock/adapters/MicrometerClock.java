package io.fastclock.adapters;

import io.fastclock.TimeSource;
import io.micrometer.core.instrument.Clock;
import java.util.Objects;

/**
 * Micrometer's {@link Clock} from a {@link TimeSource}: pass {@code MicrometerClock.system()} where a
 * registry takes a clock ({@code new SimpleMeterRegistry(SimpleConfig.DEFAULT, MicrometerClock.system())}),
 * or {@code MicrometerClock.of(manualTimeSource)} in tests.  {@link #wallTime()} is UTC ms,
 * {@link #monotonicTime()} monotonic ns.
 */
public final class MicrometerClock implements Clock {
    private final TimeSource source;

    private MicrometerClock(TimeSource source) {
        this.source = source;
    }

    public static MicrometerClock system() {
        return SystemHolder.INSTANCE;
    }

    /** Built on first use: a test that only wraps a manual source never loads the native library
     *  or starts the calibrator (a nested class is initialised only when first touched). */
    private static final class SystemHolder {
        static final MicrometerClock INSTANCE = new MicrometerClock(TimeSource.system());
    }

    public static MicrometerClock of(TimeSource source) {
        return new MicrometerClock(Objects.requireNonNull(source, "source"));
    }

    @Override
    public long wallTime() {
        return source.currentTimeMillis();
    }

    @Override
    public long monotonicTime() {
        return source.nanoTime();
    }

    @Override
    public String toString() {
        return "MicrometerClock[" + source + "]";
    }
}
