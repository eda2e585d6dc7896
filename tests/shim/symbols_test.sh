#!/bin/sh
# The shim as an ELF object: it exports the libc names unversioned (so they
# satisfy clock_gettime@GLIBC_2.17 and @GLIBC_2.2.5 references alike) and
# nothing internal, it needs only libc, it is bound at load time (no lazy
# resolver inside a signal handler), never unloaded, and it holds no
# relocation against the names it defines: nothing inside it can call back
# into them (no recursion during calibration).
set -u
so=$1
fail=0
ok() { echo "  ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
command -v readelf >/dev/null || { echo "FAIL: readelf (binutils) is required"; exit 1; }
[ -f "$so" ] || { echo "FAIL: $so does not exist"; exit 1; }

defined=$(readelf --dyn-syms -W "$so" | awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") && $4 == "FUNC" { print $8 }')
for s in clock_gettime gettimeofday timespec_get fastclock_preload_state; do
    if echo "$defined" | grep -qx "$s"; then ok "exports $s, unversioned"; else bad "does not export $s unversioned"; fi
done
# time() stays libc's: glibc binds it straight to __vdso_time, which nothing can beat.
if echo "$defined" | grep -qx time; then bad "exports time (it would only add a jump to the vDSO's)"; else ok "leaves time() to libc"; fi
leaked=$(echo "$defined" | grep -vxE 'clock_gettime|gettimeofday|timespec_get|fastclock_[a-z_0-9]+' || true)
if [ -z "$leaked" ]; then ok "exports nothing else than the libc names and fastclock_*"; else bad "also exports: $leaked"; fi

relocs=$(readelf -rW "$so" | grep -E ' (clock_gettime|gettimeofday|time|timespec_get)(@[^ ]*)? \+' || true)
if [ -z "$relocs" ]; then ok "no relocation against the interposed names (cannot call itself)"; else bad "relocations against interposed names: $relocs"; fi

dyn=$(readelf -dW "$so")
needed=$(echo "$dyn" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
extra=$(echo "$needed" | tr ' ' '\n' | grep -vxE 'libc\.so\.6|libpthread\.so\.0|libdl\.so\.2|' || true)
if [ -z "$extra" ]; then ok "needs only: $needed"; else bad "needs more than libc/pthread/dl: $extra"; fi
if echo "$dyn" | grep -q 'BIND_NOW\|FLAGS_1.*NOW'; then ok "bound at load time (BIND_NOW)"; else bad "not linked with -z now"; fi
if echo "$dyn" | grep -q 'NODELETE'; then ok "never unloaded (NODELETE)"; else bad "not linked with -z nodelete"; fi
if echo "$dyn" | grep -q 'TEXTREL'; then bad "has text relocations"; else ok "no text relocations"; fi
exit $fail
