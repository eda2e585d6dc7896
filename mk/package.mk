# Debian packaging (cmake/package.cmake, scripts/make-deb.sh).
#
#   make package       build/deb/package/fastclock_<version>_<arch>.deb, then lintian
#
# Its tests (package.*, man_pages, library_symbols) run under ctest in test-c.
.PHONY: pkg-deps package

pkg-deps:
	@scripts/ensure-deps.sh pkg

test-c: pkg-deps

package: build pkg-deps
	@deb=$$(scripts/make-deb.sh $(BUILD)) && echo "fastclock: built $$deb" && \
	  out=$$(lintian "$$deb" 2>&1 | grep -v 'running with root privileges'); \
	  echo "lintian: $${out:-no tag}"; ! echo "$$out" | grep -q '^E:'
