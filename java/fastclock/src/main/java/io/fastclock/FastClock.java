package io.fastclock;

import java.time.Clock;
import java.time.Instant;
import java.time.InstantSource;
import java.time.ZoneId;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * The kernel's CLOCK_MONOTONIC and CLOCK_REALTIME at the cost of one counter
 * read, through libfastclock.
 *
 * <p>The jar carries the native library for linux-x86_64 and calls it through
 * JNI on Java 17-21 and through critical FFM downcalls on Java 22+.  When the
 * library cannot be loaded, or with {@code -Dfastclock.native=false}, every
 * method answers from pure Java instead ({@link #isNative()} is then false and
 * {@link #reason()} says why).  No method throws, and the clock methods
 * allocate nothing.
 *
 * <p>Guarantees, native:
 * <ul>
 *   <li>{@link #nanoTime()} and {@link #currentTimeNanos()} are <em>ordered</em> reads
 *       (fenced counter reads): a read that happens after another one (same thread, or
 *       ordered by a lock, a volatile or any other happens-before edge) never returns a
 *       smaller {@code nanoTime()}.  The same contract as {@code System.nanoTime()}, on the
 *       same timeline: values are directly comparable with {@code System.nanoTime()} on
 *       Linux.</li>
 *   <li>The {@code *Unordered()} variants skip the fence and cost about half as much in C;
 *       they are monotonic within one thread only.  Use them for intervals timed by one
 *       thread.</li>
 *   <li>The error against the kernel's clocks stays within the bound the core reports
 *       (about 100 ns), at any uptime; UTC follows the kernel's steps and NTP slewing.</li>
 * </ul>
 * Pure Java: {@code nanoTime()} is {@code System.nanoTime()}; UTC is
 * {@code System.nanoTime()} plus an offset to {@code Instant.now()} resampled every
 * 100 ms by a daemon thread.
 */
public final class FastClock {
    private static final long NANOS_PER_SECOND = 1_000_000_000L;
    private static final long NANOS_PER_MILLI = 1_000_000L;

    /** Constant after class initialisation, so the JIT folds the branch in every method. */
    private static final boolean NATIVE;
    /** Where the library came from, or why there is none. */
    private static final String LOAD_DETAIL;
    /**
     * nanoTime() and currentTimeMillis() answered by the JDK's own clocks: over
     * plain JNI (Java 17-21) the call costs more than fastclock saves wherever the
     * kernel's clock_gettime is already fast (a tsc clocksource).  Same timelines,
     * same ordering, and never slower than System's; on HPET or Xen machines the
     * JDK's clocks are slow and fastclock answers.  -Dfastclock.preferJdkClocks=false
     * turns this off (e.g. with -XX:+CriticalJNINatives, whose calls are cheap).
     */
    private static final boolean JDK_CLOCKS;
    private static final String JDK_CLOCKS_WHY;
    /** A plain JNI call from HotSpot on x86-64 (measured 6.5-7 ns: the no-op benchmark). */
    static final double JNI_CALL_NS = 6.0;

    static {
        boolean nat = false, jdk = false;
        String detail, why = "fastclock answers";
        try {
            NativeLoader.Result r = NativeLoader.load(NativeLoader.Config.fromSystem());
            detail = r.detail;
            if (r.loaded) {
                // A plain JNI call first: it settles the core's mode decision before
                // any critical FFM call runs, and proves the library answers.
                Map<String, String> st = parseStatus(Jni.status());
                String binding = NativeCalls.binding();
                nat = true;
                double read = parseDouble(st.get("read_ns")), kernel = parseDouble(st.get("kernel_read_ns"));
                if (preferJdkClocks(binding, read, kernel) && Props.flag("fastclock.preferJdkClocks", true)) {
                    jdk = true;
                    why = String.format(java.util.Locale.ROOT,
                            "System.nanoTime()/currentTimeMillis() (a JNI call, ~%.0f ns, plus fastclock's "
                                    + "%.1f ns read is no faster than the kernel's %.1f ns here)",
                            JNI_CALL_NS, read, kernel);
                }
            }
        } catch (Throwable t) {
            detail = "the native library is unusable (" + t + ")";
        }
        NATIVE = nat;
        LOAD_DETAIL = detail;
        JDK_CLOCKS = jdk;
        JDK_CLOCKS_WHY = why;
    }

    /** Whether the JDK's own fine clocks are at least as fast as reaching fastclock this way. */
    static boolean preferJdkClocks(String binding, double readNs, double kernelReadNs) {
        return "jni".equals(binding) && readNs > 0 && kernelReadNs > 0 && readNs + JNI_CALL_NS >= kernelReadNs;
    }

    private static double parseDouble(String s) {
        try {
            return s == null ? 0 : Double.parseDouble(s.trim());
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    private static Map<String, String> parseStatus(String text) {
        Map<String, String> m = new LinkedHashMap<>();
        for (String line : text.split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0)
                m.put(line.substring(0, eq), line.substring(eq + 1));
        }
        return m;
    }

    private static final InstantSource SOURCE = new Source();

    private FastClock() {}

    // ------------------------------------------------------------ monotonic

    /**
     * Nanoseconds on the CLOCK_MONOTONIC timeline: comparable with {@code System.nanoTime()}
     * on Linux, and monotonic across threads in the happens-before sense.
     */
    public static long nanoTime() {
        return NATIVE && !JDK_CLOCKS ? NativeCalls.monoNs() : System.nanoTime();
    }

    /**
     * {@link #nanoTime()} without the counter fence: monotonic within the calling thread
     * only.  A read ordered after another thread's read may come out a few hundred
     * nanoseconds earlier.
     */
    public static long nanoTimeUnordered() {
        return NATIVE ? NativeCalls.monoNsUnordered() : System.nanoTime();
    }

    /** CLOCK_MONOTONIC with about 1 ms resolution; never ahead of {@link #nanoTime()}. */
    public static long coarseNanoTime() {
        return NATIVE ? NativeCalls.monoCoarseNs() : System.nanoTime();
    }

    // ------------------------------------------------------------ UTC

    /** Nanoseconds since the Unix epoch, UTC (the kernel's CLOCK_REALTIME). */
    public static long currentTimeNanos() {
        return NATIVE ? NativeCalls.realNs() : JavaClock.currentTimeNanos();
    }

    /** {@link #currentTimeNanos()} without the counter fence (see {@link #nanoTimeUnordered()}). */
    public static long currentTimeNanosUnordered() {
        return NATIVE ? NativeCalls.realNsUnordered() : JavaClock.currentTimeNanos();
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
        if (JDK_CLOCKS)
            return System.currentTimeMillis();
        return Math.floorDiv(currentTimeNanos(), NANOS_PER_MILLI);
    }

    /** Milliseconds since the Unix epoch with about 1 ms resolution; never ahead of {@link #currentTimeMillis()}. */
    public static long coarseCurrentTimeMillis() {
        return NATIVE ? Math.floorDiv(NativeCalls.realCoarseNs(), NANOS_PER_MILLI) : currentTimeMillis();
    }

    // ------------------------------------------------------------ java.time

    /** The current instant, at nanosecond resolution (allocates the Instant). */
    public static Instant instant() {
        long ns = currentTimeNanos();
        return Instant.ofEpochSecond(Math.floorDiv(ns, NANOS_PER_SECOND), Math.floorMod(ns, NANOS_PER_SECOND));
    }

    /** An {@link InstantSource} backed by this clock, for code that takes one. */
    public static InstantSource instantSource() {
        return SOURCE;
    }

    /**
     * A {@link Clock} backed by this clock in the given zone, for java.time code
     * ({@code ZonedDateTime.now(FastClock.clock(zone))}).
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
     * or {@code "system"}, the kernel's own clocks) when native, {@code "java"} otherwise.
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
            sb.append("nanoTime/currentTimeMillis=").append(JDK_CLOCKS_WHY).append('\n');
            String noFfm = NativeCalls.ffmUnavailable();
            if (noFfm != null)
                sb.append("ffm=").append(noFfm).append('\n');
            for (Map.Entry<String, String> e : nativeStatus().entrySet())
                sb.append(e.getKey()).append('=').append(e.getValue()).append('\n');
        } else {
            sb.append("mode=java\nreason=").append(LOAD_DETAIL).append('\n');
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
            m.putAll(parseStatus(Jni.status()));
        } catch (Throwable t) {
            m.put("error", t.toString());
        }
        return m;
    }

    static String loadDetail() {
        return LOAD_DETAIL;
    }

    // ------------------------------------------------------------ adapters

    private static final class Source implements InstantSource {
        @Override
        public Instant instant() {
            return FastClock.instant();
        }

        @Override
        public long millis() {
            return currentTimeMillis();
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

    private static final class ZonedClock extends Clock {
        private final ZoneId zone;

        ZonedClock(ZoneId zone) {
            this.zone = zone;
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
            return currentTimeMillis();
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
