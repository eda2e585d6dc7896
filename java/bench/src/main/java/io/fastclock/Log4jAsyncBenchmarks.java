package io.fastclock;

import io.fastclock.adapters.Log4jClock;
import io.fastclock.bench.ForkRoutes;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.lang.reflect.Field;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;
import org.apache.logging.log4j.core.async.AsyncLogger;
import org.apache.logging.log4j.core.async.AsyncLoggerContext;
import org.apache.logging.log4j.core.async.DefaultAsyncQueueFullPolicy;
import org.apache.logging.log4j.core.async.EventRoute;
import org.apache.logging.log4j.core.jmx.RingBufferAdmin;
import org.apache.logging.log4j.core.util.Clock;
import org.apache.logging.log4j.core.util.ClockFactory;
import org.apache.logging.log4j.util.Unbox;
import org.openjdk.jmh.annotations.AuxCounters;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.infra.BenchmarkParams;
import org.openjdk.jmh.infra.ThreadParams;

/**
 * Log4j 2 asynchronous logging end to end, events per second, with Log4j's default
 * clock ({@code SystemClock}: {@code Clock.systemUTC().instant()}) and with fastclock's
 * ({@code log4j2.clock=io.fastclock.adapters.Log4jClock}).
 *
 * <p>All loggers asynchronous ({@code AsyncLoggerContextSelector}, LMAX Disruptor 4),
 * Log4j's defaults otherwise: garbage-free mode with its 4 Ki-slot ring, the Timeout
 * wait strategy, the blocking queue-full policy (counted, see below).  The producer
 * (the benchmark thread) takes the timestamp, formats the message ({@code "event {}"}
 * with a garbage-free boxed counter) into a ring slot and publishes it; Log4j's
 * background thread formats each event with a {@code PatternLayout} whose date is at
 * nanosecond precision and writes it through a {@code RandomAccessFile} appender to
 * {@code /dev/null} (the bytes are really encoded and written, one {@code write(2)}
 * per batch, and nothing reaches a disk).  The clock is read on the producer thread
 * only.
 *
 * <p>Two measurements per clock, for 1 and 2 producer threads (this machine has 2
 * vCPUs, and the background thread needs one):
 * <ul>
 * <li>{@code burst}: the producer's own rate, the number an application thread
 * sees.  Each invocation logs {@value #BURST} events into a ring the background
 * thread has emptied first (the wait is outside the timed part), so back-pressure
 * never enters the timing: the {@code ringFull} counter (publishes that found the
 * ring full) must stay 0, and the iteration fails otherwise.
 * <li>{@code sustained}: log as fast as possible without pause, end to end.  The
 * ring fills within milliseconds; from then on a publish finds it full every few
 * hundred events and the producer parks until the background thread frees slots,
 * so the rate is the pipeline's, set by the background thread's work per event.
 * </ul>
 * Counters per iteration ({@code events}, {@code ringFull}, and the producer's and
 * the background thread's CPU time against the wall time) say which side bounds the
 * rate; BenchMain tabulates them.
 *
 * <p>Log4j reads {@code log4j2.clock} and the context selector once per JVM: every
 * (benchmark, clock) pair runs in its own fork, and the state sets the properties
 * before Log4j starts (a @Fork(jvmArgsPrepend) would be replaced by the arguments
 * BenchMain prepends).  Setup fails unless the clock the async loggers actually hold is the
 * one asked for.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
public class Log4jAsyncBenchmarks {
    /** Events per timed burst: a quarter of the ring (4 Ki slots, Log4j's default in garbage-free mode), so two producers never fill it. */
    static final int BURST = 1024;

    /** Log4j's queue-full policy (blocks the producer until a slot frees), counting per thread how often it ran. */
    public static final class CountingQueueFullPolicy extends DefaultAsyncQueueFullPolicy {
        private static final ThreadLocal<AtomicLong> COUNT = ThreadLocal.withInitial(AtomicLong::new);

        public CountingQueueFullPolicy() {}

        @Override
        public EventRoute getRoute(long backgroundThreadId, org.apache.logging.log4j.Level level) {
            COUNT.get().incrementAndGet();
            return super.getRoute(backgroundThreadId, level);
        }

        static AtomicLong forCurrentThread() {
            return COUNT.get();
        }
    }

    @State(Scope.Benchmark)
    public static class Async {
        /** Which clock Log4j uses: its default, or fastclock's adapter. */
        @Param({"default", "fastclock"})
        public String clock;

        Logger log;
        RingBufferAdmin ring;
        long ringSize;
        /** Log4j's background thread (the ring's one consumer). */
        long consumer;

        @Setup(Level.Trial)
        public void start(BenchmarkParams params) {
            System.setProperty("log4j2.contextSelector", "org.apache.logging.log4j.core.async.AsyncLoggerContextSelector");
            System.setProperty("log4j2.configurationFile", "log4j2-async-bench.xml");
            System.setProperty("log4j2.AsyncQueueFullPolicy", CountingQueueFullPolicy.class.getName());
            System.setProperty("log4j2.disableJmx", "true");
            boolean fast;
            switch (clock) {
            case "default": fast = false; System.clearProperty("log4j2.clock"); break;
            case "fastclock": fast = true; System.setProperty("log4j2.clock", Log4jClock.class.getName()); break;
            default: throw new IllegalArgumentException("clock=" + clock + ": default or fastclock");
            }
            log = LogManager.getLogger(Log4jAsyncBenchmarks.class);
            if (!(log instanceof AsyncLogger))
                throw new IllegalStateException("not an all-async logger: " + log.getClass().getName());
            ring = ((AsyncLoggerContext) LogManager.getContext(false)).createRingBufferAdmin();
            ringSize = ring.getBufferSize();
            log.info("started"); // the first event: everything on the path is initialised
            consumer = backgroundThread();
            Clock inUse = asyncLoggerClock();
            if ((inUse instanceof Log4jClock) != fast)
                throw new IllegalStateException("clock=" + clock + " but Log4j's async loggers use " + inUse);
            System.out.println("# Log4j async loggers' clock: " + inUse.getClass().getName() + " (" + inUse + "); ring "
                    + ringSize + " slots; fastclock " + FastClock.binding() + ", mode " + FastClock.mode());
            ForkRoutes.record(params); // (FastClock is loaded by the line above in either clock's fork)
        }

        /** The clock AsyncLogger took (its static CLOCK, read once): the one every event here gets its time from. */
        private static Clock asyncLoggerClock() {
            try {
                Field f = AsyncLogger.class.getDeclaredField("CLOCK");
                f.setAccessible(true);
                return (Clock) f.get(null);
            } catch (ReflectiveOperationException | RuntimeException e) {
                // Not there in another Log4j version: AsyncLogger asks ClockFactory, as this does.
                return ClockFactory.getClock();
            }
        }

        private static long backgroundThread() {
            for (Thread t : Thread.getAllStackTraces().keySet())
                if (t.getName().contains("AsyncLogger"))
                    return t.getId();
            throw new IllegalStateException("no Log4j AsyncLogger thread");
        }

        /** Before a burst: wait (untimed, parked so the background thread has the CPU) until the ring is empty. */
        void awaitEmpty() {
            while (ring.getRemainingCapacity() < ringSize)
                LockSupport.parkNanos(20_000);
        }

        @TearDown(Level.Trial)
        public void stop() {
            LogManager.shutdown();
        }
    }

    /**
     * Per producer thread: the counter logged and, per iteration, how many events, how many
     * found the ring full, and CPU time (this thread's; the background thread's and the wall
     * time from thread 0 only, so JMH's sums over threads count them once): where the time goes.
     */
    @State(Scope.Thread)
    @AuxCounters(AuxCounters.Type.EVENTS)
    public static class Producer {
        private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
        Async async;
        boolean first;
        long self;
        long n, nAtStart, fullAtStart, cpuAtStart, consumerCpuAtStart, wallAtStart;
        AtomicLong full;

        @Setup(Level.Trial)
        public void bind(Async a, ThreadParams t) {
            async = a;
            first = t.getThreadIndex() == 0;
            self = Thread.currentThread().getId();
            full = CountingQueueFullPolicy.forCurrentThread();
        }

        @Setup(Level.Iteration)
        public void mark() {
            nAtStart = n;
            fullAtStart = full.get();
            cpuAtStart = THREADS.getThreadCpuTime(self);
            consumerCpuAtStart = THREADS.getThreadCpuTime(async.consumer);
            wallAtStart = System.nanoTime();
        }

        /** Publishes by this thread that found the ring full since the iteration began. */
        long ringFullSoFar() {
            return full.get() - fullAtStart;
        }

        /** Taken here: JMH reads the counters after the last iteration's trial teardown (Log4j stopped). */
        @TearDown(Level.Iteration)
        public void take() {
            events = n - nAtStart;
            ringFull = ringFullSoFar();
            producerCpuNs = THREADS.getThreadCpuTime(self) - cpuAtStart;
            consumerCpuNs = first ? THREADS.getThreadCpuTime(async.consumer) - consumerCpuAtStart : 0;
            wallNs = first ? System.nanoTime() - wallAtStart : 0;
        }

        /** Events this thread logged in the iteration. */
        public long events;
        /** Of those, how many found the ring full (and waited for a slot). */
        public long ringFull;
        /** CPU time of this producer thread, ns. */
        public long producerCpuNs;
        /** CPU time of Log4j's background thread (formats and writes every event), ns; thread 0 only. */
        public long consumerCpuNs;
        /** Wall time over which the CPU times were taken, ns; thread 0 only. */
        public long wallNs;
    }

    /** A burst's producer: waits for an empty ring before each (timed) burst; fails if the ring ever filled. */
    @State(Scope.Thread)
    public static class Bursts {
        Async async;
        Producer producer;

        @Setup(Level.Trial)
        public void bind(Async a, Producer p) {
            async = a;
            producer = p;
        }

        @Setup(Level.Invocation)
        public void awaitEmpty() {
            async.awaitEmpty();
        }

        @TearDown(Level.Iteration)
        public void noBackPressure() {
            long full = producer.ringFullSoFar();
            if (full != 0)
                throw new IllegalStateException(full + " publishes found the ring full during bursts: "
                        + "back-pressure would be in the timing");
        }
    }

    private static void burst(Async a, Producer p) {
        Logger log = a.log;
        long n = p.n;
        for (int i = 0; i < BURST; i++)
            log.info("event {}", Unbox.box(++n));
        p.n = n;
    }

    @Benchmark
    @Threads(1)
    @OperationsPerInvocation(BURST)
    public void burst1(Async a, Bursts b) {
        burst(a, b.producer);
    }

    @Benchmark
    @Threads(2)
    @OperationsPerInvocation(BURST)
    public void burst2(Async a, Bursts b) {
        burst(a, b.producer);
    }

    @Benchmark
    @Threads(1)
    public void sustained1(Async a, Producer p) {
        a.log.info("event {}", Unbox.box(++p.n));
    }

    @Benchmark
    @Threads(2)
    public void sustained2(Async a, Producer p) {
        a.log.info("event {}", Unbox.box(++p.n));
    }
}
