package io.fastclock;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.junit.jupiter.api.Test;

/**
 * Never slower than the JDK: each fine clock is answered by fastclock only where
 * the costs measured in this process say it is clearly cheaper than the JDK's
 * counterpart, and that decision is stable across fresh JVMs.  (Whether the
 * prediction holds is measured by JMH, `make bench-java`, not here.)
 */
class JdkClocksTest {
    /** mono, mono unordered, real, real unordered, clock_gettime MONOTONIC, REALTIME. */
    static double[] costs(double mono, double monoU, double real, double realU, double kMono, double kReal) {
        return new double[] {mono, monoU, real, realU, kMono, kReal};
    }

    /**
     * A Clock's millis() reads its instant()'s clock: fastclock's REALTIME where that
     * is fastclock's line and the line answers instant(); the JDK's where instant() is
     * the JDK's; where fastclock's REALTIME is the kernel's own, the cheaper of the two
     * (one clock either way).  Mixed, a millis() could follow an instant() 1 ms lower.
     */
    @Test
    void aClocksMillisComesFromItsInstantsClock() {
        // nat, realIsKernel, currentTimeNanos routed to fastclock, currentTimeMillis routed to fastclock
        assertTrue(FastClock.clockMillisNative(true, false, true, false), "line answers instant(): millis too");
        assertFalse(FastClock.clockMillisNative(true, false, false, true), "the JDK answers instant(): millis too");
        assertTrue(FastClock.clockMillisNative(true, false, true, true));
        assertFalse(FastClock.clockMillisNative(true, false, false, false));
        assertFalse(FastClock.clockMillisNative(true, true, true, false), "one kernel clock: the cheaper route");
        assertTrue(FastClock.clockMillisNative(true, true, true, true));
        assertFalse(FastClock.clockMillisNative(false, false, true, true), "no native library");
        // This JVM's clock, read around a millisecond's edge many times.
        java.time.Clock c = FastClock.clock(java.time.ZoneOffset.UTC);
        for (int i = 0; i < 200_000; i++) {
            long i0 = c.instant().toEpochMilli(), m = c.millis(), i1 = c.instant().toEpochMilli();
            assertTrue(i0 <= m && m <= i1, i0 + " <= " + m + " <= " + i1 + " at " + i);
        }
    }

    @Test
    void theCoresKernelRoutesCountAsTheKernelAnswering() {
        assertTrue(CoreState.kernelAnswersFineReads(Map.of("mode", "tsc-percpu", "counter",
                "clock_gettime (the cheaper read here)")));
        assertTrue(CoreState.kernelAnswersFineReads(Map.of("mode", "tsc", "counter",
                "clock_gettime (the counter costs more here)")));
        assertTrue(CoreState.kernelAnswersFineReads(Map.of("mode", "tsc", "counter",
                "clock_gettime (ordered), rdtsc (unordered)")));
        assertTrue(CoreState.kernelAnswersFineReads(Map.of("mode", "tsc-percpu", "counter",
                "clock_gettime (ordered), rdtscp (unordered)")));
        assertFalse(CoreState.kernelAnswersFineReads(Map.of("mode", "tsc", "counter", "rdtscp")));
        assertFalse(CoreState.kernelAnswersFineReads(Map.of("mode", "tsc", "counter", "lfence;rdtsc")));
        assertFalse(CoreState.kernelAnswersFineReads(Map.of("mode", "tsc-percpu", "counter", "rdtscp")));
        assertFalse(CoreState.kernelAnswersFineReads(Map.of("mode", "tsc", "counter",
                "clock_gettime (first line pending)")));
        assertFalse(CoreState.kernelAnswersFineReads(Map.of("mode", "tsc")));
    }

