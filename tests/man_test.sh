#!/bin/sh
# The built man pages render without a warning and say what their sources
# say: fastclock(1) names every command and option the --help texts list,
# libfastclock(3) every name the public headers declare.
# usage: man_test.sh MAN_DIR SOURCE_DIR FASTCLOCK
set -u
mandir=$1 src=$2 fastclock=$3
fail=0
ok() { echo "  ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }
command -v man >/dev/null || { echo "SKIP: man (man-db) is not installed"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for page in fastclock.1 libfastclock.3; do
    [ -f "$mandir/$page.gz" ] || { bad "$mandir/$page.gz was not built"; continue; }
    gzip -dc "$mandir/$page.gz" > "$work/$page"
    LC_ALL=C.UTF-8 MANWIDTH=200 man --warnings -E UTF-8 -l "$work/$page" > "$work/$page.txt" 2> "$work/$page.err"
    if [ -s "$work/$page.err" ]; then bad "$page renders with warnings:"; cat "$work/$page.err"
    else ok "$page renders without warnings ($(wc -l < "$work/$page.txt") lines)"; fi
    # One line per word, hyphenation undone, for lookups.
    sed 's/\xe2\x80\x90/-/g' "$work/$page.txt" | tr -s ' \t' '\n\n' > "$work/$page.words"
done

has() { grep -qxF -- "$2" "$work/$1.words" || grep -qF -- "$2" "$work/$1.txt"; }

cmds=$("$fastclock" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }')
missing=""
for cmd in $cmds; do
    has fastclock.1 "fastclock $cmd" || missing="$missing 'fastclock $cmd'"
    for o in $("$fastclock" "$cmd" --help | grep -E -- '^usage:|^ {1,4}-' | grep -oE -- '(^|[ [,|])--?[a-z][a-z-]*' | sed 's/^[ [,|]//' | sort -u); do
        has fastclock.1 "$o" || missing="$missing $cmd:$o"
    done
done
version=$("$fastclock" --version)
has fastclock.1 "$version" || missing="$missing '$version'"
[ -z "$missing" ] && ok "fastclock.1 has every command and option of --help, and '$version'" ||
    bad "fastclock.1 lacks:$missing"

api=$(cc -E -P -I"$src/include" "$src/include/fastclock_inline.h" | grep -oE '(^|[^a-z0-9_])fastclock_[a-z0-9_]+[[:space:]]*[(;]' |
      sed -E 's/^[^f]//; s/[[:space:](;]+$//' | grep -v '_$' | sort -u) # names ending in _: the header's own helpers
missing=""
for n in $api; do grep -q -- "$n" "$work/libfastclock.3.txt" || missing="$missing $n"; done
[ -z "$missing" ] && ok "libfastclock.3 names all $(echo "$api" | wc -l) names of the headers" ||
    bad "libfastclock.3 lacks:$missing"
exit $fail
