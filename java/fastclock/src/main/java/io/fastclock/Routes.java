package io.fastclock;

import java.util.Locale;

/**
 * Who answers each fine clock: fastclock's native read, or the JDK's own clock.
 *
 * <p>Promise 2 of the project: no FastClock method costs more than its JDK
 * counterpart.  Where a native read cannot win (JNI's thread-state transition,
 * the core's mode {@code system}, whose reads are the kernel's own), the JDK's
 * clock answers.  The decision is taken once, at class initialisation, from
 * costs measured in this process ({@link Jni#costs}: libc's clock_gettime,
 * which the JDK calls, the cheapest of fifteen batches; each fastclock read as
 * the median of its ratio to clock_gettime within the same batch, so a
 * neighbour's load cancels out; see {@link #fromMeasurement}) plus what the
 * binding adds per call; a decision close to its threshold is measured twice
 * more and taken from the medians ({@link #measuredAgain}).  Fastclock answers
 * only when it is predicted to cost at most {@link #MARGIN} of the JDK's
 * clock, so a measurement's jitter (a few percent) does not flip the choice
 * between fresh JVMs; in a near tie the JDK answers.  Three routes are
 * decided by construction, with no measurement at all: the JDK's clocks
 * where the core's reads are the kernel's same call (fastclock adds only
 * the binding); fastclock against Instant.now() for currentTimeNanos() there
 * (the same REALTIME call, through the binding against JNI plus an Instant:
 * cheaper by a few ns); and over FFM, fastclock's nanoTime() where the
 * core's line answers ordered reads (see the five-argument decide).
 *
 * <p>The JDK's costs: {@code System.nanoTime()} and
 * {@code System.currentTimeMillis()} are leaf calls into clock_gettime
 * (MONOTONIC, REALTIME); {@code Instant.now()} goes through
 * {@code VM.getNanoTimeAdjustment}, a native method with a thread-state
 * transition, so it adds about one JNI call, plus building the Instant
 * (JMH on this project's machine, same runs: Instant.now() as epoch ns cost
 * 6.9-9.5 ns more than System.currentTimeMillis(), JDK 17 and 25).
 *
 * <p>Where the JDK answers currentTimeNanos() it is Instant.now(), with
 * Instant.now()'s cost and its allocation where escape analysis does not
 * remove it.
 */
final class Routes {
    /** A plain JNI call from HotSpot on x86-64: JMH's no-op, 6.5-6.9 ns on the project's machine. */
    static final double JNI_CALL_NS = 6.0;
    /**
     * What JNI adds to a read that ends in a bare counter read (the unordered
     * flavours): more than to a fenced read or a kernel call, which overlap part
     * of the transition.  JMH, JDK 17, Intel Xeon guest, same run, beyond the C
     * read: ordered MONOTONIC +5.1 ns, the vDSO's REALTIME +6.0, unordered
     * MONOTONIC +8.8, unordered REALTIME +8.7.  At 6 ns nanoTimeUnordered() was
     * predicted at 0.92x System.nanoTime() and measured at 1.08x.
     */
    static final double JNI_BARE_READ_NS = 9.0;
    /**
     * A critical FFM downcall adds nothing over the C call the measurement already
     * includes (JMH, JDK 25: FastClock.nanoTime() 17.8 ns where C measured 16.9-18).
     */
    static final double FFM_CALL_NS = 0.0;
    /** Instant.now() beyond its native call: building the Instant (JMH: 6.9-9.5 ns above currentTimeMillis in all). */
    static final double INSTANT_NS = 3.0;
    /** Fastclock answers when it costs at most this fraction of the JDK's clock. */
    static final double MARGIN = 0.95;

    /**
     * The core's unordered read, in C, on the machine where the binding's costs
     * above were measured (an Intel Xeon guest: 9.0 ns).  A JNI transition is CPU
     * work, as that read is (a bare counter read and a multiply: no clocksource in
     * it), so on a slower CPU both cost more: on an Intel Xeon guest (model 0xcf)
     * whose unordered read cost 16-21 ns, JMH's JNI no-op cost 12.7 ns against
     * 6.5-6.9.  Taken as fixed there, the transition's share of a prediction
     * moved with the machine's speed, and a near decision (nanoTimeUnordered on
     * JDK 17: 16.0 + 9 against 0.95 x 25.7, then 21.2 + 9 against 0.95 x 35.4)
     * flipped in 3 of 20 fresh JVMs beside a CPU hog.
     */
    static final double REFERENCE_BARE_READ_NS = 9.0;

