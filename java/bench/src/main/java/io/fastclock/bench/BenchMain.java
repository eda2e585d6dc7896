package io.fastclock.bench;

import io.fastclock.FastClock;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;
import org.openjdk.jmh.results.BenchmarkResult;
import org.openjdk.jmh.results.IterationResult;
import org.openjdk.jmh.results.Result;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.BenchmarkList;
import org.openjdk.jmh.runner.BenchmarkListEntry;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.format.OutputFormatFactory;
import org.openjdk.jmh.runner.options.VerboseMode;
import org.openjdk.jmh.runner.RunnerException;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.Options;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;
import org.openjdk.jmh.util.ListStatistics;
import org.openjdk.jmh.util.Statistics;

/**
 * Runs the benchmarks for the Java running this and prints a Markdown table:
 * ns/op with the 99.9% confidence half-width, and each row as a ratio to
 * System.nanoTime() and to Instant.now() from the same run.
 *
 * <pre>java [--enable-native-access=ALL-UNNAMED] -jar benchmarks.jar [--out FILE] [-f ROUNDS] [-wi N] [-i N] [-w SECONDS] [-r SECONDS] [--jvmArg ARG]... [--include REGEX]</pre>
 *
 * {@code --include} keeps only the benchmarks whose name (class.method, without the
 * package) the regular expression finds, e.g. {@code --include Log4jAsync} for the
 * Log4j 2 async-logging throughput alone; its table gives events/s with each clock
 * and the ratio fastclock/default from the same run.
 *
 * {@code --jvmArg -Dfastclock.native=false} measures the pure-Java fallback (the
 * rows that call the bindings directly are left out); FASTCLOCK_MODE in the
 * environment reaches the forks.
 *
 * Each JMH fork is a fresh JVM that takes its own never-slower decision: the header's
 * binding, mode and answers are the launcher JVM's, and after the run a line gives what
 * the forks themselves decided ({@link ForkRoutes}), or a warning listing each decision
 * when they differ.  Verdicts: see {@link #verdict}.
 */
public final class BenchMain {
    private static final String PKG = "io.fastclock.";

    /** Row order and labels: benchmark (class.method) -> label. */
    private static final String[][] ROWS = {
        {"ClockBenchmarks.systemNanoTime", "System.nanoTime()"},
        {"ClockBenchmarks.nanoTime", "**FastClock.nanoTime()**"},
        {"ClockBenchmarks.nanoTimeUnordered", "FastClock.nanoTimeUnordered()"},
        {"ClockBenchmarks.coarseNanoTime", "FastClock.coarseNanoTime()"},
        {"ClockBenchmarks.agronaCachedNanoClock", "Agrona CachedNanoClock.nanoTime()"},
        {"ClockBenchmarks.instantNowEpochNanos", "Instant.now() as epoch ns"},
        {"ClockBenchmarks.currentTimeNanos", "**FastClock.currentTimeNanos()**"},
        {"ClockBenchmarks.currentTimeNanosUnordered", "FastClock.currentTimeNanosUnordered()"},
        {"ClockBenchmarks.agronaOffsetEpochNanoClock", "Agrona OffsetEpochNanoClock.nanoTime()"},
        {"ClockBenchmarks.agronaSystemEpochNanoClock", "Agrona SystemEpochNanoClock.nanoTime()"},
        {"ClockBenchmarks.instantNow", "Instant.now()"},
        {"ClockBenchmarks.instant", "FastClock.instant()"},
        {"ClockBenchmarks.systemCurrentTimeMillis", "System.currentTimeMillis()"},
        {"ClockBenchmarks.currentTimeMillis", "FastClock.currentTimeMillis()"},
        {"ClockBenchmarks.coarseCurrentTimeMillis", "FastClock.coarseCurrentTimeMillis()"},
        {"Log4jBenchmarks.log4jDefaultClock", "Log4j 2 event, default clock (Instant.now())"},
        {"Log4jBenchmarks.log4jFastClock", "Log4j 2 event, log4j2.clock=fastclock"},
        {"Log4jBenchmarks.log4jDefaultClockInit", "Log4j 2 clock alone: SystemClock.init (Instant.now())"},
        {"Log4jBenchmarks.log4jFastClockInit", "Log4j 2 clock alone: fastclock's Log4jClock.init"},
        {"ClockBenchmarks.jniNoop", "JNI no-op"},
        {"ClockBenchmarks.ffmNoop", "FFM no-op (critical)"},
        {"ClockBenchmarks.jniNanoTime", "nanoTime via JNI"},
        {"ClockBenchmarks.jniCurrentTimeNanos", "currentTimeNanos via JNI"},
        {"CriticalJniBenchmarks.jniNoop", "JNI no-op, -XX:+CriticalJNINatives"},
        {"CriticalJniBenchmarks.nanoTime", "FastClock.nanoTime(), -XX:+CriticalJNINatives"},
        {"CriticalJniBenchmarks.nanoTimeUnordered", "FastClock.nanoTimeUnordered(), -XX:+CriticalJNINatives"},
        {"CriticalJniBenchmarks.currentTimeNanos", "FastClock.currentTimeNanos(), -XX:+CriticalJNINatives"},
    };

