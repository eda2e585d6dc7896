package io.fastclock;

import java.time.Instant;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * The pure-Java fallback for UTC: System.nanoTime() plus an offset to
 * Instant.now(), resampled by a daemon thread.  Anchoring on Instant.now()
 * (nanosecond resolution on Linux since JDK 15) rather than
 * currentTimeMillis() keeps the offset accurate to half the bracket of the
 * sample that set it (tens of nanoseconds when the JIT has compiled it;
 * microseconds for a first, interpreted sample, until a step) instead of
 * up to a millisecond.  The read path is one volatile load and
 * System.nanoTime(): no allocation.
 *
 * <p>Between steps of the kernel's clock UTC never goes back: NTP slews
 * REALTIME and MONOTONIC alike, so the true offset only changes at a step,
 * and a sample that differs by no more than its own and the kept offset's
 * uncertainty (their brackets) is noise: the offset is kept, unless a
 * higher one comes from a bracket as narrow (never a lower one: time would
 * go back).  Beyond that it is a step of the system clock, which UTC
 * follows, as Instant.now() does.  (A wide sample once taken as higher,
 * and then a narrow one below it, would otherwise let the next narrow one
 * step UTC back by the wide one's error.)
 */
final class JavaClock {
    /** NTP slews by at most 500 ppm: 100 ms between samples bounds the drift at 50 us. */
    static final long RESAMPLE_INTERVAL_NS = TimeUnit.MILLISECONDS.toNanos(100);
    /** Brackets per sample; the narrowest one wins (the others were interrupted). */
    private static final int TRIES = 16;
    /** Beyond the brackets: Instant.now()'s own granularity and the midpoint's rounding. */
    private static final long NOISE_MARGIN_NS = 1_000;

    /** Epoch nanoseconds minus System.nanoTime(). */
    private static volatile long offsetNs;
    /** The bracket of the sample that set offsetNs: its uncertainty. */
    private static volatile long offsetWidthNs;
    private static volatile long lastWidthNs;
    private static volatile long samples;
    private static final String THREAD_PROBLEM;

    static {
        resample();
        String problem = null;
        try {
            Thread t = new Thread(JavaClock::resampleForever, "fastclock-java-resample");
            t.setDaemon(true);
            t.start();
        } catch (Throwable e) {
            // Keep the first offset; UTC then drifts with NTP's slew until restart.
            problem = "resampling thread could not start (" + e + ")";
        }
        THREAD_PROBLEM = problem;
    }

    private JavaClock() {}

    static long currentTimeNanos() {
        return System.nanoTime() + offsetNs;
    }

    static synchronized void resample() {
        long bestWidth = Long.MAX_VALUE, bestOffset = 0;
        for (int i = 0; i < TRIES; i++) {
            long n0 = System.nanoTime();
            Instant now = Instant.now();
            long n1 = System.nanoTime();
            long width = n1 - n0;
            if (width < bestWidth) {
                bestWidth = width;
                long epochNs = now.getEpochSecond() * 1_000_000_000L + now.getNano();
                bestOffset = epochNs - (n0 + width / 2);
            }
        }
        if (samples == 0 || takes(offsetNs, offsetWidthNs, bestOffset, bestWidth)) {
            offsetNs = bestOffset;
            offsetWidthNs = bestWidth;
        }
        lastWidthNs = bestWidth;
        samples++;
    }

    /**
     * Whether a sample (offset, bracket width) replaces the kept offset: a step (off by
     * more than both brackets and the margin), or as sharp and not lower.  Never a lower
     * offset within the noise: UTC would go back.
     */
    static boolean takes(long kept, long keptWidth, long offset, long width) {
        long noise = width + keptWidth + NOISE_MARGIN_NS;
        return Math.abs(offset - kept) > noise || (offset >= kept && width <= keptWidth);
    }

    private static void resampleForever() {
        for (;;) {
            LockSupport.parkNanos(RESAMPLE_INTERVAL_NS);
            try {
                resample();
            } catch (Throwable e) {
                // Nothing here allocates much or throws; keep the thread alive regardless.
            }
        }
    }

    static long samples() {
        return samples;
    }

    static String describe() {
        return "System.nanoTime() + an offset to Instant.now() resampled every "
                + TimeUnit.NANOSECONDS.toMillis(RESAMPLE_INTERVAL_NS) + " ms (last bracket "
                + lastWidthNs + " ns, " + samples + " samples)"
                + (THREAD_PROBLEM == null ? "" : "; " + THREAD_PROBLEM);
    }
}
