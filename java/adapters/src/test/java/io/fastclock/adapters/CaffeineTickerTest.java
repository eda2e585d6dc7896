package io.fastclock.adapters;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.github.benmanes.caffeine.cache.Cache;
import com.github.benmanes.caffeine.cache.Caffeine;
import io.fastclock.ManualTimeSource;
import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.Test;

/** Caffeine (from Maven Central) expiring entries by fastclock's time, and by a manual source's. */
class CaffeineTickerTest {
    @Test
    void aManualSourceExpiresEntriesOnDemand() {
        ManualTimeSource time = ManualTimeSource.at(Instant.parse("2030-01-01T00:00:00Z"));
        Cache<String, String> cache = Caffeine.newBuilder()
                .expireAfterWrite(Duration.ofSeconds(10))
                .ticker(CaffeineTicker.of(time))
                .executor(Runnable::run)
                .build();
        cache.put("k", "v");
        time.advance(Duration.ofSeconds(9));
        assertEquals("v", cache.getIfPresent("k"));
        time.advance(Duration.ofSeconds(2));
        assertNull(cache.getIfPresent("k"), "expired 11 s after the write by the manual clock");
    }

    @Test
    void theSystemTickerIsMonotonicNanoseconds() {
        long a = System.nanoTime(), v = CaffeineTicker.system().read(), b = System.nanoTime();
        assertTrue(v >= a - 1000 && v <= b + 1000, a + " " + v + " " + b);
        Cache<String, String> cache = Caffeine.newBuilder()
                .expireAfterWrite(Duration.ofMinutes(1))
                .ticker(CaffeineTicker.system())
                .build();
        cache.put("k", "v");
        assertEquals("v", cache.getIfPresent("k"));
    }
}