    /**
     * currentTimeNanosUnordered() is decided by construction (the kernel's same call
     * against Instant.now()'s) only where the core's unordered wall reads are the
     * kernel's (tsc-percpu with real_source vdso among them): where the kernel answers
     * mode tsc's ordered reads alone, the unordered wall read is the line's, and is
     * measured.
     */
    @Test
    void anUnorderedWallReadThatIsALinesIsMeasured() {
        CoreState orderedOnly = CoreState.of("mode=tsc\ncounter=clock_gettime (ordered), rdtsc (unordered)\n"
                + "real_source=vdso\ncalibrations=2\n");
        CoreState perCpu = CoreState.of("mode=tsc-percpu\ncounter=rdtscp\nreal_source=vdso\ncalibrations=2\n");
        CoreState allKernel = CoreState.of("mode=tsc\ncounter=clock_gettime (the counter costs more here)\n"
                + "real_source=vdso\ncalibrations=2\n");
        CoreState system = CoreState.of("mode=system\ncounter=clock_gettime\nreal_source=vdso\n");
        assertTrue(orderedOnly.monoIsKernel && !orderedOnly.unorderedIsKernel, orderedOnly.toString());
        for (CoreState s : List.of(allKernel, system, perCpu))
            assertTrue(s.monoIsKernel && s.unorderedIsKernel, s.toString());
        for (String binding : List.of("ffm", "jni")) {
            // The line's unordered REALTIME dearer than Instant.now() (a trapping counter): the JDK answers.
            double[] dear = costs(20.0, 60.0, 21.0, 60.0, 20.0, 20.0);
            Routes r = Routes.decide(binding, dear, orderedOnly);
            assertFalse(r.currentTimeNanosUnordered, binding + " " + orderedOnly + ": " + r.answers);
            // ... and cheaper: fastclock answers.
            r = Routes.decide(binding, costs(20.0, 9.0, 21.0, 9.0, 20.0, 20.0), orderedOnly);
            assertTrue(r.currentTimeNanosUnordered, binding + " " + orderedOnly + ": " + r.answers);
            // The kernel's own call against Instant.now()'s same call through JNI plus an
            // Instant: fastclock by construction, whatever was measured.
            for (CoreState s : List.of(allKernel, system, perCpu))
                assertTrue(Routes.decide(binding, dear, s).currentTimeNanosUnordered, binding + " " + s);
        }
    }

    @Test
    void perCpuLinesOnAKernelThatReadsTheCounterLeaveTheJdkAnswering() {
        assertTrue(CoreState.perCpuLinesOverTheKernelsCounter(Map.of("mode", "tsc-percpu", "counter", "rdtscp",
                "real_source", "vdso")));
        // The kernel's clock is not the counter: the wall reads are the lines' too.
        assertFalse(CoreState.perCpuLinesOverTheKernelsCounter(Map.of("mode", "tsc-percpu", "counter", "rdtscp",
                "real_source", "line")));
        // Mode tsc: its line does not name the CPU (Routes.decide weighs it).
        assertFalse(CoreState.perCpuLinesOverTheKernelsCounter(Map.of("mode", "tsc", "counter", "rdtscp",
                "real_source", "vdso")));
        // Routed to the kernel already: kernelAnswersFineReads says so.
        assertFalse(CoreState.perCpuLinesOverTheKernelsCounter(Map.of("mode", "tsc-percpu", "counter",
                "clock_gettime (the cheaper read here)", "real_source", "vdso")));
        assertFalse(CoreState.perCpuLinesOverTheKernelsCounter(Map.of("mode", "tsc-percpu", "real_source", "vdso")));
        // Decided as the kernel's: a per-CPU read measured at 0.90 of the vDSO's (noise) does not answer.
        Routes r = Routes.decide("ffm", costs(30.0, 30.0, 30.3, 30.2, 33.3, 30.5), true, true);
        assertFalse(r.nanoTime || r.nanoTimeUnordered || r.currentTimeMillis, r.answers);
        assertFalse(r.close, r.costs);
    }

    @Test
    void jniOnATscClocksourceKeepsTheJdksFineClocks() {
        // This machine's figures: fenced read 20.6, bare 9.5, wall reads via the vDSO 23.3, kernel 23.6.
        Routes r = Routes.decide("jni", costs(20.6, 9.5, 23.3, 9.5, 23.6, 23.6));
        assertFalse(r.nanoTime, r.answers);
        assertFalse(r.currentTimeMillis, r.answers);
        assertTrue(r.currentTimeNanos, r.answers); // 29.3 against Instant.now()'s ~32.6
        assertTrue(r.nanoTimeUnordered, r.answers); // 15.5 against 23.6
        assertTrue(r.currentTimeNanosUnordered, r.answers);
    }

    @Test
    void ffmOnATscClocksourceAnswersWhereItIsClearlyCheaper() {
        Routes r = Routes.decide("ffm", costs(20.6, 9.5, 23.3, 9.5, 23.6, 23.6));
        assertTrue(r.nanoTime, r.answers);
        assertTrue(r.nanoTimeUnordered, r.answers);
        assertTrue(r.currentTimeNanos, r.answers); // 23.3 against Instant.now()'s ~32.6
        assertFalse(r.currentTimeMillis, r.answers); // 23.3 against currentTimeMillis' 23.6: a tie
    }

