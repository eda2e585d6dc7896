package io.fastclock;

import io.fastclock.bench.ForkRoutes;
import java.util.concurrent.TimeUnit;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.apache.logging.log4j.core.time.MutableInstant;
import org.apache.logging.log4j.core.time.PreciseClock;
import org.apache.logging.log4j.core.util.SystemClock;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.infra.BenchmarkParams;

/**
 * One real use end to end: Log4j 2 logging an event (created, timestamped, passed to
 * an appender that drops it), with Log4j's default clock (Instant.now() on Java 9+)
 * and with fastclock's (log4j2.clock=io.fastclock.adapters.Log4jClock).  Log4j picks
 * its clock once per JVM; every benchmark runs in its own fork, and the state sets
 * the properties before Log4j starts (a @Fork(jvmArgsPrepend) would be replaced by the
 * arguments BenchMain prepends).
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class Log4jBenchmarks {
    @State(Scope.Benchmark)
    public static class DefaultClock {
        Logger log;
        long n;

        @Setup
        public void start() {
            System.setProperty("log4j2.configurationFile", "log4j2-bench.xml");
            log = LogManager.getLogger(Log4jBenchmarks.class);
        }
    }

    @State(Scope.Benchmark)
    public static class FastClockClock {
        Logger log;
        long n;

        @Setup
        public void start() {
            System.setProperty("log4j2.configurationFile", "log4j2-bench.xml");
            System.setProperty("log4j2.clock", "io.fastclock.adapters.Log4jClock");
            log = LogManager.getLogger(Log4jBenchmarks.class);
            if (!(org.apache.logging.log4j.core.util.ClockFactory.getClock() instanceof io.fastclock.adapters.Log4jClock))
                throw new IllegalStateException("Log4j did not take log4j2.clock");
        }

        @Setup
        public void record(BenchmarkParams params) {
            ForkRoutes.record(params);
        }
    }

    /**
     * The clock alone, as Log4j calls it for each event (PreciseClock.init into the
     * event's MutableInstant): the events above spread over 150-200 ns from fork to
     * fork (where the JIT lays out Log4j's path), which drowns a few ns of clock.
     */
    @State(Scope.Thread)
    public static class Clocks {
        final PreciseClock log4jDefault = new SystemClock();
        final PreciseClock fastclock = new io.fastclock.adapters.Log4jClock();
        final MutableInstant instant = new MutableInstant();

        /** Both clocks are here; fastclock's loads FastClock (the default-clock fork above does not). */
        @Setup
        public void record(BenchmarkParams params) {
            ForkRoutes.record(params);
        }
    }

    @Benchmark
    public long log4jDefaultClockInit(Clocks s) {
        s.log4jDefault.init(s.instant);
        return s.instant.getEpochSecond() + s.instant.getNanoOfSecond();
    }

    @Benchmark
    public long log4jFastClockInit(Clocks s) {
        s.fastclock.init(s.instant);
        return s.instant.getEpochSecond() + s.instant.getNanoOfSecond();
    }

    @Benchmark
    public void log4jDefaultClock(DefaultClock s) {
        s.log.info("event {}", ++s.n);
    }

    @Benchmark
    public void log4jFastClock(FastClockClock s) {
        s.log.info("event {}", ++s.n);
    }
}
