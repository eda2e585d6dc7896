package io.fastclock;

import java.time.Duration;
import java.time.Instant;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.UnaryOperator;

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
 * <p>Thread-safe and lock-free: reads and changes may come from any thread; a read that
 * happens after a change sees it.  The whole clock (monotonic time, UTC offset,
 * auto-advance step, bounds) is one immutable state behind one atomic reference, and every
 * change replaces it by compare-and-set: each change and each read is atomic, so a read never
 * mixes two states (a UTC the clock never held), and a step of UTC applies to the monotonic
 * time it finds (an advance is either before it or after it, never half of each).  A read
 * without auto-advance is one volatile load and allocates nothing; changes (and reads with
 * auto-advance, which change the clock) allocate the new state.
 *
 * <p>Not {@link java.io.Serializable}: it is mutable test state (and so is a
 * {@code java.time.Clock} from {@link #withZone}, which serialises only with its source).
 */
public final class ManualTimeSource implements TimeSource {
    /** One state of the clock; never changed, only replaced. */
    private static final class State {
        final long nanos;
        /** UTC ns minus monotonic ns. */
        final long utcOffset;
        final long autoAdvanceNs;
        final long halfWidthNs;
        final boolean synchronised;

        State(long nanos, long utcOffset, long autoAdvanceNs, long halfWidthNs, boolean synchronised) {
            this.nanos = nanos;
            this.utcOffset = utcOffset;
            this.autoAdvanceNs = autoAdvanceNs;
            this.halfWidthNs = halfWidthNs;
            this.synchronised = synchronised;
        }

        /** Monotonic time moved to {@code next}, UTC with it; exact: UTC beyond a long throws. */
        State at(long next) {
            Math.addExact(next, utcOffset);
            return new State(next, utcOffset, autoAdvanceNs, halfWidthNs, synchronised);
        }

        long utc() {
            return Math.addExact(nanos, utcOffset);
        }
    }

    private final AtomicReference<State> state;

    private ManualTimeSource(long nanoTime, long utcNanos) {
        // Exact: a wrapped offset would make every later read throw instead.
        this.state = new AtomicReference<>(new State(nanoTime, Math.subtractExact(utcNanos, nanoTime), 0, 0, true));
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
        // Exact: an overflow throws before anything changes; a concurrent change is kept.
        return update(s -> s.at(Math.addExact(s.nanos, ns)));
    }

    /** Steps UTC to {@code utc} (forward or back); monotonic time does not move. */
    public ManualTimeSource setInstant(Instant utc) {
        long target = epochNanos(Objects.requireNonNull(utc, "utc"));
        // At the monotonic time of the state it replaces: an advance is wholly before or after.
        return update(s -> new State(s.nanos, Math.subtractExact(target, s.nanos), s.autoAdvanceNs, s.halfWidthNs,
                s.synchronised));
    }

    /** Replaces the state by {@code f} of it, atomically (compare-and-set, retried on a concurrent change). */
    private ManualTimeSource update(UnaryOperator<State> f) {
        for (;;) {
            State cur = state.get(), next = f.apply(cur);
            if (state.compareAndSet(cur, next))
                return this;
        }
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
        return update(s -> new State(s.nanos, s.utcOffset, ns, s.halfWidthNs, s.synchronised));
    }

    /**
     * What {@link #currentTimeBounds} reports: UTC &plusmn; {@code halfWidth}, and whether the
     * time counts as synchronised.
     */
    public ManualTimeSource setBounds(Duration halfWidth, boolean synchronised) {
        long ns = halfWidth.toNanos();
        if (ns < 0)
            throw new IllegalArgumentException("negative half-width " + halfWidth);
        return update(s -> new State(s.nanos, s.utcOffset, s.autoAdvanceNs, ns, synchronised));
    }

    /**
     * The state now, then moved on by its auto-advance step: a read is one state.
     *
     * @throws ArithmeticException if the step would carry the clock, or UTC, past a long of
     *     ns (as {@link #advanceNanos} refuses it); the clock is then unchanged
     */
    private State read() {
        for (;;) {
            State cur = state.get();
            long step = cur.autoAdvanceNs;
            if (step == 0)
                return cur;
            // As advanceNanos: never wraps, nor carries UTC past a long.
            if (state.compareAndSet(cur, cur.at(Math.addExact(cur.nanos, step))))
                return cur;
        }
    }

    @Override
    public long nanoTime() {
        return read().nanos;
    }

    /** @throws ArithmeticException if auto-advance has carried UTC past the year 2262 */
    @Override
    public long currentTimeNanos() {
        return read().utc();
    }

    @Override
    public boolean currentTimeBounds(long[] earliestLatest) {
        if (earliestLatest.length < 2)
            throw new IllegalArgumentException("earliestLatest needs 2 elements, has " + earliestLatest.length);
        State s = read(); // the time and the bounds of one state
        long now = s.utc(), w = s.halfWidthNs;
        // Saturated: a half-width set wide enough to leave a long never turns the interval inside out.
        long earliest = now - w, latest = now + w;
        earliestLatest[0] = earliest > now ? Long.MIN_VALUE : earliest;
        earliestLatest[1] = latest < now ? Long.MAX_VALUE : latest;
        return s.synchronised;
    }

    @Override
    public String toString() {
        State s = state.get();
        return "ManualTimeSource[nanoTime=" + s.nanos + ", utc=" + Instant.ofEpochSecond(0, 0).plusNanos(s.nanos + s.utcOffset) + "]";
    }
}
