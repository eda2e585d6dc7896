package io.fastclock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.Test;

/**
 * Monotonic across threads for the ordered clocks: a thread that has seen
 * another thread's reading (through an atomic or a lock) never reads a
 * smaller value afterwards.  The unordered variants promise this within a
 * thread only, so that is what they are held to.
 */
class MonotonicTest {
    static final int THREADS = 3; // more threads than the 2 cores: lots of hand-offs
    static final long RUN_NS = 1_500_000_000L;

    /** Cross-thread slack: none, except where the core itself promises only a bound. */
    static long tolerance() {
        if (!"tsc-percpu".equals(FastClock.mode()))
            return 0;
        return Long.parseLong(FastClock.nativeStatus().getOrDefault("error_bound_ns", "0"));
    }

    interface Body {
        void run(long deadline) throws Exception;
    }

    static void inThreads(Body body) throws Exception {
        long deadline = System.nanoTime() + RUN_NS;
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failures = new ArrayList<>();
        for (int i = 0; i < THREADS; i++) {
            Thread t = new Thread(() -> {
                try {
                    body.run(deadline);
                } catch (Throwable e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                }
            });
            threads.add(t);
            t.start();
        }
        for (Thread t : threads)
            t.join();
        if (!failures.isEmpty())
            throw new AssertionError(failures.get(0));
    }

    /** One reading handed from thread to thread: each read must not undercut the last one. */
    static final class Baton {
        final long value;
        final long owner;

        Baton(long value, long owner) {
            this.value = value;
            this.owner = owner;
        }
    }

    /**
     * Two threads take strict turns through an AtomicReference (release/acquire):
     * every read is ordered after the other thread's previous read.  Returns
     * {hand-offs, backward steps, worst step}.
     */
    /** Hand-offs a run must see before its time may end (a busy machine needs longer). */
    static final long MIN_HANDOFFS = 10_000;
    static final long MAX_EXTRA_NS = 8_000_000_000L;

