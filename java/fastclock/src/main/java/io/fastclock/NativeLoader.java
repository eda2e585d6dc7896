package io.fastclock;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserPrincipal;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Locale;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Supplier;

/**
 * Finds and loads libfastclock_jni.so, in this order:
 * <ol>
 *   <li>{@code -Dfastclock.library.path=/path/to/libfastclock_jni.so}: that file and nothing
 *       else (an explicit choice that fails is reported, not papered over);</li>
 *   <li>{@code System.loadLibrary("fastclock_jni")} (java.library.path, e.g. a distro package) --
 *       unless the jar carries a library for this platform and the copy there is another
 *       build (its SHA-256 differs from the jar's): a stale package must not win over the
 *       jar, and once loaded it could not be unloaded for the jar's own (JNI binds a
 *       native method to the first library of the class loader that has it);</li>
 *   <li>the copy bundled in the jar for this platform: checked against the SHA-256 recorded at
 *       build time, kept for this user and build in a private directory and checked again on
 *       disk before each load (see loadKept), tried in every directory first; only where no
 *       kept copy could be used, written to a fresh 0700 directory, checked, loaded, and
 *       deleted (Linux keeps the mapping).  A directory that refuses (noexec, read-only,
 *       full) is passed over: -Dfastclock.tmpdir, java.io.tmpdir, $XDG_RUNTIME_DIR,
 *       ~/.cache/fastclock.</li>
 * </ol>
 * Never throws: the result says what happened.  Everything here runs once, at class
 * initialisation, so clarity wins over speed.
 */
final class NativeLoader {
    static final String LIBRARY = "fastclock_jni";
    static final String FILE_NAME = "lib" + LIBRARY + ".so";
    /** Must match FASTCLOCK_JAVA_ABI in java/native/fastclock_jni.c. */
    static final int ABI = 2;

    static final class Result {
        final boolean loaded;
        /** Where the library came from (loaded), or why none could be used (not loaded). */
        final String detail;

        private Result(boolean loaded, String detail) {
            this.loaded = loaded;
            this.detail = detail;
        }

        static Result ok(String how) {
            return new Result(true, how);
        }

        static Result failed(String why) {
            return new Result(false, why);
        }

        @Override
        public String toString() {
            return (loaded ? "loaded: " : "not loaded: ") + detail;
        }
    }

    /** What the loader looks at.  {@link #fromSystem()} for real use; tests build their own. */
    static final class Config {
        boolean enabled = true;
        String explicitPath;
        boolean tryLoadLibrary = true;
        String osName = "";
        String osArch = "";
        List<Path> tempDirs = new ArrayList<>();
        /** Resource name -> stream, or null when absent. */
        Function<String, InputStream> resources = NativeLoader.class::getResourceAsStream;
        /** System.load, from this class so the library belongs to this class loader. */
        Consumer<String> load = path -> System.load(path);
        Consumer<String> loadLibrary = name -> System.loadLibrary(name);
        /** The file System.loadLibrary would load from java.library.path, or null. */
        Supplier<Path> onLibraryPath = () -> onLibraryPath(System.getProperty("java.library.path"));
        /** Confirms a loaded library is ours and current; returns null or why not. */
        Supplier<String> verify = NativeLoader::verifyLoaded;

        static Config fromSystem() {
            Config c = new Config();
            c.enabled = Props.flag("fastclock.native", true);
            c.explicitPath = emptyToNull(System.getProperty("fastclock.library.path"));
            c.osName = System.getProperty("os.name", "");
            c.osArch = System.getProperty("os.arch", "");
            c.tempDirs = defaultTempDirs();
            return c;
        }
    }

    private NativeLoader() {}