    public static void main(String[] args) throws RunnerException, IOException {
        int rounds = 4, warmups = 2, iterations = 4;
        double warmupSeconds = 1, iterationSeconds = 1;
        Path out = null;
        List<String> jvmArgs = new ArrayList<>();
        Pattern only = null;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            String v = i + 1 < args.length ? args[i + 1] : null;
            if (v == null)
                usage("missing value after " + a);
            switch (a) {
            case "--out": out = Paths.get(v); break;
            case "-f": rounds = Integer.parseInt(v); break;
            case "-wi": warmups = Integer.parseInt(v); break;
            case "-i": iterations = Integer.parseInt(v); break;
            case "-w": warmupSeconds = Double.parseDouble(v); break;
            case "-r": iterationSeconds = Double.parseDouble(v); break;
            case "--jvmArg": jvmArgs.add(v); break;
            case "--include": only = Pattern.compile(v); break;
            default: usage("unknown option " + a);
            }
            i++;
        }

        int feature = Runtime.version().feature();
        // One fork per benchmark per round, rounds repeated: every benchmark is
        // sampled early, middle and late, so a neighbour's load on a shared
        // machine shifts all rows alike instead of skewing the ratios.
        ChainedOptionsBuilder o = new OptionsBuilder()
                .include("^" + PKG.replace(".", "\\.") + "(Clock|Log4j|Log4jAsync)Benchmarks\\.")
                .forks(1)
                .warmupIterations(warmups)
                .warmupTime(TimeValue.milliseconds((long) (warmupSeconds * 1000)))
                .measurementIterations(iterations)
                .measurementTime(TimeValue.milliseconds((long) (iterationSeconds * 1000)))
                .shouldFailOnError(true);
        // The forks' own arguments, prepended below (with --jvmArg's: a launcher option that
        // conflicts with one of them comes later on the fork's command line, and wins).
        List<String> forkArgs = new ArrayList<>();
        if (feature >= 24) {
            // JMH 1.37 itself uses sun.misc.Unsafe: keep 24+'s warnings out of the output.
            forkArgs.add("--enable-native-access=ALL-UNNAMED");
            forkArgs.add("--sun-misc-unsafe-memory-access=allow");
        } else if (feature >= 22) {
            forkArgs.add("--enable-native-access=ALL-UNNAMED");
        } else {
            o.exclude("ClockBenchmarks\\.ffmNoop$");
            if (feature <= 17) // CriticalJNINatives: deprecated in 16, removed in 18
                o.include("^" + PKG.replace(".", "\\.") + "CriticalJniBenchmarks\\.");
        }

