# The two set-up commands: `make run` and `make test` (see README.md).
BUILD_DIR ?= build
JOBS ?= 2
CMAKE_FLAGS ?=
# The project's PyTorch environment's interpreter (packaging/install-pytorch.sh), in a recipe.
TORCH_PYTHON = $$(bash packaging/install-pytorch.sh --print)/bin/python
ifeq ($(CI),true)
  CMAKE_FLAGS += -DPIPESTUDIO_WERROR=ON -DPIPESTUDIO_REQUIRE_PYTORCH=ON
  # The full build: the GUI and the engine with all their tests, never left out quietly.
  FULL_BUILD_FLAGS = -DPIPESTUDIO_REQUIRE_UI=ON -DPIPESTUDIO_REQUIRE_ENGINE=ON
endif

.PHONY: all deps pytorch-env configure build run test build-torch2 test-torch2 lint lint-tree demo asan-test fuzz-build \
  fuzz-smoke package package-test-root clean

all: build

deps:
	@bash packaging/install-deps.sh

# PyTorch 2.11 in a virtual environment (~5 GB, downloaded once into ~/.cache/pipestudio): the
# checks against PyTorch itself (tests/pytorch) and the engine's torch2 build use it.
pytorch-env:
	@bash packaging/install-pytorch.sh

configure: deps pytorch-env
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DPIPESTUDIO_TORCH_PYTHON=$(TORCH_PYTHON) $(CMAKE_FLAGS) $(FULL_BUILD_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# The GUI on the bundled example; with no display, the headless demo.
run: build
	@if [ -x $(BUILD_DIR)/app/pipestudio ] && { [ -n "$$DISPLAY" ] || [ -n "$$WAYLAND_DISPLAY" ]; }; then \
	  $(BUILD_DIR)/app/pipestudio resources/examples/example.pipe; \
	else \
	  bash packaging/demo.sh $(BUILD_DIR)/app/pipestudio-cli; \
	fi

demo: build
	@bash packaging/demo.sh $(BUILD_DIR)/app/pipestudio-cli

test: build
	@cd $(BUILD_DIR) && QT_QPA_PLATFORM=offscreen ctest --output-on-failure -j $(JOBS)

# The engine against PyTorch 2.11 from pip (the torch2 preset: CUDA and NCCL code compiled and
# linked), and every CPU engine test against it (CI runs both this and the Debian 1.13 build).
build-torch2: deps pytorch-env
	@PIPESTUDIO_TORCH_SITE=$$($(TORCH_PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') \
	  cmake --preset torch2 -DPIPESTUDIO_TORCH_PYTHON=$(TORCH_PYTHON) $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-torch2 -j $(JOBS) --target pipestudio-cli pipestudio-engine engine_tests

test-torch2: build-torch2
	@cd build-torch2 && ctest --output-on-failure -j $(JOBS) -L engine

# The Debian packages pipestudio and pipestudio-engine (packaging/README.md) in $(BUILD_DIR)/packages,
# checked by lintian. `make test` checks them too (ctest -L package: tests/package/deb_test.sh).
package: build
	@cd $(BUILD_DIR) && cpack -G DEB >/dev/null
	@lintian --fail-on error,warning $(BUILD_DIR)/packages/pipestudio*_$$(dpkg-parsechangelog -l packaging/debian/changelog -S Version)_*.deb
	@ls -1 $(BUILD_DIR)/packages/*.deb

# The packages installed into a fresh Debian 12 root (debootstrap minbase; needs root and a Debian
# mirror): apt resolves their dependencies, then the CLI, a gradient-checked run, a simulate with
# the profile a .pipe header names, the GUI's screenshot, and a purge that leaves nothing
# (tests/package/clean_root_test.sh; times, logs and the screenshot in $(BUILD_DIR)/clean-root).
package-test-root: build
	@bash tests/package/clean_root_test.sh $(BUILD_DIR)

# clang-format and clang-tidy over the C++ files of the last commit (LINT_BASE=REV: since REV).
lint: build
	@BUILD_DIR=$(BUILD_DIR) JOBS=$(JOBS) bash .ci/lint

# The same over the whole tree: clang-format over every C++ file, clang-tidy over every source of
# core, sessions, engine, ui and app (about 7 minutes on 2 cores).
lint-tree: build
	@BUILD_DIR=$(BUILD_DIR) JOBS=$(JOBS) LINT_SCOPE=tree bash .ci/lint

# Address and undefined-behaviour sanitizers over the core, command-line, session and engine
# (CPU) tests: the preset asan builds the engine too (libtorch itself is not instrumented;
# tests/sanitizers/lsan.supp leaves its own process-lifetime allocations out). The preset leaves
# out the one test that bounds predicted against measured time
# (RunSessionCli.ProfiledPredictionIsWithinAFactorOfTwoOfTheMeasuredMakespan): instrumentation slows
# the engine's own code and not libtorch's kernels, so the profile and the run stop measuring the
# same thing; it runs in `make test`.
asan-test: deps
	@cmake --preset asan >/dev/null
	@cmake --build build-asan -j $(JOBS) --target pipestudio-cli pipestudio-engine core_tests cli_tests sessions_tests engine_tests
	@ctest --preset asan -j $(JOBS)

# libFuzzer targets of every parser (tests/fuzz, docs/fuzzing.md) under the address and
# undefined-behaviour sanitizers; fuzz-smoke runs each for FUZZ_SECONDS (CI: 9 x 19 s).
FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 19
FUZZ_CXX ?= clang++-14
FUZZ_TARGETS ?= dsl pytorch_csv cost_profile trace_import run_events session session_write hosts flight_recorder

fuzz-build: deps
	@cmake -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=$(FUZZ_CXX) \
	  -DPIPESTUDIO_FUZZ=ON -DPIPESTUDIO_BUILD_TESTS=OFF -DPIPESTUDIO_BUILD_UI=OFF -DPIPESTUDIO_BUILD_ENGINE=OFF \
	  -DPIPESTUDIO_BUILD_BENCH=OFF >/dev/null
	@cmake --build $(FUZZ_DIR) -j $(JOBS) --target fuzzers

fuzz-smoke: fuzz-build
	@bash tests/fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

clean:
	rm -rf $(BUILD_DIR) build-asan build-torch2 $(FUZZ_DIR)