    @Test
    void statusNamesWhatAnUnroutedUnorderedWallReadReturns() {
        // The unordered wall read loses to Instant.now(), the ordered one wins:
        // currentTimeNanosUnordered() is then currentTimeNanos(), fastclock's ordered read.
        Routes r = Routes.decide("jni", costs(20.6, 9.5, 23.3, 60.0, 23.6, 23.6));
        assertTrue(r.currentTimeNanos, r.answers);
        assertFalse(r.currentTimeNanosUnordered, r.answers);
        assertTrue(r.answers.contains("currentTimeNanosUnordered=fastclock(ordered)"), r.answers);
    }

    @Test
    void modeSystemNeverAnswersTheLeafClocks() {
        // Every fastclock read is the kernel's plus a little.
        for (String binding : new String[] {"jni", "ffm"}) {
            Routes r = Routes.decide(binding, costs(24.0, 24.0, 24.0, 24.0, 23.7, 23.7));
            assertFalse(r.nanoTime || r.nanoTimeUnordered || r.currentTimeMillis, binding + ": " + r.answers);
        }
    }

    @Test
    void whereTheCoreReadsTheKernelTheJdkAnswersWhateverTheMeasurementSays() {
        // A jittery measurement can make the kernel's own read look 6% cheaper
        // than itself: mode system must still leave the leaf clocks to the JDK.
        for (String binding : new String[] {"jni", "ffm"}) {
            Routes r = Routes.decide(binding, costs(22.2, 22.2, 22.2, 22.2, 23.7, 23.7), true, true);
            assertFalse(r.nanoTime || r.nanoTimeUnordered || r.currentTimeMillis, binding + ": " + r.answers);
        }
        // Mode tsc with real_source=vdso: currentTimeMillis is the JDK's; nanoTime is measured.
        Routes r = Routes.decide("ffm", costs(20.6, 9.5, 22.2, 9.5, 23.6, 23.7), false, true);
        assertFalse(r.currentTimeMillis, r.answers);
        assertTrue(r.nanoTime, r.answers);
    }

    @Test
    void whereTheWallReadIsTheKernelsItsMeasuredRatioDoesNotDecideAgainstInstantNow() {
        // Mode system, or mode tsc with real_source=vdso: currentTimeNanos() is
        // the kernel's REALTIME through the binding, Instant.now() the same call
        // through JNI plus an Instant.  A ratio that jitters +-15% under load
        // must not move the choice (it did: 3 of 20 fresh JVMs, JDK 17).
        for (String binding : new String[] {"jni", "ffm"}) {
            for (boolean system : new boolean[] {true, false}) {
                Set<String> seen = new HashSet<>();
                for (double ratio = 0.85; ratio <= 1.15; ratio += 0.01) {
                    double real = 23.7 * ratio;
                    Routes r = Routes.decide(binding, costs(20.6, 9.5, real, system ? real : 9.5, 23.6, 23.7), system,
                            true);
                    assertTrue(r.currentTimeNanos, binding + " ratio " + ratio + ": " + r.answers);
                    seen.add(r.answers);
                }
                assertEquals(1, seen.size(), binding + (system ? ", mode system: " : ", real_source=vdso: ") + seen);
            }
        }
        // Nor does the kernel's cost: it is on both sides.  From a vDSO read to a
        // system call on a slow clocksource, one answer, in both bindings.
        for (String binding : new String[] {"jni", "ffm"}) {
            Set<String> seen = new HashSet<>();
            for (double k = 20; k <= 1000; k *= 1.05) {
                Routes r = Routes.decide(binding, costs(k, k, k, k, k, k), true, true);
                assertTrue(r.currentTimeNanos && r.currentTimeNanosUnordered, binding + " at " + k + " ns: " + r.answers);
                seen.add(r.answers);
            }
            assertEquals(1, seen.size(), binding + ", mode system, the kernel's cost from 20 to 1000 ns: " + seen);
        }
    }

