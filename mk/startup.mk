# Whole-process cost of one read: libc alone, linked (thread and lazy), and
# under the shim, interleaved (bench/startup/).
.PHONY: bench-startup

bench-startup: build
	$(BUILD)/bin/fastclock-bench-startup --runs 300 $(BUILD)/bin/fastclock-startup-probe-plain \
		$(BUILD)/bin/fastclock-startup-probe-linked $(BUILD)/lib/libfastclock-preload.so
