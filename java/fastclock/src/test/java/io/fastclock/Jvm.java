package io.fastclock;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/** Runs Probe in a child JVM (same JDK, same class path) and parses its output. */
final class Jvm {
    final int exitCode;
    final String stdout;
    final String stderr;
    final Map<String, String> values = new HashMap<>();

    private Jvm(int exitCode, String stdout, String stderr) {
        this.exitCode = exitCode;
        this.stdout = stdout;
        this.stderr = stderr;
        for (String line : stdout.split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0)
                values.put(line.substring(0, eq), line.substring(eq + 1));
        }
    }

    static int feature() {
        return Runtime.version().feature();
    }

    static Path javaExecutable() {
        return Paths.get(System.getProperty("java.home"), "bin", "java");
    }

    /** The command line for Probe with these JVM options. */
    static List<String> command(String... jvmArgs) {
        return command(true, jvmArgs);
    }

    /** enableNativeAccess: pass --enable-native-access=ALL-UNNAMED on Java 22+, as users should. */
    static List<String> command(boolean enableNativeAccess, String... jvmArgs) {
        List<String> cmd = new ArrayList<>();
        cmd.add(javaExecutable().toString());
        if (enableNativeAccess && feature() >= 22)
            cmd.add("--enable-native-access=ALL-UNNAMED");
        for (String a : jvmArgs)
            cmd.add(a);
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(Probe.class.getName());
        return cmd;
    }

    /** Probe with this class path instead of the test's own. */
    static Jvm probeWithClassPath(String classPath, String... jvmArgs) throws IOException, InterruptedException {
        List<String> cmd = command(jvmArgs);
        cmd.set(cmd.indexOf("-cp") + 1, classPath);
        return run(cmd, null);
    }

    static Jvm probe(String... jvmArgs) throws IOException, InterruptedException {
        return run(command(jvmArgs), null);
    }

    /** Probe with these arguments to Probe itself (after the class name). */
    static Jvm probeArgs(List<String> probeArgs, Map<String, String> env, String... jvmArgs)
            throws IOException, InterruptedException {
        List<String> cmd = command(jvmArgs);
        cmd.addAll(probeArgs);
        return run(cmd, env);
    }

    static Jvm run(List<String> cmd, Map<String, String> env) throws IOException, InterruptedException {
        ProcessBuilder pb = new ProcessBuilder(cmd);
        if (env != null) {
            for (Map.Entry<String, String> e : env.entrySet()) {
                if (e.getValue() == null)
                    pb.environment().remove(e.getKey());
                else
                    pb.environment().put(e.getKey(), e.getValue());
            }
        }
        Process p = pb.start();
        p.getOutputStream().close();
        // Both streams drained on threads of their own, so that the time limit applies
        // (reading stdout here first would wait for a hung child for ever).
        ByteArrayOutputStream err = new ByteArrayOutputStream(), out = new ByteArrayOutputStream();
        Thread drainErr = new Thread(() -> copy(p.getErrorStream(), err));
        Thread drainOut = new Thread(() -> copy(p.getInputStream(), out));
        drainErr.start();
        drainOut.start();
        if (!p.waitFor(120, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IOException("child JVM timed out: " + cmd);
        }
        drainErr.join();
        drainOut.join();
        return new Jvm(p.exitValue(), out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    private static void copy(InputStream in, ByteArrayOutputStream out) {
        try {
            in.transferTo(out);
        } catch (IOException ignored) {
            // the process died; what we have is what there is
        }
    }

    /**
     * For a child started with FASTCLOCK_MODE=mode (tsc, percpu, system): null where that
     * mode runs; else the core's reason, which must be a refusal (FASTCLOCK_MODE=... refused:
     * the machine lacks what it needs; for tsc also a warp check that found the CPUs apart).
     */
    String refusalOf(String mode) {
        String core = Map.of("tsc", "tsc", "percpu", "tsc-percpu", "system", "system").get(mode);
        if (core.equals(get("mode")))
            return null;
        String reason = String.valueOf(get("reason"));
        org.junit.jupiter.api.Assertions.assertTrue(reason.startsWith("FASTCLOCK_MODE=" + mode + " refused")
                        || ("tsc".equals(mode) && reason.contains("disagree by")),
                "FASTCLOCK_MODE=" + mode + ", and mode " + get("mode") + " runs: " + reason);
        return reason;
    }

    String get(String key) {
        return values.get(key);
    }

    @Override
    public String toString() {
        return "exit " + exitCode + "\n--- stdout\n" + stdout + "--- stderr\n" + stderr;
    }
}