    @Test
    void whereTheLineAnswersOverFfmItsMeasuredRatioDoesNotDecideNanoTime() {
        // Mode tsc, the line answering ordered reads: over FFM fastclock's
        // nanoTime() is the kernel's work less the split, whatever a jittery
        // ratio says (0.92 against MARGIN 0.95 flipped 1 of 20 JVMs, JDK 25).
        Set<String> seen = new HashSet<>();
        for (double ratio = 0.85; ratio <= 1.15; ratio += 0.01) {
            Routes r = Routes.decide("ffm", costs(16.4 * ratio, 9.0, 16.4, 11.5, 16.4, 16.4), false, true, true);
            assertTrue(r.nanoTime, "ratio " + ratio + ": " + r.answers);
            assertTrue(r.costs.contains("by construction"), r.costs);
            seen.add(r.answers);
        }
        assertEquals(1, seen.size(), seen.toString());
        // Through JNI the transition is measured against the kernel's call, as before.
        assertFalse(Routes.decide("jni", costs(15.0, 9.0, 16.4, 11.5, 16.4, 16.4), false, true, true).nanoTime);
        // Not the line (tsc-percpu, or ordered reads routed to the kernel): measured.
        assertFalse(Routes.decide("ffm", costs(20.9, 20.8, 16.4, 16.4, 16.4, 16.4), false, true, false).nanoTime);
        // Mode system: the kernel's own read, the JDK answers.
        assertFalse(Routes.decide("ffm", costs(16.4, 16.4, 16.4, 16.4, 16.4, 16.4), true, true, true).nanoTime);
    }

    @Test
    void whereTheLineAnswersRealtimeOverFfmItsMeasuredRatioDoesNotDecideCurrentTimeMillis() {
        // Mode tsc, the line answering ordered REALTIME (the core timed it cheaper
        // than the kernel's): over FFM fastclock answers currentTimeMillis(),
        // whatever a jittery ratio says (0.91 against MARGIN 0.95 flipped 1 of
        // 124 JMH forks, JDK 25).
        Set<String> seen = new HashSet<>();
        for (double ratio = 0.85; ratio <= 1.15; ratio += 0.01) {
            Routes r = Routes.decide("ffm", costs(16.4, 9.0, 20.7 * ratio, 9.0, 20.7, 20.7), false, false, true, true);
            assertTrue(r.currentTimeMillis, "ratio " + ratio + ": " + r.answers);
            assertTrue(r.costs.contains("timed cheaper than the kernel's REALTIME"), r.costs);
            seen.add(r.answers);
        }
        assertEquals(1, seen.size(), seen.toString());
        // The kernel's own REALTIME (real_source vdso): the JDK's call of the same clock.
        assertFalse(Routes.decide("ffm", costs(16.4, 9.0, 19.0, 9.0, 20.7, 20.7), false, true, true, false).currentTimeMillis);
        // Through JNI the transition is measured: 19.0 + 6 against 0.95 x 20.7.
        assertFalse(Routes.decide("jni", costs(16.4, 9.0, 19.0, 9.0, 20.7, 20.7), false, false, true, true).currentTimeMillis);
        // The line, but not timed by the core (a kernel clocksource other than the
        // counter): measured -- 20.5 against 0.95 x 20.7 is the JDK's.
        assertFalse(Routes.decide("ffm", costs(16.4, 9.0, 20.5, 9.0, 20.7, 20.7), false, false, true, false).currentTimeMillis);
        assertTrue(Routes.decide("ffm", costs(16.4, 9.0, 18.0, 9.0, 20.7, 20.7), false, false, true, false).currentTimeMillis);
        // Timed, but fastclock does not answer currentTimeNanos() (its REALTIME above
        // 0.95x Instant.now()'s): millis() and instant() must read one clock, so no shortcut.
        Routes far = Routes.decide("ffm", costs(16.4, 9.0, 35.0, 9.0, 20.7, 20.7), false, false, true, true);
        assertFalse(far.currentTimeNanos, far.answers);
        assertFalse(far.currentTimeMillis, far.answers);
        // Not mode tsc's line (tsc-percpu's lines): measured, and dearer here.
        assertFalse(Routes.decide("ffm", costs(20.9, 20.8, 22.0, 21.0, 20.7, 20.7), false, false, false, false).currentTimeMillis);
    }

