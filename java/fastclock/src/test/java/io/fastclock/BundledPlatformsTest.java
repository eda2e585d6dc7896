package io.fastclock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.net.JarURLConnection;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Enumeration;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The jar's natives, one per platform: what it carries (each library with its
 * own SHA-256, built for its platform's CPU) and that the loader takes the one
 * of the JVM's os.arch, checked against its own checksum.  The host's library
 * is always required; make also requires linux-aarch64 (cross-built, passed
 * as -Dfastclock.test.platforms, mk/java.mk).  The loads are recorded, not
 * done: a JVM cannot load another CPU's code (tests/jni_entry_points.c runs
 * the arm64 library under qemu).
 */
class BundledPlatformsTest {
    /** Every platform the loader knows, with its ELF e_machine. */
    static final Map<String, Integer> MACHINE = Map.of("linux-x86_64", 62, "linux-aarch64", 183);
    static final Map<String, String> OS_ARCH = Map.of("linux-x86_64", "amd64", "linux-aarch64", "aarch64");

    @TempDir
    Path tmp;

    static Set<String> required() {
        Set<String> r = new LinkedHashSet<>();
        String host = NativeLoader.platform(System.getProperty("os.name"), System.getProperty("os.arch"));
        assertNotNull(host, "the build runs on a platform the jar serves");
        r.add(host);
        for (String p : System.getProperty("fastclock.test.platforms", "").split("[,\\s]+"))
            if (!p.isEmpty())
                r.add(p);
        return r;
    }

    static String lib(String platform) {
        return NativeLoader.resourceDir(platform) + NativeLoader.FILE_NAME;
    }

    static byte[] resource(String name) throws IOException {
        try (InputStream in = NativeLoader.class.getResourceAsStream(name)) {
            return in == null ? null : in.readAllBytes();
        }
    }

    static int machine(byte[] elf) {
        return (elf[18] & 0xff) | (elf[19] & 0xff) << 8;
    }

    /** This platform's library, or a skip naming why a plain build may lack it (a failure where it is required). */
    static byte[] bundledOrSkip(String platform) throws IOException {
        byte[] b = resource(lib(platform));
        if (b == null && required().contains(platform))
            fail("the jar has no " + platform + " library, and this build requires it");
        assumeTrue(b != null, "the jar has no " + platform + " library: a plain mvn build bundles only the host's"
                + " (make adds linux-aarch64, cross-built with Debian's aarch64-linux-gnu toolchain)");
        return b;
    }

