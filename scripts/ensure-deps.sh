#!/bin/sh
# Installs what a `make` target needs on a fresh Debian/Ubuntu machine, and
# nothing when it is already there.  Usage: ensure-deps.sh GROUP...
#   c     compiler, CMake, Ninja, GoogleTest, Python (the man pages)
#   java  JDK 17 and Maven
#   java25 a JDK 25: openjdk-25-jdk-headless where apt has it and none is there
#         (Debian 12 has none: mk/java.mk then names what it looked for)
#   cli   Python's jsonschema (tests of `fastclock doctor --json`)
#   pkg   the .deb: dpkg-dev (dpkg-shlibdeps), lintian, man-db, fakeroot
#   arm64 the cross toolchain, the arm64 libc, qemu-user (or qemu-user-static)
#         and GoogleTest's source (built for arm64 with the tree)
#   peers Abseil (libabsl-dev), for make bench-peers (which also needs
#         rustup's cargo: Debian 12's is too old for its lock file)
set -eu

missing=""
pkg_ok() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
want() { pkg_ok "$1" || missing="$missing $1"; }

if ! command -v dpkg-query >/dev/null 2>&1; then
    # Not Debian: check for the tools and say what is missing.
    for tool in cmake cc c++ make; do
        command -v "$tool" >/dev/null 2>&1 || { echo "fastclock: '$tool' is required" >&2; exit 1; }
    done
    exit 0
fi

for group in "$@"; do
    case "$group" in
    c) for p in cmake ninja-build gcc g++ make pkg-config libgtest-dev python3; do want "$p"; done ;;
    java) for p in openjdk-17-jdk-headless maven; do want "$p"; done ;;
    java25)
        if [ -z "${JAVA25_HOME:-}" ] && ! ls -d /usr/lib/jvm/temurin-25-jdk-* /usr/lib/jvm/java-25-openjdk-* >/dev/null 2>&1 &&
            apt-cache show openjdk-25-jdk-headless >/dev/null 2>&1; then
            want openjdk-25-jdk-headless
        fi ;;
    cli) for p in python3 python3-jsonschema; do want "$p"; done ;;
    pkg) for p in dpkg-dev lintian man-db fakeroot gzip; do want "$p"; done ;;
    peers)
        for p in libabsl-dev pkg-config g++; do want "$p"; done ;;
    arm64)
        for p in gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-arm64-cross libc6-dev-arm64-cross googletest; do
            want "$p"
        done
        pkg_ok qemu-user || pkg_ok qemu-user-static || missing="$missing qemu-user" ;;
    *) echo "ensure-deps.sh: unknown group '$group'" >&2; exit 2 ;;
    esac
done

[ -z "$missing" ] && exit 0

if [ "$(id -u)" = 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1 && [ -t 0 ]; then
    SUDO="sudo" # at a terminal: a password prompt is an answer
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n" # no terminal (CI): never a prompt that nobody answers
else
    echo "fastclock: missing packages:$missing; install them with: apt-get install$missing" >&2
    exit 1
fi
echo "fastclock: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q $missing >/dev/null 2>&1 ||
    { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q $missing; }
