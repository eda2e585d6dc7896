package io.fastclock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The loader's decisions, in this JVM, with the loading itself replaced by a
 * recorder (a JVM loads a library once; the real loads run in child JVMs,
 * see LoaderProcessTest).
 */
class NativeLoaderTest {
    static final String PLATFORM = "linux-x86_64";
    static final String LIB = NativeLoader.resourceDir(PLATFORM) + NativeLoader.FILE_NAME;

    @TempDir
    Path tmp;

    final List<String> loaded = new ArrayList<>();

    /** Linux x86-64, no explicit path, no java.library.path copy, loads recorded. */
    NativeLoader.Config config(Path... dirs) {
        NativeLoader.Config c = new NativeLoader.Config();
        c.osName = "Linux";
        c.osArch = "amd64";
        c.tryLoadLibrary = false;
        c.onLibraryPath = () -> null;
        c.tempDirs = new ArrayList<>(List.of(dirs));
        c.load = path -> {
            Path p = Path.of(path);
            // At load time: the verified file, alone in a private directory.
            assertTrue(Files.isRegularFile(p), path);
            try {
                assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(p.getParent())));
                assertEquals(NativeLoader.sha256(bundled()), NativeLoader.sha256(Files.readAllBytes(p)));
            } catch (IOException e) {
                throw new AssertionError(e);
            }
            loaded.add(path);
        };
        c.loadLibrary = name -> {
            throw new UnsatisfiedLinkError("no " + name + " in java.library.path");
        };
        c.verify = () -> null;
        return c;
    }

    static byte[] bundled() throws IOException {
        try (InputStream in = NativeLoader.class.getResourceAsStream(LIB)) {
            assertTrue(in != null, "the jar bundles " + LIB);
            return in.readAllBytes();
        }
    }

    @Test
    void theJarBundlesTheLibraryWithItsChecksum() throws IOException {
        byte[] lib = bundled();
        assertTrue(lib.length > 10_000, "library size " + lib.length);
        assertEquals(0x7f, lib[0]);
        assertEquals('E', lib[1]);
        try (InputStream in = NativeLoader.class.getResourceAsStream(LIB + ".sha256")) {
            String sum = new String(in.readAllBytes()).trim();
            assertEquals(NativeLoader.sha256(lib), sum.split("\\s+")[0]);
        }
    }

    static Path keptDir(Path parent) throws IOException {
        return NativeLoader.keptDir(parent, NativeLoader.processUser(parent), NativeLoader.sha256(bundled()));
    }

    static List<String> names(Path dir) throws IOException {
        try (var s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).sorted().collect(Collectors.toList());
        }
    }

    /** The kept copy: one per user and build, loaded again by every later load. */
    @Test
    void extractsVerifiesLoadsAndKeepsOneCopy() throws IOException {
        NativeLoader.Result r = NativeLoader.load(config(tmp));
        assertTrue(r.loaded, r.toString());
        Path kept = keptDir(tmp).resolve(NativeLoader.FILE_NAME);
        assertEquals(List.of(kept.toString()), loaded);
        assertTrue(r.detail.contains("extracted") && r.detail.contains("kept at " + kept), r.detail);
        assertEquals(List.of(keptDir(tmp).getFileName().toString()), names(tmp), "one directory, nothing else");
        assertEquals(List.of(NativeLoader.FILE_NAME), names(keptDir(tmp)), "one file, no part left over");
        r = NativeLoader.load(config(tmp));
        assertTrue(r.loaded, r.toString());
        assertEquals(List.of(kept.toString(), kept.toString()), loaded, "the same file again");
    }

    static UnsatisfiedLinkError heldBy(String path) {
        return new UnsatisfiedLinkError("Native Library " + path + " already loaded in another classloader");
    }

    /** record, but every kept copy under parent held by a live class loader: a fresh copy follows. */
    static java.util.function.Consumer<String> allKeptCopiesHeld(java.util.function.Consumer<String> record, Path parent)
            throws IOException {
        String kept = keptDir(parent).toString();
        return path -> {
            if (path.startsWith(kept))
                throw heldBy(path);
            record.accept(path);
        };
    }

    /** A kept file a live class loader holds is passed over for the next; past the last, a fresh copy. */
    @Test
    void aKeptCopyALiveClassLoaderHoldsGivesWayToTheNext() throws IOException {
        NativeLoader.Config c = config(tmp);
        var record = c.load;
        Path first = keptDir(tmp).resolve(NativeLoader.FILE_NAME);
        c.load = path -> {
            if (path.equals(first.toString()))
                throw heldBy(path);
            record.accept(path);
        };
        NativeLoader.Result r = NativeLoader.load(c);
        assertTrue(r.loaded, r.toString());
        assertEquals(List.of(keptDir(tmp).resolve("libfastclock_jni-1.so").toString()), loaded);

        loaded.clear();
        c.load = allKeptCopiesHeld(record, tmp);
        r = NativeLoader.load(c);
        assertTrue(r.loaded, r.toString());
        assertEquals(1, loaded.size());
        assertFalse(loaded.get(0).startsWith(keptDir(tmp).toString()), loaded.toString());
        assertFalse(Files.exists(Path.of(loaded.get(0))), "a fresh copy is removed after loading");
        assertTrue(r.detail.contains("held by live class loaders"), r.detail);
        assertEquals(List.of(keptDir(tmp).getFileName().toString()), names(tmp), "the fresh copy's directory is gone");
    }

    /** A kept file that is not the jar's library is replaced before it is loaded. */
    @Test
    void aKeptCopyThatDiffersIsReplacedBeforeItsLoad() throws IOException {
        Path dir = Files.createDirectory(keptDir(tmp), PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwx------")));
        byte[] other = bundled();
        other[other.length / 2] ^= 1;
        Files.write(dir.resolve(NativeLoader.FILE_NAME), other);
        NativeLoader.Result r = NativeLoader.load(config(tmp)); // config's load checks the SHA-256 at load time
        assertTrue(r.loaded, r.toString());
        assertEquals(NativeLoader.sha256(bundled()), NativeLoader.sha256(Files.readAllBytes(dir.resolve(NativeLoader.FILE_NAME))));
    }

    /** A kept copy in a later directory comes before a fresh copy in an earlier one. */
    @Test
    void aKeptCopyAnywhereComesBeforeAFreshOne(@TempDir Path second) throws IOException {
        Path taken = Files.createDirectory(keptDir(tmp)); // as another user's, made first in a shared /tmp
        Files.setPosixFilePermissions(taken, PosixFilePermissions.fromString("rwxrwxrwx"));
        NativeLoader.Result r = NativeLoader.load(config(tmp, second));
        assertTrue(r.loaded, r.toString());
        assertEquals(List.of(keptDir(second).resolve(NativeLoader.FILE_NAME).toString()), loaded);
        assertEquals(List.of(taken.getFileName().toString()), names(tmp), "no fresh copy left in the first");
    }

    /** A kept directory another user could write into is never used: a fresh private copy instead. */
    @Test
    void aKeptDirectoryOthersCouldWriteIsNotUsed() throws IOException {
        Path dir = Files.createDirectory(keptDir(tmp));
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxrwxrwx"));
        NativeLoader.Result r = NativeLoader.load(config(tmp));
        assertTrue(r.loaded, r.toString());
        assertFalse(loaded.get(0).startsWith(dir.toString()), loaded.toString());
        assertTrue(r.detail.contains("not a private directory"), r.detail);
        assertEquals(List.of(), names(dir), "nothing written there");
    }

    /**
     * A parent another user could write to, not sticky, could have the private
     * directory renamed away and another put in its place between check and load:
     * not used.  Sticky, as /tmp is, only a directory's owner may rename it: used.
     */
    @Test
    void aParentOthersCouldWriteIsUsedOnlyWhereSticky(@TempDir Path second) throws IOException {
        Path open = Files.createDirectory(tmp.resolve("open"));
        Files.setAttribute(open, "unix:mode", 0777);
        NativeLoader.Result r = NativeLoader.load(config(open, second));
        assertTrue(r.loaded, r.toString());
        assertTrue(loaded.get(0).startsWith(second.toString()), loaded.toString());
        assertTrue(r.detail.contains(open + ": not used, " + open + " is writable by others (rwxrwxrwx, not sticky)"),
                r.detail);
        assertEquals(List.of(), names(open), "nothing left there");

        loaded.clear();
        Files.setAttribute(open, "unix:mode", 01777);
        r = NativeLoader.load(config(open, second));
        assertTrue(r.loaded, r.toString());
        assertTrue(loaded.get(0).startsWith(open.toString()), loaded.toString());

        // A directory above counts as much as the parent itself.
        loaded.clear();
        Files.setAttribute(open, "unix:mode", 0777);
        Path below = Files.createDirectory(open.resolve("below"), PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwx------")));
        r = NativeLoader.load(config(below, second));
        assertTrue(loaded.get(0).startsWith(second.toString()), loaded.toString());
        assertTrue(r.detail.contains(below + ": not used, " + open + " is writable by others"), r.detail);
    }

    /**
     * A directory given through a link is used by its real path: the link's owner
     * (another user's in a shared /tmp) could point it elsewhere between the
     * checks and the load, so nothing is reached through it after the first look.
     */
    @Test
    void aDirectoryGivenThroughALinkIsUsedByItsRealPath() throws IOException {
        Path real = Files.createDirectory(tmp.resolve("real"), PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwx------")));
        Path link = Files.createSymbolicLink(tmp.resolve("link"), real);
        NativeLoader.Result r = NativeLoader.load(config(link));
        assertTrue(r.loaded, r.toString());
        assertEquals(List.of(keptDir(real.toRealPath()).resolve(NativeLoader.FILE_NAME).toString()), loaded);
        assertFalse(r.detail.contains(link.toString()), r.detail);

        // Fresh copies too: the kept slots held, the fresh one is made under the real path.
        loaded.clear();
        NativeLoader.Config c = config(link);
        c.load = allKeptCopiesHeld(c.load, real.toRealPath());
        r = NativeLoader.load(c);
        assertTrue(r.loaded, r.toString());
        assertTrue(loaded.get(0).startsWith(real.toRealPath() + "/fastclock-"), loaded.toString());
    }

    /**
     * A directory the loader makes is private whatever the umask; one that is
     * group-writable for the user's own group (a user private group, named after
     * the user: ~/.cache under umask 002 on Debian and Ubuntu) is used.
     */
    @Test
    void itsOwnDirectoriesArePrivateAndTheUsersOwnGroupMayWrite() throws IOException {
        Path made = tmp.resolve("made").resolve("deeper");
        NativeLoader.Result r = NativeLoader.load(config(made));
        assertTrue(r.loaded, r.toString());
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(made)));
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(made.getParent())));

        Path shared = Files.createDirectory(tmp.resolve("upg"));
        Files.setAttribute(shared, "unix:mode", 0775);
        java.nio.file.attribute.PosixFileAttributes a = Files.readAttributes(shared,
                java.nio.file.attribute.PosixFileAttributes.class);
        boolean upg = a.group().getName().equals(a.owner().getName());
        loaded.clear();
        r = NativeLoader.load(config(shared));
        assertEquals(upg, r.loaded, "group " + a.group().getName() + " of " + a.owner().getName() + ": " + r);
    }

    @Test
    void theProcessUserIsTheOwnerOfWhatItMakes() throws IOException {
        Path made = Files.createFile(tmp.resolve("made"));
        assertEquals(Files.getOwner(made), NativeLoader.processUser(tmp));
        assertEquals(List.of("made"), names(tmp), "the probe file removed");
    }

    @Test
    void aCorruptBundledLibraryIsNeverLoaded() {
        NativeLoader.Config c = config(tmp);
        c.resources = name -> {
            try {
                InputStream in = NativeLoader.class.getResourceAsStream(name);
                if (in == null || !name.endsWith(".so"))
                    return in;
                byte[] b = in.readAllBytes();
                b[b.length / 2] ^= 1; // one flipped bit
                return new ByteArrayInputStream(b);
            } catch (IOException e) {
                throw new AssertionError(e);
            }
        };
        NativeLoader.Result r = NativeLoader.load(c);
        assertFalse(r.loaded);
        assertTrue(r.detail.contains("SHA-256"), r.detail);
        assertTrue(loaded.isEmpty(), "nothing loaded");
    }

    @Test
    void aMissingLibraryOrChecksumIsReported() {
        NativeLoader.Config c = config(tmp);
        c.resources = name -> null;
        NativeLoader.Result r = NativeLoader.load(c);
        assertFalse(r.loaded);
        assertTrue(r.detail.contains("no native library for linux-x86_64"), r.detail);

        c = config(tmp);
        c.resources = name -> name.endsWith(".sha256") ? null : NativeLoader.class.getResourceAsStream(name);
        r = NativeLoader.load(c);
        assertFalse(r.loaded);
        assertTrue(r.detail.contains("no checksum"), r.detail);
        assertTrue(loaded.isEmpty());
    }

    @Test
    void unsupportedPlatformsFallBackWithTheirName() {
        assertEquals("linux-x86_64", NativeLoader.platform("Linux", "amd64"));
        assertEquals("linux-x86_64", NativeLoader.platform("Linux", "x86_64"));
        assertEquals("linux-aarch64", NativeLoader.platform("Linux", "aarch64"));
        assertNull(NativeLoader.platform("Mac OS X", "aarch64"));
        assertNull(NativeLoader.platform("Linux", "riscv64"));

        NativeLoader.Config c = config(tmp);
        c.osName = "Windows 11";
        NativeLoader.Result r = NativeLoader.load(c);
        assertFalse(r.loaded);
        assertTrue(r.detail.contains("no native library for Windows 11/amd64"), r.detail);
        c = config(tmp);
        c.osArch = "riscv64";
        r = NativeLoader.load(c);
        assertTrue(r.detail.contains("Linux/riscv64"), r.detail);
        assertTrue(loaded.isEmpty());
    }

    @Test
    void aDirectoryThatCannotMapCodeMovesOnToTheNext(@TempDir Path second) {
        NativeLoader.Config c = config(tmp, second);
        var record = c.load;
        c.load = path -> {
            if (path.startsWith(tmp.toString()))
                throw new UnsatisfiedLinkError(path + ": failed to map segment from shared object");
            record.accept(path);
        };
        NativeLoader.Result r = NativeLoader.load(c);
        assertTrue(r.loaded, r.toString());
        assertTrue(loaded.get(0).startsWith(second.toString()), loaded.toString());
        assertTrue(r.detail.contains("failed to map segment"), "earlier failures are kept: " + r.detail);
    }

    @Test
    void anUnwritableDirectoryMovesOnToTheNext() throws IOException {
        Path file = Files.createFile(tmp.resolve("a-file"));
        Path second = Files.createDirectory(tmp.resolve("ok"));
        NativeLoader.Result r = NativeLoader.load(config(file.resolve("sub"), second));
        assertTrue(r.loaded, r.toString());
        assertTrue(loaded.get(0).startsWith(second.toString()), loaded.toString());
    }

    @Test
    void whenEveryDirectoryFailsTheReasonListsThemAll(@TempDir Path second) {
        NativeLoader.Config c = config(tmp, second);
        c.load = path -> {
            throw new UnsatisfiedLinkError(path + ": failed to map segment from shared object");
        };
        NativeLoader.Result r = NativeLoader.load(c);
        assertFalse(r.loaded);
        assertTrue(r.detail.contains(tmp.toString()) && r.detail.contains(second.toString()), r.detail);
    }

    @Test
    void deniedNativeAccessStopsAndSaysWhatToDo(@TempDir Path second) {
        NativeLoader.Config c = config(tmp, second);
        c.load = path -> {
            throw new IllegalCallerException("native access is not enabled for the unnamed module");
        };
        NativeLoader.Result r = NativeLoader.load(c);
        assertFalse(r.loaded);
        assertTrue(r.detail.contains("--enable-native-access=ALL-UNNAMED"), r.detail);
        assertFalse(r.detail.contains(second.toString()), "no point trying other directories: " + r.detail);
    }

    @Test
    void javaLibraryPathComesBeforeExtractionAndIsVerified() {
        NativeLoader.Config c = config(tmp);
        c.tryLoadLibrary = true;
        List<String> asked = new ArrayList<>();
        c.loadLibrary = asked::add;
        NativeLoader.Result r = NativeLoader.load(c);
        assertTrue(r.loaded, r.toString());
        assertEquals(List.of("fastclock_jni"), asked);
        assertTrue(loaded.isEmpty(), "no extraction");
        assertTrue(r.detail.contains("java.library.path"), r.detail);

        // A stale library of another ABI is refused, not used.
        c.verify = () -> "incompatible native library (ABI 0, this jar needs 1)";
        r = NativeLoader.load(c);
        assertFalse(r.loaded);
        assertTrue(r.detail.contains("incompatible"), r.detail);
    }

    /** A stale or foreign build on java.library.path is passed over for the jar's; the same build is used. */
    @Test
    void anotherBuildOnTheLibraryPathGivesWayToTheJars() throws IOException {
        Path dir = Files.createDirectories(tmp.resolve("libpath"));
        Path stale = dir.resolve(NativeLoader.FILE_NAME);
        byte[] other = bundled().clone();
        other[other.length - 1] ^= 1; // another build: other bytes
        Files.write(stale, other);
        assertEquals(stale, NativeLoader.onLibraryPath("/nonexistent:" + dir));
        assertEquals(null, NativeLoader.onLibraryPath("/nonexistent::"));

        NativeLoader.Config c = config(tmp);
        c.tryLoadLibrary = true;
        List<String> asked = new ArrayList<>();
        c.loadLibrary = asked::add;
        c.onLibraryPath = () -> stale;
        NativeLoader.Result r = NativeLoader.load(c);
        assertTrue(r.loaded, r.toString());
        assertEquals(List.of(), asked, "the stale copy was loaded");
        assertEquals(1, loaded.size(), "the jar's copy was extracted and loaded");
        assertTrue(r.detail.contains("another build"), r.detail);

        // Nowhere to write the jar's copy (noexec, read-only): the other build, if its ABI is this jar's.
        NativeLoader.Config nowhere = config();
        nowhere.tryLoadLibrary = true;
        nowhere.loadLibrary = asked::add;
        nowhere.onLibraryPath = () -> stale;
        r = NativeLoader.load(nowhere);
        assertTrue(r.loaded, r.toString());
        assertEquals(List.of("fastclock_jni"), asked);
        assertTrue(r.detail.contains("java.library.path") && r.detail.contains("another build"), r.detail);
        asked.clear();

        // The same build there: loaded from there, nothing extracted.
        Files.write(stale, bundled());
        loaded.clear();
        r = NativeLoader.load(c);
        assertTrue(r.loaded, r.toString());
        assertEquals(List.of("fastclock_jni"), asked);
        assertTrue(loaded.isEmpty(), "no extraction");
    }

    @Test
    void anExplicitPathIsTheOnlyCandidate() throws IOException {
        NativeLoader.Config c = config(tmp);
        c.explicitPath = tmp.resolve("missing.so").toString();
        NativeLoader.Result r = NativeLoader.load(c);
        assertFalse(r.loaded);
        assertTrue(r.detail.contains("-Dfastclock.library.path=") && r.detail.contains("no such file"), r.detail);
        assertTrue(loaded.isEmpty(), "no fallback to extraction behind an explicit choice");

        // A path no file system can name: said, not thrown.
        c.explicitPath = "/tmp/lib\u0000fastclock.so";
        r = NativeLoader.load(c);
        assertFalse(r.loaded);
        assertTrue(r.detail.contains("not a usable path"), r.detail);

        // Junk never reaches the dynamic linker.
        Path junk = Files.write(tmp.resolve("libjunk.so"), new byte[] {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                16, 17, 18, 19, 20, 21});
        c = config(tmp);
        c.explicitPath = junk.toString();
        r = NativeLoader.load(c);
        assertFalse(r.loaded);
        assertTrue(r.detail.contains(junk.toString()) && r.detail.contains("bad magic"), r.detail);
        assertTrue(loaded.isEmpty());

        // Nor does a library for another CPU.
        byte[] lib = bundled();
        lib[18] = (byte) 183; // EM_AARCH64
        lib[19] = 0;
        Path arm = Files.write(tmp.resolve("libarm.so"), lib);
        c.explicitPath = arm.toString();
        r = NativeLoader.load(c);
        assertFalse(r.loaded);
        assertTrue(r.detail.contains("another CPU"), r.detail);

        // What the linker itself refuses is reported with its message.
        c = config(tmp);
        c.explicitPath = bundledCopy(tmp).toString();
        c.load = path -> {
            throw new UnsatisfiedLinkError(path + ": undefined symbol: foo");
        };
        r = NativeLoader.load(c);
        assertFalse(r.loaded);
        assertTrue(r.detail.contains("cannot be loaded") && r.detail.contains("undefined symbol"), r.detail);
    }

    static Path bundledCopy(Path dir) throws IOException {
        return Files.write(dir.resolve("libcopy.so"), bundled());
    }

    @Test
    void disabledMeansDisabled() {
        NativeLoader.Config c = config(tmp);
        c.enabled = false;
        NativeLoader.Result r = NativeLoader.load(c);
        assertFalse(r.loaded);
        assertTrue(r.detail.contains("-Dfastclock.native=false"), r.detail);
        assertTrue(loaded.isEmpty());
    }

    @Test
    void defaultDirectoriesHonourTheProperties() {
        String old = System.getProperty("fastclock.tmpdir");
        try {
            System.setProperty("fastclock.tmpdir", tmp.toString());
            List<Path> dirs = NativeLoader.defaultTempDirs();
            assertEquals(tmp.toAbsolutePath().normalize(), dirs.get(0));
            assertTrue(dirs.contains(Path.of(System.getProperty("java.io.tmpdir")).toAbsolutePath().normalize()), dirs.toString());
            assertTrue(dirs.get(dirs.size() - 1).endsWith(Path.of(".cache", "fastclock")), dirs.toString());
        } finally {
            if (old == null)
                System.clearProperty("fastclock.tmpdir");
            else
                System.setProperty("fastclock.tmpdir", old);
        }
    }
}