    @Test
    void jniBeforeABareCounterReadCostsMoreThanItsNoOp() {
        // An Intel Xeon guest, JDK 17: the unordered read is 9.0 ns in C and
        // clock_gettime 16.4; through JNI it measured 17.9 (1.08x System.nanoTime()),
        // so the JDK answers nanoTimeUnordered(); the unordered wall read (11.6 + 9
        // against Instant.now()'s ~25) still goes to fastclock.
        Routes r = Routes.decide("jni", costs(15.1, 9.0, 16.5, 11.6, 16.4, 16.5), false, true, true);
        assertFalse(r.nanoTimeUnordered, r.answers);
        assertFalse(r.nanoTime, r.answers);
        assertTrue(r.currentTimeNanos, r.answers);
        assertTrue(r.currentTimeNanosUnordered, r.answers);
        // An AMD EPYC guest: 11.5 + 9 against 0.95 x 28.7, fastclock (JMH there: 0.53x).
        assertTrue(Routes.decide("jni", costs(24.4, 11.5, 28.2, 15.0, 28.7, 28.2), false, true, true).nanoTimeUnordered);
        // FFM adds nothing before either kind of read.
        assertTrue(Routes.decide("ffm", costs(15.1, 9.0, 16.5, 11.6, 16.4, 16.5), false, true, true).nanoTimeUnordered);
    }

    @Test
    void theBindingsCostScalesWithTheCpusSpeed() {
        // An Intel Xeon guest (model 0xcf), JDK 17, two fresh JVMs beside a CPU hog:
        // the same machine measured at two speeds.  With JNI's cost fixed, the first
        // kept nanoTimeUnordered on the JDK (16.0 + 9 against 0.95 x 25.7) and the
        // second gave it to fastclock (21.2 + 9 against 0.95 x 35.4).  Scaled with
        // the unordered read (JMH there: JNI no-op 12.7 ns), both decide alike.
        Routes slow = Routes.decide("jni", costs(30.9, 21.2, 35.1, 30.6, 35.4, 36.0), false, true, true);
        Routes fast = Routes.decide("jni", costs(23.9, 16.0, 25.5, 19.2, 25.7, 25.8), false, true, true);
        assertEquals(fast.answers, slow.answers);
        assertFalse(slow.nanoTimeUnordered, slow.answers); // JMH: 1.00x System.nanoTime() through JNI
        assertTrue(slow.currentTimeNanos, slow.answers);    // JMH: 0.84x Instant.now()
        // A slow clocksource leaves JNI's cost where it was: the unordered read has no clocksource in it.
        assertTrue(Routes.decide("jni", costs(21.0, 9.0, 22.0, 11.0, 600, 600)).nanoTimeUnordered);
        assertEquals(1.0, Routes.cpuScale(costs(15.1, 9.0, 16.5, 11.6, 16.4, 16.5)), 1e-9);
    }

    @Test
    void aSlowFastclockReadLeavesInstantNowAnswering() {
        // tsc-percpu's per-CPU lookup made the unordered wall read cost 33 ns here.
        Routes r = Routes.decide("ffm", costs(24.2, 24.0, 23.8, 33.1, 23.9, 24.0));
        assertFalse(r.currentTimeNanosUnordered, r.answers);
        assertTrue(r.currentTimeNanos, r.answers);
    }

    @Test
    void aDecisionCloseToItsThresholdIsMeasuredAgain() {
        // The Intel guest, JDK 17: the unordered wall read (11.6 + 9 against 0.95 x 25.5,
        // 0.85x of its threshold) and nanoTimeUnordered (9 + 9 against 0.95 x 16.4, 1.16x)
        // are close; nanoTime (15.1 + 6, 1.35x) is not.
        assertTrue(Routes.decide("jni", costs(15.1, 9.0, 16.5, 11.6, 16.4, 16.5), false, true, true).close);
        assertTrue(Routes.decide("jni", costs(15.1, 3.0, 16.5, 11.6, 16.4, 16.5), false, true, true).close);
        assertTrue(Routes.decide("jni", costs(15.1, 9.0, 16.5, 5.0, 16.4, 16.5), false, true, true).close);
        assertFalse(Routes.decide("jni", costs(15.1, 3.0, 16.5, 5.0, 16.4, 16.5), false, true, true).close);
        // A slow kernel clock: nothing is close.
        assertFalse(Routes.decide("jni", costs(17, 9, 18, 9, 600, 600)).close);
        // Mode system: the JDK's System clocks answer without a measurement, and the
        // kernel's call against Instant.now(), which makes the same call, is decided by
        // constants: nothing is close, however near the figures.
        for (String binding : new String[] {"jni", "ffm"})
            assertFalse(Routes.decide(binding, costs(16.4, 16.4, 16.4, 16.4, 16.4, 16.4), true, true).close, binding);
        // One measurement's burst does not survive the median of three, figure by figure.
        double[] first = {30, 9, 16, 11}, second = {15, 9, 16, 11}, third = {15.2, 12, 16, 10};
        int[] call = {0};
        double[] m = Routes.measuredAgain(first, out -> System.arraycopy(call[0]++ == 0 ? second : third, 0, out, 0, 4));
        assertArrayEquals(new double[] {15.2, 9, 16, 11}, m, 1e-9);
        assertEquals(2, call[0]);
        assertEquals(30, first[0], 0, "the first measurement is left as it was");
    }

