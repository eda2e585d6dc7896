package io.fastclock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Instant;
import org.junit.jupiter.api.Test;

/** The pure-Java implementation, in this JVM and as a whole in a child JVM. */
class FallbackTest {
    @Test
    void javaUtcAgreesWithInstantNow() {
        Stats s = AgreementTest.bracket(() -> AgreementTest.epochNs(Instant.now()), JavaClock::currentTimeNanos);
        System.out.println("[fastclock] pure-Java currentTimeNanos vs Instant.now: " + s);
        // Offset from a min-latency bracket: tens of ns, plus NTP slew between resamples.
        assertTrue(s.p99 <= 5_000, s.toString());
        assertTrue(s.max <= 200_000, s.toString());
    }

    /**
     * A resample's noise (half a bracket, tens of ns) must not step UTC back:
     * a thread reads in a tight loop while another resamples as fast as it can.
     */
    @Test
    void resamplingNeverStepsJavaUtcBack() throws InterruptedException {
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        Thread resampler = new Thread(() -> {
            while (!stop.get())
                JavaClock.resample();
        });
        resampler.start();
        long back = 0, worst = 0, reads = 0, prev = JavaClock.currentTimeNanos();
        long end = System.nanoTime() + 1_000_000_000L;
        try {
            while (System.nanoTime() < end) {
                for (int i = 0; i < 1000; i++) {
                    long v = JavaClock.currentTimeNanos();
                    if (v < prev) {
                        back++;
                        worst = Math.max(worst, prev - v);
                    }
                    prev = v;
                }
                reads += 1000;
            }
        } finally {
            stop.set(true);
            resampler.join();
        }
        System.out.println("[fastclock] pure-Java UTC under constant resampling: " + reads + " reads, " + back
                + " back (worst " + worst + " ns), " + JavaClock.samples() + " samples");
        assertEquals(0, back, "worst step back " + worst + " ns");
    }