    static Result load(Config c) {
        if (!c.enabled)
            return Result.failed("native library disabled by -Dfastclock.native=false");
        if (c.explicitPath != null)
            return loadExplicit(c);

        List<String> notes = new ArrayList<>();
        String other = c.tryLoadLibrary ? anotherBuildOnLibraryPath(c) : null;
        if (other != null) {
            notes.add(other);
        } else if (c.tryLoadLibrary) {
            Result r = fromLibraryPath(c, notes);
            if (r != null)
                return r;
        }

        String platform = platform(c.osName, c.osArch);
        if (platform == null) {
            notes.add("no native library for " + c.osName + "/" + c.osArch);
            return Result.failed(join(notes));
        }
        boolean[] loadedOne = {false};
        Result extracted = extractAndLoad(c, platform, notes, loadedOne);
        if (extracted.loaded || loadedOne[0] || other == null)
            return extracted;
        // The jar's copy could not be written or mapped anywhere (noexec, read-only,
        // full): the other build on java.library.path, if its ABI is this jar's.
        Result r = fromLibraryPath(c, notes);
        return r != null ? r : Result.failed(join(notes));
    }

    /** System.loadLibrary, verified; null (and a note) where there is no loadable copy. */
    private static Result fromLibraryPath(Config c, List<String> notes) {
        try {
            c.loadLibrary.accept(LIBRARY);
            return verified(c, "System.loadLibrary(\"" + LIBRARY + "\") from java.library.path"
                    + (notes.isEmpty() ? "" : " (before that: " + join(notes) + ")"));
        } catch (UnsatisfiedLinkError e) {
            // Usually absent ("no fastclock_jni in java.library.path"), but
            // a copy there may be for another CPU or lack a symbol: say which.
            notes.add("System.loadLibrary: " + e.getMessage());
            return null;
        } catch (RuntimeException e) {
            return Result.failed(denied(e));
        }
    }

    /**
     * Why the copy on java.library.path is passed over for the jar's (another build:
     * its SHA-256 is not the one the jar records), or null to load it.  Null also
     * where the jar has no library for this platform (the path's copy is then the
     * only one) or there is no copy on the path.
     */
    private static String anotherBuildOnLibraryPath(Config c) {
        String platform = platform(c.osName, c.osArch);
        if (platform == null)
            return null;
        Path p;
        String recorded;
        try {
            p = c.onLibraryPath.get();
            byte[] sum = readResource(c, resourceDir(platform) + FILE_NAME + ".sha256");
            if (p == null || sum == null)
                return null;
            recorded = firstToken(new String(sum, StandardCharsets.US_ASCII));
            if (holds(p, recorded))
                return null;
        } catch (IOException | RuntimeException e) {
            return null; // unreadable there: System.loadLibrary says what it finds
        }
        return "java.library.path has another build of " + FILE_NAME + " (" + p + "): the jar's own is loaded";
    }

    /** The first lib*.so of that name in the directories of a java.library.path value, or null. */
    static Path onLibraryPath(String libraryPath) {
        if (libraryPath == null)
            return null;
        for (String dir : libraryPath.split(java.io.File.pathSeparator)) {
            if (dir.isEmpty())
                continue;
            try {
                Path p = Paths.get(dir, System.mapLibraryName(LIBRARY));
                if (Files.isRegularFile(p))
                    return p;
            } catch (RuntimeException e) {
                // An unusable entry is skipped, as the JVM skips it.
            }
        }
        return null;
    }

    private static Result loadExplicit(Config c) {
        String what = "-Dfastclock.library.path=" + c.explicitPath;
        Path p;
        try {
            p = Paths.get(c.explicitPath).toAbsolutePath();
        } catch (RuntimeException e) { // a NUL in it: InvalidPathException
            return Result.failed(what + ": not a usable path (" + e.getMessage() + ")");
        }
        if (!Files.isRegularFile(p))
            return Result.failed(what + ": no such file");
        String notElf = elfProblem(p, c.osArch);
        if (notElf != null)
            return Result.failed(what + ": " + notElf);
        try {
            c.load.accept(p.toString());
        } catch (UnsatisfiedLinkError e) {
            return Result.failed(what + ": cannot be loaded (" + e.getMessage() + ")");
        } catch (RuntimeException e) {
            return Result.failed(denied(e));
        }
        return verified(c, what);
    }

