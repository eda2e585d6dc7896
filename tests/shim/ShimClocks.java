import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Instant;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The JVM's clocks, for the shim's tests.
 *
 *   serve                  for each line on stdin, print mono= real= real_ms= (nanoTime,
 *                          Instant.now, currentTimeMillis) for shim_agree
 *   monotonic SECS THREADS threads read System.nanoTime() under one lock; any value below
 *                          the previous one (by any thread) fails
 *   loop N                 N calls of each clock (for counting what reaches libc)
 */
public final class ShimClocks {
    private static final Object LOCK = new Object();
    private static long last = Long.MIN_VALUE;
    private static long lastMillis = Long.MIN_VALUE;
    private static long reads, decreases, worst, millisDecreases;

    public static void main(String[] args) throws Exception {
        switch (args.length > 0 ? args[0] : "") {
            case "serve" -> { requireShim(); serve(); }
            case "monotonic" -> { requireShim(); System.exit(monotonic(Double.parseDouble(args[1]), Integer.parseInt(args[2]))); }
            case "loop" -> loop(Long.parseLong(args[1]));
            default -> {
                System.err.println("usage: ShimClocks serve | monotonic SECONDS THREADS | loop N");
                System.exit(2);
            }
        }
    }

    /**
     * The checks below are about the JVM under the shim: one that is not
     * mapped (the loader refused it, as it does for another architecture's,
     * with a warning only) would check the JVM's own clocks and pass.
     */
    static void requireShim() throws Exception {
        String maps = new String(java.nio.file.Files.readAllBytes(java.nio.file.Path.of("/proc/self/maps")));
        if (!maps.contains("libfastclock-preload")) {
            System.err.println("ShimClocks: libfastclock-preload is not mapped in this JVM (LD_PRELOAD="
                    + System.getenv("LD_PRELOAD") + ")");
            System.exit(3);
        }
    }

    static void serve() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StringBuilder sb = new StringBuilder();
        while (in.readLine() != null) {
            long mono = System.nanoTime();
            Instant now = Instant.now();
            long millis = System.currentTimeMillis();
            sb.setLength(0);
            sb.append("mono=").append(mono)
              .append(" real=").append(now.getEpochSecond() * 1_000_000_000L + now.getNano())
              .append(" real_ms=").append(millis).append('\n');
            System.out.print(sb);
            System.out.flush();
        }
    }

    static int monotonic(double seconds, int threads) throws Exception {
        AtomicBoolean stop = new AtomicBoolean();
        Thread[] ts = new Thread[threads];
        for (int i = 0; i < threads; i++) {
            ts[i] = new Thread(() -> {
                while (!stop.get()) {
                    synchronized (LOCK) {
                        long v = System.nanoTime();
                        if (v < last) {
                            decreases++;
                            worst = Math.max(worst, last - v);
                        }
                        last = v;
                        long m = System.currentTimeMillis();
                        if (m < lastMillis)
                            millisDecreases++;
                        lastMillis = m;
                        reads++;
                    }
                }
            });
            ts[i].start();
        }
        Thread.sleep((long) (seconds * 1000));
        stop.set(true);
        for (Thread t : ts)
            t.join();
        System.out.printf("%d nanoTime reads across %d threads: %d decreases (worst %d ns); "
                + "currentTimeMillis: %d decreases%n", reads, threads, decreases, worst, millisDecreases);
        return decreases == 0 && millisDecreases == 0 && reads > 10000 ? 0 : 1;
    }

    static void loop(long n) {
        long sum = 0;
        for (long i = 0; i < n; i++) {
            sum += System.nanoTime();
            sum += System.currentTimeMillis();
            sum += Instant.now().getNano();
        }
        System.out.println("loop " + n + " " + (sum & 1));
    }
}
