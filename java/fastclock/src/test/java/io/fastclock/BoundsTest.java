package io.fastclock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.time.Instant;
import org.junit.jupiter.api.Test;

/** currentTimeBounds: an interval around true UTC, as the core (or the fallback) bounds it. */
class BoundsTest {
    static long epochNs(Instant i) {
        return i.getEpochSecond() * 1_000_000_000L + i.getNano();
    }

    static String status(String key) {
        for (String line : FastClock.status().split("\n"))
            if (line.startsWith(key + "="))
                return line.substring(key.length() + 1);
        return null;
    }

    @Test
    void theBoundsContainInstantNow() {
        long[] b = new long[2];
        for (int i = 0; i < 10_000; i++) {
            long before = epochNs(Instant.now());
            FastClock.currentTimeBounds(b);
            long after = epochNs(Instant.now());
            // The kernel's REALTIME read around the call lies within the interval (the
            // interval is at least the core's error bound wide on each side).
            assertTrue(b[0] <= after && b[1] >= before, i + ": [" + b[0] + ", " + b[1] + "] vs [" + before + ", " + after + "]");
            assertTrue(b[0] < b[1], b[0] + " " + b[1]);
        }
    }

    @Test
    void nativeBoundsAreTheCoresAndSaySynchronisedAsTheKernelDoes() {
        assumeTrue(FastClock.isNative(), "needs the native library (fastclock_real_bounded)");
        long[] b = new long[2];
        boolean synced = FastClock.currentTimeBounds(b);
        String k = status("kernel_synchronized");
        assertEquals("1".equals(k), synced, FastClock.status());
        // At least the core's own error bound on each side, at most 16 s (an unsynchronised kernel) and a margin.
        long halfWidth = (b[1] - b[0]) / 2;
        assertTrue(halfWidth >= Long.parseLong(status("error_bound_ns")) / 2, halfWidth + "\n" + FastClock.status());
        assertTrue(halfWidth <= 17_000_000_000L, halfWidth + "\n" + FastClock.status());
    }

    @Test
    void anArrayTooShortOrNullIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> FastClock.currentTimeBounds(new long[1]));
        assertThrows(NullPointerException.class, () -> FastClock.currentTimeBounds(null));
        long[] longer = {7, 7, 7};
        FastClock.currentTimeBounds(longer);
        assertEquals(7, longer[2], "only [0] and [1] are written");
    }

    @Test
    void theFallbackBoundsAreTheJdksClockPlusMinusTheUnsynchronisedMaxerror() throws Exception {
        Jvm j = Jvm.probe("-Dfastclock.native=false");
        assertEquals(0, j.exitCode, j.toString());
        assertEquals("false", j.get("native"), j.toString());
        assertEquals("false", j.get("bounds_synchronized"), j.toString());
        assertEquals("true", j.get("bounds_contain_now"), j.toString());
        assertEquals(2 * FastClock.FALLBACK_HALF_WIDTH_NS, Long.parseLong(j.get("bounds_width_ns")), j.toString());
    }
}
