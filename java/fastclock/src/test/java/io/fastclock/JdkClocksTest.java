package io.fastclock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.HashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Over plain JNI, nanoTime() and currentTimeMillis() must never be slower than
 * the JDK's own: where the kernel's clock is as fast as a JNI call plus
 * fastclock's read, the JDK's clocks answer.
 */
class JdkClocksTest {
    @Test
    void theRule() {
        // A tsc clocksource: clock_gettime ~20 ns, fastclock 17 ns + a 6 ns JNI call.
        assertTrue(FastClock.preferJdkClocks("jni", 17.0, 20.0));
        // HPET: the kernel's clock costs hundreds of ns; fastclock wins by far.
        assertFalse(FastClock.preferJdkClocks("jni", 17.0, 600.0));
        // A critical FFM call costs ~2 ns: fastclock wins even over the vDSO.
        assertFalse(FastClock.preferJdkClocks("ffm", 17.0, 20.0));
        // Costs not measured (forced modes, mode system): fastclock answers.
        assertFalse(FastClock.preferJdkClocks("jni", 0, 20.0));
        assertFalse(FastClock.preferJdkClocks("jni", 17.0, 0));
        assertFalse(FastClock.preferJdkClocks("java", 17.0, 20.0));
    }

    @Test
    void statusFollowsTheRuleWithTheMeasuredCosts() {
        assumeTrue(FastClock.isNative(), "needs the native library");
        Map<String, String> st = new HashMap<>();
        for (String line : FastClock.status().split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0)
                st.put(line.substring(0, eq), line.substring(eq + 1));
        }
        String who = st.get("nanoTime/currentTimeMillis");
        assertNotNull(who, FastClock.status());
        double read = Double.parseDouble(st.get("read_ns")), kernel = Double.parseDouble(st.get("kernel_read_ns"));
        boolean expected = FastClock.preferJdkClocks(FastClock.binding(), read, kernel);
        assertEquals(expected, who.startsWith("System."), who + " with read " + read + " kernel " + kernel);
        String binding = System.getProperty("fastclock.test.binding");
        if ("ffm".equals(binding))
            assertEquals("fastclock answers", who);
    }

    @Test
    void theClocksAgreeEitherWay() {
        long a = System.nanoTime(), v = FastClock.nanoTime(), b = System.nanoTime();
        assertTrue(v >= a - 1000 && v <= b + 1000, a + " " + v + " " + b);
        long m0 = System.currentTimeMillis(), m = FastClock.currentTimeMillis(), m1 = System.currentTimeMillis();
        assertTrue(m >= m0 - 1 && m <= m1 + 1, m0 + " " + m + " " + m1);
    }
}
