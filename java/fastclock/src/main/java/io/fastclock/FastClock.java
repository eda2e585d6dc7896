package io.fastclock;

import java.time.Clock;
import java.time.Instant;
import java.time.InstantSource;
import java.time.ZoneId;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.locks.LockSupport;

/**
 * The kernel's CLOCK_MONOTONIC and CLOCK_REALTIME at the cost of one counter
 * read, through libfastclock.
 *
 * <p>The jar carries the native library for linux-x86_64 (and linux-aarch64 where
 * the build had a cross-compiled one) and calls it through
 * JNI on Java 17-21 and through critical FFM downcalls on Java 22+.  When the
 * library cannot be loaded, or with {@code -Dfastclock.native=false}, every
 * method answers from pure Java instead ({@link #isNative()} is then false and
 * {@link #reason()} says why).  No method throws (but for null or short
 * arguments), and the clock methods allocate nothing -- but where
 * {@code Instant.now()}, the JDK's counterpart, answers {@link #currentTimeNanos()}
 * and the methods built on it ({@code status()} says so: {@code answers=}): it
 * builds an {@code Instant}, which escape analysis may or may not remove; and in
 * the pure-Java fallback the read that resamples (one per 100 ms at most) builds
 * its sample and reads {@code Instant.now()} 16 times.
 *
 * <p>Never slower than the JDK: each fine clock is answered by fastclock only
 * where, measured in this process at start-up, it costs at most 0.95x its JDK
 * counterpart ({@code System.nanoTime()}, {@code System.currentTimeMillis()},
 * {@code Instant.now()}); elsewhere by that JDK clock itself.  Three routes
 * are decided by construction, not measured: the JDK's own leaf clocks answer
 * where the core's read is the kernel's same call, or does the kernel's work
 * and more (tsc-percpu's lines on a kernel whose clocksource is the counter); fastclock answers
 * {@code currentTimeNanos()} there (the same call, without building an
 * Instant); and over FFM, fastclock's {@code nanoTime()} where the core's line
 * answers (the kernel's work less its timespec split).  {@link #status()}
 * shows who answers each method ({@code answers=}) and the figures
 * ({@code answers_why=}); see {@code Routes}.
 *
 * <p>Guarantees, native:
 * <ul>
 *   <li>{@link #nanoTime()} and {@link #currentTimeNanos()} are <em>ordered</em> reads
 *       (fenced counter reads): a read that happens after another one (same thread, or
 *       ordered by a lock, a volatile or any other happens-before edge) never returns a
 *       smaller {@code nanoTime()}.  The same contract as {@code System.nanoTime()}, on the
 *       same timeline: values are directly comparable with {@code System.nanoTime()} on
 *       Linux, to within the core's error bound (monotonicity holds within each clock, not
 *       between a {@code System.nanoTime()} read and a {@code FastClock} one).  In the core's
 *       {@code tsc-percpu} mode (machines whose CPUs' counters disagree) order across threads
 *       holds to within that error bound only; {@link #mode()} says which mode runs.</li>
 *   <li>The {@code *Unordered()} variants skip the fence and cost about half as much in C;
 *       they are monotonic within one platform thread only (a virtual thread that moves
 *       to another carrier is, for them, a read from another thread).  Use them for
 *       intervals timed by one thread.  Monotonicity holds per method: where the JDK answers one of
 *       {@code nanoTime()} and {@code nanoTimeUnordered()} and fastclock the other
 *       ({@code status()}, {@code answers=}), a read of one after the other may be
 *       earlier by up to the error bound.</li>
 *   <li>The error against the kernel's clocks stays within the bound the core reports
 *       (about 100 ns), at any uptime; UTC follows the kernel's steps and NTP slewing.</li>
 * </ul>
 * Pure Java: {@code nanoTime()} is {@code System.nanoTime()}; UTC is
 * {@code System.nanoTime()} plus an offset to {@code Instant.now()}, resampled by the first
 * read that finds it older than 100 ms (no thread of its own): a step of the system clock,
 * or a suspend, shows in UTC at that resample, up to 100 ms later.
 *
 * <p>The objects {@link #timeSource()} / {@link #instantSource()} and {@link #clock(ZoneId)}
 * return are {@link java.io.Serializable}, as {@code java.time.Clock} asks: the source
 * deserialises as the one shared instance, a clock as {@code FastClock.clock(zone)} in the
 * deserialising JVM (what it reads is that JVM's fastclock, not a value carried over).
 */
