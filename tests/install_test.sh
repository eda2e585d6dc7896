#!/bin/sh
# `make install PREFIX=...` must give a working package: a program built
# against it with find_package(fastclock) and with pkg-config runs.
set -eu
build_dir=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
mkdir "$work/app"
cat > "$work/app/main.c" <<'C'
#include <fastclock.h>
#include <fastclock_inline.h>
#include <stdio.h>
int main(void) {
    struct fastclock_status st;
    if (fastclock_status(&st) != 0 || fastclock_mono_ns() <= 0) return 1;
    if (fastclock_mono_coarse_ns_inline() <= 0 || fastclock_real_coarse_ns_inline() <= 0) return 2;
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
cmake -S "$work/app" -B "$work/app/b" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/app/b" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib" "$work/app/b/app_shared"
"$work/app/b/app_static"
export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
cc "$work/app/main.c" $(pkg-config --cflags --libs fastclock) -o "$work/app/pc"
LD_LIBRARY_PATH="$work/prefix/lib" "$work/app/pc"
echo "install: find_package and pkg-config consumers run"