    static long[] pingPong(LongSupplier clock, long slack) throws Exception {
        AtomicReference<Baton> baton = new AtomicReference<>(new Baton(Long.MIN_VALUE, -1));
        AtomicLong handoffs = new AtomicLong(), back = new AtomicLong(), worst = new AtomicLong();
        AtomicLong sofar = new AtomicLong();
        long start = System.nanoTime();
        long deadline = start + RUN_NS, hardDeadline = deadline + MAX_EXTRA_NS;
        // Done when the time is up and enough hand-offs happened, or at the hard deadline.
        java.util.function.LongPredicate done =
                now -> now > hardDeadline || (now > deadline && sofar.get() >= MIN_HANDOFFS);
        Thread[] threads = new Thread[2];
        List<Throwable> failures = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            final long me = i;
            threads[i] = new Thread(() -> {
                try {
                    long spins = 0, n = 0, backHere = 0, worstHere = 0;
                    while (true) {
                        Baton b = baton.get();
                        if (b.owner == me) {
                            if ((++spins & 63) == 0) {
                                if (done.test(System.nanoTime()))
                                    break;
                                Thread.yield(); // the other thread may be off-CPU (2 busy cores)
                            }
                            Thread.onSpinWait();
                            continue;
                        }
                        long t = clock.getAsLong(); // ordered after the other thread's read
                        if (t + slack < b.value) {
                            backHere++;
                            worstHere = Math.max(worstHere, b.value - t);
                        }
                        baton.set(new Baton(t, me));
                        if ((++n & 255) == 0) {
                            sofar.addAndGet(256);
                            if (done.test(System.nanoTime()))
                                break;
                        }
                    }
                    handoffs.addAndGet(n);
                    back.addAndGet(backHere);
                    worst.accumulateAndGet(worstHere, Math::max);
                } catch (Throwable e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                }
            });
            threads[i].start();
        }
        for (Thread t : threads)
            t.join();
        if (!failures.isEmpty())
            throw new AssertionError(failures.get(0));
        return new long[] {handoffs.get(), back.get(), worst.get()};
    }

    @Test
    void nanoTimeIsMonotonicAcrossThreadsTakingTurns() throws Exception {
        long[] r = pingPong(FastClock::nanoTime, tolerance());
        System.out.println("[fastclock] nanoTime, two threads taking turns: " + r[0] + " hand-offs, " + r[1]
                + " backward (worst " + r[2] + " ns)");
        assertTrue(r[0] > 5_000, "hand-offs: " + r[0]);
        assertEquals(0, r[1], "backward steps across threads, worst " + r[2] + " ns");

        // For the record, not a promise either way: the unordered read is allowed to do this.
        long[] u = pingPong(FastClock::nanoTimeUnordered, 0);
        System.out.println("[fastclock] nanoTimeUnordered, two threads taking turns: " + u[0] + " hand-offs, " + u[1]
                + " backward (worst " + u[2] + " ns)");
    }

    /** The native ordered read itself, whatever answers nanoTime() (the JDK's clock over JNI on 17). */
    @Test
    void theNativeOrderedReadIsMonotonicAcrossThreadsTakingTurns() throws Exception {
        assertTrue(FastClock.isNative(), FastClock.status());
        long[] r = pingPong(NativeCalls::monoNs, tolerance());
        System.out.println("[fastclock] native ordered read (nanoTime: " + (FastClock.routes().nanoTime ? "native" : "the JDK's")
                + "), two threads taking turns: " + r[0] + " hand-offs, " + r[1] + " backward (worst " + r[2] + " ns)");
        assertTrue(r[0] > 5_000, "hand-offs: " + r[0]);
        assertEquals(0, r[1], "backward steps across threads, worst " + r[2] + " ns");
    }

    @Test
    void coarseNanoTimeIsMonotonicAcrossThreadsTakingTurns() throws Exception {
        // Read from the memory the core publishes (an acquire load, coherent), or a native call.
        long[] r = pingPong(FastClock::coarseNanoTime, 0);
        System.out.println("[fastclock] coarseNanoTime, two threads taking turns: " + r[0] + " hand-offs, " + r[1]
                + " backward (worst " + r[2] + " ns)");
        assertTrue(r[0] > 5_000, "hand-offs: " + r[0]);
        assertEquals(0, r[1], "backward steps across threads, worst " + r[2] + " ns");
    }

    @Test
    void orderedClocksAreMonotonicAcrossThreadsUnderALock() throws Exception {
        Object lock = new Object();
        long[] last = {Long.MIN_VALUE};
        long[] owner = {-1};
        AtomicLong handoffs = new AtomicLong(), back = new AtomicLong();
        long slack = tolerance();
        inThreads(deadline -> {
            long me = Thread.currentThread().getId();
            synchronized (lock) {
                while (System.nanoTime() < deadline) {
                    if (owner[0] == me) { // strict turns: wait for another thread
                        lock.wait(1);
                        continue;
                    }
                    long t = FastClock.nanoTime();
                    if (t + slack < last[0])
                        back.incrementAndGet();
                    last[0] = t;
                    owner[0] = me;
                    handoffs.incrementAndGet();
                    lock.notifyAll();
                }
            }
        });
        System.out.println("[fastclock] nanoTime under a lock: " + handoffs + " hand-offs, " + back + " backward");
        assertTrue(handoffs.get() > 1000, "hand-offs: " + handoffs);
        assertEquals(0, back.get());
    }

    static void perThread(LongSupplier clock) throws Exception {
        AtomicLong back = new AtomicLong(), reads = new AtomicLong();
        inThreads(deadline -> {
            long prev = clock.getAsLong(), n = 0;
            long until = System.nanoTime() + RUN_NS / 3;
            while ((n & 1023) != 0 || System.nanoTime() < until) {
                long t = clock.getAsLong();
                if (t < prev)
                    back.incrementAndGet();
                prev = t;
                n++;
            }
            reads.addAndGet(n);
        });
        assertTrue(reads.get() > 100_000, "reads " + reads);
        assertEquals(0, back.get(), "backward steps within a thread");
    }

    @Test
    void everyMonotonicClockIsMonotonicWithinAThread() throws Exception {
        perThread(FastClock::nanoTime);
        perThread(FastClock::nanoTimeUnordered);
        perThread(FastClock::coarseNanoTime);
        // The native reads, whatever answers the methods above.
        assertTrue(FastClock.isNative(), FastClock.status());
        perThread(NativeCalls::monoNs);
        perThread(NativeCalls::monoNsUnordered);
    }

    /**
     * The same across threads, and the agreement with the JDK's clocks, in each mode the
     * core can be forced into (this JVM runs the one it picked): a child JVM per mode.
     * A forced mode must run, unless the core refused it (FASTCLOCK_MODE=... refused: the
     * machine lacks what it needs; for tsc also a warp check that found the CPUs apart),
     * which skips at the end, naming it.
     */
    @Test
    void theOrderedClocksHoldAcrossThreadsInEveryForcedMode() throws Exception {
        assumeTrue(FastClock.isNative(), "needs the native library (the fallback has no modes)");
        List<String> refused = new ArrayList<>();
        for (String mode : List.of("tsc", "percpu", "system")) {
            Jvm j = Jvm.probeArgs(List.of("pingpong"), Map.of("FASTCLOCK_MODE", mode));
            assertEquals(0, j.exitCode, j.toString());
            String refusal = j.refusalOf(mode);
            if (refusal != null) {
                refused.add(refusal);
                continue;
            }
            if (!j.get("mode").equals(j.get("mode_after"))) { // left meanwhile: the slack was the old mode's
                refused.add("left " + j.get("mode") + " for " + j.get("mode_after") + " during the run: "
                        + j.get("reason_after"));
                continue;
            }
            String what = "FASTCLOCK_MODE=" + mode + ": " + j;
            // As the in-process ping-pong asks (a busy machine may end it at the hard deadline).
            assertTrue(Long.parseLong(j.get("nanotime_handoffs")) > 5_000, what);
            assertEquals("0", j.get("nanotime_back"), what);
            assertTrue(Long.parseLong(j.get("real_handoffs")) > 5_000, what);
            assertEquals("0", j.get("real_back"), what);
            // Against the JDK's own reads around each: the core's bound, and room for a
            // preempted bracket on a busy machine (as LoaderProcessTest allows).
            long allowed = Long.parseLong(j.get("error_bound_ns")) + 100_000;
            assertTrue(Long.parseLong(j.get("worst_mono_ns")) <= allowed, what);
            assertTrue(Long.parseLong(j.get("worst_real_ns")) <= allowed, what);
        }
        assumeTrue(refused.isEmpty(), "the other modes held; refused or left here: " + refused);
    }
}
