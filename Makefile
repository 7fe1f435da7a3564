# Command entry points.  `make demo` and `make test` are the README's two commands.
PRESET ?= default
BUILD  := build/$(PRESET)
JOBS   ?= 2

.PHONY: bootstrap configure build demo test bench fuzz format clean

bootstrap:
	@scripts/bootstrap.sh

configure: bootstrap
	@test -f $(BUILD)/build.ninja || cmake --preset $(PRESET)

build: configure
	cmake --build $(BUILD) -j $(JOBS)
	scripts/install-capture.sh $(BUILD)
	@# stagescope_torch for the Megatron-Core venv's Python 3.12 (scripts/megatron-env.sh), when it exists
	@if [ -x .venv-megatron/bin/python ]; then JOBS=$(JOBS) scripts/build-capture-for.sh .venv-megatron/bin/python; fi

# The main job: run the default config (8 ranks, encoder tp2·dp2 -> llm tp2·pp2), record it,
# check it, and open the viewer on it when a display is available.
demo: build
	scripts/demo.sh $(BUILD)

# The suite, then its sanitizer pass (scripts/sanitize.sh: ASan + UBSan build of everything
# but the engine; the hostile corpus and the storage/report/plan tests under it).  Both passes
# always run, and a failure of either fails the target (exit 8: the suite, 9: the sanitizer
# pass, 8 when both); the failed tests' output is printed again at the end
# (scripts/show-failed-tests.sh), where a log cut to its tail keeps it.
test: build
	@suite=0; ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --timeout 600 || suite=1; \
	sanitizer=0; JOBS=$(JOBS) scripts/sanitize.sh $(BUILD)/app/stagescope || sanitizer=1; \
	if [ $$suite = 1 ]; then scripts/show-failed-tests.sh $(BUILD); fi; \
	echo "make test: suite $$( [ $$suite = 0 ] && echo passed || echo FAILED ), sanitizer pass $$( [ $$sanitizer = 0 ] && echo passed || echo FAILED )"; \
	if [ $$suite = 1 ]; then exit 8; fi; if [ $$sanitizer = 1 ]; then exit 9; fi

bench: build
	scripts/bench.sh $(BUILD)

# A bounded (20 s) libFuzzer run of the run-file reader; the suite replays its seed corpus.
fuzz: configure
	cmake --build $(BUILD) --target fuzz

format:
	find app core storage ui tests -name '*.cpp' -o -name '*.h' | xargs clang-format -i

clean:
	rm -rf build
