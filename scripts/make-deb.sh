#!/bin/sh
# Builds the .deb: a tree configured as Debian installs (prefix /usr,
# libdir lib/<multiarch>, tests off) under BUILD_DIR/deb, then CPack.
# Incremental: a second run rebuilds only what changed.
# usage: make-deb.sh BUILD_DIR [SOURCE_DIR]   prints the .deb's path last
set -eu
build=$1
src=${2:-$(cd "$(dirname "$0")/.." && pwd)}
tree="$build/deb"
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || cc -print-multiarch)
generator=$(command -v ninja >/dev/null 2>&1 && echo Ninja || echo "Unix Makefiles")
if [ ! -f "$tree/CMakeCache.txt" ]; then
    cmake -S "$src" -B "$tree" -G "$generator" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        -DFASTCLOCK_BUILD_TESTS=OFF -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR="lib/$multiarch" >&2
fi
cmake --build "$tree" >&2
rm -f "$tree"/package/*.deb
(cd "$tree" && cpack -G DEB >&2)
ls "$tree"/package/*.deb