    /** The resampling threads of the pure-Java UTC clock in this JVM (there should be none). */
    static long resampleThreads() {
        return Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.getName().equals("fastclock-java-resample"))
                .count();
    }

    /**
     * No thread of its own: a thread running JavaClock's code would pin its class loader for
     * the JVM's life (an application server's redeploy in fallback mode leaked one thread and
     * one class loader each time).  The offset is resampled by the read that finds it older
     * than the interval; an idle clock does no work at all.
     */
    @Test
    void theOffsetIsResampledByTheFirstReadAfterTheIntervalAndByNoThread() throws InterruptedException {
        JavaClock.currentTimeNanos(); // initialised
        assertEquals(0, resampleThreads(), "a resampling thread runs");
        JavaClock.currentTimeNanos();
        long before = JavaClock.samples();
        Thread.sleep(3 * JavaClock.RESAMPLE_INTERVAL_NS / 1_000_000);
        assertEquals(before, JavaClock.samples(), "resampled with nobody reading");
        long t0 = System.nanoTime();
        long a = JavaClock.currentTimeNanos();
        assertEquals(before + 1, JavaClock.samples(), "the first read after the interval resamples");
        long b = JavaClock.currentTimeNanos();
        if (System.nanoTime() - t0 < JavaClock.RESAMPLE_INTERVAL_NS) // (not if this thread lost its CPU that long)
            assertEquals(before + 1, JavaClock.samples(), "the next read does not");
        assertTrue(b >= a, a + " -> " + b);
    }

    /** Readers racing for a stale offset: one resamples, the others read on, none waits or throws. */
    @Test
    void concurrentReadersOfAStaleOffsetResampleItOnce() throws Exception {
        JavaClock.currentTimeNanos();
        Thread.sleep(2 * JavaClock.RESAMPLE_INTERVAL_NS / 1_000_000);
        long before = JavaClock.samples();
        java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
        java.util.List<Thread> readers = new java.util.ArrayList<>();
        long[] worst = new long[4];
        for (int r = 0; r < 4; r++) {
            int id = r;
            Thread t = new Thread(() -> {
                try {
                    go.await();
                } catch (InterruptedException e) {
                    return;
                }
                long prev = JavaClock.currentTimeNanos();
                for (int i = 0; i < 100_000; i++) {
                    long v = JavaClock.currentTimeNanos();
                    worst[id] = Math.max(worst[id], prev - v);
                    prev = v;
                }
            });
            t.start();
            readers.add(t);
        }
        long t0 = System.nanoTime();
        go.countDown();
        for (Thread t : readers)
            t.join();
        long elapsed = System.nanoTime() - t0;
        long after = JavaClock.samples();
        assertTrue(after >= before + 1, "resampled: " + before + " -> " + after);
        // One resample per interval that the reads spanned, not one per reader or per read.
        long most = 2 + elapsed / JavaClock.RESAMPLE_INTERVAL_NS;
        assertTrue(after - before <= most, "resampled " + (after - before) + " times in " + elapsed / 1_000_000 + " ms");
        for (long w : worst)
            assertEquals(0, w, "UTC went back within a reader");
    }

    @Test
    void disabledNativeFallsBackToPureJavaWithAReason() throws Exception {
        Jvm j = Jvm.probe("-Dfastclock.native=false");
        assertEquals(0, j.exitCode, j.toString());
        assertEquals("false", j.get("native"), j.toString());
        assertEquals("java", j.get("mode"), j.toString());
        assertEquals("java", j.get("binding"), j.toString());
        assertTrue(j.get("reason").contains("-Dfastclock.native=false"), j.toString());
        assertEquals("true", j.get("all_calls"), j.toString());
        // System.nanoTime itself, and UTC from the resampled offset.
        assertEquals(0, Long.parseLong(j.get("worst_mono_ns")), j.toString());
        assertTrue(Long.parseLong(j.get("worst_real_ns")) < 100_000, j.toString());
        assertTrue(j.stderr.isEmpty(), "nothing on stderr: " + j.stderr);
    }

    @Test
    void initialisedOnAnInterruptedThreadKeepsNativeAndTheInterrupt() throws Exception {
        Jvm plain = Jvm.probeArgs(java.util.List.of("answers"), null);
        Jvm j = Jvm.probeArgs(java.util.List.of("interrupted", "answers"), null);
        assertEquals(0, j.exitCode, j.toString());
        assertEquals("true", j.get("still_interrupted"), j.toString());
        assertEquals(plain.get("native"), j.get("native"), j.toString());
        assertEquals(plain.get("mode"), j.get("mode"), j.toString());
    }

    @Test
    void aMistypedSwitchIsReportedAndTheDefaultKept() throws Exception {
        Jvm j = Jvm.probe("-Dfastclock.native=flase");
        assertEquals(0, j.exitCode, j.toString());
        assertEquals("true", j.get("native"), j.toString());
        assertTrue(j.stderr.contains("ignoring -Dfastclock.native=flase (expected true or false)"), j.toString());

        j = Jvm.probe("-Dfastclock.native=off");
        assertEquals("false", j.get("native"), j.toString());
    }

    /**
     * A wide bracket (the resampler preempted) once let a sample 500 us high replace a
     * sharp offset; a sharp sample below it was then noise against the wide bracket, and the
     * next sharp one stepped UTC back by the 500 us.  Now a sample replaces the kept offset
     * only as a step beyond both brackets, or as sharp and not lower.
     */
    @Test
    void aWideSampleDoesNotMoveTheOffsetSoThatUtcLaterGoesBack() {
        long kept = 0, width = 1_000;
        assertFalse(JavaClock.takes(kept, width, 500_000, 1_000_000), "a wide sample within its own noise");
        assertFalse(JavaClock.takes(kept, width, -500, 1_000), "a lower sharp sample within the noise");
        assertTrue(JavaClock.takes(kept, width, 300, 800), "a sharper sample ahead");
        assertTrue(JavaClock.takes(kept, width, 2_000_000, 1_000_000), "a step forward beyond both brackets");
        assertTrue(JavaClock.takes(kept, width, -2_000_000, 1_000), "a step back of the system clock");
    }

    @Test
    void aManualSourceWhoseOffsetWouldWrapIsRefusedAtOnce() {
        assertThrows(ArithmeticException.class,
                () -> ManualTimeSource.at(Instant.parse("2030-01-01T00:00:00Z"), -8_000_000_000_000_000_000L));
    }
}
