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

    @Test
    void theOffsetIsResampledInTheBackground() throws InterruptedException {
        long before = JavaClock.samples();
        Thread.sleep(5 * JavaClock.RESAMPLE_INTERVAL_NS / 1_000_000);
        long after = JavaClock.samples();
        assertTrue(after >= before + 2, "resamples: " + before + " -> " + after);
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
