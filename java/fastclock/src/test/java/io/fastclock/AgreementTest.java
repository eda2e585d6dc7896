package io.fastclock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Instant;
import java.util.Set;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The native clocks against the JDK's own, read back to back: each FastClock
 * value is bracketed by two JDK reads, and the error is how far it falls
 * outside the bracket.  Scheduling noise only widens brackets, so the
 * bounds hold on a busy machine; a clock that is off shows at once.
 */
class AgreementTest {
    static final int N = 50_000;
    /** "p99 within a few microseconds in Java"; the core does ~100 ns. */
    static final long P99_BOUND_NS = 2_000;
    static final long MAX_BOUND_NS = 100_000;

    @BeforeAll
    static void nativeLibraryIsInUse() {
        // This machine is linux-x86_64 with the library in the jar: it must load.
        assertTrue(FastClock.isNative(), FastClock.status());
        String expected = System.getProperty("fastclock.test.binding");
        if (expected != null)
            assertEquals(expected, FastClock.binding(), "binding on Java " + Jvm.feature() + "\n" + FastClock.status());
        assertTrue(Set.of("tsc", "tsc-percpu", "system").contains(FastClock.mode()), FastClock.status());
        assertTrue(FastClock.reason().length() > 10, FastClock.reason());
        System.out.println("[fastclock] Java " + Runtime.version() + "\n" + FastClock.status());
    }

    static long epochNs(Instant i) {
        return i.getEpochSecond() * 1_000_000_000L + i.getNano();
    }

    static Stats bracket(LongSupplier reference, LongSupplier clock) {
        for (int i = 0; i < 20_000; i++) { // let the JIT compile the loop first
            reference.getAsLong();
            clock.getAsLong();
        }
        long[] err = new long[N];
        for (int i = 0; i < N; i++) {
            long a = reference.getAsLong();
            long f = clock.getAsLong();
            long b = reference.getAsLong();
            err[i] = Probe.outside(a, f, b);
        }
        return new Stats(err);
    }

    static void check(String what, Stats s) {
        System.out.println("[fastclock] " + what + ": " + s);
        assertTrue(s.p99 <= P99_BOUND_NS, what + ": " + s);
        assertTrue(s.max <= MAX_BOUND_NS, what + ": " + s);
    }

    @Test
    void nanoTimeAgreesWithSystemNanoTime() {
        check("nanoTime vs System.nanoTime", bracket(System::nanoTime, FastClock::nanoTime));
    }

    @Test
    void nanoTimeUnorderedAgreesWithSystemNanoTime() {
        check("nanoTimeUnordered vs System.nanoTime", bracket(System::nanoTime, FastClock::nanoTimeUnordered));
    }

    @Test
    void currentTimeNanosAgreesWithInstantNow() {
        check("currentTimeNanos vs Instant.now", bracket(() -> epochNs(Instant.now()), FastClock::currentTimeNanos));
    }

    @Test
    void currentTimeNanosUnorderedAgreesWithInstantNow() {
        check("currentTimeNanosUnordered vs Instant.now",
                bracket(() -> epochNs(Instant.now()), FastClock::currentTimeNanosUnordered));
    }

    /**
     * The native reads themselves, whatever the routes chose: where the JDK's
     * clock answers a method (JNI's transition on 17, mode system), the tests
     * above hold the JDK to itself.
     */
    @Test
    void theNativeReadsAgreeWithTheJdkWhateverAnswersTheMethods() {
        System.out.println("[fastclock] routes: " + FastClock.routes().answers);
        check("native mono vs System.nanoTime", bracket(System::nanoTime, NativeCalls::monoNs));
        check("native mono unordered vs System.nanoTime", bracket(System::nanoTime, NativeCalls::monoNsUnordered));
        check("native real vs Instant.now", bracket(() -> epochNs(Instant.now()), NativeCalls::realNs));
        check("native real unordered vs Instant.now",
                bracket(() -> epochNs(Instant.now()), NativeCalls::realNsUnordered));
    }

    @Test
    void instantAgreesWithInstantNowAtNanosecondResolution() {
        check("instant() vs Instant.now", bracket(() -> epochNs(Instant.now()), () -> epochNs(FastClock.instant())));
        int subMicro = 0;
        for (int i = 0; i < 100; i++)
            subMicro += FastClock.instant().getNano() % 1000 != 0 ? 1 : 0;
        assertTrue(subMicro > 50, "instant() has nanosecond digits: " + subMicro + "/100");
    }

    @Test
    void millisAndMicrosAreTheSameInstant() {
        for (int i = 0; i < 100_000; i++) {
            long a = System.currentTimeMillis();
            long f = FastClock.currentTimeMillis();
            long b = System.currentTimeMillis();
            // One millisecond of slack for a read that straddles a tick boundary.
            assertTrue(f >= a - 1 && f <= b + 1, a + " " + f + " " + b);

            long n0 = FastClock.currentTimeNanos();
            long us = FastClock.currentTimeMicros();
            long ms = FastClock.currentTimeMillis();
            long n1 = FastClock.currentTimeNanos();
            assertTrue(us >= Math.floorDiv(n0, 1000L) && us <= Math.floorDiv(n1, 1000L), n0 + " " + us + " " + n1);
            assertTrue(ms >= Math.floorDiv(n0, 1_000_000L) && ms <= Math.floorDiv(n1, 1_000_000L), n0 + " " + ms + " " + n1);
        }
    }

    @Test
    void coarseClocksAreNeverAheadAndAboutAMillisecondFresh() throws InterruptedException {
        FastClock.coarseNanoTime();
        Thread.sleep(20); // the calibrator thread starts feeding the coarse clocks
        long worstLag = 0, prev = FastClock.coarseNanoTime();
        long until = System.nanoTime() + 1_000_000_000L;
        while (System.nanoTime() < until) {
            long c = FastClock.coarseNanoTime();
            long fine = FastClock.nanoTime();
            long cm = FastClock.coarseCurrentTimeMillis();
            long fineReal = FastClock.currentTimeNanos();
            assertTrue(c <= fine, "coarse ahead of fine: " + c + " > " + fine);
            assertTrue(c >= prev, "coarse went back: " + prev + " -> " + c);
            // The core allows 1 us for the REALTIME pair (the two are read separately).
            assertTrue(cm * 1_000_000L <= fineReal + 1000, "coarse millis ahead: " + cm + " vs " + fineReal);
            worstLag = Math.max(worstLag, fine - c);
            prev = c;
        }
        System.out.println("[fastclock] coarse lag behind nanoTime: worst " + worstLag / 1e6 + " ms");
        // Kernel coarse clocks lag a tick (4 ms at HZ=250); plus scheduling on a busy machine.
        assertTrue(worstLag < 50_000_000L, "coarse lag " + worstLag + " ns");
        long cm = FastClock.coarseCurrentTimeMillis(), now = System.currentTimeMillis();
        assertTrue(Math.abs(now - cm) < 50, "coarse millis " + cm + " vs " + now);
    }
}
