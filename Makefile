# The two set-up commands: `make run` and `make test` (see README.md).
BUILD_DIR ?= build
JOBS ?= 2
CMAKE_FLAGS ?=
ifeq ($(CI),true)
  CMAKE_FLAGS += -DPIPESTUDIO_WERROR=ON
endif

.PHONY: all deps configure build run test demo asan-test clean

all: build

deps:
	@bash packaging/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null

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

# Address and undefined-behaviour sanitizers over the core tests.
asan-test: deps
	@cmake --preset asan >/dev/null
	@cmake --build build-asan -j $(JOBS) --target all
	@cd build-asan && ctest --output-on-failure -j $(JOBS) -L core

clean:
	rm -rf $(BUILD_DIR) build-asan
