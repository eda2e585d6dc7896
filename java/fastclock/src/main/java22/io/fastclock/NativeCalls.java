package io.fastclock;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The hot native reads, Java 22+ edition: FFM downcalls straight to the core's
 * exported functions, marked critical (no thread-state transition: they are
 * short, lock-free and never call back into Java).  Held in static finals and
 * called with invokeExact so the JIT links them like a direct call.
 *
 * Falls back to JNI (same library) when linking fails or with
 * -Dfastclock.ffm=false; the benchmarks compare both.
 */
final class NativeCalls {
    private NativeCalls() {}

    private static final MethodHandle MONO, MONO_U, REAL, REAL_U, MONO_C, REAL_C, NOOP;
    private static final String FFM_UNAVAILABLE;

    static {
        String[] names = {
            "fastclock_mono_ns", "fastclock_mono_ns_unordered", "fastclock_real_ns",
            "fastclock_real_ns_unordered", "fastclock_mono_coarse_ns", "fastclock_real_coarse_ns",
            "fastclock_java_noop",
        };
        MethodHandle[] h = new MethodHandle[names.length];
        String why = null;
        if (!Props.flag("fastclock.ffm", true)) {
            why = "FFM disabled by -Dfastclock.ffm=false";
        } else {
            try {
                Linker linker = Linker.nativeLinker();
                // The library was loaded with System.load by this class loader.
                SymbolLookup lookup = SymbolLookup.loaderLookup();
                FunctionDescriptor longOfVoid = FunctionDescriptor.of(ValueLayout.JAVA_LONG);
                Linker.Option critical = Linker.Option.critical(false);
                for (int i = 0; i < names.length; i++) {
                    String name = names[i];
                    MemorySegment sym = lookup.find(name)
                            .orElseThrow(() -> new UnsatisfiedLinkError("no symbol " + name));
                    h[i] = linker.downcallHandle(sym, longOfVoid, critical);
                }
            } catch (Throwable t) {
                // IllegalCallerException when native access is denied, or an old library.
                why = "FFM linking failed (" + t + "); using JNI";
                h = new MethodHandle[names.length];
            }
        }
        MONO = h[0];
        MONO_U = h[1];
        REAL = h[2];
        REAL_U = h[3];
        MONO_C = h[4];
        REAL_C = h[5];
        NOOP = h[6];
        FFM_UNAVAILABLE = why;
    }

    static String binding() {
        return MONO != null ? "ffm" : "jni";
    }

    static String ffmUnavailable() {
        return FFM_UNAVAILABLE;
    }

    // The catch blocks cannot run (the C functions do not throw); invokeExact
    // merely declares Throwable.  The null checks fold away: the fields are
    // static final.

    static long monoNs() {
        if (MONO != null) {
            try {
                return (long) MONO.invokeExact();
            } catch (Throwable t) {
                // fall through to JNI
            }
        }
        return Jni.monoNs();
    }

    static long monoNsUnordered() {
        if (MONO_U != null) {
            try {
                return (long) MONO_U.invokeExact();
            } catch (Throwable t) {
                // fall through to JNI
            }
        }
        return Jni.monoNsUnordered();
    }

    static long realNs() {
        if (REAL != null) {
            try {
                return (long) REAL.invokeExact();
            } catch (Throwable t) {
                // fall through to JNI
            }
        }
        return Jni.realNs();
    }

    static long realNsUnordered() {
        if (REAL_U != null) {
            try {
                return (long) REAL_U.invokeExact();
            } catch (Throwable t) {
                // fall through to JNI
            }
        }
        return Jni.realNsUnordered();
    }

    static long monoCoarseNs() {
        if (MONO_C != null) {
            try {
                return (long) MONO_C.invokeExact();
            } catch (Throwable t) {
                // fall through to JNI
            }
        }
        return Jni.monoCoarseNs();
    }

    static long realCoarseNs() {
        if (REAL_C != null) {
            try {
                return (long) REAL_C.invokeExact();
            } catch (Throwable t) {
                // fall through to JNI
            }
        }
        return Jni.realCoarseNs();
    }

    static long noop() {
        if (NOOP != null) {
            try {
                return (long) NOOP.invokeExact();
            } catch (Throwable t) {
                // fall through to JNI
            }
        }
        return Jni.noop();
    }
}
