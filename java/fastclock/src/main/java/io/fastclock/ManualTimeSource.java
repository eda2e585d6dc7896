package io.fastclock;

import java.time.Duration;
import java.time.Instant;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A {@link TimeSource} for tests: time stands still until the test moves it.
 *
 * <p>Monotonic time only ever moves forward ({@link #advance}); UTC moves with it
 * and can also be stepped on its own ({@link #setInstant}), as an administrator or
 * NTP steps the kernel's clock.  Optionally every read advances by a fixed step
 * ({@link #setAutoAdvance}, as Guava's {@code FakeTicker.setAutoIncrementStep}).
 * The bounds reported by {@link #currentTimeBounds} are the current UTC
 * &plusmn; a half-width the test chooses (default 0), and "synchronised" as the test
 * says (default true).
 *
 * <p>Thread-safe: reads and changes may come from any thread; a read that
 * happens after a change sees it.
 */
public final class ManualTimeSource implements TimeSource {
    private final AtomicLong nanos;
    /** UTC ns minus monotonic ns. */
    private volatile long utcOffset;
    private volatile long autoAdvanceNs;
    private volatile long halfWidthNs;
    private volatile boolean synchronised = true;

    private ManualTimeSource(long nanoTime, long utcNanos) {
        this.nanos = new AtomicLong(nanoTime);
        // Exact: a wrapped offset would make every later read throw instead.
        this.utcOffset = Math.subtractExact(utcNanos, nanoTime);
    }

    /** UTC at {@code utc}, monotonic time at 0. */
    public static ManualTimeSource at(Instant utc) {
        return at(utc, 0);
    }

    /** UTC at {@code utc}, monotonic time at {@code nanoTime}. */
    public static ManualTimeSource at(Instant utc, long nanoTime) {
        return new ManualTimeSource(nanoTime, epochNanos(Objects.requireNonNull(utc, "utc")));
    }

    /** Starting at the time of another source (e.g. {@code TimeSource.system()}), frozen there. */
    public static ManualTimeSource startingAt(TimeSource now) {
        return new ManualTimeSource(now.nanoTime(), now.currentTimeNanos());
    }

    private static long epochNanos(Instant i) {
        return Math.addExact(Math.multiplyExact(i.getEpochSecond(), 1_000_000_000L), i.getNano());
    }

    /**
     * Moves monotonic time and UTC forward together.
     *
     * @throws IllegalArgumentException if {@code d} is negative (monotonic time never goes back)
     */
    public ManualTimeSource advance(Duration d) {
        return advanceNanos(d.toNanos());
    }

    /**
     * {@link #advance(Duration)} in nanoseconds.
     *
     * @throws ArithmeticException if UTC would leave a long of ns since the epoch (past
     *     the year 2262), as {@link #at} and {@link #setInstant} refuse such a time; the
     *     clock is then unchanged
     */
    public ManualTimeSource advanceNanos(long ns) {
        if (ns < 0)
            throw new IllegalArgumentException("monotonic time never goes back: " + ns + " ns");
        for (;;) { // a CAS, not an add: a concurrent auto-advance is kept, an overflow is not
            long cur = nanos.get(), next = Math.addExact(cur, ns);
            Math.addExact(next, utcOffset);
            if (nanos.compareAndSet(cur, next))
                return this;
        }
    }

    /** Steps UTC to {@code utc} (forward or back); monotonic time does not move. */
    public ManualTimeSource setInstant(Instant utc) {
        long target = epochNanos(Objects.requireNonNull(utc, "utc"));
        synchronized (this) { // against a concurrent step; reads stay lock-free
            utcOffset = Math.subtractExact(target, nanos.get());
        }
        return this;
    }

    /**
     * Every read of {@link #nanoTime()} or {@link #currentTimeNanos()} (and what derives from
     * them) returns the current time, then advances by {@code step}.  {@code Duration.ZERO}
     * turns it off.  A read whose step would carry monotonic time or UTC past a long of ns throws
     * {@link ArithmeticException} and leaves the clock where it was, as {@link #advanceNanos} does.
     *
     * @throws IllegalArgumentException if {@code step} is negative
     */
    public ManualTimeSource setAutoAdvance(Duration step) {
        long ns = step.toNanos();
        if (ns < 0)
            throw new IllegalArgumentException("monotonic time never goes back: step " + step);
        autoAdvanceNs = ns;
        return this;
    }

    /**
     * What {@link #currentTimeBounds} reports: UTC &plusmn; {@code halfWidth}, and whether the
     * time counts as synchronised.
     */
    public ManualTimeSource setBounds(Duration halfWidth, boolean synchronised) {
        long ns = halfWidth.toNanos();
        if (ns < 0)
            throw new IllegalArgumentException("negative half-width " + halfWidth);
        this.halfWidthNs = ns;
        this.synchronised = synchronised;
        return this;
    }

    /**
     * The time now, then moved on by the auto-advance step.
     *
     * @throws ArithmeticException if the step would carry the clock, or UTC, past a long of
     *     ns (as {@link #advanceNanos} refuses it); the clock is then unchanged
     */
    private long read() {
        long step = autoAdvanceNs;
        if (step == 0)
            return nanos.get();
        for (;;) { // as advanceNanos: never wraps, nor carries UTC past a long
            long cur = nanos.get(), next = Math.addExact(cur, step);
            Math.addExact(next, utcOffset);
            if (nanos.compareAndSet(cur, next))
                return cur;
        }
    }

    @Override
    public long nanoTime() {
        return read();
    }

    /** @throws ArithmeticException if auto-advance has carried UTC past the year 2262 */
    @Override
    public long currentTimeNanos() {
        long offset = utcOffset;
        return Math.addExact(read(), offset);
    }

    @Override
    public boolean currentTimeBounds(long[] earliestLatest) {
        if (earliestLatest.length < 2)
            throw new IllegalArgumentException("earliestLatest needs 2 elements, has " + earliestLatest.length);
        long now = currentTimeNanos(), w = halfWidthNs;
        // Saturated: a half-width set wide enough to leave a long never turns the interval inside out.
        long earliest = now - w, latest = now + w;
        earliestLatest[0] = earliest > now ? Long.MIN_VALUE : earliest;
        earliestLatest[1] = latest < now ? Long.MAX_VALUE : latest;
        return synchronised;
    }

    @Override
    public String toString() {
        long n = nanos.get();
        return "ManualTimeSource[nanoTime=" + n + ", utc=" + Instant.ofEpochSecond(0, 0).plusNanos(n + utcOffset) + "]";
    }
}