    /**
     * How much slower this CPU runs than the one the binding's costs were measured
     * on, from the core's measured unordered read; never below 1 (a faster CPU
     * keeps the measured costs: the JDK answers the closer calls).  A fair proxy
     * only where that read is the global line's bare counter read (mode tsc; not a
     * per-CPU lookup, not the kernel's clock): {@link #decide} asks it only there,
     * and only through JNI (a critical FFM downcall adds nothing to scale).
     */
    static double cpuScale(double[] c) {
        double u = c[MONO_UNORDERED];
        return u > REFERENCE_BARE_READ_NS ? u / REFERENCE_BARE_READ_NS : 1.0;
    }

    /**
     * The six costs {@link #decide} takes, from Jni.costs' figures: the kernel's
     * cheapest batch, and each fastclock read as its paired median ratio times that.
     * (Two separate minima moved apart by 15% under load on the project's machine,
     * flipping a near decision between JVMs; the paired ratio did not.)
     */
    static double[] fromMeasurement(double[] m) {
        double[] c = new double[6];
        c[KERNEL_MONO] = m[KERNEL_MONO];
        c[KERNEL_REAL] = m[KERNEL_REAL];
        c[MONO] = m[6] * m[KERNEL_MONO];
        c[MONO_UNORDERED] = m[7] * m[KERNEL_MONO];
        c[REAL] = m[8] * m[KERNEL_REAL];
        c[REAL_UNORDERED] = m[9] * m[KERNEL_REAL];
        return c;
    }

    /** Indexes into the costs array (the order of Jni.costs). */
    static final int MONO = 0, MONO_UNORDERED = 1, REAL = 2, REAL_UNORDERED = 3, KERNEL_MONO = 4, KERNEL_REAL = 5;

    final boolean nanoTime, nanoTimeUnordered, currentTimeNanos, currentTimeNanosUnordered, currentTimeMillis;
    /** The decision in words, without figures: identical across JVMs that decide alike. */
    final String answers;
    /** The figures it came from. */
    final String costs;
    /** A measured comparison lay within CLOSE of its threshold: measure again ({@link #measuredAgain}). */
    final boolean close;

    private Routes(boolean nanoTime, boolean nanoTimeUnordered, boolean currentTimeNanos,
            boolean currentTimeNanosUnordered, boolean currentTimeMillis, String answers, String costs,
            boolean close) {
        this.nanoTime = nanoTime;
        this.nanoTimeUnordered = nanoTimeUnordered;
        this.currentTimeNanos = currentTimeNanos;
        this.currentTimeNanosUnordered = currentTimeNanosUnordered;
        this.currentTimeMillis = currentTimeMillis;
        this.answers = answers;
        this.costs = costs;
        this.close = close;
    }

    /** The same decision with a note appended to its figures. */
    Routes noted(String note) {
        return new Routes(nanoTime, nanoTimeUnordered, currentTimeNanos, currentTimeNanosUnordered,
                currentTimeMillis, answers, costs + "; " + note, close);
    }

    /** No library: every clock from the JDK (UTC nanoseconds from JavaClock, cheaper than Instant.now()). */
    static Routes java(String why) {
        return new Routes(false, false, false, false, false,
                "nanoTime=System.nanoTime() nanoTimeUnordered=System.nanoTime() "
                        + "currentTimeNanos=System.nanoTime()+offset currentTimeNanosUnordered=System.nanoTime()+offset "
                        + "currentTimeMillis=System.currentTimeMillis()",
                why, false);
    }

    /**
     * Every fine clock from the JDK although the library answers: the core's state
     * moved under each of SETTLE_TRIES measurements (see {@link #onSettledState}).
     */
    static Routes jdkOnly(String why) {
        return new Routes(false, false, false, false, false, words(false, false, false, false, false), why, false);
    }