public final class FastClock {
    private static final long NANOS_PER_SECOND = 1_000_000_000L;
    private static final long NANOS_PER_MILLI = 1_000_000L;

    /** Constant after class initialisation, so the JIT folds the branch in every method. */
    private static final boolean NATIVE;
    /** Where the library came from, or why there is none. */
    private static final String LOAD_DETAIL;
    /** Who answers each fine clock (see {@link Routes}); constant after class initialisation. */
    private static final Routes ROUTES;
    private static final boolean R_NANO, R_NANO_U, R_REAL, R_REAL_U, R_MILLIS;
    /** A Clock's millis() from fastclock's REALTIME, not the JDK's: see {@link #clockMillis()}. */
    private static final boolean CLOCK_MILLIS_NATIVE;
    /** Kept for the benchmarks' and tests' reference: see {@link Routes#JNI_CALL_NS}. */
    static final double JNI_CALL_NS = Routes.JNI_CALL_NS;

    static {
        boolean nat = false;
        Routes routes = null;
        boolean realIsKernelForGood = false;
        String detail;
        try {
            NativeLoader.Result r = NativeLoader.load(NativeLoader.Config.fromSystem());
            detail = r.detail;
            if (r.loaded) {
                CoreState first = awaitFirstLine();
                String binding = NativeCalls.binding();
                // No coarse read here: the core ticks the coarse clocks every millisecond
                // from their first read on (coarseNanoTime), not for every JVM that loads this.
                boolean preferJdk = Props.flag("fastclock.preferJdkClocks", true);
                CoreState[] decidedOn = {first};
                if (preferJdk) {
                    routes = Routes.onSettledState(first, () -> CoreState.of(Jni.status()), state -> {
                        decidedOn[0] = state;
                        return decided(binding, state);
                    });
                } else {
                    double[] measured = new double[Jni.COST_FIGURES];
                    Jni.costs(measured);
                    routes = Routes.allNative(binding, Routes.fromMeasurement(measured));
                }
                // For a Clock's millis(): "vdso" before the first line (a start-up that
                // gave up waiting) may become the line's REALTIME later.
                realIsKernelForGood = decidedOn[0].realIsKernelForGood;
                nat = true; /* last: a failure above leaves the JDK answering, and says so */
            }
        } catch (Throwable t) {
            detail = "the native library is unusable (" + t + ")";
        }
        NATIVE = nat;
        LOAD_DETAIL = detail;
        if (routes == null || !nat) // a decision taken before a failure does not stand
            routes = Routes.java("pure Java");
        ROUTES = routes;
        R_NANO = routes.nanoTime;
        R_NANO_U = routes.nanoTimeUnordered;
        R_REAL = routes.currentTimeNanos;
        R_REAL_U = routes.currentTimeNanosUnordered;
        R_MILLIS = routes.currentTimeMillis;
        CLOCK_MILLIS_NATIVE = clockMillisNative(nat, realIsKernelForGood, R_REAL, R_MILLIS);
    }

    /**
     * The routes for the core in this state, from costs measured now.  Where
     * fastclock's read is the kernel's own (mode system, or tsc-percpu answered by
     * the kernel's clock: counter "clock_gettime ..."), it cannot beat the JDK's
     * call of the same clock: no measurement decides that (two measurements of one
     * vDSO call would let noise pick the answer, differently between JVMs).
     */
    private static Routes decided(String binding, CoreState s) {
        // Every measurement on the line's steady path, or set aside (Routes.OFF_STEADY):
        // only where the line answers, and a decision rests on it.
        boolean lineAnswers = s.monoIsLine && !s.monoIsKernel;
        int[] setAside = {0};
        java.util.function.Consumer<double[]> measure = out -> System.arraycopy(
                Routes.measuredSteady(Jni::costs, lineAnswers, FastClock::pause, setAside), 0, out, 0, out.length);
        double[] measured = new double[Jni.COST_FIGURES];
        measure.accept(measured);
        Routes routes = Routes.decide(binding, Routes.fromMeasurement(measured), s);
        if (routes.close) {
            measured = Routes.measuredAgain(measured, measure);
            routes = Routes.decide(binding, Routes.fromMeasurement(measured), s)
                    .noted("close to a threshold at first: the median of three measurements");
        }
        if (lineAnswers)
            routes = routes.noted(Routes.steadyNote(measured, setAside[0]));
        if (s.perCpuOverVdso)
            routes = routes.noted("the JDK's leaf clocks by construction: the kernel's vDSO reads the "
                    + "counter with less work than a per-CPU line");
        return routes;
    }