    /**
     * Jni.costs' figures, with the control: the line's unordered read (ns) and its
     * ratio to the bare counter read (out[10]); the bare read (out[11]) follows.
     */
    static double[] measurement(double monoU, double control) {
        double[] m = new double[Jni.COST_FIGURES];
        m[1] = monoU;
        m[10] = control;
        m[11] = monoU / control;
        return m;
    }

    /**
     * A measurement taken while the line's reads were off their steady path (its
     * unordered read well above the bare counter read beside it) is set aside and
     * taken again after a growing pause; where the line does not answer, or it stays
     * off, the measurement stands.
     */
    @Test
    void aMeasurementOffTheLinesSteadyPathIsTakenAgainAfterAPause() {
        double[][] seq = {measurement(17.6, 1.96), measurement(17.0, 1.9), measurement(8.9, 1.04),
                measurement(20, 2)};
        int[] call = {0};
        List<Long> pauses = new ArrayList<>();
        int[] setAside = {0};
        double[] m = Routes.measuredSteady(out -> System.arraycopy(seq[call[0]++], 0, out, 0, out.length), true,
                pauses::add, setAside);
        assertEquals(8.9, m[1], 0);
        assertEquals(3, call[0]);
        assertEquals(2, setAside[0]);
        assertEquals(List.of(1_000_000L, 2_000_000L), pauses);
        assertTrue(Routes.steadyNote(m, setAside[0]).contains("2 measurements off the reads' steady path"),
                Routes.steadyNote(m, setAside[0]));
        assertFalse(Routes.steadyNote(m, setAside[0]).contains("still off"), Routes.steadyNote(m, setAside[0]));

        // A cheap counter read (an arm64 CNTVCT read of 2 ns) makes the line's 4 ns read
        // 2x it on its steady path: not off it by 4 ns, so it stands.
        assertFalse(Routes.offSteady(measurement(4.0, 2.0)));
        assertTrue(Routes.offSteady(measurement(17.6, 1.96)));

        // Where the line does not answer (mode system, tsc-percpu), the control says nothing.
        call[0] = 0;
        setAside[0] = 0;
        m = Routes.measuredSteady(out -> System.arraycopy(seq[call[0]++], 0, out, 0, out.length), false,
                pauses::add, setAside);
        assertEquals(1, call[0]);
        assertEquals(0, setAside[0]);

        // Reads that stay off it are the reads this JVM gets: the last measurement stands, and says so.
        call[0] = 0;
        pauses.clear();
        m = Routes.measuredSteady(out -> {
            call[0]++;
            System.arraycopy(measurement(20, 2), 0, out, 0, out.length);
        }, true, pauses::add, setAside);
        assertEquals(Routes.STEADY_TRIES + 1, call[0]);
        assertEquals(Routes.STEADY_TRIES, setAside[0]);
        assertEquals(31_000_000L, pauses.stream().mapToLong(Long::longValue).sum());
        assertTrue(Routes.steadyNote(m, setAside[0]).contains("still off it"), Routes.steadyNote(m, setAside[0]));
    }

