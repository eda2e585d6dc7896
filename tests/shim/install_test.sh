#!/bin/sh
# `make install` puts the shim next to the library, and the installed
# `fastclock run` finds it there without being told.
# usage: install_test.sh BUILD_DIR SHIM_CHECK
set -u
build=$1 check=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
unset FASTCLOCK_PRELOAD LD_PRELOAD
cmake --install "$build" --prefix "$prefix" >/dev/null || { echo "FAIL: cmake --install"; exit 1; }
shim=$(find "$prefix" -name libfastclock-preload.so)
[ -n "$shim" ] || { echo "FAIL: libfastclock-preload.so was not installed under $prefix"; exit 1; }
echo "  ok: installed ${shim#$prefix/}"
out=$("$prefix/bin/fastclock" run -- sh -c 'echo "$LD_PRELOAD"') || { echo "FAIL: installed fastclock run failed"; exit 1; }
[ "$out" = "$shim" ] || { echo "FAIL: installed fastclock run preloaded '$out', want '$shim'"; exit 1; }
echo "  ok: the installed fastclock run preloads $out"
"$prefix/bin/fastclock" run -- "$check" interpose >/dev/null || { echo "FAIL: interposition through the installed shim"; exit 1; }
echo "  ok: a program run by the installed fastclock is served by the installed shim"
