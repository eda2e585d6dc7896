package io.fastclock.adapters;

import com.github.benmanes.caffeine.cache.Ticker;
import io.fastclock.TimeSource;
import java.util.Objects;

/**
 * Caffeine's {@link Ticker} from a {@link TimeSource}: {@code Caffeine.newBuilder().ticker(CaffeineTicker.system())}
 * in production, {@code CaffeineTicker.of(manualTimeSource)} in tests to expire entries on demand.
 * {@link #read()} is the source's {@link TimeSource#nanoTime()} (monotonic ns, as Caffeine expects).
 */
public final class CaffeineTicker implements Ticker {
    private final TimeSource source;

    private CaffeineTicker(TimeSource source) {
        this.source = source;
    }

    /** fastclock's nanoTime(). */
    public static CaffeineTicker system() {
        return SystemHolder.INSTANCE;
    }

    /** Built on first use: a test that only wraps a manual source never loads the native library
     *  or starts the calibrator (a nested class is initialised only when first touched). */
    private static final class SystemHolder {
        static final CaffeineTicker INSTANCE = new CaffeineTicker(TimeSource.system());
    }

    /** The given source's nanoTime(). */
    public static CaffeineTicker of(TimeSource source) {
        return new CaffeineTicker(Objects.requireNonNull(source, "source"));
    }

    @Override
    public long read() {
        return source.nanoTime();
    }

    @Override
    public String toString() {
        return "CaffeineTicker[" + source + "]";
    }
}
