#!/bin/sh
# `make install` must give a working package: a program built against it
# with find_package(fastclock) and with pkg-config runs, linked shared and
# static.  Twice: with the default libdir under a --prefix, and as a Debian
# package installs it (prefix /usr, multiarch libdir lib/<triplet>, DESTDIR),
# where the .pc and the CMake package must still find the headers.
# In a cross build the consumers are the target's, run under the emulator
# (tests/target.sh).
# usage: install_test.sh BUILD_DIR SOURCE_DIR
set -eu
build_dir=$1 src_dir=$2
. "$src_dir/tests/target.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/app"
cat > "$work/app/main.c" <<'C'
#include <fastclock.h>
#include <fastclock_inline.h>
#include <stdio.h>
int main(void) {
    struct fastclock_status st;
    if (fastclock_status(&st) != 0 || fastclock_mono_ns() <= 0) return 1;
    if (fastclock_mono_coarse_ns_inline() <= 0 || fastclock_real_coarse_ns_inline() <= 0) return 2;
    int64_t a = fastclock_mono_ns(), b = fastclock_mono_ns_inline(), c = fastclock_mono_ns_unordered_inline();
    if (b < a || c <= 0) return 3;
    printf("%s\n", st.mode);
    return 0;
}
C
cat > "$work/app/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.18)
project(app C)
find_package(fastclock 0.1 REQUIRED)
add_executable(app_shared main.c)
target_link_libraries(app_shared PRIVATE fastclock::fastclock)
add_executable(app_static main.c)
target_link_libraries(app_static PRIVATE fastclock::fastclock_static)
C

# consumers PREFIX LIBDIR NAME: build and run the app against the tree at PREFIX.
# A cross toolchain's find_package searches the target's root only (as in any
# cross build: cmake/aarch64-linux-gnu.cmake), so there the package's
# directory is named.
consumers() {
    prefix=$1 libdir=$2 name=$3
    if [ -n "$toolchain" ]; then find="-Dfastclock_DIR=$libdir/cmake/fastclock"
    else find="-DCMAKE_PREFIX_PATH=$prefix"; fi
    cmake -S "$work/app" -B "$work/b-$name" ${toolchain:+"-DCMAKE_TOOLCHAIN_FILE=$toolchain"} "$find" >/dev/null
    cmake --build "$work/b-$name" >/dev/null
    LD_LIBRARY_PATH="$libdir" $run "$work/b-$name/app_shared" >/dev/null
    $run "$work/b-$name/app_static" >/dev/null
    if readelf -d "$work/b-$name/app_static" | grep NEEDED | grep -q libfastclock; then
        echo "FAIL: app_static ($name) needs libfastclock.so"; exit 1
    fi
    echo "  ok: $name: find_package(fastclock) consumers run, shared and static"
    cflags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags fastclock)
    incdir=$(echo "$cflags" | sed -n 's/^-I\([^ ]*\) *$/\1/p')
    if [ -z "$incdir" ] || [ ! -f "$incdir/fastclock.h" ] ||
       [ "$(realpath "$incdir")" != "$(realpath "$prefix/include")" ]; then
        echo "FAIL: $name: pkg-config --cflags gives '$cflags', want -I$prefix/include"; exit 1
    fi
    libs=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --libs fastclock)
    "$cc" "$work/app/main.c" $cflags $libs -o "$work/pc-$name"
    LD_LIBRARY_PATH="$libdir" $run "$work/pc-$name" >/dev/null
    echo "  ok: $name: pkg-config gives $cflags $libs, and that consumer runs"
}

cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
consumers "$work/prefix" "$work/prefix/lib" "prefix"

# As a Debian package would: configure a copy of the tree for /usr and a
# multiarch libdir (nothing is rebuilt but what the paths change), install
# into a DESTDIR.
triplet=$("$cc" -print-multiarch 2>/dev/null || true)
[ -n "$triplet" ] || triplet=x86_64-linux-gnu
deb_build="$work/build-deb"
echo "not a real jar" > "$work/fastclock-test.jar"
cmake -S "$src_dir" -B "$deb_build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTCLOCK_BUILD_TESTS=OFF \
    ${toolchain:+"-DCMAKE_TOOLCHAIN_FILE=$toolchain"} \
    -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR="lib/$triplet" -DFASTCLOCK_JAR="$work/fastclock-test.jar" >/dev/null
jni=""
cmake --build "$deb_build" --target help | grep -q 'fastclock_jni' && jni=fastclock_jni
cmake --build "$deb_build" --target fastclock fastclock_static fastclock_man3 $jni >/dev/null
DESTDIR="$work/root" cmake --install "$deb_build" --component library >/dev/null
DESTDIR="$work/root" cmake --install "$deb_build" --component java >/dev/null

# Java, in Debian's places: the jar in /usr/share/java with an unversioned
# link, the JNI library (built when CMake found a JDK) in <libdir>/jni.
version=$(sed -n 's/^Version: //p' "$work/root/usr/lib/$triplet/pkgconfig/fastclock.pc")
cmp -s "$work/fastclock-test.jar" "$work/root/usr/share/java/fastclock-$version.jar" ||
    { echo "FAIL: the jar was not installed as /usr/share/java/fastclock-$version.jar"; exit 1; }
[ "$(readlink "$work/root/usr/share/java/fastclock.jar")" = "fastclock-$version.jar" ] ||
    { echo "FAIL: /usr/share/java/fastclock.jar does not link to fastclock-$version.jar"; exit 1; }
echo "  ok: the jar goes to /usr/share/java/fastclock-$version.jar, fastclock.jar links to it"
if [ -n "$jni" ]; then
    [ -f "$work/root/usr/lib/$triplet/jni/libfastclock_jni.so" ] ||
        { echo "FAIL: libfastclock_jni.so not installed in /usr/lib/$triplet/jni"; exit 1; }
    echo "  ok: the JNI library goes to /usr/lib/$triplet/jni"
else
    echo "  (no JDK headers: libfastclock_jni.so not built, its install not checked)"
fi
for f in "usr/lib/$triplet/libfastclock.a" "usr/lib/$triplet/pkgconfig/fastclock.pc" \
         "usr/lib/$triplet/cmake/fastclock/fastclockConfig.cmake" usr/include/fastclock.h; do
    [ -e "$work/root/$f" ] || { echo "FAIL: /$f not installed"; exit 1; }
done
consumers "$work/root/usr" "$work/root/usr/lib/$triplet" "multiarch"
echo "install: find_package and pkg-config consumers run (prefix and /usr, lib/$triplet)"
