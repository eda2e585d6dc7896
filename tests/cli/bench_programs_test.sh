#!/bin/sh
# The benchmarks beside the command (bench/): what they print must be true.
#
#   bench_programs_test.sh core FASTCLOCK_BENCH_CORE
#       a short run: its verdict says "slower" when fastclock_mono_ns's median
#       is above clock_gettime's, and it names the .so it measures through;
#       bad arguments exit 2.
#   bench_programs_test.sh startup FASTCLOCK_BENCH_STARTUP EMPTY_SO
#       probes that fail (exit 1, exit 127) stop the run with a message
#       instead of being timed as fast starts; a probe that reports no first
#       read is left out of that median and counted; --runs is parsed
#       strictly.
set -u
what=$1
fail=0
ok() { echo "  ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fastclock-bench-programs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

case $what in
core)
    bin=$2
    "$bin" --seconds 0.2 >"$tmp/out" 2>"$tmp/err" || bad "a 0.2 s run exited $?: $(cat "$tmp/err")"
    grep -q 'through libfastclock.so' "$tmp/out" && ok "names its linkage" || bad "no word on libfastclock.so"
    mono=$(awk '$1 == "fastclock_mono_ns" && $2 ~ /^[0-9.]+$/ { print $2 }' "$tmp/out")
    cg=$(awk '$1 == "clock_gettime(MONOTONIC)" && $2 ~ /^[0-9.]+$/ { print $2 }' "$tmp/out")
    verdict=$(grep '^fastclock_mono_ns is ' "$tmp/out")
    if [ -z "$mono" ] || [ -z "$cg" ] || [ -z "$verdict" ]; then
        bad "no fastclock_mono_ns / clock_gettime(MONOTONIC) row or verdict in: $(cat "$tmp/out")"
    else
        # The word from the printed medians; the ratio within their rounding.
        said=$(echo "$verdict" | sed -n 's/^fastclock_mono_ns is \(.*\) clock_gettime(CLOCK_MONOTONIC);.*/\1/p')
        if echo "$said" | awk -v m="$mono" -v c="$cg" '{
                if ($0 == "as fast as") exit !(c / m < 1.006 && m / c < 1.006)
                x = $1; sub(/x$/, "", x)
                if ($2 == "faster") exit !(c / m >= 1.004 && x - c / m < 0.011 && c / m - x < 0.011)
                if ($2 == "slower") exit !(m / c >= 1.004 && x - m / c < 0.011 && m / c - x < 0.011)
                exit 1 }'; then
            ok "verdict from the medians ($mono vs $cg ns): $said"
        else
            bad "medians $mono vs $cg ns, but the verdict says: $verdict"
        fi
    fi
    "$bin" --seconds 0 >/dev/null 2>&1
    [ $? -eq 2 ] && ok "--seconds 0: exit 2" || bad "--seconds 0 accepted"
    "$bin" --bogus >/dev/null 2>&1
    [ $? -eq 2 ] && ok "--bogus: exit 2" || bad "--bogus accepted"
    ;;
startup)
    bin=$2 lib=$3
    # Probes: one that reports its first read, one that reports none, one
    # that fails, one the "loader" cannot start (127).
    printf '#!/bin/sh\n[ "${1:-}" = report ] && echo 1234\nexit 0\n' >"$tmp/good"
    printf '#!/bin/sh\nexit 0\n' >"$tmp/silent"
    printf '#!/bin/sh\nexit 1\n' >"$tmp/fails"
    printf '#!/bin/sh\nexit 127\n' >"$tmp/unloadable"
    chmod +x "$tmp/good" "$tmp/silent" "$tmp/fails" "$tmp/unloadable"

    for runs in 50x "" 1e3 " 20" 9 100001 -10; do
        "$bin" --runs "$runs" "$tmp/good" "$tmp/good" "$lib" "$lib" >/dev/null 2>"$tmp/err"
        rc=$?
        if [ $rc -eq 2 ] && grep -q -- "--runs needs a whole number from 10 to 100000 (got '$runs')" "$tmp/err"; then
            ok "--runs '$runs' refused"
        else
            bad "--runs '$runs': exit $rc, stderr: $(cat "$tmp/err")"
        fi
    done

    "$bin" --runs 10 "$tmp/good" "$tmp/good" "$lib" "$lib" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 0 ] && grep -Eq '^linked \(thread\) .* 1234$' "$tmp/out"; then
        ok "good probes: timed, first read 1234"
    else
        bad "good probes: exit $rc: $(cat "$tmp/out" "$tmp/err")"
    fi

    "$bin" --runs 10 "$tmp/silent" "$tmp/good" "$lib" "$lib" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 0 ] && grep -Eq '^plain \(libc\) .* - +\(10 of 10 runs reported no first read\)$' "$tmp/out" &&
        grep -Eq '^linked \(lazy\) .* 1234$' "$tmp/out" && grep -q 'reported no first read' "$tmp/err"; then
        ok "missing first reads left out and counted"
    else
        bad "silent probe: exit $rc: $(cat "$tmp/out" "$tmp/err")"
    fi

    for probe in fails unloadable; do
        "$bin" --runs 10 "$tmp/good" "$tmp/$probe" "$lib" "$lib" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        want="exited with status 1;"
        [ $probe = unloadable ] && want="exited with status 127 (the loader could not start it"
        if [ $rc -ne 0 ] && grep -q "linked (thread) ($tmp/$probe) $want" "$tmp/err" && [ ! -s "$tmp/out" ]; then
            ok "$probe probe: the run stops (exit $rc)"
        else
            bad "$probe probe: exit $rc, stdout: $(cat "$tmp/out"), stderr: $(cat "$tmp/err")"
        fi
    done
    ;;
*)
    echo "usage: $0 core BENCH_CORE | startup BENCH_STARTUP EMPTY_SO" >&2
    exit 2
    ;;
esac
exit $fail
