package io.fastclock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Real loads, each in a fresh JVM: every way of finding the library, every
 * way it can fail, and that a failure still leaves working clocks.
 */
class LoaderProcessTest {
    @TempDir
    Path tmp;

    static void assertFallback(Jvm j, String reasonPart) {
        assertEquals(0, j.exitCode, j.toString());
        assertEquals("false", j.get("native"), j.toString());
        assertEquals("java", j.get("mode"), j.toString());
        assertTrue(j.get("reason").contains(reasonPart), "reason should contain '" + reasonPart + "':\n" + j);
        assertEquals("true", j.get("all_calls"), j.toString());
        assertTrue(Long.parseLong(j.get("worst_real_ns")) < 100_000, j.toString());
        // Both from the fallback's own UTC: exactly consistent (the JDK's currentTimeMillis
        // follows a step at once, the fallback's UTC at its next resample).
        assertEquals("0", j.get("clock_millis_outside_ms"), j.toString());
    }

    static void assertNative(Jvm j) {
        assertEquals(0, j.exitCode, j.toString());
        assertEquals("true", j.get("native"), j.toString());
        assertEquals(Jvm.feature() >= 22 ? "ffm" : "jni", j.get("binding"), j.toString());
        assertEquals("true", j.get("all_calls"), j.toString());
        assertTrue(Long.parseLong(j.get("worst_mono_ns")) < 100_000, j.toString());
        // millis() comes from instant()'s clock (FastClock.clockMillisNative): never
        // outside the two instants read around it, even across a millisecond's edge.
        assertEquals(0, Long.parseLong(j.get("clock_millis_outside_ms")), j.toString());
    }

    Path bundledCopy() throws IOException {
        Path p = tmp.resolve("lib").resolve(NativeLoader.FILE_NAME);
        Files.createDirectories(p.getParent());
        try (InputStream in = NativeLoader.class.getResourceAsStream(NativeLoaderTest.LIB)) {
            Files.copy(in, p);
        }
        return p;
    }

    @Test
    void byDefaultTheBundledLibraryIsExtractedAndKeptOnce() throws Exception {
        Path dir = Files.createDirectory(tmp.resolve("extract"));
        Path kept = NativeLoaderTest.keptDir(dir).resolve(NativeLoader.FILE_NAME);
        for (int jvm = 1; jvm <= 2; jvm++) {
            Jvm j = Jvm.probe("-Dfastclock.tmpdir=" + dir);
            assertNative(j);
            assertTrue(j.get("detail").contains("extracted from the jar") && j.get("detail").contains("kept at " + kept),
                    "JVM " + jvm + ": " + j);
            assertTrue(j.stderr.isEmpty(), "no warnings with --enable-native-access: " + j.stderr);
        }
        assertEquals(List.of(kept.getParent().getFileName().toString()), NativeLoaderTest.names(dir), "one kept directory");
        assertEquals(List.of(NativeLoader.FILE_NAME), NativeLoaderTest.names(kept.getParent()), "one kept file");
    }

    /** The jar on its own, away from the build tree and its native directory, still finds its library. */
    @Test
    void aJarCopiedOutsideTheTreeLoadsItsLibrary() throws Exception {
        String jar = null;
        List<String> rest = new ArrayList<>();
        for (String e : System.getProperty("java.class.path").split(java.io.File.pathSeparator)) {
            if (e.matches(".*fastclock-[0-9][0-9.]*(-SNAPSHOT)?\\.jar"))
                jar = e;
            else
                rest.add(e);
        }
        assumeTrue(jar != null, "needs the packaged fastclock jar on the class path (failsafe runs against it)");
        Path copy = Files.copy(Paths.get(jar), Files.createDirectory(tmp.resolve("elsewhere")).resolve("fastclock.jar"));
        rest.add(0, copy.toString());
        Jvm j = Jvm.probeWithClassPath(String.join(java.io.File.pathSeparator, rest));
        assertNative(j);
        assertTrue(j.get("detail").contains("extracted from the jar"), j.toString());
    }

    @Test
    void anExplicitPathIsUsed() throws Exception {
        Path lib = bundledCopy();
        Jvm j = Jvm.probe("-Dfastclock.library.path=" + lib);
        assertNative(j);
        assertTrue(j.get("detail").contains("-Dfastclock.library.path=" + lib), j.toString());
    }

    @Test
    void aCorruptExplicitFileFallsBackToJava() throws Exception {
        byte[] lib = Files.readAllBytes(bundledCopy());
        // A clobbered header is caught before the dynamic linker sees it...
        Path clobbered = tmp.resolve("clobbered.so");
        byte[] bad = lib.clone();
        java.util.Arrays.fill(bad, 0, 16, (byte) 0);
        Files.write(clobbered, bad);
        assertFallback(Jvm.probe("-Dfastclock.library.path=" + clobbered), "not an ELF shared library");
        // ...a truncated file is refused by the linker, with its message.
        Path truncated = tmp.resolve("truncated.so");
        Files.write(truncated, java.util.Arrays.copyOf(lib, 256));
        Jvm j = Jvm.probe("-Dfastclock.library.path=" + truncated);
        assertFallback(j, "cannot be loaded");
        assertTrue(j.get("reason").contains(truncated.toString()), j.toString());
    }