    /**
     * Routes are decided on the core's state as it was when their costs were measured:
     * a warp found during the measurement (mode tsc to tsc-percpu answered by the
     * kernel's clock) has them decided again on the new state; a state that keeps
     * moving leaves the JDK answering every clock.
     */
    @Test
    void routesAreDecidedOnTheStateTheirCostsWereMeasuredIn() {
        CoreState line = CoreState.of("mode=tsc\ncounter=rdtscp\nreal_source=line\nreal_line_ratio=0.9\ncalibrations=3\n");
        CoreState kernel = CoreState.of("mode=tsc-percpu\ncounter=clock_gettime (the cheaper read here)\n"
                + "real_source=vdso\ncalibrations=3\n");
        assertTrue(line.monoIsLine && line.realIsTimedLine && !line.monoIsKernel, line.toString());
        assertTrue(kernel.monoIsKernel && kernel.realIsKernelForGood && !kernel.monoIsLine, kernel.toString());
        assertEquals(line, CoreState.of("mode=tsc\ncounter=lfence;rdtsc\nreal_source=line\nreal_line_ratio=0.8\n"
                + "calibrations=9\n"), "the same facts, other figures");

        // The line's costs, as they would be measured (fastclock cheaper everywhere).
        double[] lineCosts = costs(16.0, 9.0, 18.0, 9.0, 20.4, 20.4);
        List<CoreState> decidedOn = new ArrayList<>();
        java.util.function.Function<CoreState, Routes> decide = s -> {
            decidedOn.add(s);
            return Routes.decide("ffm", lineCosts, s);
        };

        // Settled: one decision, on the state it was measured in.
        Routes r = Routes.onSettledState(line, () -> line, decide);
        assertEquals(List.of(line), decidedOn);
        assertTrue(r.nanoTime && r.currentTimeNanos, r.answers);
        assertFalse(r.costs.contains("decided again"), r.costs);

        // A warp found while measuring: decided again on the kernel's state, where the JDK answers.
        decidedOn.clear();
        java.util.Iterator<CoreState> states = List.of(kernel, kernel).iterator();
        r = Routes.onSettledState(line, states::next, decide);
        assertEquals(List.of(line, kernel), decidedOn);
        assertFalse(r.nanoTime || r.nanoTimeUnordered || r.currentTimeMillis, r.answers);
        assertTrue(r.costs.contains("decided again: the core's state moved under 1 measurement"), r.costs);

        // Moving under every measurement: the JDK answers everything, and says why.
        decidedOn.clear();
        boolean[] flip = {false};
        r = Routes.onSettledState(line, () -> (flip[0] = !flip[0]) ? kernel : line, decide);
        assertEquals(Routes.SETTLE_TRIES, decidedOn.size());
        assertFalse(r.nanoTime || r.nanoTimeUnordered || r.currentTimeNanos || r.currentTimeNanosUnordered
                || r.currentTimeMillis, r.answers);
        assertTrue(r.answers.contains("currentTimeNanos=Instant.now()"), r.answers);
        assertTrue(r.costs.contains("moved under each of " + Routes.SETTLE_TRIES + " measurements"), r.costs);
    }

    /**
     * The control itself: in a fresh JVM whose core runs its line (mode tsc, forced),
     * the line's unordered read costs about the bare counter read beside it, so no
     * measurement is set aside on a quiet machine and one is only on a disturbed one.
     */
    @Test
    void theLinesUnorderedReadCostsAboutTheBareCounterRead() throws Exception {
        assumeTrue(FastClock.isNative(), "needs the native library");
        Jvm j = Jvm.probeArgs(List.of("answers"), Map.of("FASTCLOCK_MODE", "tsc"));
        assertEquals(0, j.exitCode, j.toString());
        String why = j.get("answers_why");
        if (!"tsc".equals(j.get("mode")))
            throw new org.opentest4j.TestAbortedException("mode tsc refused here: " + j.get("reason"));
        if (j.get("counter").startsWith("clock_gettime"))
            throw new org.opentest4j.TestAbortedException(
                    "the kernel's clock answers the fine reads here (a costly counter read): " + j.get("counter"));
        java.util.regex.Matcher x = java.util.regex.Pattern
                .compile("the line's unordered read ([0-9.]+)x the bare counter read").matcher(why);
        assertTrue(x.find(), why);
        double ratio = Double.parseDouble(x.group(1));
        assertTrue(ratio >= 0.8 && ratio <= Routes.OFF_STEADY, why);
        assertFalse(why.contains("still off it"), why);
    }

    @Test
    void aSlowKernelClockIsBeatenEverywhere() {
        // HPET or Xen: clock_gettime costs hundreds of ns, the TSC does not.
        Routes r = Routes.decide("jni", costs(17, 9, 18, 9, 600, 600));
        assertTrue(r.nanoTime && r.nanoTimeUnordered && r.currentTimeNanos && r.currentTimeNanosUnordered
                && r.currentTimeMillis, r.answers);
    }

    @Test
    void unmeasuredCostsLeaveTheJdkAnswering() {
        Routes r = Routes.decide("ffm", costs(0, 0, 0, 0, 0, 0));
        assertFalse(r.nanoTime || r.nanoTimeUnordered || r.currentTimeNanos || r.currentTimeNanosUnordered
                || r.currentTimeMillis, r.answers);
    }

