# The LD_PRELOAD shim (cmake/preload.cmake).  Its tests run with the others
# under ctest (`make test`); the Java ones need a JDK, installed first, and
# JDK 25 for shim.java.interposed.jdk25 (otherwise installed only after
# test-c, by java-deps, and a fresh machine's first run would skip it).
.PHONY: shim-deps bench-shim

shim-deps:
	@scripts/ensure-deps.sh java java25

test-c: shim-deps

# The shim's benchmark: C and Java loops, plain and under `fastclock run`.
bench-shim: build shim-deps
	bench/shim/run.py --build $(BUILD)