    /**
     * Whether a Clock's millis() reads fastclock's REALTIME (else the JDK's
     * currentTimeMillis()): the same clock as its instant() wherever the two
     * differ -- fastclock's line, within the error bound of the kernel's clock,
     * against the JDK's, which is the kernel's: mixed, a millis() could follow an
     * instant() one millisecond lower.  Where fastclock's REALTIME is the kernel's
     * own for good (not just until its first line), both are the same clock, and
     * the cheaper route stands.
     */
    static boolean clockMillisNative(boolean nat, boolean realIsKernel, boolean rReal, boolean rMillis) {
        return nat && (realIsKernel ? rMillis : rReal);
    }

    /** Parks for ns, however often the thread is interrupted meanwhile, and leaves its interrupt as it was. */
    private static void pause(long ns) {
        boolean interrupted = Thread.interrupted();
        long deadline = System.nanoTime() + ns;
        for (long left = ns; left > 0; left = deadline - System.nanoTime()) {
            LockSupport.parkNanos(left);
            interrupted |= Thread.interrupted();
        }
        if (interrupted)
            Thread.currentThread().interrupt();
    }

    /**
     * The core builds its first line a few tens of microseconds after deciding
     * its mode; until then its reads are the kernel's, which would be measured
     * instead of its own.  Waits up to 50 ms for a calibration, reading the clock
     * meanwhile (with FASTCLOCK_CALIBRATOR=lazy readers calibrate) -- not where no
     * line will come: mode system, or the kernel's clock answering tsc-percpu
     * (counter "clock_gettime ...").  Parks rather than sleeps: class
     * initialisation on an interrupted thread neither throws (which would cost the
     * native library for the JVM's life) nor clears the caller's interrupt.
     */
    private static CoreState awaitFirstLine() {
        // A plain JNI call first: it settles the core's mode decision before any
        // critical FFM call runs, and proves the library answers.
        Map<String, String> st = CoreState.parse(Jni.status());
        long deadline = System.nanoTime() + 50_000_000L;
        while (!("system".equals(st.get("mode")) || CoreState.kernelAnswersFineReads(st)
                || CoreState.number(st.get("calibrations")) > 0) && System.nanoTime() - deadline < 0) {
            for (int r = 0; r < 64; r++)
                Jni.monoNs();
            // pause, not parkNanos: on an interrupted thread parkNanos returns at once,
            // and the wait would shrink to nothing (the routes then measured on the
            // kernel's reads, for the JVM's life).
            pause(1_000_000L);
            st = CoreState.parse(Jni.status());
        }
        return new CoreState(st);
    }

    private static final Source SOURCE = new Source();

    private FastClock() {}

    // ------------------------------------------------------------ monotonic

    /**
     * Nanoseconds on the CLOCK_MONOTONIC timeline: comparable with {@code System.nanoTime()}
     * on Linux, and monotonic across threads in the happens-before sense.
     */
    public static long nanoTime() {
        return R_NANO ? NativeCalls.monoNs() : System.nanoTime();
    }

    /**
     * {@link #nanoTime()} without the counter fence: monotonic within the calling thread
     * only.  A read ordered after another thread's read may come out a few hundred
     * nanoseconds earlier.
     */
    public static long nanoTimeUnordered() {
        return R_NANO_U ? NativeCalls.monoNsUnordered() : System.nanoTime();
    }

