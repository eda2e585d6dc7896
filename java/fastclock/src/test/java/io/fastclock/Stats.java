package io.fastclock;

import java.util.Arrays;

/** Percentiles of a sample of non-negative errors, for the agreement tests. */
final class Stats {
    final long p50, p99, max;
    final int n;

    Stats(long[] errors) {
        long[] s = errors.clone();
        Arrays.sort(s);
        n = s.length;
        p50 = s[n / 2];
        p99 = s[(int) (n * 0.99)];
        max = s[n - 1];
    }

    @Override
    public String toString() {
        return "n=" + n + " p50=" + p50 + " ns p99=" + p99 + " ns max=" + max + " ns";
    }
}
