package io.fastclock;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.Test;

/** The clock methods allocate nothing (measured with the JVM's per-thread allocation counter). */
class AllocationTest {
    static final int CALLS = 1_000_000;

    static long allocatedBytes() {
        return ((com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean())
                .getThreadAllocatedBytes(Thread.currentThread().getId());
    }

    static void noAllocation(String what, LongSupplier clock) {
        long sink = 0;
        for (int i = 0; i < 200_000; i++) // compiled before measuring
            sink += clock.getAsLong();
        long before = allocatedBytes();
        for (int i = 0; i < CALLS; i++)
            sink += clock.getAsLong();
        long bytes = allocatedBytes() - before;
        System.out.println("[fastclock] " + what + ": " + bytes + " bytes over " + CALLS + " calls (" + (sink & 1) + ")");
        // One allocation per call would be >= 16 MB; the counter itself may cost a little.
        assertTrue(bytes < 64 * 1024, what + " allocated " + bytes + " bytes in " + CALLS + " calls");
    }

    @Test
    void hotMethodsDoNotAllocate() {
        noAllocation("nanoTime", FastClock::nanoTime);
        noAllocation("nanoTimeUnordered", FastClock::nanoTimeUnordered);
        // Where the JDK answers the UTC clocks (Routes), they are Instant.now(), which allocates.
        if (FastClock.routes().currentTimeNanos || !FastClock.isNative()) {
            noAllocation("currentTimeNanos", FastClock::currentTimeNanos);
            noAllocation("currentTimeMicros", FastClock::currentTimeMicros);
        }
        if (FastClock.routes().currentTimeNanosUnordered || !FastClock.isNative())
            noAllocation("currentTimeNanosUnordered", FastClock::currentTimeNanosUnordered);
        noAllocation("currentTimeMillis", FastClock::currentTimeMillis);
        noAllocation("coarseNanoTime", FastClock::coarseNanoTime);
        noAllocation("coarseCurrentTimeMillis", FastClock::coarseCurrentTimeMillis);
        noAllocation("pure-Java currentTimeNanos", JavaClock::currentTimeNanos);
        long[] bounds = new long[2];
        noAllocation("currentTimeBounds", () -> FastClock.currentTimeBounds(bounds) ? bounds[0] : bounds[1]);
    }
}
