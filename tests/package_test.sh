#!/bin/sh
# The .deb (make package), in three steps run as ctest package.build,
# package.lintian and package.install:
#   build    scripts/make-deb.sh builds it; dpkg-deb -c must list every part
#            (library, headers, .pc, CMake package, shim, CLI, man pages, bash
#            completion, copyright, changelog) and no Java part; its
#            Architecture and its binaries' ELF machine are this tree's, its
#            Depends the glibc its binaries ask for
#   lintian  no error (warnings are printed)
#   install  dpkg -i into an empty root (dpkg --root, its own database), then
#            from there: fastclock doctor, fastclock run finding the shim, a
#            pkg-config consumer, the completion; dpkg -r leaves nothing behind
# A cross build's package is its target's (scripts/make-deb.sh): its programs
# run under the emulator, the consumer is built for the target (tests/target.sh).
# usage: package_test.sh build|lintian|install BUILD_DIR SOURCE_DIR
set -u
step=$1 build=$2 src=$3
ok() { echo "  ok: $*"; }
fail() { echo "FAIL: $*"; exit 1; }
. "$src/tests/target.sh"
gnu_type=""
[ -z "$cross" ] || gnu_type=$("$cc" -dumpmachine)
arch=$(dpkg-architecture ${gnu_type:+-t"$gnu_type"} -qDEB_HOST_ARCH 2>/dev/null)
multiarch=$(dpkg-architecture ${gnu_type:+-t"$gnu_type"} -qDEB_HOST_MULTIARCH 2>/dev/null || cc -print-multiarch)
deb() { ls "$build"/deb/package/*.deb 2>/dev/null | head -1; }

case $step in
build)
    for tool in dpkg-deb dpkg-shlibdeps cpack; do
        command -v $tool >/dev/null || fail "$tool is required (make test installs dpkg-dev: scripts/ensure-deps.sh pkg)"
    done
    "$src/scripts/make-deb.sh" "$build" "$src" > "$build/deb-build.log" 2>&1 ||
        { tail -30 "$build/deb-build.log"; fail "scripts/make-deb.sh failed (log: $build/deb-build.log)"; }
    d=$(deb); [ -n "$d" ] || fail "no .deb under $build/deb/package"
    ok "built ${d##*/}, $(stat -c %s "$d") bytes"
    list=$(dpkg-deb -c "$d" | awk '{ print $6 }' | sed 's|^\./|/|')
    l=/usr/lib/$multiarch
    for f in /usr/bin/fastclock /usr/include/fastclock.h /usr/include/fastclock_inline.h \
             $l/libfastclock.so.0.1.0 $l/libfastclock.so.0 $l/libfastclock.so $l/libfastclock.a \
             $l/libfastclock-preload.so $l/pkgconfig/fastclock.pc $l/cmake/fastclock/fastclockConfig.cmake \
             $l/cmake/fastclock/fastclockTargets.cmake /usr/share/man/man1/fastclock.1.gz \
             /usr/share/man/man3/libfastclock.3.gz /usr/share/bash-completion/completions/fastclock \
             /usr/share/doc/fastclock/copyright /usr/share/doc/fastclock/changelog.gz; do
        echo "$list" | grep -qxF "$f" || fail "the package lacks $f"
    done
    ok "it carries the library, headers, .pc, CMake package, shim, CLI, man pages, completion, copyright, changelog"
    java=$(echo "$list" | grep -E '/jni/|/share/java' || true)
    [ -z "$java" ] || fail "the package carries Java parts: $java"
    ok "and no Java part"
    x="$build/deb/x"
    trap 'rm -rf "$x"' EXIT
    dpkg-deb -x "$d" "$x" && a="$x/usr/lib/$multiarch/libfastclock.a"
    if readelf -S "$a" | grep -q '\.debug_info'; then fail "libfastclock.a in the package has debug info"; fi
    "$nm" -g --defined-only "$a" | grep -q ' T fastclock_mono_ns$' || fail "libfastclock.a in the package lost its symbols"
    ok "its libfastclock.a is stripped of debug info ($(stat -c %s "$a") bytes), symbols kept"

    got=$(dpkg-deb -f "$d" Architecture)
    [ "$got" = "$arch" ] || fail "the package's Architecture is $got, want $arch"
    machine() { readelf -h "$1" | sed -n 's/^ *Machine: *//p'; }
    want=$(machine "$build/bin/fastclock")
    elfs="usr/bin/fastclock usr/lib/$multiarch/libfastclock.so.0.1.0 usr/lib/$multiarch/libfastclock-preload.so"
    for f in $elfs; do
        m=$(machine "$x/$f")
        [ "$m" = "$want" ] || fail "/$f in the package is for '$m', this tree's programs for '$want'"
    done
    ok "Architecture: $got; its library, CLI and shim are $want ELF, as this tree's"

    # The glibc it needs: libc6 (>= x.y), x.y the highest GLIBC_x.y version
    # node its binaries ask for -- what dpkg-shlibdeps says of a native
    # package, and what cmake/deb-depends.cmake says of a cross build's.
    depends=$(dpkg-deb -f "$d" Depends)
    glibc=$(for f in $elfs; do readelf -V -W "$x/$f"; done |
            sed -n 's/^.*Name: GLIBC_\([0-9.]*\) .*$/\1/p' | sort -V | tail -1)
    [ -n "$glibc" ] || fail "the package's binaries ask for no GLIBC_* version"
    [ "$depends" = "libc6 (>= $glibc)" ] ||
        fail "Depends is '$depends'; its binaries ask for GLIBC_$glibc at most: want 'libc6 (>= $glibc)'"
    ok "Depends: $depends (its binaries ask for GLIBC_$glibc at most)"
    ;;