    /**
     * Decisions taken, at most, while the core's state moves under their
     * measurement, before the JDK answers everything.  The state moves at most a
     * few times in a process's life (the first line; a warp found, which makes
     * tsc-percpu; the kernel's clock chosen where the counter costs more), so a
     * third decision that still sees it move means something keeps changing it.
     */
    static final int SETTLE_TRIES = 3;

    /**
     * The decision decideOn takes (measuring the costs) on the core's state,
     * kept only where the state read after it (now) is the one it was taken on:
     * the start-up warp check may find a warp, or the first line come, while the
     * costs are measured, and then figures measured on one state would decide
     * routes for another (a kernel's read timed as the line's, say).  Where the
     * state moved, the decision is taken again on the new one; where it still
     * moves after SETTLE_TRIES decisions the JDK answers every clock, which can
     * never cost more than the JDK.
     */
    static Routes onSettledState(CoreState first, java.util.function.Supplier<CoreState> now,
            java.util.function.Function<CoreState, Routes> decideOn) {
        CoreState state = first;
        for (int attempt = 1;; attempt++) {
            Routes r = decideOn.apply(state);
            CoreState after = now.get();
            if (after.equals(state))
                return attempt == 1 ? r
                        : r.noted("decided again: the core's state moved under " + (attempt - 1) + " measurement"
                                + (attempt == 2 ? "" : "s"));
            if (attempt == SETTLE_TRIES)
                return jdkOnly("the JDK's clocks: the core's state moved under each of " + SETTLE_TRIES
                        + " measurements (last " + state + ", then " + after + ")");
            state = after;
        }
    }

    /** Every fine clock from fastclock (-Dfastclock.preferJdkClocks=false). */
    static Routes allNative(String binding, double[] c) {
        return new Routes(true, true, true, true, true, words(true, true, true, true, true),
                describe(binding, c, cpuScale(c)) + "; -Dfastclock.preferJdkClocks=false: fastclock answers everything", false);
    }

    static double callNs(String binding) {
        return "ffm".equals(binding) ? FFM_CALL_NS : JNI_CALL_NS;
    }

    /** The binding's cost before a bare counter read (see JNI_BARE_READ_NS). */
    static double bareCallNs(String binding) {
        return "ffm".equals(binding) ? FFM_CALL_NS : JNI_BARE_READ_NS;
    }

    /** Whether fastclock, costing fc ns in C plus the call, beats a JDK clock costing jdk ns. */
    static boolean wins(double fc, double call, double jdk) {
        return fc > 0 && jdk > 0 && fc + call <= MARGIN * jdk;
    }

    /**
     * A decision this close to its threshold (fastclock's predicted cost within
     * this factor of MARGIN times the JDK's, either way) is measured again
     * before it is taken: see {@link #measuredAgain}.
     */
    static final double CLOSE = 1.25;

    /**
     * Takes the comparisons of two measured figures in one decision and remembers
     * whether any was close.
     */
    private static final class Judge {
        boolean close;

        boolean wins(double fc, double call, double jdk) {
            if (fc > 0 && jdk > 0) {
                double r = (fc + call) / (MARGIN * jdk);
                close |= r >= 1 / CLOSE && r <= CLOSE;
            }
            return Routes.wins(fc, call, jdk);
        }
    }

    /**
     * Figure by figure, the median of three of Jni.costs' measurements.  One
     * measurement takes about half a millisecond; a neighbour's burst over it
     * (another JVM's start-up, its JIT threads) can move a paired ratio by 20%:
     * once in some 300 fresh JVMs on the project's Intel guest, JDK 17, it
     * turned currentTimeNanosUnordered over to Instant.now() (predicted at 0.85
     * of its threshold).  So a decision that lands within CLOSE of its threshold
     * ({@link #close}) is taken from the median of three, which one such
     * burst cannot move.
     */
    static double[] measuredAgain(double[] first, java.util.function.Consumer<double[]> measure) {
        double[] a = first, b = new double[first.length], c = new double[first.length];
        measure.accept(b);
        measure.accept(c);
        double[] m = new double[first.length];
        for (int i = 0; i < m.length; i++)
            m[i] = Math.max(Math.min(a[i], b[i]), Math.min(Math.max(a[i], b[i]), c[i]));
        return m;
    }

