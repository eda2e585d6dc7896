package io.fastclock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.ref.WeakReference;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * An application server's redeploy: each deployment's class loader loads the
 * library (a file no live class loader holds, since a library is bound to one
 * class loader: a kept copy an earlier, collected deployment loaded, see
 * NativeLoader), and is collected when the application is undeployed. The JVM then unloads the library, but its code stays mapped
 * (-z nodelete): its calibrator thread must stop (JNI_OnUnload), or every
 * redeploy leaves one more thread ticking every millisecond.
 */
class RedeployTest {
    /** The calibrator threads of every copy of the core in this JVM. */
    static int calibratorThreads() throws IOException {
        int n = 0;
        try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Paths.get("/proc/self/task"))) {
            for (Path t : tasks) {
                try {
                    if (Files.readString(t.resolve("comm")).trim().equals("fastclock-cal"))
                        n++;
                } catch (IOException exited) {
                    // a thread that ended while listed
                }
            }
        }
        return n;
    }

    /** Loads FastClock in a class loader of its own and reads the clock; the caller drops the loader. */
    static URLClassLoader deployOnce(List<String> natives) throws Exception {
        List<URL> urls = new ArrayList<>();
        for (String entry : System.getProperty("java.class.path").split(java.io.File.pathSeparator))
            urls.add(Paths.get(entry).toUri().toURL());
        URLClassLoader app = new URLClassLoader(urls.toArray(new URL[0]), ClassLoader.getPlatformClassLoader());
        Class<?> clock = Class.forName("io.fastclock.FastClock", true, app);
        long t = (long) clock.getMethod("nanoTime").invoke(null);
        assertTrue(t > 0);
        natives.add((boolean) clock.getMethod("isNative").invoke(null) + ": " + clock.getMethod("binding").invoke(null));
        app.close(); // its jar files; the classes stay until the loader is collected
        return app;
    }

    /** Polls until the count of calibrator threads is `want` (at most ~10 s, collecting meanwhile). */
    static int awaitThreads(int want, boolean collect) throws Exception {
        int n = calibratorThreads();
        for (int i = 0; i < 200 && n != want; i++) {
            if (collect)
                System.gc();
            Thread.sleep(50);
            n = calibratorThreads();
        }
        return n;
    }

    /**
     * The library from one path (java.library.path, or -Dfastclock.library.path):
     * a second deployment after the first was collected gets the very copy the
     * first had (kept mapped, its constructor not run again), whose thread
     * JNI_OnUnload stopped: JNI_OnLoad starts it again.
     */
    @Test
    void theSameCopyLoadedAgainRunsItsThreadAgain(@org.junit.jupiter.api.io.TempDir Path dir) throws Exception {
        String platform = NativeLoader.platform(System.getProperty("os.name"), System.getProperty("os.arch"));
        Path lib = dir.resolve(NativeLoader.FILE_NAME);
        try (java.io.InputStream in = RedeployTest.class.getResourceAsStream(
                NativeLoader.resourceDir(platform) + NativeLoader.FILE_NAME)) {
            org.junit.jupiter.api.Assumptions.assumeTrue(in != null, "this jar has no library for " + platform);
            Files.copy(in, lib);
        }
        FastClock.nanoTime();
        int before = calibratorThreads();
        String old = System.getProperty("fastclock.library.path");
        System.setProperty("fastclock.library.path", lib.toString());
        try {
            for (int deployment = 1; deployment <= 2; deployment++) {
                List<String> natives = new ArrayList<>();
                URLClassLoader app = deployOnce(natives);
                assertTrue(natives.get(0).startsWith("true"), "deployment " + deployment + ": " + natives);
                assertEquals(before + 1, awaitThreads(before + 1, false),
                        "deployment " + deployment + " runs the copy's calibrator thread");
                WeakReference<ClassLoader> gone = new WeakReference<>(app);
                app = null;
                assertEquals(before, awaitThreads(before, true), "deployment " + deployment + ", collected, stops it");
                assertTrue(gone.get() == null, "the class loader was not collected");
            }
        } finally {
            if (old == null)
                System.clearProperty("fastclock.library.path");
            else
                System.setProperty("fastclock.library.path", old);
        }
    }

    @Test
    void aCollectedClassLoadersCopyStopsItsCalibratorThread() throws Exception {
        FastClock.nanoTime(); // this loader's copy, if any, is up
        int before = calibratorThreads();
        List<String> natives = new ArrayList<>();
        URLClassLoader app = deployOnce(natives);
        assertTrue(natives.get(0).startsWith("true"), "the redeployed copy did not load natively: " + natives);
        // Its thread starts in the library's constructor (and names itself).
        assertEquals(before + 1, awaitThreads(before + 1, false),
                "the redeployed copy runs a calibrator thread of its own");
        WeakReference<ClassLoader> gone = new WeakReference<>(app);
        app = null;
        int after = awaitThreads(before, true);
        for (int i = 0; i < 100 && gone.get() != null; i++) {
            System.gc();
            Thread.sleep(50);
        }
        assertTrue(gone.get() == null, "the class loader was not collected: nothing was undeployed");
        assertEquals(before, after, "the collected copy's calibrator thread still runs");
    }

    /**
     * More redeploys than glibc's static TLS reserve has room for copies (a fresh
     * copy per class loader failed to load at about the eighth in a process): each
     * deployment, once the last one is collected, loads the copy kept for this build,
     * which the dynamic linker hands back, and stays native.
     */
    @Test
    void redeploysBeyondTheStaticTlsReserveStayNative() throws Exception {
        FastClock.nanoTime();
        int before = calibratorThreads();
        for (int deployment = 1; deployment <= 12; deployment++) {
            List<String> natives = new ArrayList<>();
            URLClassLoader app = deployOnce(natives);
            assertTrue(natives.get(0).startsWith("true"), "deployment " + deployment + " is not native: " + natives);
            WeakReference<ClassLoader> gone = new WeakReference<>(app);
            app = null;
            for (int i = 0; i < 100 && gone.get() != null; i++) {
                System.gc();
                Thread.sleep(50);
            }
            assertTrue(gone.get() == null, "deployment " + deployment + "'s class loader was not collected");
        }
        assertEquals(before, awaitThreads(before, true), "the collected copies' calibrator threads still run");
    }

    /**
     * The pure-Java fallback redeployed: its UTC clock starts no thread (one running
     * JavaClock's code would pin the deployment's class loader for the JVM's life), so the
     * undeployed class loader is collected.
     */
    @Test
    void aCollectedClassLoadersPureJavaClockLeavesNoThreadBehind() throws Exception {
        String old = System.getProperty("fastclock.native");
        System.setProperty("fastclock.native", "false");
        URLClassLoader app;
        try {
            List<URL> urls = new ArrayList<>();
            for (String entry : System.getProperty("java.class.path").split(java.io.File.pathSeparator))
                urls.add(Paths.get(entry).toUri().toURL());
            app = new URLClassLoader(urls.toArray(new URL[0]), ClassLoader.getPlatformClassLoader());
            Class<?> clock = Class.forName("io.fastclock.FastClock", true, app);
            assertEquals(false, clock.getMethod("isNative").invoke(null));
            long utc = (long) clock.getMethod("currentTimeNanos").invoke(null); // JavaClock's UTC
            assertTrue(Math.abs(utc - System.currentTimeMillis() * 1_000_000L) < 1_000_000_000L, "utc " + utc);
            app.close();
        } finally {
            if (old == null)
                System.clearProperty("fastclock.native");
            else
                System.setProperty("fastclock.native", old);
        }
        assertEquals(0, FallbackTest.resampleThreads(), "the deployment's pure-Java clock started a thread");
        WeakReference<ClassLoader> gone = new WeakReference<>(app);
        app = null;
        for (int i = 0; i < 100 && gone.get() != null; i++) {
            System.gc();
            Thread.sleep(50);
        }
        assertTrue(gone.get() == null, "the undeployed class loader was not collected");
    }
}