    /**
     * CLOCK_MONOTONIC with about 1 ms resolution; never ahead of {@link #nanoTime()} by more
     * than the core's error bound.  Read from memory the core's calibrator thread publishes
     * about every millisecond (no native call), with an acquire load: a read never returns
     * less than a read that happens before it, in any thread.  While nobody publishes (mode
     * system, or before the thread's first tick) the core's function answers.  The core ticks
     * only once the coarse clocks are read: the first coarse read in the process asks for
     * ticks and, until the first one (about a millisecond), is answered from the fine clock.
     */
    public static long coarseNanoTime() {
        if (NATIVE) {
            long v = NativeCalls.coarseMono();
            return v != 0 ? v : NativeCalls.monoCoarseNs();
        }
        return System.nanoTime();
    }

    // ------------------------------------------------------------ UTC

    /** Nanoseconds since the Unix epoch, UTC (the kernel's CLOCK_REALTIME). */
    public static long currentTimeNanos() {
        if (R_REAL)
            return NativeCalls.realNs();
        return NATIVE ? instantNowNanos() : JavaClock.currentTimeNanos();
    }

    /** Instant.now() as ns since the epoch (the Instant is allocated unless escape analysis removes it). */
    private static long instantNowNanos() {
        Instant i = Instant.now();
        return i.getEpochSecond() * NANOS_PER_SECOND + i.getNano();
    }

    /** {@link #currentTimeNanos()} without the counter fence (see {@link #nanoTimeUnordered()}). */
    public static long currentTimeNanosUnordered() {
        if (R_REAL_U)
            return NativeCalls.realNsUnordered();
        return currentTimeNanos();
    }

    /** Microseconds since the Unix epoch, UTC. */
    public static long currentTimeMicros() {
        return Math.floorDiv(currentTimeNanos(), 1000L);
    }

    /**
     * Milliseconds since the Unix epoch, UTC; the instant of {@link #currentTimeNanos()}
     * (to within the core's error bound where the JDK's clock answers, see {@link #status()}).
     */
    public static long currentTimeMillis() {
        return R_MILLIS ? Math.floorDiv(NativeCalls.realNs(), NANOS_PER_MILLI) : System.currentTimeMillis();
    }

    /**
     * A java.time Clock's millis(): instant().toEpochMilli(), as Clock requires, so from
     * instant()'s clock (see {@link #clockMillisNative}).  The pure-Java fallback's
     * currentTimeNanos() follows a step of the system clock only at its next resample
     * (100 ms) while the JDK's currentTimeMillis() follows at once, so there both come
     * from currentTimeNanos().
     */
    static long clockMillis() {
        if (!NATIVE)
            return Math.floorDiv(currentTimeNanos(), NANOS_PER_MILLI);
        return CLOCK_MILLIS_NATIVE ? Math.floorDiv(NativeCalls.realNs(), NANOS_PER_MILLI) : System.currentTimeMillis();
    }

    /**
     * Milliseconds since the Unix epoch with about 1 ms resolution; not ahead of
     * {@link #currentTimeMillis()} beyond the error bound, except until the next tick
     * after the system clock is stepped back.
     */
    public static long coarseCurrentTimeMillis() {
        if (NATIVE) {
            long ns = NativeCalls.coarseMono() != 0 ? NativeCalls.coarseReal() : NativeCalls.realCoarseNs();
            // A plain division where it equals floorDiv (every time after 1970): cheaper.
            return ns >= 0 ? ns / NANOS_PER_MILLI : Math.floorDiv(ns, NANOS_PER_MILLI);
        }
        return System.currentTimeMillis();
    }

    /**
     * The pure-Java fallback's half-width for {@link #currentTimeBounds}: without adjtimex
     * it cannot know how well the kernel's clock is disciplined, so it claims what the kernel
     * reports for an unsynchronised clock (maxerror saturates at NTP_PHASE_LIMIT, 16 s), plus
     * half a millisecond: the interval is centred on the middle of the JDK's current
     * millisecond ({@code System.currentTimeMillis()}, the kernel's REALTIME truncated).
     */
    static final long FALLBACK_HALF_WIDTH_NS = 16 * NANOS_PER_SECOND + NANOS_PER_MILLI / 2;