    /**
     * Where the line answers, its unordered read is the bare counter read plus a
     * load and a multiply: 1.0-1.1x that read, measured side by side (Jni.costs'
     * out[10]; AMD EPYC 1Ah guest).  A measurement above this was not taken on
     * the reads' steady path, and is set aside: once in a CI run (JDK 17, AMD EPYC
     * 1Ah guest) one fresh JVM measured every fastclock read at twice its usual
     * ratio to clock_gettime, in all three measurements 0.5 ms apart, while the
     * kernel's figures stayed as ever, and its JDK answered nanoTimeUnordered
     * where the other 19 JVMs' fastclock did.  A slow machine slows the control
     * alike, so this is no threshold on the machine's speed.
     */
    static final double OFF_STEADY = 1.5;
    /**
     * ... and by this many ns at least: where the counter read is itself cheap
     * (an arm64 CNTVCT read of a few ns), a load and a multiply more may be 1.5x
     * it on the steady path.
     */
    static final double OFF_STEADY_NS = 4.0;
    /** Measurements set aside at most, with a pause before each next one (1 ms, doubling: 31 ms in all). */
    static final int STEADY_TRIES = 5;

    /** A measurement of the line's reads taken off their steady path (see OFF_STEADY). */
    static boolean offSteady(double[] m) {
        // Both from the paired ratio (the decision's figures are paired medians
        // too): two separate minima could take one clean batch each.
        return m.length > 11 && m[10] > OFF_STEADY && m[11] * (m[10] - 1) > OFF_STEADY_NS;
    }

    /**
     * A measurement of Jni.costs' figures, taken again after a pause while it is
     * off the line's steady path ({@link #offSteady}) and lineAnswers (the line
     * answers the core's fine reads: elsewhere the unordered read is not the
     * counter's, and the control says nothing), at most STEADY_TRIES times;
     * setAside[0] counts the measurements set aside.  The last stands: reads
     * that stay that slow are the reads this JVM gets, and the JDK answers them.
     */
    static double[] measuredSteady(java.util.function.Consumer<double[]> measure, boolean lineAnswers,
            java.util.function.LongConsumer pauseNs, int[] setAside) {
        double[] m = new double[Jni.COST_FIGURES];
        measure.accept(m);
        long pause = 1_000_000L;
        while (lineAnswers && offSteady(m) && setAside[0] < STEADY_TRIES) {
            setAside[0]++;
            pauseNs.accept(pause);
            pause *= 2;
            m = new double[Jni.COST_FIGURES];
            measure.accept(m);
        }
        return m;
    }

    /** The control's figure in words, and the measurements set aside for it. */
    static String steadyNote(double[] m, int setAside) {
        String s = String.format(Locale.ROOT, "the line's unordered read %.2fx the bare counter read", m[10]);
        if (setAside > 0)
            s += String.format(Locale.ROOT,
                    " (%d measurement%s off the reads' steady path, above %.1fx and %.0f ns more, set aside%s)",
                    setAside, setAside == 1 ? "" : "s", OFF_STEADY, OFF_STEADY_NS,
                    offSteady(m) ? "; still off it after " + STEADY_TRIES + " tries: decided on it" : "");
        return s;
    }

    /**
     * The decision for this binding ("jni" or "ffm") from the measured costs
     * (see the index constants).  Unmeasured (0 or negative) costs mean the JDK answers.
     */
    static Routes decide(String binding, double[] c) {
        return decide(binding, c, false, false);
    }