    @Test
    void aMissingExplicitFileFallsBackToJava() throws Exception {
        assertFallback(Jvm.probe("-Dfastclock.library.path=" + tmp.resolve("nope.so")), "no such file");
    }

    @Test
    void someOtherLibraryIsRefused() throws Exception {
        // A real shared library that the JVM has not loaded itself: zlib.
        Path other = null;
        for (String dir : new String[] {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/usr/lib"}) {
            if (Files.exists(Path.of(dir, "libz.so.1"))) {
                other = Path.of(dir, "libz.so.1");
                break;
            }
        }
        Assumptions.assumeTrue(other != null, "needs libz.so.1 in a standard directory");
        assertFallback(Jvm.probe("-Dfastclock.library.path=" + other), "not a fastclock JNI library");
    }

    @Test
    void anUnusableTempDirMovesOnToTheUserCache() throws Exception {
        Path file = Files.createFile(tmp.resolve("a-file"));
        Path home = Files.createDirectory(tmp.resolve("home"));
        Jvm j = Jvm.probe("-Djava.io.tmpdir=" + file.resolve("sub"), "-Dfastclock.tmpdir=" + file.resolve("sub2"),
                "-Duser.home=" + home);
        assertNative(j);
        assertTrue(j.get("detail").contains(home.resolve(".cache").resolve("fastclock").toString()), j.toString());
    }

    /** A noexec tmpfs in a private mount namespace (unshare -rm), as on hardened hosts. */
    List<String> inNoexecMount(Path mountPoint, List<String> cmd) throws Exception {
        List<String> check = List.of("unshare", "-rm", "sh", "-c", "mount -t tmpfs -o noexec tmpfs \"$0\"", mountPoint.toString());
        Jvm probe = Jvm.run(check, null);
        Assumptions.assumeTrue(probe.exitCode == 0,
                "needs unshare -rm and tmpfs mounts (user namespaces): " + probe.stderr.trim());
        List<String> full = new ArrayList<>(List.of("unshare", "-rm", "sh", "-c",
                "mount -t tmpfs -o noexec tmpfs \"$0\" && exec \"$@\"", mountPoint.toString()));
        full.addAll(cmd);
        return full;
    }

    @Test
    void aNoexecTempDirIsSkipped() throws Exception {
        Path noexec = Files.createDirectory(tmp.resolve("noexec"));
        Path home = Files.createDirectory(tmp.resolve("home"));
        Map<String, String> env = new HashMap<>();
        env.put("XDG_RUNTIME_DIR", null);
        List<String> cmd = inNoexecMount(noexec, Jvm.command("-Djava.io.tmpdir=" + noexec, "-Duser.home=" + home));
        Jvm j = Jvm.run(cmd, env);
        assertNative(j);
        String detail = j.get("detail");
        assertTrue(detail.contains("failed to map segment") && detail.contains(home.toString()), j.toString());
    }

    @Test
    void whenNoDirectoryCanHoldCodeTheClocksStillWork() throws Exception {
        Path noexec = Files.createDirectory(tmp.resolve("noexec"));
        Map<String, String> env = new HashMap<>();
        env.put("XDG_RUNTIME_DIR", null);
        List<String> cmd = inNoexecMount(noexec, Jvm.command("-Djava.io.tmpdir=" + noexec,
                "-Duser.home=" + noexec.resolve("home")));
        Jvm j = Jvm.run(cmd, env);
        assertFallback(j, "failed to map segment");
    }

    @Test
    void deniedNativeAccessFallsBackAndSaysWhatToDo() throws Exception {
        Assumptions.assumeTrue(Jvm.feature() >= 24, "--illegal-native-access exists from Java 24");
        Jvm j = Jvm.run(Jvm.command(false, "--illegal-native-access=deny"), null);
        assertFallback(j, "--enable-native-access=ALL-UNNAMED");
    }

    @Test
    void withoutEnableNativeAccessJava25WarnsButWorks() throws Exception {
        Assumptions.assumeTrue(Jvm.feature() >= 24, "the native-access warning exists from Java 24");
        Jvm j = Jvm.run(Jvm.command(false), null);
        assertNative(j);
        assertTrue(j.stderr.contains("enable-native-access"), "the JDK's warning names the flag: " + j.stderr);
    }

    @Test
    void ffmCanBeTurnedOffOnJava22() throws Exception {
        Jvm j = Jvm.probe("-Dfastclock.ffm=false");
        assertEquals(0, j.exitCode, j.toString());
        assertEquals("true", j.get("native"), j.toString());
        assertEquals("jni", j.get("binding"), j.toString());
        if (Jvm.feature() >= 22)
            assertTrue(j.get("status").contains("ffm=FFM disabled by -Dfastclock.ffm=false"), j.toString());
    }
}
