package io.fastclock;

import io.fastclock.bench.ForkRoutes;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.infra.BenchmarkParams;

/**
 * The JNI path with -XX:+CriticalJNINatives, which makes JDK 16-17 call the
 * library's JavaCritical_* entry points (no JNIEnv, cheaper transition).
 * The flag is gone from JDK 18: BenchMain runs this on 17 only.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Fork(jvmArgsAppend = "-XX:+CriticalJNINatives")
public class CriticalJniBenchmarks {
    /** Loads the library (FastClock's class initialiser) before Jni.* is called directly. */
    @Setup
    public void requireNative(BenchmarkParams params) {
        if (!FastClock.isNative())
            throw new IllegalStateException("the native library did not load:\n" + FastClock.status());
        ForkRoutes.record(params);
    }

    @Benchmark
    public long jniNoop() {
        return Jni.noop();
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
    public long currentTimeNanos() {
        return FastClock.currentTimeNanos();
    }
}