    /**
     * As above, knowing where the core's reads are the kernel's own
     * (monoIsKernel: mode system, the kernel's clock answering the fine reads
     * -- CoreState.kernelAnswersFineReads -- or tsc-percpu's lines where the
     * kernel's vDSO reads the same counter with less work --
     * CoreState.perCpuLinesOverTheKernelsCounter; realIsKernel: mode system, or the core's
     * status says real_source=vdso): those cannot beat the JDK's call of the
     * same clock, so the JDK's System.nanoTime()/currentTimeMillis() answer
     * without a measurement that a near tie could flip between JVMs (it did:
     * 1 of 20 fresh JVMs, mode system, JDK 25).  Against Instant.now(), which
     * builds an Instant on top of the same kernel call, such a read wins by
     * construction where the binding costs less than Instant.now()'s JNI call
     * and Instant together: constants decide, neither the measured ratio (its
     * jitter under load flipped currentTimeNanos in 3 of 20 fresh JVMs, mode
     * system, JDK 17) nor the kernel's cost (on both sides: weighed with
     * MARGIN it made a threshold that a syscall clocksource straddles).
     */
    static Routes decide(String binding, double[] c, boolean monoIsKernel, boolean realIsKernel) {
        return decide(binding, c, monoIsKernel, realIsKernel, false);
    }

    /**
     * As above, knowing also where the core's ordered MONOTONIC read is its line
     * (monoIsLine: mode tsc, ordered reads not routed to the kernel).  That read
     * is the fenced counter read the kernel's clock_gettime makes too (the
     * cheaper of the two fences, chosen by the core), a seqlock and a multiply,
     * without the vDSO's clock-mode check and timespec split that
     * System.nanoTime() then undoes; where the kernel's clocksource is not the
     * counter its call costs more still.  Through a binding that adds nothing
     * per call (a critical FFM downcall) it therefore cannot cost more than
     * System.nanoTime(), and no measurement decides it: a paired ratio of 0.92
     * against MARGIN 0.95 (an Intel Xeon guest) flipped nanoTime in 1 of 20
     * fresh JDK 25 JVMs under a CPU hog.  Through JNI the transition's cost is
     * measured against the kernel's, as before.
     */
    static Routes decide(String binding, double[] c, boolean monoIsKernel, boolean realIsKernel,
            boolean monoIsLine) {
        return decide(binding, c, monoIsKernel, realIsKernel, monoIsLine, false);
    }

    /**
     * As above, knowing also where the line answers the core's ordered REALTIME
     * because the core timed it cheaper than the kernel's REALTIME (realIsTimedLine:
     * status real_line_ratio > 0 with real_source "line"; mode tsc on a kernel whose
     * clocksource is the counter).  Over FFM currentTimeMillis() is then that read
     * divided, against the kernel's same REALTIME call divided: the core's timing,
     * with its own margin, has decided it.  Elsewhere (another clocksource, where
     * nothing was timed) the ratio is measured, as before.
     */
    static Routes decide(String binding, double[] c, boolean monoIsKernel, boolean realIsKernel,
            boolean monoIsLine, boolean realIsTimedLine) {
        // (The tests' shorthand: the kernel's MONOTONIC taken for every read of it, as in
        // mode system. FastClock decides from the core's state: decide(binding, c, CoreState).)
        return decide(binding, c, monoIsKernel, realIsKernel, monoIsLine, realIsTimedLine, monoIsKernel);
    }

    /** As above, from the core's state. */
    static Routes decide(String binding, double[] c, CoreState s) {
        return decide(binding, c, s.monoIsKernel, s.realIsKernel, s.monoIsLine, s.realIsTimedLine,
                s.unorderedIsKernel);
    }

