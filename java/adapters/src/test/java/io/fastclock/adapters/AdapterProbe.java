package io.fastclock.adapters;

import io.fastclock.FastClock;
import io.fastclock.ManualTimeSource;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Instant;

/**
 * Run in a child JVM by {@link ManualSourcesLoadNothingTest}: wraps a manual source in each adapter
 * ("manual"), or takes the system adapters ("system"), then says whether the native library is mapped.
 */
public final class AdapterProbe {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("manual")) {
            ManualTimeSource time = ManualTimeSource.at(Instant.parse("2030-01-01T00:00:00Z"));
            long sum = CaffeineTicker.of(time).read() + MicrometerClock.of(time).wallTime()
                    + MicrometerClock.of(time).monotonicTime() + AgronaClocks.nanoClock(time).nanoTime()
                    + AgronaClocks.epochNanoClock(time).nanoTime();
            System.out.println("sum=" + sum);
        } else {
            long sum = CaffeineTicker.system().read() + MicrometerClock.system().monotonicTime();
            System.out.println("sum=" + sum);
            System.out.println("native=" + FastClock.isNative());
        }
        boolean mapped = Files.readAllLines(Paths.get("/proc/self/maps")).stream()
                .anyMatch(l -> l.contains("libfastclock"));
        System.out.println("mapped=" + mapped);
    }
}
