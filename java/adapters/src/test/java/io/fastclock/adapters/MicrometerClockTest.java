package io.fastclock.adapters;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.fastclock.ManualTimeSource;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleConfig;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Micrometer (from Maven Central) timing with fastclock's clocks, and with a manual source's. */
class MicrometerClockTest {
    @Test
    void aTimerMeasuresManualTime() {
        ManualTimeSource time = ManualTimeSource.at(Instant.parse("2030-01-01T00:00:00Z"));
        SimpleMeterRegistry registry = new SimpleMeterRegistry(SimpleConfig.DEFAULT, MicrometerClock.of(time));
        Timer timer = registry.timer("work");
        Timer.Sample s = Timer.start(registry);
        time.advance(Duration.ofMillis(5));
        s.stop(timer);
        assertEquals(1, timer.count());
        assertEquals(5.0, timer.totalTime(TimeUnit.MILLISECONDS), 1e-9);
        assertEquals(Instant.parse("2030-01-01T00:00:00.005Z").toEpochMilli(), registry.config().clock().wallTime());
    }

    @Test
    void theSystemClockTellsTheTime() {
        MicrometerClock c = MicrometerClock.system();
        long a = System.nanoTime(), v = c.monotonicTime(), b = System.nanoTime();
        assertTrue(v >= a - 1000 && v <= b + 1000, a + " " + v + " " + b);
        long m0 = System.currentTimeMillis(), m = c.wallTime(), m1 = System.currentTimeMillis();
        assertTrue(m >= m0 - 1 && m <= m1 + 1, m0 + " " + m + " " + m1);
        SimpleMeterRegistry registry = new SimpleMeterRegistry(SimpleConfig.DEFAULT, c);
        Timer timer = registry.timer("work");
        timer.record(() -> { });
        assertEquals(1, timer.count());
        assertTrue(timer.totalTime(TimeUnit.NANOSECONDS) >= 0);
    }
}
