package io.fastclock;

import java.time.Instant;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The pure-Java fallback for UTC: System.nanoTime() plus an offset to
 * Instant.now(), resampled by the first read that finds it older than
 * {@link #RESAMPLE_INTERVAL_NS}.  Anchoring on Instant.now()
 * (nanosecond resolution on Linux since JDK 15) rather than
 * currentTimeMillis() keeps the offset accurate to half the bracket of the
 * sample that set it (tens of nanoseconds when the JIT has compiled it;
 * microseconds for a first, interpreted sample, until a step) instead of
 * up to a millisecond.  The read path is System.nanoTime(), one volatile
 * load and a comparison: no allocation, no lock.
 *
 * <p>No thread of its own: a thread running this class's code would keep its
 * class loader reachable for the JVM's life, so an application server's
 * redeploy in fallback mode would leak a thread and a class loader each time.
 * Instead the read that finds the offset stale takes a try-lock and resamples
 * (16 brackets of Instant.now(), a microsecond or two, and the Instants they
 * return unless escape analysis removes them); a reader that finds the lock
 * taken reads on with the kept offset, never waits.  An idle clock does no
 * work, and its first read after a pause answers from a fresh sample.
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

    /** The kept offset, its uncertainty and when it goes stale: one state, replaced whole. */
    private static final class Sample {
        /** Epoch nanoseconds minus System.nanoTime(). */
        final long offsetNs;
        /** The bracket of the sample that set offsetNs: its uncertainty. */
        final long widthNs;
        /** The System.nanoTime() from which a read resamples first. */
        final long staleAtNs;

        Sample(long offsetNs, long widthNs, long staleAtNs) {
            this.offsetNs = offsetNs;
            this.widthNs = widthNs;
            this.staleAtNs = staleAtNs;
        }
    }

    private static volatile Sample current;
    /** Resamples one at a time: readers only try it, resample() waits for it. */
    private static final ReentrantLock RESAMPLING = new ReentrantLock();
    private static volatile long lastWidthNs;
    private static volatile long samples;

    static {
        resample();
    }

    private JavaClock() {}

    static long currentTimeNanos() {
        long now = System.nanoTime();
        Sample s = current;
        if (now - s.staleAtNs >= 0)
            return resampleFromRead();
        return now + s.offsetNs;
    }

    /** Off the hot path: the offset is stale; resample unless another thread is at it. */
    private static long resampleFromRead() {
        if (RESAMPLING.tryLock()) {
            try {
                if (System.nanoTime() - current.staleAtNs >= 0) // not done meanwhile by another reader
                    sampleLocked();
            } finally {
                RESAMPLING.unlock();
            }
        }
        return System.nanoTime() + current.offsetNs;
    }

    /** Takes a sample now (waiting for one in progress); the tests call it directly. */
    static void resample() {
        RESAMPLING.lock();
        try {
            sampleLocked();
        } finally {
            RESAMPLING.unlock();
        }
    }

    private static void sampleLocked() {
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
        Sample kept = current;
        long staleAt = System.nanoTime() + RESAMPLE_INTERVAL_NS;
        if (kept == null || takes(kept.offsetNs, kept.widthNs, bestOffset, bestWidth))
            current = new Sample(bestOffset, bestWidth, staleAt);
        else
            current = new Sample(kept.offsetNs, kept.widthNs, staleAt);
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

    static long samples() {
        return samples;
    }

    static String describe() {
        return "System.nanoTime() + an offset to Instant.now(), resampled by the first read after "
                + TimeUnit.NANOSECONDS.toMillis(RESAMPLE_INTERVAL_NS) + " ms (last bracket "
                + lastWidthNs + " ns, " + samples + " samples; no thread)";
    }
}
