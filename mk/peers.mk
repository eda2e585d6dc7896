# Peers measured beside fastclock, each in one process with it (bench/peers/):
# Rust's quanta and minstant (crates.io, versions pinned by Cargo.lock) and
# Abseil's absl::GetCurrentTimeNanos (Debian's libabsl-dev).  Not part of
# `make test`: a benchmark, and it fetches crates.
.PHONY: peers-deps bench-peers

PEERS_DIR := $(BUILD)/peers

peers-deps:
	@scripts/ensure-deps.sh peers

$(PEERS_DIR)/fastclock-bench-absl: bench/peers/absl_peer.cc include/fastclock.h $(BUILD)/lib/libfastclock.a | peers-deps
	@mkdir -p $(PEERS_DIR)
	c++ -O2 -std=c++17 -Wall -Wextra -o $@ bench/peers/absl_peer.cc -Iinclude $(BUILD)/lib/libfastclock.a \
		$$(pkg-config --cflags --libs absl_time)

bench-peers: build peers-deps $(PEERS_DIR)/fastclock-bench-absl
	FASTCLOCK_LIB_DIR=$(abspath $(BUILD))/lib CARGO_TARGET_DIR=$(abspath $(PEERS_DIR)) \
		cargo build --release --locked --quiet --manifest-path bench/peers/Cargo.toml
	$(PEERS_DIR)/release/fastclock-bench-peers --seconds 5
	@echo
	$(PEERS_DIR)/fastclock-bench-absl --seconds 5