        boolean fallback = jvmArgs.contains("-Dfastclock.native=false");
        if (fallback)
            o.exclude("ClockBenchmarks\\.(jni|ffm)").exclude("CriticalJniBenchmarks");
        if (only != null) // JMH takes includes as alternatives: narrow with an exclude of everything else
            o.exclude("^" + PKG.replace(".", "\\.") + "(?!.*(" + only.pattern() + "))");
        forkArgs.addAll(jvmArgs);
        // Each fork takes its own never-slower decision: the forks record theirs here
        // (ForkRoutes).  Every fork argument is prepended, not appended: an append here
        // would replace a benchmark's own @Fork(jvmArgsAppend) (CriticalJniBenchmarks'
        // flag on 17, whose rows would then be measured without it).
        Path forkRoutes = Files.createTempFile("fastclock-fork-routes", ".tsv");
        forkRoutes.toFile().deleteOnExit();
        forkArgs.add("-D" + ForkRoutes.FILE_PROPERTY + "=" + forkRoutes);
        o.jvmArgsPrepend(forkArgs.toArray(new String[0]));

        String clocksourceBefore = clocksource();
        if (fallback)
            System.setProperty("fastclock.native", "false"); // so the context below describes the forks
        String context = context();
        System.out.println(context);
        int forks = 0;
        Map<String, ListStatistics> byName = new HashMap<>();
        // Per benchmark: each round's mean (paired ratios) and the secondary counters summed.
        Map<String, List<Double>> roundMeans = new HashMap<>();
        Map<String, Map<String, Double>> counters = new HashMap<>();
        // The benchmarks this run selects, in JMH's order (by mode, then name); each round
        // runs them one by one, forward in odd rounds and backward in even
        // ones, so that a drift within a round (a neighbour's load, the
        // host's turbo budget) falls on both sides of every ratio alike.
        Options base = o.build();
        List<String> names = new ArrayList<>();
        for (BenchmarkListEntry e : BenchmarkList.defaultList().find(
                OutputFormatFactory.createFormatInstance(System.out, VerboseMode.SILENT), base.getIncludes(), base.getExcludes()))
            if (!names.contains(e.getUsername()))
                names.add(e.getUsername());
        if (names.isEmpty())
            usage("no benchmark matches");
        for (int round = 1; round <= rounds; round++) {
            System.out.println("# fastclock: round " + round + " of " + rounds);
            List<String> order = new ArrayList<>(names);
            if (round % 2 == 0)
                Collections.reverse(order);
            List<RunResult> results = new ArrayList<>();
            for (String name : order) {
                // Includes add up (JMH takes them as alternatives): the one
                // benchmark is picked by excluding every other name.
                results.addAll(new Runner(new OptionsBuilder().parent(base)
                        .exclude("^(?!" + Pattern.quote(name) + "$)")
                        // Log4jAsyncBenchmarks: the clock that goes first alternates by round.
                        .param("clock", round % 2 == 1 ? new String[] {"default", "fastclock"}
                                                       : new String[] {"fastclock", "default"})
                        .build()).run());
            }
            for (RunResult r : results) {
                forks++;
                String key = key(r);
                ListStatistics st = byName.computeIfAbsent(key, k -> new ListStatistics());
                ListStatistics thisRound = new ListStatistics();
                Map<String, Double> sums = counters.computeIfAbsent(key, k -> new TreeMap<>());
                for (BenchmarkResult br : r.getBenchmarkResults())
                    for (IterationResult ir : br.getIterationResults()) {
                        st.addValue(ir.getPrimaryResult().getScore());
                        thisRound.addValue(ir.getPrimaryResult().getScore());
                        for (Map.Entry<String, Result> e : ir.getSecondaryResults().entrySet())
                            sums.merge(e.getKey(), e.getValue().getScore(), Double::sum);
                    }
                roundMeans.computeIfAbsent(key, k -> new ArrayList<>()).add(thisRound.getMean());
            }
        }
        String clocksourceAfter = clocksource();
        if (!clocksourceBefore.equals(clocksourceAfter))
            context += "WARNING: the kernel's clocksource changed during the run (" + clocksourceBefore + " -> "
                    + clocksourceAfter + "): the JDK rows are not comparable\n";
        context += forkRoutes(forkRoutes, forks);
        String table = context + "\n" + table(byName, rounds, warmups, iterations, warmupSeconds, iterationSeconds)
                + log4jAsync(byName, roundMeans, counters, rounds, warmups, iterations, warmupSeconds, iterationSeconds);
        System.out.println();
        System.out.println(table);
        if (out != null)
            Files.write(out, table.getBytes(StandardCharsets.UTF_8));
    }

    private static void usage(String why) {
        System.err.println("BenchMain: " + why
                + "\nusage: java -jar benchmarks.jar [--out FILE] [-f ROUNDS] [-wi N] [-i N] [-w SECONDS] [-r SECONDS]"
                + " [--jvmArg ARG]... [--include REGEX]");
        System.exit(2);
    }

    /** class.method without the package, then the parameters if any: "Log4jAsyncBenchmarks.burst1:clock=default". */
    private static String key(RunResult r) {
        String key = r.getParams().getBenchmark().substring(PKG.length());
        for (String p : r.getParams().getParamsKeys())
            key += ":" + p + "=" + r.getParams().getParam(p);
        return key;
    }

    /** Log4jAsyncBenchmarks rows: method -> label. */
    private static final String[][] LOG4J_ASYNC = {
        {"burst1", "1 producer, bursts (producer's rate, no back-pressure)"},
        {"burst2", "2 producers, bursts (producer's rate, no back-pressure)"},
        {"sustained1", "1 producer, sustained (end to end, ring full)"},
        {"sustained2", "2 producers, sustained (end to end, ring full)"},
    };

    /**
     * Log4j 2 async logging, events/s with Log4j's default clock and with fastclock's, and
     * the ratio fastclock/default (above 1: more events per second with fastclock); then
     * where the time goes, from the benchmark's counters (thread CPU times, ring-full waits).
     */
    private static String log4jAsync(Map<String, ListStatistics> r, Map<String, List<Double>> rounds,
            Map<String, Map<String, Double>> counters, int nRounds, int warmups, int iterations, double w, double i) {
        StringBuilder sb = new StringBuilder();
        for (String[] row : LOG4J_ASYNC) {
            String d = "Log4jAsyncBenchmarks." + row[0] + ":clock=default", f = "Log4jAsyncBenchmarks." + row[0] + ":clock=fastclock";
            Statistics a = r.get(f), b = r.get(d);
            if (a == null || b == null)
                continue;
            if (sb.length() == 0) {
                sb.append(String.format(Locale.ROOT,
                        "%nLog4j 2 async logging (all loggers async, PatternLayout with a ns timestamp -> /dev/null), "
                                + "events/s: %d rounds, each a fresh fork per (benchmark, clock) measuring %d x %.1f s after "
                                + "%d x %.1f s of warm-up; ± = 99.9%% confidence half-width over the %d iterations; "
                                + "ratio = fastclock / default (> 1: fastclock logs more events per second), error propagated "
                                + "from both; per round = the ratio of the two forks run side by side in each round.%n%n",
                        nRounds, iterations, i, warmups, w, nRounds * iterations));
                sb.append("| measurement | default clock, M events/s | ± | median | fastclock, M events/s | ± | median "
                        + "| ratio (means) | ratio (medians) | per round |\n");
                sb.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
            }
            List<Double> ra = rounds.get(f), rb = rounds.get(d);
            StringBuilder per = new StringBuilder();
            for (int k = 0; k < Math.min(ra.size(), rb.size()); k++)
                per.append(k == 0 ? "" : ", ").append(String.format(Locale.ROOT, "%.2f", ra.get(k) / rb.get(k)));
            sb.append(String.format(Locale.ROOT, "| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %s | %.2f | %s |%n", row[1],
                    b.getMean() / 1e6, err(b) / 1e6, median(b) / 1e6, a.getMean() / 1e6, err(a) / 1e6, median(a) / 1e6,
                    ratio(a, b), median(a) / median(b), per));
        }
        if (sb.length() == 0)
            return "";
        sb.append("\nWhere the time goes (sums over all measured iterations; CPU = the thread's own CPU time, so a thread"
                + " short of 100% busy was waiting or preempted; the background thread formats and writes every event):\n\n");
        sb.append("| measurement | clock | producer CPU ns/event | background CPU ns/event | background busy "
                + "| publishes that found the ring full, per 1000 events |\n");
        sb.append("|---|---|---:|---:|---:|---:|\n");
        for (String[] row : LOG4J_ASYNC)
            for (String clock : new String[] {"default", "fastclock"}) {
                Map<String, Double> c = counters.get("Log4jAsyncBenchmarks." + row[0] + ":clock=" + clock);
                if (c == null || c.getOrDefault("events", 0.0) <= 0)
                    continue;
                double ev = c.get("events");
                sb.append(String.format(Locale.ROOT, "| %s | %s | %.0f | %.0f | %.0f%% | %.2f |%n", row[1], clock,
                        c.getOrDefault("producerCpuNs", 0.0) / ev, c.getOrDefault("consumerCpuNs", 0.0) / ev,
                        100 * c.getOrDefault("consumerCpuNs", 0.0) / c.getOrDefault("wallNs", Double.NaN),
                        1000 * c.getOrDefault("ringFull", 0.0) / ev));
            }
        sb.append("\nNever slower, Log4j 2 async (fastclock's events/s against the default clock's, same run; " + VERDICTS_HIGHER
                + "):\n\n");
        for (String[] row : LOG4J_ASYNC) {
            Statistics a = r.get("Log4jAsyncBenchmarks." + row[0] + ":clock=fastclock");
            Statistics b = r.get("Log4jAsyncBenchmarks." + row[0] + ":clock=default");
            if (a == null || b == null)
                continue;
            double q = a.getMean() / b.getMean(), e = q * ratioRel(a, b);
            sb.append(String.format(Locale.ROOT, "- %s: %.2f ± %.2f (median %.2f) -> %s%n", row[1], q, e,
                    median(a) / median(b), verdict(q, e, false)));
        }
        return sb.toString();
    }

    private static String table(Map<String, ListStatistics> r, int rounds, int warmups, int iterations, double w,
            double i) {
        boolean any = false;
        for (String[] row : ROWS)
            any |= r.containsKey(row[0]);
        if (!any)
            return "";
        Statistics nano = r.get("ClockBenchmarks.systemNanoTime");
        Statistics inst = r.get("ClockBenchmarks.instantNowEpochNanos");
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT,
                "JMH, average time; %d rounds over all benchmarks, each a fresh fork measuring %d x %.1f s after "
                        + "%d x %.1f s of warm-up; ± = 99.9%% confidence half-width of the mean over the %d iterations "
                        + "(ratio errors propagated from both); medians resist preempted iterations; "
                        + "every ratio is from this same run.%n%n",
                rounds, iterations, i, warmups, w, rounds * iterations));
        sb.append("| benchmark | mean ns/op | ± | median ns/op | mean × System.nanoTime() | median × System.nanoTime() "
                + "| mean × Instant.now() | median × Instant.now() |\n");
        sb.append("|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for (String[] row : ROWS) {
            Statistics x = r.get(row[0]);
            if (x == null)
                continue;
            sb.append(String.format(Locale.ROOT, "| %s | %.2f | %.2f | %.2f | %s | %s | %s | %s |%n", row[1],
                    x.getMean(), err(x), median(x), ratio(x, nano), medianRatio(x, nano), ratio(x, inst),
                    medianRatio(x, inst)));
        }
        sb.append('\n');
        Statistics millis = r.get("ClockBenchmarks.systemCurrentTimeMillis");
        Statistics instantNow = r.get("ClockBenchmarks.instantNow");
        sb.append("Never slower (promise 2: each method against its JDK counterpart, same run; " + VERDICTS_LOWER
                + "):\n\n");
        notSlower(sb, "FastClock.nanoTime()", r.get("ClockBenchmarks.nanoTime"), "System.nanoTime()", nano);
        notSlower(sb, "FastClock.nanoTimeUnordered()", r.get("ClockBenchmarks.nanoTimeUnordered"), "System.nanoTime()", nano);
        notSlower(sb, "FastClock.coarseNanoTime()", r.get("ClockBenchmarks.coarseNanoTime"), "System.nanoTime()", nano);
        notSlower(sb, "FastClock.currentTimeNanos()", r.get("ClockBenchmarks.currentTimeNanos"), "Instant.now() as epoch ns", inst);
        notSlower(sb, "FastClock.currentTimeNanosUnordered()", r.get("ClockBenchmarks.currentTimeNanosUnordered"),
                "Instant.now() as epoch ns", inst);
        notSlower(sb, "FastClock.instant()", r.get("ClockBenchmarks.instant"), "Instant.now()", instantNow);
        notSlower(sb, "FastClock.currentTimeMillis()", r.get("ClockBenchmarks.currentTimeMillis"),
                "System.currentTimeMillis()", millis);
        notSlower(sb, "FastClock.coarseCurrentTimeMillis()", r.get("ClockBenchmarks.coarseCurrentTimeMillis"),
                "System.currentTimeMillis()", millis);
        notSlower(sb, "Log4j 2 event with fastclock", r.get("Log4jBenchmarks.log4jFastClock"),
                "with Log4j's default clock", r.get("Log4jBenchmarks.log4jDefaultClock"));
        notSlower(sb, "Log4j 2 clock alone: fastclock's Log4jClock.init", r.get("Log4jBenchmarks.log4jFastClockInit"),
                "SystemClock.init", r.get("Log4jBenchmarks.log4jDefaultClockInit"));
        sb.append("\nFaster where the counter allows (issue 10's targets; JDK 25 over FFM, mode tsc; the verdicts "
                + "as above, against each target instead of 1):\n\n");
        target(sb, "FastClock.nanoTime() <= 0.90 x System.nanoTime()", r.get("ClockBenchmarks.nanoTime"), nano, 0.90);
        target(sb, "FastClock.nanoTimeUnordered() <= 0.65 x System.nanoTime()", r.get("ClockBenchmarks.nanoTimeUnordered"),
                nano, 0.65);
        target(sb, "FastClock.currentTimeNanos() <= 0.60 x Instant.now()", r.get("ClockBenchmarks.currentTimeNanos"), inst,
                0.60);
        absolute(sb, "FastClock.coarseNanoTime() <= 2 ns", r.get("ClockBenchmarks.coarseNanoTime"), 2.0);
        absolute(sb, "FastClock.coarseCurrentTimeMillis() <= 2 ns", r.get("ClockBenchmarks.coarseCurrentTimeMillis"), 2.0);
        return sb.toString();
    }

    /** a/b with the propagated error of both (independent errors, first order). */
    private static String ratio(Statistics a, Statistics b) {
        if (a == null || b == null || b.getMean() <= 0)
            return "n/a";
        double q = a.getMean() / b.getMean();
        double e = q * ratioRel(a, b);
        return Double.isNaN(e) ? String.format(Locale.ROOT, "%.2f ± n/a", q) : String.format(Locale.ROOT, "%.2f ± %.2f", q, e);
    }

    private static double median(Statistics x) {
        return x.getPercentile(50);
    }

    /** Robust to the preempted iterations of a shared machine; no error bar of its own. */
    private static String medianRatio(Statistics a, Statistics b) {
        if (a == null || b == null || median(b) <= 0)
            return "n/a";
        return String.format(Locale.ROOT, "%.2f", median(a) / median(b));
    }

    private static double err(Statistics x) {
        return x.getN() > 2 ? x.getMeanErrorAt(0.999) : Double.NaN;
    }

    /** The relative error; NaN where there is none (two iterations or fewer). */
    private static double rel(Statistics x) {
        double e = err(x);
        return Double.isNaN(e) || x.getMean() == 0 ? Double.NaN : e / x.getMean();
    }

    private static double sq(double x) {
        return x * x;
    }

    /** The relative error of a/b: both's, independent, first order (NaN where either has none). */
    private static double ratioRel(Statistics a, Statistics b) {
        return Math.sqrt(sq(rel(a)) + sq(rel(b)));
    }

    /** A target on a ratio: judged on the mean with its interval, as the never-slower verdicts are. */
    private static void target(StringBuilder sb, String what, Statistics a, Statistics b, double limit) {
        if (a == null || b == null)
            return;
        double q = a.getMean() / b.getMean(), e = q * ratioRel(a, b), m = median(a) / median(b);
        sb.append(String.format(Locale.ROOT, "- target %s: mean ratio %.2f ± %.2f -> %s; median ratio %.2f%n", what, q,
                e, verdict(q, e, limit, true), m));
    }

    private static void notSlower(StringBuilder sb, String what, Statistics a, String jdk, Statistics b) {
        if (a == null || b == null)
            return;
        double q = a.getMean() / b.getMean(), e = q * ratioRel(a, b);
        sb.append(String.format(Locale.ROOT, "- %s vs %s: %.2f ± %.2f (median %.2f) -> %s%n", what, jdk, q, e,
                median(a) / median(b), verdict(q, e, true)));
    }

    static final String VERDICTS_LOWER = "\"met\" when the mean ratio is <= 1 and so is its 99.9% interval (ratio + error); "
            + "\"NOT met\" when the mean ratio is above 1; either one \"inconclusive\" when the interval straddles 1";
    static final String VERDICTS_HIGHER = "\"met\" when the mean ratio is >= 1 and so is its 99.9% interval (ratio - error); "
            + "\"NOT met\" when the mean ratio is below 1; either one \"inconclusive\" when the interval straddles 1";

    /**
     * The never-slower verdict on a ratio q ± e (99.9% half-width): met only where the mean
     * ratio is on the good side of 1 (at most 1 where lower is better, at least 1 where higher
     * is), and inconclusive, said so, wherever the error interval reaches across 1.  (It was
     * "met" while q - e <= 1: 1.19 ± 0.58 passed.)
     */
    static String verdict(double q, double e, boolean lowerIsBetter) {
        return verdict(q, e, 1.0, lowerIsBetter);
    }

    /** The same against any limit (a target: 0.90, 2 ns); no interval (too few iterations) is said. */
    static String verdict(double q, double e, double limit, boolean lowerIsBetter) {
        if (Double.isNaN(q))
            return "n/a";
        boolean meanOk = lowerIsBetter ? q <= limit : q >= limit;
        if (Double.isNaN(e))
            return (meanOk ? "met" : "NOT met") + " on the mean, no interval (two iterations or fewer)";
        double err = Math.abs(e);
        double lo = q - err, hi = q + err;
        // Where lower is better the pessimistic end is the top of the interval (higher: the bottom).
        double pessimistic = lowerIsBetter ? hi : lo, optimistic = lowerIsBetter ? lo : hi;
        boolean ok = lowerIsBetter ? pessimistic <= limit : pessimistic >= limit;
        boolean maybeOk = lowerIsBetter ? optimistic <= limit : optimistic >= limit;
        String interval = String.format(Locale.ROOT, "99.9%% interval %.2f..%.2f straddles %s", lo, hi,
                java.math.BigDecimal.valueOf(limit).stripTrailingZeros().toPlainString());
        if (ok)
            return "met";
        if (meanOk)
            return "met on the mean, inconclusive (" + interval + ")";
        if (maybeOk)
            return "NOT met on the mean, inconclusive (" + interval + ")";
        return "NOT met";
    }

    private static void absolute(StringBuilder sb, String what, Statistics a, double limitNs) {
        if (a == null)
            return;
        sb.append(String.format(Locale.ROOT, "- target %s: mean %.2f ± %.2f ns -> %s%n", what, a.getMean(), err(a),
                verdict(a.getMean(), err(a), limitNs, true)));
    }

    private static String clocksource() {
        return read("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    }

    private static String context() {
        String cpu = firstLine("/proc/cpuinfo", "model name");
        String hyp = firstLine("/proc/cpuinfo", "flags").contains(" hypervisor") ? ", virtualised" : "";
        String cs = clocksource();
        return String.format(Locale.ROOT,
                "Machine: %s (%d CPUs%s), Linux %s, clocksource %s%nJava: %s %s (%s)%n"
                        + "fastclock in the launcher JVM (each JMH fork decides for itself at start-up; what the forks "
                        + "decided follows the run): binding %s, mode %s (%s)%n"
                        + "fastclock answers in the launcher JVM: %s%n",
                cpu, Runtime.getRuntime().availableProcessors(), hyp, System.getProperty("os.version"), cs,
                System.getProperty("java.vm.name"), Runtime.version(), System.getProperty("java.vendor"),
                FastClock.binding(), FastClock.mode(), FastClock.reason(), answers());
    }

    /** The status() line that says who answers each fine clock (the never-slower decision). */
    private static String answers() {
        return ForkRoutes.answers();
    }

    /**
     * What the forks decided (ForkRoutes' lines): one line when they all agree, else a warning
     * and each decision with the benchmarks whose forks took it.  Forks of benchmarks that
     * never load FastClock (Log4j's default clock) record nothing.
     */
    static String forkRoutes(Path file, int forks) throws IOException {
        List<String> lines = Files.exists(file) ? Files.readAllLines(file, StandardCharsets.UTF_8) : new ArrayList<>();
        Map<String, List<String>> byDecision = new TreeMap<>();
        Map<String, List<String>> reasons = new TreeMap<>();
        int recorded = 0;
        for (String l : lines) {
            String[] f = l.split("\t", 5);
            if (f.length < 4)
                continue;
            recorded++;
            String decision = "binding " + f[1] + ", mode " + f[2] + "; answers: " + f[3];
            List<String> benches = byDecision.computeIfAbsent(decision, k -> new ArrayList<>());
            if (!benches.contains(f[0]))
                benches.add(f[0]);
            List<String> why = reasons.computeIfAbsent(decision, k -> new ArrayList<>());
            if (f.length == 5 && !why.contains(f[4]))
                why.add(f[4]);
        }
        String counted = recorded + " of " + forks + " forks"
                + (recorded < forks ? "; the others' benchmarks never load FastClock" : "");
        if (byDecision.isEmpty())
            return "fastclock in the forks: unknown (" + counted + ")\n";
        if (byDecision.size() == 1)
            return "fastclock in every fork that recorded it (" + counted + "): " + byDecision.keySet().iterator().next()
                    + "\n";
        StringBuilder sb = new StringBuilder("WARNING: the forks decided differently (" + counted
                + "); rows measured under different routes are compared below:\n");
        for (Map.Entry<String, List<String>> e : byDecision.entrySet()) {
            sb.append("- ").append(e.getKey()).append(" (").append(String.join(", ", e.getValue())).append(")");
            List<String> why = reasons.get(e.getKey());
            if (why != null && !why.isEmpty())
                sb.append("; mode's reason: ").append(String.join(" / ", why));
            sb.append("\n");
        }
        return sb.toString();
    }

    private static String read(String path) {
        try {
            return new String(Files.readAllBytes(Paths.get(path)), StandardCharsets.UTF_8).trim();
        } catch (IOException | RuntimeException e) {
            return "unknown";
        }
    }

    private static String firstLine(String path, String key) {
        List<String> lines;
        try {
            lines = Files.readAllLines(Paths.get(path), StandardCharsets.UTF_8);
        } catch (IOException | RuntimeException e) {
            lines = new ArrayList<>();
        }
        for (String l : lines) {
            if (l.startsWith(key)) {
                int c = l.indexOf(':');
                return c < 0 ? l : l.substring(c + 1).trim();
            }
        }
        return "unknown";
    }
}
