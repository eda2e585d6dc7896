# Debian packaging (cmake/package.cmake, scripts/make-deb.sh).
#
#   make package         build/deb/package/fastclock_<version>_<arch>.deb, then lintian
#   make package-arm64   the same for arm64, from the cross-built tree (mk/arm64.mk):
#                        build-arm64/deb/package/fastclock_<version>_arm64.deb
#
# Its tests (package.*, man_pages, library_symbols) run under ctest in test-c,
# and in test-arm64 for the arm64 package.
.PHONY: pkg-deps package package-arm64

pkg-deps:
	@scripts/ensure-deps.sh pkg

test-c: pkg-deps
test-arm64: pkg-deps

# make_deb BUILD_DIR: the .deb of that tree, and lintian's word on it (the
# package.lintian test's own check: an error tag, or a lintian that could
# not check, fails).
make_deb = @deb=$$(scripts/make-deb.sh $(1)) || exit 1; echo "fastclock: built $$deb"; \
	  sh tests/package_test.sh lintian $(1) $(CURDIR)

package: build pkg-deps
	$(call make_deb,$(BUILD))

package-arm64: build-arm64 pkg-deps
	$(call make_deb,$(ARM64_BUILD))