    @Test
    void statusShowsWhoAnswersAndWhy() {
        Map<String, String> st = new TreeMap<>();
        for (String line : FastClock.status().split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0)
                st.put(line.substring(0, eq), line.substring(eq + 1));
        }
        assertEquals(FastClock.routes().answers, st.get("answers"), FastClock.status());
        if (FastClock.isNative()) {
            assertNotNull(st.get("answers_why"), FastClock.status());
            assertTrue(st.get("answers_why").contains("clock_gettime MONOTONIC"), st.get("answers_why"));
        } else {
            assertTrue(st.get("answers").contains("nanoTime=System.nanoTime()"), st.get("answers"));
        }
    }

    /** Every field of the C status, each number as digits (no locale's decimal comma). */
    @Test
    void theNativeStatusCarriesEveryFieldAsPlainNumbers() {
        assertTrue(FastClock.isNative(), FastClock.status());
        Map<String, String> st = FastClock.nativeStatus();
        for (String k : List.of("counter_hz", "calibrations", "last_calibration_age_ns", "calibration_interval_ns",
                "error_bound_ns", "last_error_ns", "max_error_ns", "sample_width_ns", "fallback_reads",
                "realtime_steps", "ordered", "forced", "read_ns", "kernel_read_ns", "real_error_bound_ns",
                "kernel_synchronized", "cpus_calibrated", "kernel_maxerror_ns", "kernel_esterror_ns",
                "max_warp_cycles", "real_line_ratio")) {
            assertNotNull(st.get(k), k + " missing: " + st);
            assertTrue(st.get(k).matches("-?[0-9]+(\\.[0-9]+)?"), k + "=" + st.get(k));
        }
        for (String k : List.of("mode", "reason", "calibrator", "counter", "real_source", "version"))
            assertFalse(st.getOrDefault(k, "").isEmpty(), k + " missing: " + st);
    }

    @Test
    void theClocksAgreeWhoeverAnswers() {
        long a = System.nanoTime(), v = FastClock.nanoTime(), b = System.nanoTime();
        assertTrue(v >= a - 1000 && v <= b + 1000, a + " " + v + " " + b);
        long m0 = System.currentTimeMillis(), m = FastClock.currentTimeMillis(), m1 = System.currentTimeMillis();
        assertTrue(m >= m0 - 1 && m <= m1 + 1, m0 + " " + m + " " + m1);
    }

    /**
     * The same decision in 20 fresh JVMs, in the core's automatic mode and in each mode
     * forced: system, tsc (where the measured costs decide, and once flipped between
     * JVMs) and tsc-percpu (the per-CPU lines answer the core's reads; on a tsc
     * clocksource the kernel's vDSO does less work, and a measurement of the two
     * must not decide).  A forced mode must be the mode that runs, unless the core
     * refused it (FASTCLOCK_MODE=... refused: the machine lacks what it needs),
     * which skips that mode and says so at the end.
     */
    @Test
    void twentyFreshJvmsDecideAlike() throws Exception {
        assumeTrue(FastClock.isNative(), "needs the native library (the fallback has nothing to decide)");
        List<String> refused = new ArrayList<>();
        modes:
        for (String mode : new String[] {null, "system", "tsc", "percpu"}) {
            Map<String, String> env = new TreeMap<>();
            env.put("FASTCLOCK_MODE", mode);
            List<String> seen = new ArrayList<>();
            // For each choice, the core's mode and the figures of one JVM that made it.
            Map<String, String> why = new TreeMap<>();
            for (int i = 0; i < 20; i++) {
                Jvm j = Jvm.probeArgs(List.of("answers"), env);
                assertEquals(0, j.exitCode, j.toString());
                assertEquals("true", j.get("native"), j.toString());
                String refusal = mode == null ? null : j.refusalOf(mode);
                if (refusal != null) {
                    refused.add(refusal);
                    continue modes;
                }
                seen.add(j.get("answers"));
                why.putIfAbsent(j.get("answers"), "mode=" + j.get("mode") + " (" + j.get("reason") + "), "
                        + j.get("core") + ": " + j.get("answers_why"));
            }
            assertEquals(1, new java.util.HashSet<>(seen).size(),
                    "mode " + mode + ": " + Collections.frequency(seen, seen.get(0)) + " of 20 chose "
                            + seen.get(0) + "; each choice and why: " + why);
        }
        assumeTrue(refused.isEmpty(), "the other modes decided alike; refused here: " + refused);
    }
}
