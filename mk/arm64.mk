# arm64, cross-built with Debian's toolchain (cmake/aarch64-linux-gnu.cmake)
# and tested under qemu-user: the same ctest suite as test-c, in its own tree.
#
#   make test-arm64    build $(ARM64_BUILD), run its tests under qemu-aarch64
#
# Not run there: the real-kernel tests.  They disturb the kernel's clock, and
# under qemu-user the kernel is the host's, which test-c has just tested; the
# arm64 code's answer to every such fault is tested through the seam
# (faults_test).  The cross build registers them as skips that say so
# (tests/realkernel/CMakeLists.txt), so the count shows them.
ARM64_BUILD ?= build-arm64

# On an x86-64 host only: elsewhere Debian has no aarch64 cross toolchain
# (an arm64 host runs the same suite natively, as test-c).
ifeq ($(shell uname -m),x86_64)
TEST_TARGETS += test-arm64
endif
.PHONY: arm64-deps arm64-configure arm64-jni build-arm64 test-arm64

arm64-deps:
	@scripts/ensure-deps.sh c arm64

# shim-deps: the JDK, whose (architecture-neutral) JNI headers build the
# jar's linux-aarch64 native here too.
arm64-configure: arm64-deps shim-deps pkg-deps
	@cmake -S . -B $(ARM64_BUILD) -G "$(GENERATOR)" \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake >/dev/null

# Just the jar's linux-aarch64 native (mk/java.mk), without the test suite.
arm64-jni: arm64-configure
	cmake --build $(ARM64_BUILD) --target fastclock_jni

# After arm64-jni: two builds in one tree at once (make -j, test-java beside
# test-arm64) would race on the same files.
build-arm64: arm64-jni
	cmake --build $(ARM64_BUILD)

# The same output as test-c's ctest, so .ci/run counts it.
test-arm64: build-arm64 cli-deps
	cd $(ARM64_BUILD) && ctest --output-on-failure --timeout 300 -LE realkernel