    @Test
    void theJarCarriesEachPlatformsLibraryWithItsChecksumAndCpu() throws Exception {
        Set<String> required = required();
        for (String p : required)
            assertTrue(MACHINE.containsKey(p), "unknown platform in fastclock.test.platforms: " + p);
        for (String p : MACHINE.keySet()) {
            URL url = NativeLoader.class.getResource(lib(p));
            if (url == null) {
                assertFalse(required.contains(p), "the jar has no " + lib(p) + ", and this build requires it");
                continue;
            }
            assertEquals("jar", url.getProtocol(), "read from the packaged jar: " + url);
            byte[] b = resource(lib(p));
            assertTrue(b.length > 10_000, p + ": library size " + b.length);
            assertTrue(b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F', p + ": ELF magic");
            assertEquals(2, b[4], p + ": ELFCLASS64");
            assertEquals(1, b[5], p + ": little-endian");
            assertEquals(3, (b[16] & 0xff) | (b[17] & 0xff) << 8, p + ": ET_DYN, a shared object");
            assertEquals(MACHINE.get(p), machine(b), p + ": ELF e_machine");
            byte[] sum = resource(lib(p) + ".sha256");
            assertNotNull(sum, p + ": its .sha256 is in the jar");
            assertEquals(NativeLoader.sha256(b), new String(sum, StandardCharsets.US_ASCII).trim().split("\\s+")[0],
                    p + ": the recorded SHA-256 is the library's");
        }

        // Nothing else under native/: a misnamed directory would never be found.
        URL dir = NativeLoader.class.getResource(lib(required.iterator().next()));
        Path jar = Paths.get(((JarURLConnection) dir.openConnection()).getJarFileURL().toURI());
        Set<String> entries = new TreeSet<>();
        try (JarFile jf = new JarFile(jar.toFile())) {
            for (Enumeration<JarEntry> e = jf.entries(); e.hasMoreElements();) {
                String n = e.nextElement().getName();
                if (n.startsWith("io/fastclock/native/") && !n.endsWith("/"))
                    entries.add(n);
            }
        }
        Set<String> known = new TreeSet<>();
        for (String p : MACHINE.keySet()) {
            String l = lib(p).substring(1);
            if (entries.contains(l)) {
                known.add(l);
                known.add(l + ".sha256");
            }
        }
        assertEquals(known, entries, "the jar's native/ holds each platform's library and checksum, nothing else");
    }

    /** A loader that records what it would load, for a JVM on this os.arch. */
    NativeLoader.Config config(String osArch, List<byte[]> loaded) {
        NativeLoader.Config c = new NativeLoader.Config();
        c.osName = "Linux";
        c.osArch = osArch;
        c.tryLoadLibrary = false;
        c.tempDirs = new ArrayList<>(List.of(tmp));
        c.load = path -> {
            try {
                loaded.add(Files.readAllBytes(Path.of(path)));
            } catch (IOException e) {
                throw new AssertionError(e);
            }
        };
        c.verify = () -> null;
        return c;
    }

    @ParameterizedTest
    @ValueSource(strings = {"linux-x86_64", "linux-aarch64"})
    void theLoaderExtractsTheLibraryForTheJvmsCpu(String platform) throws IOException {
        byte[] want = bundledOrSkip(platform);
        List<byte[]> loaded = new ArrayList<>();
        NativeLoader.Result r = NativeLoader.load(config(OS_ARCH.get(platform), loaded));
        assertTrue(r.loaded, r.toString());
        assertTrue(r.detail.contains("extracted from the jar (" + platform + ")"), r.detail);
        assertEquals(1, loaded.size());
        assertTrue(Arrays.equals(want, loaded.get(0)), "what reached System.load is " + platform + "'s library");
        assertEquals(MACHINE.get(platform), machine(loaded.get(0)));

        // The ELF check an explicit path gets agrees: right on its own CPU, refused on the other.
        Path f = Files.write(tmp.resolve("lib.so"), want);
        assertNull(NativeLoader.elfProblem(f, OS_ARCH.get(platform)));
        for (String other : MACHINE.keySet())
            if (!other.equals(platform)) {
                String why = NativeLoader.elfProblem(f, OS_ARCH.get(other));
                assertTrue(why != null && why.contains("another CPU"), platform + "'s library on " + other + ": " + why);
            }
    }

    @ParameterizedTest
    @ValueSource(strings = {"linux-x86_64", "linux-aarch64"})
    void eachPlatformsLibraryIsCheckedAgainstItsOwnSha256(String platform) throws IOException {
        bundledOrSkip(platform);
        String name = lib(platform);

        // One flipped bit in this platform's library: refused, nothing loaded.
        List<byte[]> loaded = new ArrayList<>();
        NativeLoader.Config c = config(OS_ARCH.get(platform), loaded);
        c.resources = n -> {
            try {
                byte[] b = resource(n);
                if (b != null && n.equals(name))
                    b[b.length / 2] ^= 1;
                return b == null ? null : new ByteArrayInputStream(b);
            } catch (IOException e) {
                throw new AssertionError(e);
            }
        };
        NativeLoader.Result r = NativeLoader.load(c);
        assertFalse(r.loaded, r.toString());
        assertTrue(r.detail.contains(platform + " fails its SHA-256 check"), r.detail);
        assertTrue(loaded.isEmpty());

        // Another platform's checksum does not vouch for this library.
        for (String other : MACHINE.keySet()) {
            if (other.equals(platform) || resource(lib(other)) == null)
                continue;
            c = config(OS_ARCH.get(platform), loaded);
            c.resources = n -> NativeLoader.class.getResourceAsStream(
                    n.equals(name + ".sha256") ? lib(other) + ".sha256" : n);
            r = NativeLoader.load(c);
            assertFalse(r.loaded, r.toString());
            assertTrue(r.detail.contains("SHA-256"), r.detail);
            assertTrue(loaded.isEmpty());
        }
    }
}
