package io.fastclock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/** The coarse clocks read the memory the core's calibrator publishes: no native call per read. */
class CoarseTest {
    /** A child JVM in mode tsc, forced: the core's calibrator thread ticks there. */
    static Jvm inModeTsc() throws Exception {
        Map<String, String> env = new TreeMap<>();
        env.put("FASTCLOCK_MODE", "tsc");
        Jvm j = Jvm.probeArgs(java.util.List.of("coarse-lazy"), env);
        assertEquals(0, j.exitCode, j.toString());
        assertEquals("true", j.get("native"), j.toString());
        assumeTrue(!j.get("reason").startsWith("FASTCLOCK_MODE=tsc refused"),
                "the counter cannot be trusted here, even when asked: " + j.get("reason"));
        // tsc, or tsc-percpu after a warp found: the calibrator thread ticks in both.
        assertTrue(j.get("mode").startsWith("tsc"), j.toString());
        return j;
    }

    @Test
    void coarseClocksReadPublishedMemoryWhileTheCoreTicks() throws Exception {
        assumeTrue(FastClock.isNative(), "needs the native library (the core's published coarse clocks)");
        Jvm j = inModeTsc();
        assertEquals("true", j.get("ticking_after_a_coarse_read"), j.toString());
        String expected = Jvm.feature() >= 22 ? "MemorySegment" : "Unsafe";
        assertTrue(j.get("status").contains("coarse=memory the core publishes (" + expected), j.toString());
        // The memory moves on by itself: the calibrator ticks about every millisecond.
        assertTrue(Long.parseLong(j.get("coarse_moved_ns")) >= 10_000_000L, j.toString());
        assertTrue(Long.parseLong(j.get("coarse_moved_ms")) >= 10, j.toString());
        assertEquals("true", j.get("coarse_not_ahead"), "never ahead of the fine clock:\n" + j);
    }

    @Test
    void inModeSystemTheCoarseClocksStillAnswer() throws Exception {
        assumeTrue(FastClock.isNative(), "needs the native library (FASTCLOCK_MODE is the core's)");
        Map<String, String> env = new TreeMap<>();
        env.put("FASTCLOCK_MODE", "system");
        Jvm j = Jvm.probeArgs(java.util.List.of(), env);
        assertEquals(0, j.exitCode, j.toString());
        assertEquals("system", j.get("mode"), j.toString());
        assertEquals("true", j.get("all_calls"), j.toString());
        assertTrue(j.get("status").contains("coarse=a native call"), j.toString());
        // Mode system: no native read beats the JDK's leaf clocks, so they answer.
        assertTrue(j.get("answers").contains("nanoTime=System.nanoTime()"), j.toString());
        assertTrue(j.get("answers").contains("currentTimeMillis=System.currentTimeMillis()"), j.toString());
    }

    /**
     * The core ticks the coarse clocks (its calibrator thread, every millisecond) only once
     * they are read: a JVM that loads FastClock and reads only the fine clocks asks for no
     * ticks.  The first coarse read starts them; until the first tick it is answered from the
     * fine clock, never ahead of it, and the coarse clock never goes back across the switch.
     */
    @Test
    void coarseTicksStartAtTheFirstCoarseRead() throws Exception {
        assumeTrue(FastClock.isNative(), "needs the native library (the core's published coarse clocks)");
        Jvm j = inModeTsc();
        assertEquals("false", j.get("ticking_before_a_coarse_read"), "ticks before any coarse read:\n" + j);
        assertEquals("true", j.get("ticking_after_a_coarse_read"), "no ticks after coarse reads:\n" + j);
        // The error bound against the kernel is ~100 ns; the coarse values come from the fine clocks.
        assertTrue(Long.parseLong(j.get("coarse_ahead_ns")) <= 1_000, j.toString());
        assertEquals(0, Long.parseLong(j.get("coarse_back_ns")), j.toString());
        assertTrue(j.get("status").contains("coarse=memory the core publishes"), j.toString());
    }
}
