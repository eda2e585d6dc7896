#!/bin/sh
# The installed libraries export the public API and nothing else:
#   - libfastclock.so: exactly the names declared in include/fastclock.h and
#     include/fastclock_inline.h, each with a FASTCLOCK_* version node
#     (cmake/libfastclock.map), so later additions can be versioned;
#   - libfastclock.a: the same names as its only global definitions (the
#     library's own fc_* are local), so a program may define its own fc_*
#     names and still link it.
# In a cross build, with the target's compiler and nm, the program run under
# the emulator (tests/target.sh).
# usage: symbols_test.sh BUILD_DIR SOURCE_DIR
set -u
build=$1 src=$2
. "$src/tests/target.sh"
fail=0
ok() { echo "  ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
for tool in "$nm" readelf "$cc"; do
    command -v "$tool" >/dev/null || { echo "FAIL: $tool is required (binutils, gcc)"; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/p" >/dev/null || { echo "FAIL: cmake --install"; exit 1; }
so=$(find "$work/p" -name 'libfastclock.so.*.*' | head -1)
ar=$(find "$work/p" -name libfastclock.a | head -1)
[ -n "$so" ] && [ -n "$ar" ] || { echo "FAIL: libfastclock.so.* or libfastclock.a not installed"; exit 1; }

# The API, from the headers (comments stripped by the preprocessor; the
# static inline helpers, and names ending in _, are the header's own, not
# the library's).
"$cc" -E -P -I"$src/include" "$src/include/fastclock_inline.h" |
    grep -v 'static inline' |
    grep -oE '(^|[^a-z0-9_])fastclock_[a-z0-9_]+[[:space:]]*[(;]' |
    sed -E 's/^[^f]//; s/[[:space:](;]+$//' | grep -v '_$' | sort -u > "$work/api"
n=$(wc -l < "$work/api")
[ "$n" -ge 10 ] || { bad "found only $n API names in the headers: $(cat "$work/api")"; exit 1; }
ok "the headers declare $n names"

# Shared library: defined dynamic symbols, with their versions.
readelf --dyn-syms -W "$so" | awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") { print $8 }' |
    grep -v '^FASTCLOCK_[0-9.]*$' | sort > "$work/so_syms"
unversioned=$(grep -v '@@\?FASTCLOCK_[0-9][0-9.]*$' "$work/so_syms" || true)
[ -z "$unversioned" ] && ok "every symbol of ${so##*/} carries a FASTCLOCK_* version" ||
    bad "unversioned exports: $unversioned"
sed 's/@.*//' "$work/so_syms" | sort -u > "$work/so_names"
if cmp -s "$work/api" "$work/so_names"; then ok "${so##*/} exports exactly the API"
else bad "${so##*/} exports differ from the headers (< headers, > library):"; diff "$work/api" "$work/so_names"; fi

# The library's own calls to its API bind inside it (-Bsymbolic-functions):
# no relocation names an API function, so a second copy in the process (the
# shim, one opened by path) never serves this one's coarse tick or status.
calls=$(readelf -rW "$so" | awk '$3 ~ /JUMP_SLOT/ && $5 ~ /^fastclock_/ { printf " %s", $5 }')
[ -z "$calls" ] && ok "${so##*/} calls its own API functions directly" ||
    bad "${so##*/} reaches its own API through the PLT (another copy's definitions would answer):$calls"

# Static library: global definitions, and nothing internal left global.
"$nm" -g --defined-only "$ar" | awk 'NF == 3 { print $3 }' | sort -u > "$work/a_names"
if cmp -s "$work/api" "$work/a_names"; then ok "libfastclock.a defines exactly the API globally"
else bad "libfastclock.a global definitions differ from the headers (< headers, > archive):"; diff "$work/api" "$work/a_names"; fi
undef_internal=$("$nm" -u "$ar" | awk '{ print $2 }' | grep -E '^fc_' || true)
[ -z "$undef_internal" ] && ok "libfastclock.a leaves no fc_* reference unresolved" ||
    bad "libfastclock.a refers to internal names: $undef_internal"

# A program with its own names that the library also uses inside.
cat > "$work/clash.c" <<'C'
#include <fastclock.h>
#include <fastclock_inline.h>
#include <stdio.h>
int fc_mode = 7;                 /* also internal names of the library */
void fc_cpu_probe(void) {}
int fc_seam(void) { return 3; }
int main(void) {
    int64_t a = fastclock_mono_ns(), b = fastclock_mono_coarse_ns_inline();
    if (a <= 0 || b <= 0 || fc_mode != 7 || fc_seam() != 3) return 1;
    puts("ok");
    return 0;
}
C
if "$cc" "$work/clash.c" -I"$work/p/include" "$ar" -pthread -o "$work/clash" 2> "$work/clash.err" && $run "$work/clash" >/dev/null; then
    ok "a program defining fc_mode, fc_cpu_probe and fc_seam links libfastclock.a and runs"
else
    bad "a program with its own fc_* names does not link or run with libfastclock.a:"; cat "$work/clash.err"
fi
exit $fail
