package io.fastclock.adapters;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A test that hands an adapter a manual source stays hermetic: no native library, no calibrator
 * thread, no start-up measurement.  Checked in a fresh JVM, since this one has long loaded it.
 */
class ManualSourcesLoadNothingTest {
    private static String probe(String what) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        if (Runtime.version().feature() >= 22)
            cmd.add("--enable-native-access=ALL-UNNAMED");
        String tmp = System.getProperty("fastclock.tmpdir");
        if (tmp != null)
            cmd.add("-Dfastclock.tmpdir=" + tmp);
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(AdapterProbe.class.getName());
        cmd.add(what);
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "child JVM timed out");
        assertEquals(0, p.exitValue(), out);
        return out;
    }

    @Test
    void wrappingAManualSourceLoadsNoNativeLibrary() throws Exception {
        String out = probe("manual");
        assertTrue(out.contains("mapped=false"), out);
    }

    /** The control: the same check sees the library once a system adapter is taken. */
    @Test
    void takingASystemAdapterLoadsIt() throws Exception {
        String out = probe("system");
        assertTrue(out.contains("native=true"), "the native library is part of this build: " + out);
        assertTrue(out.contains("mapped=true"), out);
    }
}
