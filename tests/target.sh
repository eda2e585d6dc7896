# Sourced by the tests that build programs against the installed library and
# run them (install_test.sh, symbols_test.sh, package_test.sh).  Sets
#   cross      non-empty in a cross build
#   cc         the C compiler for the target
#   nm         nm for the target's objects
#   toolchain  the CMake toolchain file ("" natively)
#   run        what runs a target program: "" natively, in a cross build
#              <build>/run/target-exec (the emulator; cmake/cross-run.cmake)
# from the environment tests/CMakeLists.txt gives a cross build
# (FASTCLOCK_CROSS=1, FASTCLOCK_CC...).  A cross build whose compiler or
# emulator is missing skips (exit 77), naming it.
cross=${FASTCLOCK_CROSS:-} cc=cc nm=nm toolchain="" run=""
if [ -n "$cross" ]; then
    cc=${FASTCLOCK_CC:-} nm=${FASTCLOCK_NM:-} toolchain=${FASTCLOCK_TOOLCHAIN:-} run=${FASTCLOCK_RUN:-}
    for tool in "$cc" "$nm"; do
        [ -n "$tool" ] && command -v "$tool" >/dev/null ||
            { echo "skip: a cross build, and its compiler or nm ('$tool') is not installed (scripts/ensure-deps.sh arm64)"; exit 77; }
    done
    [ -n "$run" ] ||
        { echo "skip: a cross build, and no emulator runs its programs (qemu-user: scripts/ensure-deps.sh arm64)"; exit 77; }
fi
