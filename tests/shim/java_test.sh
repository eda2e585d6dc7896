#!/bin/sh
# The JVM under the shim.
#   compile          javac ShimClocks.java (the fixture of the others)
#   agree            System.nanoTime(), Instant.now(), currentTimeMillis() under
#                    `fastclock run` agree with the kernel within 1 ms (ping-pong)
#   monotonic        System.nanoTime() is monotonic across threads under the shim
#   interposed       libjvm binds clock_gettime to the shim, and the JVM's clock
#                    calls reach it: a counting library in front of the shim
#                    sees them all, one behind it none (the shim served them)
#   interposed.jdk25 the same with JDK 25 (Temurin), whose libjvm asks for the
#                    old clock_gettime@GLIBC_2.2.5 (skipped if it is not installed)
# usage: java_test.sh CLASSDIR SOURCE FASTCLOCK SHIM SPY SHIM_AGREE SHIM_CHECK TEST
set -u
classes=$1 source=$2 fc=$3 shim=$4 spy=$5 agree=$6 check=$7 test=$8
fail=0
ok() { echo "  ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
unset LD_PRELOAD FASTCLOCK_MODE FASTCLOCK_CALIBRATOR FASTCLOCK_UNORDERED FASTCLOCK_PRELOAD JAVA_TOOL_OPTIONS

java=${JAVA:-java}
if [ "$test" = interposed.jdk25 ]; then
    java=""
    # JAVA25_HOME as mk/java.mk takes it, else Debian's or Temurin's packages (any architecture).
    for j in ${JAVA25_HOME:+"$JAVA25_HOME/bin/java"} /usr/lib/jvm/temurin-25-jdk-*/bin/java /usr/lib/jvm/java-25-openjdk-*/bin/java; do
        [ -x "$j" ] && { java=$j; break; }
    done
    if [ -z "$java" ]; then
        echo "SKIP: no JDK 25 installed (JAVA25_HOME unset; looked in /usr/lib/jvm)"
        exit 77
    fi
    test=interposed
fi
if ! command -v "$java" >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
    echo "FAIL: Java (JDK 17) is required: run scripts/ensure-deps.sh java"
    exit 1
fi
run_java() { "$java" -Xshare:auto -XX:TieredStopAtLevel=1 -cp "$classes" ShimClocks "$@"; }

case "$test" in
compile)
    mkdir -p "$classes" && javac -d "$classes" "$source" && ok "compiled $(basename "$source")" || bad "javac failed"
    ;;
agree)
    "$agree" serve 100 -- "$fc" run -- "$java" -cp "$classes" ShimClocks serve ||
        bad "the JVM's clocks under fastclock run disagree with the kernel"
    ;;
monotonic)
    "$fc" run -- "$java" -cp "$classes" ShimClocks monotonic 2 2 || bad "System.nanoTime() went back across threads"
    ;;
interposed)
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    "$java" -version 2>&1 | head -n 1
    LD_DEBUG=bindings LD_DEBUG_OUTPUT="$tmp/ld" LD_PRELOAD="$shim" run_java loop 1 >/dev/null
    binding=$(cat "$tmp"/ld.* | grep -E "binding file [^ ]*libjvm\.so \[0\] to [^ ]*libfastclock-preload\.so \[0\]: normal symbol \`clock_gettime'" | head -n 1)
    [ -n "$binding" ] && ok "libjvm binds clock_gettime to the shim:${binding#*:}" ||
        bad "libjvm does not bind clock_gettime to the shim: $(cat "$tmp"/ld.* | grep "libjvm.*\`clock_gettime'")"
    n=200000
    field() { sed -n "s/.*\\b$1=\\([0-9]*\\).*/\\1/p" "$2"; }
    # A counting library in front of the shim sees every call the JVM makes
    # and hands it on to the shim: at least n of each, the loop's own calls.
    SHIM_SPY_OUT="$tmp/front" LD_PRELOAD="$spy $shim" run_java loop $n >/dev/null
    mono=$(field mono "$tmp/front") real=$(field real "$tmp/front")
    echo "  in front of the shim: $mono CLOCK_MONOTONIC and $real CLOCK_REALTIME calls"
    [ "${mono:-0}" -ge $n ] && [ "${real:-0}" -ge $((2 * n)) ] &&
        ok "every nanoTime(), currentTimeMillis() and Instant.now() of the loop went through the interposed symbol" ||
        bad "the JVM's clock calls did not go through the interposed symbol (mono=$mono real=$real, want >= $n, $((2 * n)))"
    # Mode tsc, forced: the shim answers them all itself (tsc-percpu, where
    # the warp check moves it there, answers them itself too).
    if status=$(FASTCLOCK_MODE=tsc LD_PRELOAD="$shim" "$check" status) && ! echo "$status" | grep -Eq "mode=tsc(-percpu)? "; then
        echo "SKIP: the counter cannot be trusted here, even when asked: $status"
        exit 77
    fi
    SHIM_SPY_OUT="$tmp/tsc" FASTCLOCK_MODE=tsc LD_PRELOAD="$shim $spy" run_java loop $n >/dev/null
    mono=$(field mono "$tmp/tsc") real=$(field real "$tmp/tsc") coarse=$(field real_coarse "$tmp/tsc")
    echo "  mode tsc: $mono CLOCK_MONOTONIC, $real CLOCK_REALTIME, $coarse CLOCK_REALTIME_COARSE calls reached libc"
    [ "$mono" = 0 ] && [ "$real" = 0 ] && ok "the shim served every JVM clock read itself" ||
        bad "JVM clock reads reached libc in mode tsc (mono=$mono real=$real)"
    ;;
*)
    echo "unknown test $test"
    exit 2
    ;;
esac
exit $fail