    /**
     * An interval that contains true UTC now, in ns since the epoch: fills
     * {@code earliestLatest[0]} with the earliest and {@code [1]} with the latest possible
     * time, and returns true when a daemon (NTP, PTP) synchronises the kernel's clock.
     * Native: the core's {@code fastclock_real_bounded} (its own error against the kernel's
     * REALTIME plus the kernel's maxerror, grown at 500 ppm since NTP last set it; an
     * unsynchronised kernel gives 16 s).  Pure Java: the JDK's clock
     * &plusmn; {@link #FALLBACK_HALF_WIDTH_NS}, and false (it cannot ask the kernel).
     * Allocates nothing.
     *
     * @throws NullPointerException if the array is null
     * @throws IllegalArgumentException if it has fewer than 2 elements
     */
    public static boolean currentTimeBounds(long[] earliestLatest) {
        if (earliestLatest.length < 2)
            throw new IllegalArgumentException("earliestLatest needs 2 elements, has " + earliestLatest.length);
        if (NATIVE) {
            int r = Jni.realBounded(earliestLatest);
            if (r >= 0)
                return r == 0;
        }
        // The kernel's REALTIME itself, read now: milliseconds are ample against 16 s, and
        // allocate nothing (Instant.now() may).  Not JavaClock's UTC: that is nanoTime plus
        // an offset resampled by the first read 100 ms after the last sample, off by a
        // whole step or suspend until then.
        long mid = System.currentTimeMillis() * NANOS_PER_MILLI + NANOS_PER_MILLI / 2;
        earliestLatest[0] = mid - FALLBACK_HALF_WIDTH_NS;
        earliestLatest[1] = mid + FALLBACK_HALF_WIDTH_NS;
        return false;
    }

    // ------------------------------------------------------------ java.time

    /** The current instant, at nanosecond resolution (allocates the Instant). */
    public static Instant instant() {
        if (NATIVE && !R_REAL)
            return Instant.now();
        // ofEpochSecond splits the adjustment itself (floorDiv/floorMod): splitting
        // here too would divide twice, which cost ~3 ns and made instant() no
        // faster than Instant.now() on JDK 17.
        return Instant.ofEpochSecond(0, currentTimeNanos());
    }

    /**
     * An {@link InstantSource} backed by this clock, for code that takes one (the {@link #timeSource()}).
     * Serializable: it deserialises as this same instance.
     */
    public static InstantSource instantSource() {
        return SOURCE;
    }

    /**
     * This clock as a {@link TimeSource} object (one shared instance), for code that takes
     * its clock as a parameter; tests pass a {@link ManualTimeSource} instead.  Serializable:
     * it deserialises as this same instance.
     */
    public static TimeSource timeSource() {
        return SOURCE;
    }

    /**
     * A {@link Clock} backed by this clock in the given zone, for java.time code
     * ({@code ZonedDateTime.now(FastClock.clock(zone))}).  Serializable, as the JDK's clocks
     * are: it deserialises as {@code FastClock.clock(zone)}, equal to this one.
     *
     * @throws NullPointerException if {@code zone} is null
     */
    public static Clock clock(ZoneId zone) {
        return new ZonedClock(Objects.requireNonNull(zone, "zone"));
    }

    // ------------------------------------------------------------ what runs

    /** True when libfastclock answers; false in the pure-Java fallback. */
    public static boolean isNative() {
        return NATIVE;
    }

    /**
     * The implementation answering now: the core's mode ({@code "tsc"}, {@code "tsc-percpu"}
     * or {@code "system"}, the kernel's own clocks; {@code "initializing"} where another
     * thread's decision did not finish within 100 ms, {@code "unknown"} where the status
     * could not be read) when native, {@code "java"} otherwise.
     */
    public static String mode() {
        if (!NATIVE)
            return "java";
        String m = nativeStatus().get("mode");
        return m != null ? m : "unknown";
    }

    /** One sentence on why {@link #mode()} is what it is. */
    public static String reason() {
        if (!NATIVE)
            return "pure Java: " + LOAD_DETAIL;
        String r = nativeStatus().get("reason");
        return r != null ? r : "status unavailable";
    }

    /** How Java reaches the library: {@code "ffm"}, {@code "jni"}, or {@code "java"} (no library). */
    public static String binding() {
        return NATIVE ? NativeCalls.binding() : "java";
    }

