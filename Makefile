# Thin wrapper over CMake presets. Each target installs what it needs first.
PRESET ?= default
BUILD_DIR := build/$(PRESET)
JOBS ?= $(shell nproc)

.PHONY: all deps configure build demo test test-asan test-tsan soak clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake --preset $(PRESET) >/dev/null

build: configure
	@cmake --build --preset $(PRESET) -j $(JOBS)

# The main job: two processes on shm, single and paged writes, every byte
# verified, after fabric-info's report of what this host offers (topology,
# providers, NICs). Only what the two tools need: their packages, the library
# and the tools (preset demo, build/demo/), no tests, CUDA kernels or Python.
demo:
	@scripts/install-deps.sh demo
	@cmake --preset demo >/dev/null
	@cmake --build --preset demo -j $(JOBS)
	@build/demo/tools/fabric-info
	@echo
	@build/demo/tools/fabric-demo --provider shm --json demo-results.json

# On failure, each failed test's last lines come again at the very end (a log read from its end).
test: build
	@ctest --preset $(PRESET) -j $(JOBS) || { scripts/failed-test-output.sh $(BUILD_DIR); exit 1; }

# The field suite's soak (tests/field/soak_test.cpp) for 10 minutes: 5 per provider, shm then
# tcp; CI runs it for 30 s each. Figures: docs/reliability.md#field-failures.
soak: build
	@FABRIC_FIELD_SOAK_SECONDS=300 ctest --preset $(PRESET) -R FieldSoak --output-on-failure

test-asan:
	@$(MAKE) --no-print-directory test PRESET=asan

test-tsan:
	@$(MAKE) --no-print-directory test PRESET=tsan

clean:
	rm -rf build