    /** After a load: is it really this version's library? */
    private static Result verified(Config c, String how) {
        String problem;
        try {
            problem = c.verify.get();
        } catch (LinkageError | RuntimeException e) {
            problem = "not a fastclock JNI library (" + e + ")";
        }
        return problem == null ? Result.ok(how) : Result.failed(how + ": " + problem);
    }

    static String verifyLoaded() {
        int abi = Jni.abi();
        return abi == ABI ? null : "incompatible native library (ABI " + abi + ", this jar needs " + ABI + ")";
    }

    /**
     * A look at the ELF header before handing a file to the dynamic linker: junk
     * makes HotSpot print a stack-guard warning and rewrite guard pages.
     */
    static String elfProblem(Path p, String osArch) {
        byte[] h = new byte[20];
        try (InputStream in = Files.newInputStream(p)) {
            if (in.readNBytes(h, 0, h.length) < h.length)
                return "not an ELF shared library (too short)";
        } catch (IOException e) {
            return "cannot be read (" + e + ")";
        }
        if (h[0] != 0x7f || h[1] != 'E' || h[2] != 'L' || h[3] != 'F')
            return "not an ELF shared library (bad magic)";
        if (h[4] != 2 || h[5] != 1)
            return "not a 64-bit little-endian ELF library";
        int machine = (h[18] & 0xff) | (h[19] & 0xff) << 8;
        String platform = platform("linux", osArch);
        int want = "linux-x86_64".equals(platform) ? 62 : "linux-aarch64".equals(platform) ? 183 : -1;
        if (want != -1 && machine != want)
            return "built for another CPU (ELF machine " + machine + ", this JVM runs on " + osArch + ")";
        return null;
    }

    static String resourceDir(String platform) {
        return "/io/fastclock/native/" + platform + "/";
    }