    /** A multi-line description for logs and bug reports: mode, reason, loading, binding, accuracy. */
    public static String status() {
        StringBuilder sb = new StringBuilder(512);
        sb.append("fastclock-java: ").append(NATIVE ? "native" : "pure Java").append('\n');
        sb.append("binding=").append(binding()).append('\n');
        if (NATIVE) {
            sb.append("library=").append(LOAD_DETAIL).append('\n');
            sb.append("answers=").append(ROUTES.answers).append('\n');
            sb.append("answers_why=").append(ROUTES.costs).append('\n');
            sb.append("coarse=").append(coarseFromMemory()
                    ? "memory the core publishes (" + NativeCalls.coarseAccess() + ", no native call)"
                    : "a native call (the core publishes no coarse clocks now; it ticks them from"
                            + " their first read on)").append('\n');
            String noFfm = NativeCalls.ffmUnavailable();
            if (noFfm != null)
                sb.append("ffm=").append(noFfm).append('\n');
            for (Map.Entry<String, String> e : nativeStatus().entrySet())
                sb.append(e.getKey()).append('=').append(e.getValue()).append('\n');
        } else {
            sb.append("mode=java\nreason=").append(LOAD_DETAIL).append('\n');
            sb.append("answers=").append(ROUTES.answers).append('\n');
            sb.append("utc=").append(JavaClock.describe()).append('\n');
        }
        return sb.toString();
    }

    /** The core's fastclock_status(), live; empty if it cannot be read. */
    static Map<String, String> nativeStatus() {
        Map<String, String> m = new LinkedHashMap<>();
        if (!NATIVE)
            return m;
        try {
            m.putAll(CoreState.parse(Jni.status()));
        } catch (Throwable t) {
            m.put("error", t.toString());
        }
        return m;
    }

    static Routes routes() {
        return ROUTES;
    }

    /** Whether the coarse clocks read the core's published memory now (false: a native call or the JDK). */
    static boolean coarseFromMemory() {
        return NATIVE && NativeCalls.coarseMono() != 0;
    }

    static String loadDetail() {
        return LOAD_DETAIL;
    }

    // ------------------------------------------------------------ adapters

    /** Serializable as the one instance: deserialised, it is this JVM's {@link FastClock#timeSource()}. */
    private static final class Source implements TimeSource, java.io.Serializable {
        private static final long serialVersionUID = 1L;

        private Object readResolve() {
            return SOURCE;
        }

        @Override
        public long nanoTime() {
            return FastClock.nanoTime();
        }

        @Override
        public long currentTimeNanos() {
            return FastClock.currentTimeNanos();
        }

        @Override
        public boolean currentTimeBounds(long[] earliestLatest) {
            return FastClock.currentTimeBounds(earliestLatest);
        }

        /**
         * From currentTimeNanos()'s clock, as TimeSource's default is (clockMillis):
         * FastClock.currentTimeMillis() is routed on its own, and where it is the JDK's
         * while currentTimeNanos() is the line, a millisecond read after a nanosecond
         * reading could fall below it at a millisecond's edge.
         */
        @Override
        public long currentTimeMillis() {
            return clockMillis();
        }

        @Override
        public Instant instant() {
            return FastClock.instant();
        }

        @Override
        public long millis() {
            return clockMillis();
        }

        @Override
        public Clock withZone(ZoneId zone) {
            return clock(zone);
        }

        @Override
        public String toString() {
            return "FastClock.instantSource()";
        }
    }

    /** Serializable as its zone: deserialised, it is {@code FastClock.clock(zone)} in that JVM. */
    private static final class ZonedClock extends Clock implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        private final ZoneId zone;

        ZonedClock(ZoneId zone) {
            this.zone = zone;
        }

        /** Refuses a stream without a zone, as {@link FastClock#clock} refuses a null one. */
        private Object readResolve() throws java.io.ObjectStreamException {
            if (zone == null)
                throw new java.io.InvalidObjectException("zone");
            return this;
        }

        @Override
        public ZoneId getZone() {
            return zone;
        }

        @Override
        public Clock withZone(ZoneId z) {
            return zone.equals(z) ? this : clock(z);
        }

        @Override
        public Instant instant() {
            return FastClock.instant();
        }

        @Override
        public long millis() {
            return clockMillis();
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof ZonedClock && zone.equals(((ZonedClock) o).zone);
        }

        @Override
        public int hashCode() {
            return zone.hashCode() + 0x5fa57c10;
        }

        @Override
        public String toString() {
            return "FastClock.clock[" + zone + "]";
        }
    }
}
