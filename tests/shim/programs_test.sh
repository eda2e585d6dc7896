#!/bin/sh
# Unmodified programs under `fastclock run`: date and python3 bind their
# clock_gettime to the shim and report the same time as the unshimmed
# kernel clock, within 1 ms.
# usage: programs_test.sh FASTCLOCK SHIM_AGREE
set -u
fc=$1 agree=$2
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ok() { echo "  ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
unset LD_PRELOAD FASTCLOCK_MODE FASTCLOCK_CALIBRATOR FASTCLOCK_UNORDERED FASTCLOCK_PRELOAD

# Which definition did the program's own reference bind to?
bound_to_shim() { # PROGRAM_NAME SYMBOL -- COMMAND...
    name=$1 sym=$2
    shift 3
    LD_DEBUG=bindings LD_DEBUG_OUTPUT="$tmp/ld" "$fc" run -- "$@" >/dev/null 2>&1
    if cat "$tmp"/ld.* 2>/dev/null | grep -E "binding file [^ ]*$name \[0\] to [^ ]*libfastclock-preload\.so \[0\]: normal symbol \`$sym'" >/dev/null; then
        ok "$name binds $sym to the shim"
    else
        bad "$name does not bind $sym to the shim: $(cat "$tmp"/ld.* 2>/dev/null | grep "\`$sym'" | head -n 3)"
    fi
    rm -f "$tmp"/ld.*
}

echo "date:"
bound_to_shim date clock_gettime -- date
"$agree" once -- "$fc" run -- date +real=%s%N || bad "date under fastclock run disagrees with the kernel"

echo "python3:"
if ! command -v python3 >/dev/null 2>&1; then
    bad "python3 is required for this test (apt-get install python3)"
    exit 1
fi
"$agree" once -- "$fc" run -- python3 -c 'import time; print("real=%d" % time.time_ns())' ||
    bad "python3 time.time_ns() under fastclock run disagrees with the kernel"
"$agree" serve 50 -- "$fc" run -- python3 -c '
import sys, time
for _ in sys.stdin:
    print("mono=%d real=%d" % (time.clock_gettime_ns(time.CLOCK_MONOTONIC), time.time_ns()), flush=True)
' || bad "python3 clocks under fastclock run disagree with the kernel"
# The interpreter process resolves clock_gettime to the shim: a NULL
# timespec gives EFAULT (libc would crash in the vDSO).
out=$("$fc" run -- python3 -c '
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print(libc.clock_gettime(1, None), ctypes.get_errno())')
[ "$out" = "-1 14" ] && ok "python3's clock_gettime is the shim's (NULL timespec: EFAULT)" ||
    bad "python3's clock_gettime(1, NULL) gave '$out', want '-1 14'"
exit $fail
