# The front door.  `make run` builds and shows what this machine's clocks
# cost; `make test` runs every test.  Both install what they need first.
BUILD    ?= build
PREFIX   ?= /usr/local
GENERATOR ?= Ninja
CMAKE_FLAGS ?=

.PHONY: all build deps run test test-c test-realkernel install install-java clean

# Components add their test targets to TEST_TARGETS in mk/*.mk.
TEST_TARGETS := test-c

all: build

deps:
	@scripts/ensure-deps.sh c

$(BUILD)/build.ninja $(BUILD)/Makefile: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

# Configured every time (a second, with its cache): a configure that failed
# is tried again, CMAKE_FLAGS take effect, and what was not found before (a
# JDK installed since) is looked for again.
build: deps
	@cmake -S . -B $(BUILD) -G "$(GENERATOR)" -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD)

# The doctor's exit status 1 means it found a problem on this machine (see
# its report), not that the run failed: go on to the bench.
run: build
	$(BUILD)/bin/fastclock doctor || [ $$? -eq 1 ]
	$(BUILD)/bin/fastclock bench --seconds 2

# Timing-sensitive tests run one at a time: the machines are small.
# The real-kernel fault tests (label realkernel, ~70 s) change the kernel's
# clock -- adjtimex frequency and tick, REALTIME steps, the clocksource --
# and restore it, even when killed; without root they skip and say why.
# Nothing else runs meanwhile (ctest without -j; RUN_SERIAL).
# (The components' dependencies come first -- mk/*.mk add them -- and the
# build after them, below: CMake looks for a JDK when it configures.)
test-c:
	cd $(BUILD) && ctest --output-on-failure --timeout 600

test-realkernel: build
	cd $(BUILD) && ctest --output-on-failure --timeout 600 -L realkernel

-include $(sort $(wildcard mk/*.mk))

test-c: build

# One step at a time: the real-kernel tests change the kernel's clock under
# everything else, and the Java and arm64 steps reconfigure trees ctest reads.
.NOTPARALLEL:

test: $(TEST_TARGETS)

# Installs the Java parts too when they are built: the JNI library (CMake
# builds it whenever it finds a JDK) in <libdir>/jni and the jar (Maven's)
# in share/java.  install-java builds the jar first.
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

install-java: java-jar
	$(MAKE) install

clean:
	rm -rf $(BUILD) $(ARM64_BUILD) java/*/target
