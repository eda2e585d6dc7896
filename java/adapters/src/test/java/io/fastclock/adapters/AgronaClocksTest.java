package io.fastclock.adapters;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.fastclock.ManualTimeSource;
import io.fastclock.TimeSource;
import java.time.Duration;
import java.time.Instant;
import org.agrona.concurrent.EpochClock;
import org.agrona.concurrent.EpochNanoClock;
import org.agrona.concurrent.NanoClock;
import org.agrona.concurrent.SystemEpochNanoClock;
import org.agrona.concurrent.SystemNanoClock;
import org.junit.jupiter.api.Test;

/** Agrona's clock interfaces (from Maven Central), each with its own meaning of nanoTime(). */
class AgronaClocksTest {
    @Test
    void eachClockTellsItsTimeline() {
        ManualTimeSource time = ManualTimeSource.at(Instant.parse("2030-01-01T00:00:00Z"), 1000);
        NanoClock mono = AgronaClocks.nanoClock(time);
        EpochNanoClock epochNs = AgronaClocks.epochNanoClock(time);
        EpochClock epochMs = AgronaClocks.epochClock(time);
        time.advance(Duration.ofNanos(1_500_000));
        assertEquals(1_501_000, mono.nanoTime());
        assertEquals(Instant.parse("2030-01-01T00:00:00Z").toEpochMilli() * 1_000_000 + 1_500_000, epochNs.nanoTime());
        assertEquals(Instant.parse("2030-01-01T00:00:00.001Z").toEpochMilli(), epochMs.time());
    }

    @Test
    void theSystemClocksAgreeWithAgronasOwn() {
        NanoClock ours = AgronaClocks.nanoClock(TimeSource.system());
        NanoClock theirs = SystemNanoClock.INSTANCE;
        long a = theirs.nanoTime(), v = ours.nanoTime(), b = theirs.nanoTime();
        assertTrue(v >= a - 1000 && v <= b + 1000, a + " " + v + " " + b);
        EpochNanoClock oursUtc = AgronaClocks.epochNanoClock(TimeSource.system());
        EpochNanoClock theirsUtc = new SystemEpochNanoClock();
        long u0 = theirsUtc.nanoTime(), u = oursUtc.nanoTime(), u1 = theirsUtc.nanoTime();
        assertTrue(u >= u0 - 1000 && u <= u1 + 1000, u0 + " " + u + " " + u1);
    }
}
