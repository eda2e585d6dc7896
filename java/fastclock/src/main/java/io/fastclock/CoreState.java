package io.fastclock;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * What the core's status says about who answers its reads, in the terms the
 * routes are decided on ({@link Routes#decide}).  Two states with the same facts
 * lead to the same decision from the same costs; a decision is kept only where
 * the facts read after its measurement match those it was taken on
 * ({@link Routes#onSettledState}).
 *
 * <p>A class, not a record: a record's equals, hashCode and toString link
 * through invokedynamic's ObjectMethods bootstrap, which kept a redeployed
 * class loader from being collected (RedeployTest failed 3 of 4 with it).
 */
final class CoreState {
    /** The core's reads are the kernel's own: mode system, the kernel's clock answering fine reads, or per-CPU lines over the kernel's counter. */
    final boolean monoIsKernel;
    /** The core's REALTIME is the kernel's (the above, or status real_source=vdso). */
    final boolean realIsKernel;
    /** ... and stays so: not just until the first line (a start-up that gave up waiting). */
    final boolean realIsKernelForGood;
    /** Mode tsc with the line answering ordered reads (the counter is an instruction, not "clock_gettime (...)"). */
    final boolean monoIsLine;
    /** The line answers the ordered REALTIME because the core timed it cheaper than the kernel's. */
    final boolean realIsTimedLine;
    /**
     * The core's unordered wall reads are the kernel's too: mode system, the
     * kernel's clock answering every fine read, or tsc-percpu whose wall clocks
     * the kernel answers (real_source "vdso": the core routes the unordered wall
     * reads there with the ordered ones, wall.c fc_wall_enter_percpu) -- not mode
     * tsc with the kernel answering the ordered reads alone (counter
     * "clock_gettime (ordered), ... (unordered)"), where they are the line's.
     */
    final boolean unorderedIsKernel;
    /** tsc-percpu's own lines where the kernel's clocksource is the counter (see below). */
    final boolean perCpuOverVdso;

    CoreState(Map<String, String> st) {
        String mode = st.get("mode"), counter = st.get("counter");
        perCpuOverVdso = perCpuLinesOverTheKernelsCounter(st);
        monoIsKernel = "system".equals(mode) || kernelAnswersFineReads(st) || perCpuOverVdso;
        realIsKernel = monoIsKernel || "vdso".equals(st.get("real_source"));
        realIsKernelForGood = monoIsKernel || (realIsKernel && number(st.get("calibrations")) > 0);
        unorderedIsKernel = "system".equals(mode)
                || (kernelAnswersFineReads(st) && !counter.endsWith("(unordered)"))
                || ("tsc-percpu".equals(mode) && "vdso".equals(st.get("real_source")));
        monoIsLine = "tsc".equals(mode) && counter != null && !counter.startsWith("clock_gettime");
        realIsTimedLine = monoIsLine && !realIsKernel && number(st.get("real_line_ratio")) > 0;
    }

    static CoreState of(String statusText) {
        return new CoreState(parse(statusText));
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof CoreState))
            return false;
        CoreState s = (CoreState) o;
        return monoIsKernel == s.monoIsKernel && realIsKernel == s.realIsKernel
                && realIsKernelForGood == s.realIsKernelForGood && monoIsLine == s.monoIsLine
                && realIsTimedLine == s.realIsTimedLine && unorderedIsKernel == s.unorderedIsKernel
                && perCpuOverVdso == s.perCpuOverVdso;
    }

    @Override
    public int hashCode() {
        return (monoIsKernel ? 1 : 0) | (realIsKernel ? 2 : 0) | (realIsKernelForGood ? 4 : 0)
                | (monoIsLine ? 8 : 0) | (realIsTimedLine ? 16 : 0) | (perCpuOverVdso ? 32 : 0)
                | (unorderedIsKernel ? 64 : 0);
    }

    @Override
    public String toString() {
        return "monoIsKernel=" + monoIsKernel + " realIsKernel=" + realIsKernel + " realIsKernelForGood="
                + realIsKernelForGood + " monoIsLine=" + monoIsLine + " realIsTimedLine=" + realIsTimedLine
                + " unorderedIsKernel=" + unorderedIsKernel + " perCpuOverVdso=" + perCpuOverVdso;
    }

    /**
     * The counter is trusted but the kernel's clock answers fine reads (status
     * counter "clock_gettime (...)"): tsc-percpu routed to it, or the core's
     * counter-cost routes in either mode (ordered reads, or all of them, where
     * the counter costs more than twice the kernel's clock).  The JDK's call of
     * that clock then answers, without a measurement a near tie could flip --
     * for the unordered reads too (under the ordered route alone they are still
     * the line's: a speed-up given up there for one stable rule).
     */
    static boolean kernelAnswersFineReads(Map<String, String> st) {
        String mode = st.get("mode"), counter = st.get("counter");
        return ("tsc-percpu".equals(mode) || "tsc".equals(mode)) && counter != null
                && counter.startsWith("clock_gettime") && !counter.equals("clock_gettime (first line pending)");
    }

    /**
     * tsc-percpu on its own lines (FASTCLOCK_MODE=percpu asks for them) where the
     * kernel's clocksource is the counter (status real_source "vdso" with the
     * lines answering: the core routes its wall reads to the vDSO from that
     * fact; mode.c choose_percpu_kernel).  The vDSO's MONOTONIC read there is a
     * subset of a per-CPU read's work -- the counter, a seqlock, a multiply,
     * without naming the CPU, finding its slot and clamping per thread -- so
     * the JDK's clocks answer, as where the kernel's clock answers outright: a
     * measured ratio of 1.10-1.17 came out at 0.94 in 1 of 20 fresh JDK 25
     * JVMs, which made fastclock answer nanoTime() there.
     */
    static boolean perCpuLinesOverTheKernelsCounter(Map<String, String> st) {
        String counter = st.get("counter");
        return "tsc-percpu".equals(st.get("mode")) && "vdso".equals(st.get("real_source")) && counter != null
                && !counter.startsWith("clock_gettime");
    }

    /** The status text (key=value lines) as a map, in its order. */
    static Map<String, String> parse(String text) {
        Map<String, String> m = new LinkedHashMap<>();
        for (String line : text.split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0)
                m.put(line.substring(0, eq), line.substring(eq + 1));
        }
        return m;
    }

    /** A status figure, 0 where absent or unreadable. */
    static double number(String s) {
        try {
            return s == null ? 0 : Double.parseDouble(s.trim());
        } catch (NumberFormatException e) {
            return 0;
        }
    }
}
