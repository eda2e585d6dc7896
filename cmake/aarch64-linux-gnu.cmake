# Cross-compiling for arm64 with Debian's toolchain (gcc-aarch64-linux-gnu,
# g++-aarch64-linux-gnu, libc6-arm64-cross), the tests run under qemu-user.
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake
# (make test-arm64 does this; mk/arm64.mk.)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(FC_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${FC_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${FC_CROSS_TRIPLE}-g++)
# Debian's cross libc lives here; qemu finds the loader and libraries through -L.
set(FC_CROSS_SYSROOT /usr/${FC_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH ${FC_CROSS_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# qemu-user (Debian's qemu-user or qemu-user-static), told where the arm64 libc is.
find_program(FC_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(FC_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${FC_QEMU_AARCH64} -L ${FC_CROSS_SYSROOT})
endif()

# GoogleTest for arm64, built with this tree from Debian's source package
# (googletest: /usr/src/googletest); see tests/CMakeLists.txt.
set(FASTCLOCK_GTEST_SOURCE /usr/src/googletest CACHE PATH "GoogleTest's source, built for the target")

# Under qemu-user the kernel is the host's: its sysfs names the host's
# clocksources (tsc, kvm-clock), never arch_sys_counter, so the library would
# rightly refuse the counter and no test would reach the arm64 read path.
# cmake/cross-run.cmake therefore builds <build>/qemu-root, a stand-in for an
# arm64 kernel's clocksource directory (what every arm64 Linux kernel
# reports: arch_sys_counter, available and current) plus the arm64 libc,
# and points the emulator's -L prefix there; qemu looks up every path there
# first.  The refusal on the host's own sysfs is tested too (arm64.*).
set(FASTCLOCK_QEMU_STANDIN ON CACHE BOOL "Run the tests against a stand-in arm64 clocksource directory")