    /** loadedOne[0]: a copy reached the dynamic linker (whatever its verification said). */
    private static Result extractAndLoad(Config c, String platform, List<String> notes, boolean[] loadedOne) {
        String dir = resourceDir(platform);
        byte[] lib;
        String expected;
        try {
            lib = readResource(c, dir + FILE_NAME);
            byte[] sum = readResource(c, dir + FILE_NAME + ".sha256");
            if (lib == null) {
                notes.add("the jar has no native library for " + platform);
                return Result.failed(join(notes));
            }
            if (sum == null) {
                notes.add("the jar's native library for " + platform + " has no checksum");
                return Result.failed(join(notes));
            }
            expected = firstToken(new String(sum, StandardCharsets.US_ASCII));
        } catch (IOException e) {
            notes.add("cannot read the bundled library: " + e);
            return Result.failed(join(notes));
        }
        if (!sha256(lib).equalsIgnoreCase(expected)) {
            notes.add("the bundled library for " + platform + " fails its SHA-256 check (corrupt jar?)");
            return Result.failed(join(notes));
        }
        if (c.tempDirs.isEmpty()) {
            notes.add("no directory to extract the bundled library to");
            return Result.failed(join(notes));
        }
        // A kept copy in any directory before a fresh copy in any: a fresh copy
        // takes static TLS for good (see loadKept), and the first directory's
        // kept one may be unusable (another user made its name in a shared /tmp).
        // Only under directories nobody else could rename or replace: a private
        // directory in a parent another user may write to (not sticky) can be
        // swapped, with the file in it, between its check and its load.
        // This user as each directory's file system reports it (NFS squashing,
        // idmapped mounts may report another than the next directory's).
        // Each directory by its real path from here on: a link in the path as given
        // is followed once, now, and never again (its owner, whoever it is, could
        // point it elsewhere between a check and a load).
        Map<Path, UserPrincipal> users = new LinkedHashMap<>();
        for (Path given : c.tempDirs) {
            Path parent = given;
            try {
                // Made private where missing (a umask of 002 would leave it group-writable);
                // not where it is a link to a directory, which JDK 17 before 17.0.14 refuses
                // (JDK-8294193: FileAlreadyExistsException).
                if (!Files.isDirectory(given))
                    Files.createDirectories(given, PosixFilePermissions.asFileAttribute(PRIVATE));
                parent = given.toRealPath();
                UserPrincipal user = processUser(parent);
                String unsafe = othersCouldSwap(parent, user);
                if (unsafe != null) {
                    notes.add(parent + ": not used, " + unsafe);
                    continue;
                }
                users.put(parent, user);
            } catch (IOException | UnsupportedOperationException e) {
                notes.add(parent + ": cannot write (" + e + ")");
            } catch (RuntimeException e) {
                return Result.failed(denied(e));
            }
        }
        Set<Path> cannotMapCode = new HashSet<>();
        for (Path parent : users.keySet()) {
            boolean[] cannotMap = {false};
            Result kept;
            try {
                kept = loadKept(c, parent, users.get(parent), platform, lib, expected, notes, cannotMap);
            } catch (RuntimeException e) {
                return Result.failed(denied(e));
            }
            if (kept != null) {
                loadedOne[0] = true;
                return kept;
            }
            if (cannotMap[0])
                cannotMapCode.add(parent); // (noted) a fresh copy there would fail the same way
        }
        for (Path parent : users.keySet()) {
            if (cannotMapCode.contains(parent))
                continue;
            Path tmp = null, file = null;
            try {
                // Private directory: nobody else can swap the file between check and load.
                tmp = Files.createTempDirectory(parent, "fastclock-", PosixFilePermissions.asFileAttribute(PRIVATE));
                file = tmp.resolve(FILE_NAME);
                if (!writeChecked(file, lib, expected, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                    notes.add(parent + ": the written copy differs from the jar's (disk full?)");
                    continue;
                }
                c.load.accept(file.toString());
                loadedOne[0] = true;
                return verified(c, "extracted from the jar (" + platform + ") to " + parent
                        + (notes.isEmpty() ? "" : " (before that: " + join(notes) + ")"));
            } catch (UnsatisfiedLinkError e) {
                // Typically a noexec mount: "failed to map segment from shared object".
                notes.add(parent + ": " + e.getMessage());
            } catch (IOException | UnsupportedOperationException e) {
                notes.add(parent + ": cannot write (" + e + ")");
            } catch (RuntimeException e) {
                return Result.failed(denied(e));
            } finally {
                deleteQuietly(file);
                deleteQuietly(tmp);
            }
        }
        return Result.failed(join(notes));
    }

    /** Kept copies per user and build: a class loader takes the first that no live class loader holds. */
    static final int KEPT_SLOTS = 4;
    private static final Set<PosixFilePermission> PRIVATE = PosixFilePermissions.fromString("rwx------");

    /**
     * The jar's library from a copy kept for this user and build
     * ({@code fastclock-USER-SHA/} in the directory), loaded and verified; null where
     * none could be used here (a fresh copy follows), with cannotMap[0] set where the
     * directory cannot map code at all.
     *
     * <p>Why kept: the library's thread-local state is initial-exec TLS (the read path
     * must not call the dynamic linker), which glibc places in a small static reserve,
     * never returned.  A fresh copy per class loader (an application server's redeploy)
     * took a share of it each time, and about the eighth copy in a process failed to
     * load ("cannot allocate memory in static TLS block"), leaving pure Java.  A class
     * loader that loads a kept file that an earlier, collected loader had loaded gets
     * that copy back (-z nodelete keeps it mapped; JNI_OnLoad restarts its thread), and
     * nothing more is taken.  A file a live loader holds is refused by the JVM ("already
     * loaded in another classloader"): the next slot, and past the last, a fresh copy.
     *
     * <p>The directory must be this user's, mode 0700, not a link, so that nobody else
     * can put a file there between its check and its load; every file is checked
     * against the jar's SHA-256 before each load, and replaced (written beside it,
     * checked, renamed over it) where it differs.
     */
    private static Result loadKept(Config c, Path parent, UserPrincipal me, String platform, byte[] lib,
                                   String expected, List<String> notes, boolean[] cannotMap) {
        Path dir;
        try {
            dir = keptDir(parent, me, expected);
            try {
                Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(PRIVATE));
            } catch (FileAlreadyExistsException earlier) {
                // kept by an earlier load, this JVM's or another's: checked below
            }
            PosixFileAttributes a = Files.readAttributes(dir, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
            if (!a.isDirectory() || !a.owner().equals(me) || !a.permissions().equals(PRIVATE)) {
                notes.add(dir + ": not a private directory of " + me.getName() + " (a fresh copy instead)");
                return null;
            }
        } catch (IOException | UnsupportedOperationException | SecurityException e) {
            return null; // the fresh copy that follows says what fails here
        }
        for (int slot = 0; slot < KEPT_SLOTS; slot++) {
            Path file = dir.resolve(slot == 0 ? FILE_NAME : "lib" + LIBRARY + "-" + slot + ".so");
            try {
                if (!isKeptCopy(file, me, expected))
                    keep(dir, file, lib, expected);
                c.load.accept(file.toString());
            } catch (UnsatisfiedLinkError e) {
                if (String.valueOf(e.getMessage()).contains("already loaded in another classloader"))
                    continue; // held by a live class loader
                notes.add(parent + ": " + e.getMessage()); // typically noexec
                cannotMap[0] = true;
                return null;
            } catch (IOException e) {
                notes.add(file + ": cannot be kept (" + e + ")");
                return null;
            }
            return verified(c, "extracted from the jar (" + platform + ") to " + parent + ", kept at " + file
                    + (notes.isEmpty() ? "" : " (before that: " + join(notes) + ")"));
        }
        notes.add("the " + KEPT_SLOTS + " kept copies in " + dir + " are held by live class loaders");
        return null;
    }

    /**
     * This process's user: the owner of a file it has just made in dir.  Not
     * /proc/self's owner, which is root for a process that is not dumpable (a
     * java given capabilities, or PR_SET_DUMPABLE 0): every kept directory would
     * then look another user's, and each class loader take a fresh copy.
     */
    static UserPrincipal processUser(Path dir) throws IOException {
        Path probe = Files.createTempFile(dir, ".fastclock-", ".owner",
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        try {
            return Files.getOwner(probe, LinkOption.NOFOLLOW_LINKS);
        } finally {
            deleteQuietly(probe);
        }
    }

    private static final int STICKY = 01000;

    /**
     * Why someone other than this user (me) and root could rename or replace
     * dir or a directory above it, or null where nobody could: each must belong
     * to me or to root, and be writable by group or others only where sticky
     * (/tmp: only a file's owner may rename it).  Checked along dir's real
     * path, the one the loader then uses: a link on the way is not checked
     * (its target's owner and mode would be read, not its own) but not
     * followed again either.
     */
    static String othersCouldSwap(Path dir, UserPrincipal me) throws IOException {
        for (Path p = dir.toRealPath(); p != null; p = p.getParent()) {
            // Not following links: one made here since toRealPath is judged as itself.
            PosixFileAttributes a = Files.readAttributes(p, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
            Object uid = Files.getAttribute(p, "unix:uid", LinkOption.NOFOLLOW_LINKS);
            boolean trusted = a.owner().equals(me) || Integer.valueOf(0).equals(uid);
            if (!trusted)
                return p + " belongs to " + a.owner().getName();
            Set<PosixFilePermission> m = a.permissions();
            // Group-writable counts only where the group is not the user's own
            // (a user private group, named after the user, as Debian and Ubuntu
            // make them: with umask 002, ~/.cache is group-writable).
            boolean ownGroup = a.owner().equals(me) && a.group().getName().equals(me.getName());
            boolean othersWrite = (m.contains(PosixFilePermission.GROUP_WRITE) && !ownGroup)
                    || m.contains(PosixFilePermission.OTHERS_WRITE);
            if (othersWrite && (((Integer) Files.getAttribute(p, "unix:mode", LinkOption.NOFOLLOW_LINKS)) & STICKY) == 0)
                return p + " is writable by others (" + PosixFilePermissions.toString(m) + ", not sticky)";
        }
        return null;
    }

    /** Where the copies of the build whose SHA-256 is expected are kept for this user. */
    static Path keptDir(Path parent, UserPrincipal me, String expected) {
        return parent.resolve("fastclock-" + me.getName().replaceAll("[^A-Za-z0-9._-]", "_") + "-"
                + expected.substring(0, Math.min(16, expected.length())).toLowerCase(Locale.ROOT));
    }

    /** A regular file of this user's, not a link, with the jar's library in it. */
    private static boolean isKeptCopy(Path file, UserPrincipal me, String expected) throws IOException {
        PosixFileAttributes a;
        try {
            a = Files.readAttributes(file, PosixFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException absent) {
            return false;
        }
        return a.isRegularFile() && a.owner().equals(me) && holds(file, expected);
    }

    /** Puts the jar's library at file: written beside it, checked, renamed over it. */
    private static void keep(Path dir, Path file, byte[] lib, String expected) throws IOException {
        Path part = Files.createTempFile(dir, ".", ".part");
        try {
            if (!writeChecked(part, lib, expected))
                throw new IOException("the written copy differs from the jar's (disk full?)");
            Files.move(part, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } finally {
            deleteQuietly(part);
        }
    }

    /** Whether the file on disk is the build whose SHA-256 is sha. */
    private static boolean holds(Path file, String sha) throws IOException {
        return sha256(Files.readAllBytes(file)).equalsIgnoreCase(sha);
    }

    /** Writes lib to file and reads it back: false where the copy on disk differs (disk full?). */
    private static boolean writeChecked(Path file, byte[] lib, String expected, OpenOption... options)
            throws IOException {
        Files.write(file, lib, options);
        return holds(file, expected);
    }

    private static String denied(RuntimeException e) {
        // Java 24+ with --illegal-native-access=deny throws IllegalCallerException.
        return "loading native code is not allowed (" + e
                + "); run with --enable-native-access=ALL-UNNAMED";
    }

    /** linux-x86_64, linux-aarch64, or null when the jar cannot have a library for it. */
    static String platform(String osName, String osArch) {
        if (!osName.toLowerCase(Locale.ROOT).startsWith("linux"))
            return null;
        switch (osArch.toLowerCase(Locale.ROOT)) {
        case "amd64":
        case "x86_64":
            return "linux-x86_64";
        case "aarch64":
        case "arm64":
            return "linux-aarch64";
        default:
            return null;
        }
    }

    static List<Path> defaultTempDirs() {
        Set<Path> dirs = new LinkedHashSet<>();
        addDir(dirs, System.getProperty("fastclock.tmpdir"));
        addDir(dirs, System.getProperty("java.io.tmpdir"));
        addDir(dirs, System.getenv("XDG_RUNTIME_DIR"));
        String home = System.getProperty("user.home");
        if (home != null && !home.isEmpty() && !"?".equals(home))
            addDir(dirs, Paths.get(home, ".cache", "fastclock").toString());
        return new ArrayList<>(dirs);
    }

    private static void addDir(Set<Path> dirs, String dir) {
        if (dir != null && !dir.trim().isEmpty()) {
            try {
                dirs.add(Paths.get(dir.trim()).toAbsolutePath().normalize());
            } catch (RuntimeException ignored) {
                // An unusable path is simply not a candidate.
            }
        }
    }

    private static byte[] readResource(Config c, String name) throws IOException {
        try (InputStream in = c.resources.apply(name)) {
            return in == null ? null : in.readAllBytes();
        }
    }

    static String sha256(byte[] data) {
        try {
            return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(data));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JDK has SHA-256", e);
        }
    }

    private static String firstToken(String s) {
        String t = s.trim();
        int sp = t.indexOf(' ');
        return sp < 0 ? t : t.substring(0, sp);
    }

    private static void deleteQuietly(Path p) {
        if (p == null)
            return;
        try {
            Files.deleteIfExists(p);
        } catch (IOException | RuntimeException ignored) {
            // Best effort: a leftover file in a private temp directory harms nobody.
        }
    }

    private static String emptyToNull(String s) {
        return s == null || s.trim().isEmpty() ? null : s.trim();
    }

    private static String join(List<String> notes) {
        return String.join("; ", notes);
    }
}
