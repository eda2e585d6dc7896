# Whole-process cost of one read: libc alone, an empty library preloaded (the
# loader's own floor), linked (thread and lazy), static, and under the shim,
# interleaved (bench/startup/).
.PHONY: bench-startup

bench-startup: build
	$(BUILD)/bin/fastclock-bench-startup --runs 300 $(BUILD)/bin/fastclock-startup-probe-plain \
		$(BUILD)/bin/fastclock-startup-probe-linked $(BUILD)/lib/libfastclock.so.0 \
		$(BUILD)/lib/libfastclock-preload.so \
		$(BUILD)/lib/libfastclock-startup-empty.so $(BUILD)/bin/fastclock-startup-probe-static
