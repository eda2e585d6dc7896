# The `fastclock` command (cli/): doctor and bench.  Its tests (tests/cli)
# run under ctest with the others in test-c; the end-to-end ones check the
# JSON against docs/*.schema.json with Debian's python3-jsonschema.
.PHONY: cli-deps test-cli

cli-deps:
	@scripts/ensure-deps.sh cli

test-c: cli-deps

# Only the CLI's tests, for a quick look (make test runs them too).
test-cli: build cli-deps
	cd $(BUILD) && ctest --output-on-failure --timeout 600 -R '^cli\.'
