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
 * library (a copy of its own, extracted to a new directory, since a library
 * is bound to one class loader), and is collected when the application is
 * undeployed. The JVM then unloads the library, but its code stays mapped
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

    /** Loads FastClock in a class loader of its own, reads the clock, and drops the loader. */
    static WeakReference<ClassLoader> deployOnce(List<String> natives) throws Exception {
        List<URL> urls = new ArrayList<>();
        for (String entry : System.getProperty("java.class.path").split(java.io.File.pathSeparator))
            urls.add(Paths.get(entry).toUri().toURL());
        URLClassLoader app = new URLClassLoader(urls.toArray(new URL[0]), ClassLoader.getPlatformClassLoader());
        Class<?> clock = Class.forName("io.fastclock.FastClock", true, app);
        long t = (long) clock.getMethod("nanoTime").invoke(null);
        assertTrue(t > 0);
        natives.add((boolean) clock.getMethod("isNative").invoke(null) + ": " + clock.getMethod("binding").invoke(null));
        app.close();
        return new WeakReference<>(app);
    }

    @Test
    void aCollectedClassLoadersCopyStopsItsCalibratorThread() throws Exception {
        FastClock.nanoTime(); // this loader's copy, if any, is up
        int before = calibratorThreads();
        List<String> natives = new ArrayList<>();
        WeakReference<ClassLoader> gone = deployOnce(natives);
        assertTrue(natives.get(0).startsWith("true"), "the redeployed copy did not load natively: " + natives);
        int deployed = before;
        for (int i = 0; i < 200 && deployed == before; i++) { // its thread starts in the library's constructor
            Thread.sleep(10);
            deployed = calibratorThreads();
        }
        assertEquals(before + 1, deployed, "the redeployed copy runs a calibrator thread of its own");
        int after = deployed;
        for (int i = 0; i < 200 && (gone.get() != null || after > before); i++) {
            System.gc();
            Thread.sleep(50);
            after = calibratorThreads();
        }
        assertTrue(gone.get() == null, "the class loader was not collected: nothing was undeployed");
        assertEquals(before, after, "the collected copy's calibrator thread still runs");
    }
}
