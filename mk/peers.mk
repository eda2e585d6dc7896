# Peers measured beside fastclock, each in one process with it (bench/peers/):
# Rust's quanta and minstant (crates.io, versions pinned by Cargo.lock) and
# Abseil's absl::GetCurrentTimeNanos (Debian's libabsl-dev, linked statically
# as fastclock is: no PLT on either side).  Not part of `make test`: a
# benchmark, and it fetches crates.  Needs cargo 1.80+ (rustup's; Debian 12's
# cannot read the lock file).
.PHONY: peers-deps bench-peers

PEERS_DIR := $(BUILD)/peers

peers-deps:
	@scripts/ensure-deps.sh peers

$(PEERS_DIR)/fastclock-bench-absl: bench/peers/absl_peer.cc bench/bench_util.h include/fastclock.h $(BUILD)/lib/libfastclock.a | peers-deps
	@mkdir -p $(PEERS_DIR)
	c++ -O2 -std=c++17 -Wall -Wextra -o $@ bench/peers/absl_peer.cc -Iinclude $(BUILD)/lib/libfastclock.a \
		$$(pkg-config --cflags absl_time) -Wl,-Bstatic $$(pkg-config --libs-only-l absl_time | sed 's/-latomic//; s/-lrt//') \
		-Wl,-Bdynamic -latomic -lrt

bench-peers: build peers-deps $(PEERS_DIR)/fastclock-bench-absl
	@v=$$(cargo --version 2>/dev/null | sed -n 's/^cargo 1\.\([0-9]*\).*/\1/p'); \
	if [ -z "$$v" ] || [ "$$v" -lt 80 ]; then \
		echo "bench-peers: needs Rust's cargo 1.80 or later (rustup); found: $$(cargo --version 2>&1 | head -1)" >&2; \
		exit 1; fi
	FASTCLOCK_LIB_DIR=$(abspath $(BUILD))/lib CARGO_TARGET_DIR=$(abspath $(PEERS_DIR)) \
		cargo build --release --locked --quiet --manifest-path bench/peers/Cargo.toml
	$(PEERS_DIR)/release/fastclock-bench-peers --seconds 5
	@echo
	$(PEERS_DIR)/fastclock-bench-absl --seconds 5
