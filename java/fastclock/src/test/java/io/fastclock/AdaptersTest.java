package io.fastclock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import org.junit.jupiter.api.Test;

/** The java.time adapters tell the same time as FastClock and behave like the JDK's clocks. */
class AdaptersTest {
    static final ZoneId PARIS = ZoneId.of("Europe/Paris");

    static void between(Instant lo, Instant v, Instant hi) {
        // The JDK's clock and ours agree to well under a millisecond.
        Duration slack = Duration.ofMillis(1);
        assertTrue(!v.isBefore(lo.minus(slack)) && !v.isAfter(hi.plus(slack)), lo + " " + v + " " + hi);
    }

    @Test
    void instantSourceTellsTheTime() {
        InstantSource s = FastClock.instantSource();
        assertSame(s, FastClock.instantSource());
        Instant a = Instant.now();
        Instant v = s.instant();
        Instant b = Instant.now();
        between(a, v, b);
        long m0 = System.currentTimeMillis(), m = s.millis(), m1 = System.currentTimeMillis();
        assertTrue(m >= m0 - 1 && m <= m1 + 1, m0 + " " + m + " " + m1);
        Clock c = s.withZone(PARIS);
        assertEquals(PARIS, c.getZone());
        assertEquals(FastClock.clock(PARIS), c);
    }

    @Test
    void clockHasItsZoneAndTheTime() {
        Clock c = FastClock.clock(PARIS);
        assertEquals(PARIS, c.getZone());
        Instant a = Instant.now();
        Instant v = c.instant();
        Instant b = Instant.now();
        between(a, v, b);
        long m0 = System.currentTimeMillis(), m = c.millis(), m1 = System.currentTimeMillis();
        assertTrue(m >= m0 - 1 && m <= m1 + 1, m0 + " " + m + " " + m1);

        ZonedDateTime z = ZonedDateTime.now(c);
        assertEquals(PARIS, z.getZone());
        between(a, z.toInstant(), Instant.now());
    }

    @Test
    void withZoneEqualsAndHashCodeFollowTheZone() {
        Clock c = FastClock.clock(PARIS);
        assertSame(c, c.withZone(PARIS));
        Clock utc = c.withZone(ZoneOffset.UTC);
        assertEquals(ZoneOffset.UTC, utc.getZone());
        assertNotEquals(c, utc);
        assertEquals(FastClock.clock(PARIS), c);
        assertEquals(FastClock.clock(PARIS).hashCode(), c.hashCode());
        assertNotEquals(Clock.system(PARIS), c, "not equal to the JDK's clock");
        assertTrue(c.toString().contains("Europe/Paris"), c.toString());
    }

    @Test
    void nullZoneIsAClearError() {
        NullPointerException e = assertThrows(NullPointerException.class, () -> FastClock.clock(null));
        assertEquals("zone", e.getMessage());
        assertThrows(NullPointerException.class, () -> FastClock.clock(PARIS).withZone(null));
        assertThrows(NullPointerException.class, () -> FastClock.instantSource().withZone(null));
    }

    @Test
    void instantIsTheSameInstantAsCurrentTimeNanos() {
        long n0 = FastClock.currentTimeNanos();
        Instant i = FastClock.instant();
        long n1 = FastClock.currentTimeNanos();
        long ns = i.getEpochSecond() * 1_000_000_000L + i.getNano();
        assertTrue(ns >= n0 && ns <= n1, n0 + " " + ns + " " + n1);
    }

    static Object roundTrip(Object o) throws IOException, ClassNotFoundException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
            out.writeObject(o);
        }
        try (ObjectInputStream in = new ObjectInputStream(new ByteArrayInputStream(bytes.toByteArray()))) {
            return in.readObject();
        }
    }

    /**
     * java.time.Clock asks implementations to be Serializable where possible (the JDK's are):
     * a zoned clock comes back in its zone, telling the time; the shared source comes back as
     * the one instance (readResolve), wherever it is deserialised.
     */
    @Test
    void clocksAndTheSystemSourceSurviveSerialisation() throws Exception {
        Clock c = FastClock.clock(PARIS);
        Object back = roundTrip(c);
        assertEquals(c, back);
        Clock copy = (Clock) back;
        assertEquals(PARIS, copy.getZone());
        Instant a = Instant.now();
        Instant v = copy.instant();
        between(a, v, Instant.now());
        assertEquals(ZoneOffset.UTC, ((Clock) roundTrip(FastClock.clock(ZoneOffset.UTC))).getZone());
        assertSame(FastClock.timeSource(), roundTrip(FastClock.timeSource()));
        assertSame(FastClock.instantSource(), roundTrip(FastClock.instantSource()));
        // The source's own withZone (FastClock's zone clock, not the JDK's default wrapper)
        // round-trips too.
        assertEquals(FastClock.instantSource().withZone(PARIS), roundTrip(FastClock.instantSource().withZone(PARIS)));
    }
}