lintian)
    command -v lintian >/dev/null || { echo "SKIP: lintian is not installed (scripts/ensure-deps.sh pkg)"; exit 77; }
    d=$(deb); [ -n "$d" ] || fail "no .deb under $build/deb/package (package.build makes it)"
    out=$(lintian "$d" 2>&1); st=$?
    out=$(echo "$out" | grep -v 'running with root privileges')
    [ -n "$out" ] && echo "$out"
    [ $st -le 1 ] || fail "lintian could not check the package (exit $st)"
    echo "$out" | grep -q '^E:' && fail "lintian reports errors"
    ok "lintian: no error ($(echo "$out" | grep -c '^W:') warnings)"
    ;;
install)
    d=$(deb); [ -n "$d" ] || fail "no .deb under $build/deb/package (package.build makes it)"
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    root=$work/root
    mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates" "$root/var/lib/dpkg/triggers"
    : > "$root/var/lib/dpkg/status"
    # Only the host's libc is outside the root (--force-depends); the empty
    # maintainer scripts run without a chroot (the root has no shell).
    if [ "$(id -u)" = 0 ]; then as_root=""; else
        command -v fakeroot >/dev/null || { echo "SKIP: not root and no fakeroot"; exit 77; }
        as_root="fakeroot"; fi
    dpkg_root() { $as_root dpkg --root="$root" --log="$work/dpkg.log" --force-script-chrootless \
                  --force-depends --force-not-root "$@"; }
    # A cross build's package is of a foreign architecture here: the root
    # takes it as a multiarch system does.
    [ "$arch" = "$(dpkg --print-architecture)" ] || dpkg_root --add-architecture "$arch" ||
        fail "dpkg --add-architecture $arch in $root"
    dpkg_root -i "$d" > "$work/install.log" 2>&1 || { cat "$work/install.log"; fail "dpkg -i into $root"; }
    status=$(dpkg --root="$root" -s fastclock 2>/dev/null | sed -n 's/^Status: //p')
    [ "$status" = "install ok installed" ] || fail "dpkg says '$status' after dpkg -i"
    ok "dpkg -i into an empty root: $status"

    l=$root/usr/lib/$multiarch
    export LD_LIBRARY_PATH="$l"
    unset LD_PRELOAD FASTCLOCK_PRELOAD
    $run "$root/usr/bin/fastclock" doctor --quick > "$work/doctor.txt" 2>&1
    rc=$?
    [ $rc -le 1 ] || { cat "$work/doctor.txt"; fail "the installed fastclock doctor exited $rc"; }
    grep -qi mode "$work/doctor.txt" || { cat "$work/doctor.txt"; fail "fastclock doctor said nothing about the mode"; }
    ok "the installed fastclock doctor runs (exit $rc, $(wc -l < "$work/doctor.txt") lines)"
    # (The host's sh cannot preload a cross build's shim, and says so.)
    pre=$($run "$root/usr/bin/fastclock" run -- sh -c 'echo "$LD_PRELOAD"')
    [ "$pre" = "$l/libfastclock-preload.so" ] || fail "installed fastclock run preloads '$pre', want $l/libfastclock-preload.so"
    ok "the installed fastclock run preloads the installed shim"

    # It names the library it loaded (dladdr: ldd cannot look into a
    # foreign program).
    cat > "$work/app.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fastclock.h>
#include <stdio.h>
int main(void) {
    struct fastclock_status st;
    Dl_info lib;
    if (fastclock_status(&st) != 0 || fastclock_mono_ns() <= 0) return 1;
    if (!dladdr((void *)fastclock_mono_ns, &lib) || !lib.dli_fname) return 2;
    printf("%s %s %s\n", fastclock_version(), st.mode, lib.dli_fname);
    return 0;
}
C
    flags=$(PKG_CONFIG_PATH="$l/pkgconfig" pkg-config --cflags --libs fastclock) || fail "pkg-config fastclock"
    "$cc" "$work/app.c" $flags -o "$work/app" || fail "$cc app.c $flags"
    out=$($run "$work/app") || fail "the pkg-config consumer failed"
    [ "${out##* }" = "$l/libfastclock.so.0" ] || fail "the consumer loaded ${out##* }, not $l/libfastclock.so.0"
    ok "a pkg-config consumer ($flags) runs on the installed library: $out"

    bash -c ". '$root/usr/share/bash-completion/completions/fastclock' && complete -p fastclock" >/dev/null ||
        fail "the installed completion does not register for fastclock"
    ok "the installed bash completion registers for fastclock"

    dpkg_root -r fastclock > "$work/remove.log" 2>&1 || { cat "$work/remove.log"; fail "dpkg -r"; }
    left=$(find "$root/usr" ! -type d 2>/dev/null)
    [ -z "$left" ] || fail "dpkg -r left: $left"
    ok "dpkg -r removes every file"
    ;;
*) echo "usage: package_test.sh build|lintian|install BUILD_DIR SOURCE_DIR"; exit 2 ;;
esac
exit 0
