import java.time.Instant;

/**
 * What the JVM pays for System.nanoTime(), System.currentTimeMillis() and
 * Instant.now(): run plain, then under the shim, by bench/shim/run.py.
 * The three loops are measured interleaved, batch by batch, after warm-up
 * (C2-compiled).  Prints "name median_ns" lines.
 */
public final class ShimBench {
    static long sink;

    static long nanoTime(int n) {
        long s = 0;
        for (int i = 0; i < n; i++) s += System.nanoTime();
        return s;
    }

    static long currentTimeMillis(int n) {
        long s = 0;
        for (int i = 0; i < n; i++) s += System.currentTimeMillis();
        return s;
    }

    static long instantNow(int n) {
        long s = 0;
        for (int i = 0; i < n; i++) s += Instant.now().getNano();
        return s;
    }

    interface Loop { long run(int n); }

    public static void main(String[] args) {
        int batches = args.length > 0 ? Integer.parseInt(args[0]) : 41;
        int calls = args.length > 1 ? Integer.parseInt(args[1]) : 100_000;
        String[] names = {"System.nanoTime()", "System.currentTimeMillis()", "Instant.now()"};
        Loop[] loops = {ShimBench::nanoTime, ShimBench::currentTimeMillis, ShimBench::instantNow};
        for (int w = 0; w < 30; w++)
            for (Loop l : loops) sink += l.run(calls);
        double[][] ns = new double[loops.length][batches];
        for (int b = 0; b < batches; b++)
            for (int k = 0; k < loops.length; k++) {
                long t0 = System.nanoTime();
                sink += loops[k].run(calls);
                ns[k][b] = (double) (System.nanoTime() - t0) / calls;
            }
        for (int k = 0; k < loops.length; k++) {
            java.util.Arrays.sort(ns[k]);
            System.out.printf("%s %.2f%n", names[k], ns[k][batches / 2]);
        }
        // Whether the shim is in this JVM (run.py checks it against the column).
        String maps;
        try {
            maps = new String(java.nio.file.Files.readAllBytes(java.nio.file.Path.of("/proc/self/maps")));
        } catch (java.io.IOException e) {
            maps = "";
        }
        System.out.println("# shim " + (maps.contains("libfastclock-preload") ? "present" : "absent"));
        if (sink == 42) System.out.println();
    }
}
