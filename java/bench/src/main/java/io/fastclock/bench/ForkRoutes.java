package io.fastclock.bench;

import io.fastclock.FastClock;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import org.openjdk.jmh.infra.BenchmarkParams;

/**
 * What fastclock decided inside a JMH fork.  Each fork is a fresh JVM that takes its own
 * never-slower decision at start-up (from costs measured in that process), so the
 * launcher's decision says nothing certain about the forks': the benchmarks that use
 * FastClock call {@link #record} from their setup, and BenchMain reports what the forks
 * recorded.  One tab-separated line per fork: benchmark key, binding, mode, answers, and
 * the mode's reason (a fork that took another mode says why: a warp found, say).
 */
public final class ForkRoutes {
    /** The file each fork appends its line to; BenchMain passes it to the forks. */
    public static final String FILE_PROPERTY = "fastclock.bench.forkRoutes";
    private static boolean recorded;

    private ForkRoutes() {}

    /** Records this fork's decision once (the first setup that calls it); nothing without the property. */
    public static synchronized void record(BenchmarkParams params) {
        String path = System.getProperty(FILE_PROPERTY);
        if (path == null || recorded)
            return;
        recorded = true;
        String line = key(params) + "\t" + FastClock.binding() + "\t" + FastClock.mode() + "\t" + answers() + "\t"
                + FastClock.reason().replace('\t', ' ').replace('\n', ' ') + "\n";
        try {
            // Forks run one at a time; one short append per fork.
            Files.write(Paths.get(path), line.getBytes(StandardCharsets.UTF_8), StandardOpenOption.CREATE,
                    StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new UncheckedIOException("recording this fork's fastclock routes in " + path, e);
        }
    }

    /** class.method without the package, then the parameters: BenchMain's key for the benchmark. */
    static String key(BenchmarkParams p) {
        String key = p.getBenchmark().substring("io.fastclock.".length());
        for (String k : p.getParamsKeys())
            key += ":" + k + "=" + p.getParam(k);
        return key;
    }

    /** The status() line that says who answers each fine clock (the never-slower decision). */
    public static String answers() {
        for (String line : FastClock.status().split("\n"))
            if (line.startsWith("answers="))
                return line.substring("answers=".length());
        return "unknown";
    }
}