    /**
     * As above, knowing also where the core's unordered wall reads are the
     * kernel's own (unorderedIsKernel, CoreState): only there is
     * currentTimeNanosUnordered() the kernel's call against Instant.now()'s,
     * decided by construction.  Where the kernel answers mode tsc's ordered reads
     * alone, the unordered wall read is the line's, and measured like any other.
     */
    static Routes decide(String binding, double[] c, boolean monoIsKernel, boolean realIsKernel,
            boolean monoIsLine, boolean realIsTimedLine, boolean unorderedIsKernel) {
        double scale = "jni".equals(binding) && monoIsLine ? cpuScale(c) : 1.0;
        double call = callNs(binding) * scale, bare = bareCallNs(binding) * scale;
        double instantNow = c[KERNEL_REAL] > 0 ? c[KERNEL_REAL] + (JNI_CALL_NS + INSTANT_NS) * scale : 0;
        boolean byConstruction = monoIsLine && call == 0 && c[MONO] > 0 && c[KERNEL_MONO] > 0;
        Judge j = new Judge();
        boolean nano = !monoIsKernel && (byConstruction || j.wins(c[MONO], call, c[KERNEL_MONO]));
        boolean nanoU = !monoIsKernel && j.wins(c[MONO_UNORDERED], bare, c[KERNEL_MONO]);
        // Where the core's reads are the kernel's: the kernel's call against Instant.now(), which makes the same call through
        // JNI and builds an Instant: the binding's cost against those two, constants
        // alone.  The kernel's cost is on both sides; weighed with MARGIN it made a
        // threshold on it (171 ns over FFM, 51 over JNI) that a syscall clocksource
        // (hpet, acpi_pm: 150-850 ns) would straddle from one fresh JVM to the next.
        boolean sameKernelCall = c[KERNEL_REAL] > 0 && call < (JNI_CALL_NS + INSTANT_NS) * scale;
        boolean real = realIsKernel ? sameKernelCall : j.wins(c[REAL], call, instantNow);
        boolean realU = unorderedIsKernel ? sameKernelCall : j.wins(c[REAL_UNORDERED], bare, instantNow);
        // The line answering ordered REALTIME because the core timed it cheaper than the
        // kernel's (4% or more, twice): over a binding that adds nothing, a second,
        // jittery measurement here would only add noise -- the ratio, 0.91 against
        // MARGIN 0.95 (AMD EPYC 1Ah guest, JDK 25), flipped currentTimeMillis in 1 of
        // 124 JMH forks.  Only where fastclock answers currentTimeNanos() too, so that a
        // Clock's millis() and instant() read one clock.
        boolean millisByConstruction = realIsTimedLine && !realIsKernel && call == 0 && real && c[REAL] > 0
                && c[KERNEL_REAL] > 0;
        boolean millis = !realIsKernel && (millisByConstruction || j.wins(c[REAL], call, c[KERNEL_REAL]));
        return new Routes(nano, nanoU, real, realU, millis, words(nano, nanoU, real, realU, millis),
                describe(binding, c, scale) + (byConstruction && !monoIsKernel
                        ? "; nanoTime: the core's line through " + binding + ", no dearer than clock_gettime by construction"
                        : "") + (millisByConstruction
                        ? "; currentTimeMillis: the core's line, timed cheaper than the kernel's REALTIME by the core"
                        : ""), j.close);
    }

    private static String words(boolean nano, boolean nanoU, boolean real, boolean realU, boolean millis) {
        return "nanoTime=" + (nano ? "fastclock" : "System.nanoTime()")
                + " nanoTimeUnordered=" + (nanoU ? "fastclock" : "System.nanoTime()")
                + " currentTimeNanos=" + (real ? "fastclock" : "Instant.now()")
                // Not routed itself, it is currentTimeNanos() (FastClock), whoever answers that.
                + " currentTimeNanosUnordered=" + (realU ? "fastclock" : real ? "fastclock(ordered)" : "Instant.now()")
                + " currentTimeMillis=" + (millis ? "fastclock" : "System.currentTimeMillis()");
    }

    private static String describe(String binding, double[] c, double scale) {
        return String.format(Locale.ROOT,
                "measured in C, ns/call (fastclock's as its paired ratio to clock_gettime): fastclock mono %.1f, mono unordered %.1f, real %.1f, real unordered %.1f; "
                        + "clock_gettime MONOTONIC %.1f, REALTIME %.1f; plus %.1f ns per %s call (%.1f before a bare counter read); "
                        + "fastclock answers where it costs <= %.2fx the JDK's clock",
                c[MONO], c[MONO_UNORDERED], c[REAL], c[REAL_UNORDERED], c[KERNEL_MONO], c[KERNEL_REAL],
                callNs(binding) * scale, binding, bareCallNs(binding) * scale, MARGIN);
    }
}
