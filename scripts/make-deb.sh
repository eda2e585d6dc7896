#!/bin/sh
# Builds the .deb: a tree configured as Debian installs (prefix /usr,
# libdir lib/<multiarch>, tests off) under BUILD_DIR/deb, then CPack.
# Incremental: a second run rebuilds only what changed.
# A cross build (BUILD_DIR configured with a toolchain file, as build-arm64
# is: mk/arm64.mk) gets its target's package: the deb tree is configured with
# the same toolchain and the multiarch libdir of the Debian architecture
# cmake/package.cmake found for the target (fastclock_<version>_arm64.deb).
# usage: make-deb.sh BUILD_DIR [SOURCE_DIR]   prints the .deb's path last
set -eu
build=$1
src=${2:-$(cd "$(dirname "$0")/.." && pwd)}
tree="$build/deb"
cache() { sed -n "s/^$2:[A-Z]*=//p" "$1/CMakeCache.txt" 2>/dev/null || true; }
toolchain=$(cache "$build" CMAKE_TOOLCHAIN_FILE)
arch=$(cache "$build" FASTCLOCK_DEB_ARCH)
multiarch=$(dpkg-architecture ${arch:+-a"$arch"} -qDEB_HOST_MULTIARCH 2>/dev/null || cc -print-multiarch)
generator=$(command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")
# A tree configured for another toolchain (or none) cannot be switched over.
if [ -f "$tree/CMakeCache.txt" ] && [ "$(cache "$tree" CMAKE_TOOLCHAIN_FILE)" != "$toolchain" ]; then
    rm -rf "$tree"
fi
if [ ! -f "$tree/CMakeCache.txt" ]; then
    cmake -S "$src" -B "$tree" -G "$generator" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        ${toolchain:+"-DCMAKE_TOOLCHAIN_FILE=$toolchain"} \
        -DFASTCLOCK_BUILD_TESTS=OFF -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR="lib/$multiarch" >&2
fi
cmake --build "$tree" >&2
rm -f "$tree"/package/*.deb
(cd "$tree" && cpack -G DEB >&2)
ls "$tree"/package/*.deb
