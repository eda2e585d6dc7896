package io.fastclock;

import io.fastclock.bench.ForkRoutes;
import java.time.Instant;
import java.util.concurrent.TimeUnit;
import org.agrona.concurrent.CachedNanoClock;
import org.agrona.concurrent.OffsetEpochNanoClock;
import org.agrona.concurrent.SystemEpochNanoClock;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.infra.BenchmarkParams;

/**
 * Every clock against the JDK's and Agrona's, one thread, average time per
 * call.  In package io.fastclock to reach the bindings directly: Jni.* is the
 * JNI path on every Java; NativeCalls.noop() is the binding in use (FFM on
 * 22+).  BenchMain runs them and prints the ratios.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class ClockBenchmarks {
    private final OffsetEpochNanoClock agronaOffset = new OffsetEpochNanoClock();
    private final SystemEpochNanoClock agronaSystem = new SystemEpochNanoClock();
    /** Agrona's cached clock: a volatile its owner updates (here once, at setup); the coarse clocks' reference. */
    private final CachedNanoClock agronaCached = new CachedNanoClock();

    /**
     * Loads the library (FastClock's class initialiser) before Jni.* is called directly;
     * BenchMain leaves the Jni/FFM rows out when it runs the pure-Java fallback.
     */
    @Setup
    public void setup(BenchmarkParams params) {
        FastClock.isNative();
        agronaCached.update(System.nanoTime());
        ForkRoutes.record(params); // what this fork decided, for BenchMain's report
    }

    // ---- monotonic
    @Benchmark
    public long systemNanoTime() {
        return System.nanoTime();
    }

    @Benchmark
    public long nanoTime() {
        return FastClock.nanoTime();
    }

    @Benchmark
    public long nanoTimeUnordered() {
        return FastClock.nanoTimeUnordered();
    }

    @Benchmark
    public long coarseNanoTime() {
        return FastClock.coarseNanoTime();
    }

    @Benchmark
    public long agronaCachedNanoClock() {
        return agronaCached.nanoTime();
    }

    // ---- UTC, nanoseconds
    @Benchmark
    public long instantNowEpochNanos() {
        Instant i = Instant.now();
        return i.getEpochSecond() * 1_000_000_000L + i.getNano();
    }

    @Benchmark
    public long currentTimeNanos() {
        return FastClock.currentTimeNanos();
    }

    @Benchmark
    public long currentTimeNanosUnordered() {
        return FastClock.currentTimeNanosUnordered();
    }

    @Benchmark
    public long agronaOffsetEpochNanoClock() {
        return agronaOffset.nanoTime();
    }

    @Benchmark
    public long agronaSystemEpochNanoClock() {
        return agronaSystem.nanoTime();
    }

    @Benchmark
    public Instant instantNow() {
        return Instant.now();
    }

    @Benchmark
    public Instant instant() {
        return FastClock.instant();
    }

    // ---- UTC, milliseconds
    @Benchmark
    public long systemCurrentTimeMillis() {
        return System.currentTimeMillis();
    }

    @Benchmark
    public long currentTimeMillis() {
        return FastClock.currentTimeMillis();
    }

    @Benchmark
    public long coarseCurrentTimeMillis() {
        return FastClock.coarseCurrentTimeMillis();
    }

    // ---- call-cost baselines and the JNI path on every Java
    @Benchmark
    public long jniNoop() {
        return Jni.noop();
    }

    @Benchmark
    public long ffmNoop() {
        return NativeCalls.noop(); // FFM on 22+ (BenchMain skips it on older Java)
    }

    @Benchmark
    public long jniNanoTime() {
        return Jni.monoNs();
    }

    @Benchmark
    public long jniCurrentTimeNanos() {
        return Jni.realNs();
    }
}
