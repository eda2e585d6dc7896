# The Java library (java/): one multi-release jar, Java 17+ (JNI) and 22+ (FFM),
# with libfastclock_jni.so from this CMake build inside.
#
#   make test-java    build the native library, then the jar; run the tests on 17 and 25
#   make bench-java   JMH on 17 and 25, one table each (not part of `make test`)
#
# Maven gets the library's directory (-Dfastclock.native.dir), so it never
# runs CMake itself from here; run alone, it builds one under java/fastclock/target.
#
# The jar serves both CPUs Java runs on here: on an x86-64 host it carries
# the linux-aarch64 library too, cross-built in $(ARM64_BUILD) (mk/arm64.mk),
# and the tests are told to insist on it (a plain `mvn` build carries the
# host's only).

# Found after ensure-deps has run: recipes expand these lazily.
JAVA17_HOME ?= $(firstword $(wildcard /usr/lib/jvm/java-17-openjdk-*))
JAVA25_HOME ?= $(firstword $(wildcard /usr/lib/jvm/temurin-25-jdk-*) $(wildcard /usr/lib/jvm/java-25-openjdk-*))
MVN ?= mvn
# -fae: a failing module lets the others that do not need it run and be counted
# (.ci/run counts a module Maven skipped as a failure).
MVN_FLAGS ?= -B -ntp -fae
# Extra options for the JMH runner, e.g. BENCH_JAVA_ARGS="-f 1 -i 3" for a quick look,
# or "--include Log4jAsync -f 5 -wi 3 -i 5" for Log4j 2 async logging alone (java/README.md).
BENCH_JAVA_ARGS ?=
# BENCH_JAVA_MODES=all also measures the core's mode system and the pure-Java
# fallback on both JDKs (never slower holds in every mode; three times as long).
BENCH_JAVA_MODES ?=

TEST_TARGETS += test-java
.PHONY: java-deps java-native java-jar test-java bench-java

JAVA_CROSS_PLATFORM := $(if $(filter x86_64,$(shell uname -m)),linux-aarch64)

JAVA_MVN = cd java && JAVA_HOME="$(JAVA17_HOME)" $(MVN) $(MVN_FLAGS) \
	-Dfastclock.native.dir="$(abspath $(BUILD))/lib" \
	$(if $(JAVA_CROSS_PLATFORM),-Dfastclock.native.linux-aarch64.dir="$(abspath $(ARM64_BUILD))/lib" \
	  -Dfastclock.test.platforms=$(JAVA_CROSS_PLATFORM)) \
	-Dfastclock.jdk17.home="$(JAVA17_HOME)" -Dfastclock.jdk25.home="$(JAVA25_HOME)"

java-deps:
	@scripts/ensure-deps.sh c java java25
	@[ -n "$(JAVA17_HOME)" ] && [ -x "$(JAVA17_HOME)/bin/java" ] || { echo "fastclock: no JDK 17 at '$(JAVA17_HOME)' (looked for /usr/lib/jvm/java-17-openjdk-*; set JAVA17_HOME)" >&2; exit 1; }
	@[ -n "$(JAVA25_HOME)" ] && [ -x "$(JAVA25_HOME)/bin/javac" ] || { echo "fastclock: no JDK 25 at '$(JAVA25_HOME)' (looked for /usr/lib/jvm/temurin-25-jdk-* and java-25-openjdk-*; apt has no openjdk-25-jdk-headless here; set JAVA25_HOME): the jar's Java 22+ part is compiled and tested with it" >&2; exit 1; }

# After `build` (shared with test-c, so the two never run CMake at once).
# Configure again: a tree first configured before the JDK was there finds jni.h now.
java-native: java-deps build $(if $(JAVA_CROSS_PLATFORM),arm64-jni)
	cmake $(BUILD) >/dev/null
	@grep -q '^JAVA_INCLUDE_PATH2:PATH=/' $(BUILD)/CMakeCache.txt || { echo "fastclock: CMake found no jni.h; is a JDK installed?" >&2; exit 1; }
	cmake --build $(BUILD) --target fastclock_jni

java-jar: java-native
	$(JAVA_MVN) -pl fastclock -DskipTests clean package

test-java: java-native
	$(JAVA_MVN) -pl fastclock,adapters clean verify

bench-java: java-native
	$(JAVA_MVN) -pl fastclock,adapters,bench -DskipTests clean package
	"$(JAVA17_HOME)/bin/java" -jar java/bench/target/benchmarks.jar --out java/bench/target/jmh-java17.md $(BENCH_JAVA_ARGS)
	"$(JAVA25_HOME)/bin/java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -jar java/bench/target/benchmarks.jar --out java/bench/target/jmh-java25.md $(BENCH_JAVA_ARGS)
	@echo; cat java/bench/target/jmh-java17.md; echo; cat java/bench/target/jmh-java25.md
	@if [ "$(BENCH_JAVA_MODES)" = all ]; then \
	  FASTCLOCK_MODE=system "$(JAVA17_HOME)/bin/java" -jar java/bench/target/benchmarks.jar --out java/bench/target/jmh-java17-system.md $(BENCH_JAVA_ARGS) && \
	  FASTCLOCK_MODE=system "$(JAVA25_HOME)/bin/java" --enable-native-access=ALL-UNNAMED --sun-misc-unsafe-memory-access=allow -jar java/bench/target/benchmarks.jar --out java/bench/target/jmh-java25-system.md $(BENCH_JAVA_ARGS) && \
	  "$(JAVA17_HOME)/bin/java" -jar java/bench/target/benchmarks.jar --out java/bench/target/jmh-java17-java.md --jvmArg -Dfastclock.native=false $(BENCH_JAVA_ARGS) && \
	  "$(JAVA25_HOME)/bin/java" --sun-misc-unsafe-memory-access=allow -jar java/bench/target/benchmarks.jar --out java/bench/target/jmh-java25-java.md --jvmArg -Dfastclock.native=false $(BENCH_JAVA_ARGS) && \
	  for f in 17-system 25-system 17-java 25-java; do echo; cat java/bench/target/jmh-java$$f.md; done; fi
