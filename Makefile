# SPDX-License-Identifier: MIT
# The commands people type. CMake does the building; this file installs what is missing from
# Debian, picks the build directories, and runs things.
#
#   make run     install missing build dependencies, build, and show this machine's GPUs (live)
#   make test    the same set-up, then every test: a -Werror build, the whole suite again under
#                ASan+UBSan (clang) with short fuzz runs, the threaded tests under ThreadSanitizer
#   make fuzz    run every fuzz target longer (FUZZ_SECONDS each, default 300)
#   make bench   the benchmarks (on a machine with an NVIDIA GPU; see bench/README.md)
#   make install PREFIX=/usr/local   (the program, library, man page and bash/zsh/fish completion)

BUILD        ?= build
TEST_BUILD   ?= build-test
ASAN_BUILD   ?= build-asan
TSAN_BUILD   ?= build-tsan
PREFIX       ?= /usr/local
FUZZ_SECONDS ?= 300
ARGS         ?=
JOBS         ?= $(shell nproc 2>/dev/null || echo 2)
# tests side by side: twice the cores, as most of them wait on clocks and child processes
TEST_JOBS    ?= $(shell echo $$(( $(JOBS) * 2 )))

MAKEFLAGS += --no-print-directory

# Debian packages: to build and run, and in addition to test.
DEPS_RUN  := gcc make cmake libc6-dev libjansson-dev libyajl-dev libsqlite3-dev libprotobuf-c-dev protobuf-c-compiler python3-dev \
             libncurses-dev libevent-dev libssl-dev
DEPS_TEST := clang libclang-rt-dev python3 python3-pytest groff-base python3-protobuf tmux prometheus pkgconf
# gpumon show --json is validated against docs/show.schema.json; the zsh and fish completion
# scripts are checked by their shells (tests/cli/test_completion.py)
DEPS_TEST += python3-jsonschema zsh fish
# headless Chromium renders the `gpumon report --html` page in tests/html
DEPS_TEST += chromium-headless-shell
# gpumon run's tests that start co-tenants run again under valgrind (ctest's cli/valgrind)
DEPS_TEST += valgrind
# pip install . / pip wheel . offline into fresh venvs, from a clean copy (git ls-files) (tests/pip)
DEPS_TEST += python3-venv python3-pip python3-setuptools python3-wheel git

.PHONY: all build run test test-werror test-asan test-tsan build-werror run-werror build-asan run-asan build-tsan \
	run-tsan fuzz bench install deps deps-test clean help

all: build

help:
	@sed -n '2,12p' Makefile | sed 's/^# \{0,1\}//'

# Installs the packages in $(1) that are not installed yet; needs root (or sudo) only then.
define apt_install_missing
	@missing=""; \
	for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; \
	  elif command -v sudo >/dev/null 2>&1; then SUDO=sudo; echo "Installing$$missing needs root: using sudo"; \
	  else echo "Missing Debian packages:$$missing. Installing them needs root: run 'sudo apt-get install$$missing', then make again." >&2; exit 1; fi; \
	  echo "Installing missing Debian packages:$$missing"; \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null || exit 1; \
	fi
endef

deps:
	$(call apt_install_missing,$(DEPS_RUN))

deps-test: deps
	$(call apt_install_missing,$(DEPS_TEST))

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target gpumon

# gpumon's own line explains a missing driver (exit 12); make adds how to try it without one.
# On a terminal with no ARGS: the live view (which plays the bundled recording without a driver).
run: build
	@if [ -z "$(ARGS)" ] && [ -t 0 ] && [ -t 1 ]; then $(BUILD)/cli/gpumon watch; \
	else $(BUILD)/cli/gpumon $(ARGS); fi; st=$$?; \
	if [ $$st -eq 12 ] && [ -z "$(ARGS)" ]; then echo "Without a GPU, try: make run ARGS=\"show --replay examples/recordings/h200_train_leak.gpumon --at peak\" (README.md: Try it without a GPU)"; fi; \
	[ $$st -eq 0 ] || [ $$st -eq 12 ] || exit $$st

# The three trees are built while the tests of the one before run (niced: those tests mostly wait on
# clocks and child processes, and keep the CPU they ask for); each suite runs once its tree is built.
test: deps-test
	@$(MAKE) build-werror
	@set -u; log=$(ASAN_BUILD).build.log; rm -f $$log.status; \
	( nice -n 19 $(MAKE) build-asan build-tsan >$$log 2>&1; echo $$? >$$log.status ) & bpid=$$!; \
	$(MAKE) run-werror; st=$$?; n=0; \
	while kill -0 $$bpid 2>/dev/null; do sleep 5; n=$$((n + 5)); \
	  [ $$((n % 50)) -ne 0 ] || echo "... still building $(ASAN_BUILD) and $(TSAN_BUILD) ($$n s): $$(tail -n 1 $$log)"; done; \
	wait; \
	if [ "$$(cat $$log.status 2>/dev/null)" != 0 ]; then cat $$log; echo "the sanitizer builds failed (above)" >&2; exit 1; fi; \
	echo "[built $(ASAN_BUILD) and $(TSAN_BUILD) beside the tests: $$log]"; \
	[ $$st -eq 0 ] || exit $$st
	@$(MAKE) run-asan run-tsan

test-werror: build-werror run-werror
test-asan: build-asan run-asan
test-tsan: build-tsan run-tsan

build-werror:
	cmake -S . -B $(TEST_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGPUMON_WERROR=ON -DCMAKE_C_COMPILER=gcc
	cmake --build $(TEST_BUILD) -j $(JOBS)

run-werror:
	cd $(TEST_BUILD) && $(CURDIR)/tests/ctest-progress --output-on-failure -j $(TEST_JOBS)

build-asan:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGPUMON_WERROR=ON -DGPUMON_SANITIZE=ON \
	  -DGPUMON_FUZZ=ON -DGPUMON_FUZZ_SECONDS=10 -DCMAKE_C_COMPILER=clang
	cmake --build $(ASAN_BUILD) -j $(JOBS)

run-asan:
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  $(CURDIR)/tests/ctest-progress --output-on-failure -j $(TEST_JOBS)

# Only what the threaded tests need (ctest label "threaded", tests/CMakeLists.txt) is built.
build-tsan:
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGPUMON_WERROR=ON -DGPUMON_TSAN=ON -DCMAKE_C_COMPILER=clang
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target threaded_tests

run-tsan:
	cd $(TSAN_BUILD) && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  $(CURDIR)/tests/ctest-progress --output-on-failure -j $(JOBS) -L threaded

fuzz: deps-test
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGPUMON_SANITIZE=ON -DGPUMON_FUZZ=ON \
	  -DGPUMON_FUZZ_SECONDS=$(FUZZ_SECONDS) -DCMAKE_C_COMPILER=clang
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest --output-on-failure -R '^fuzz/'

bench: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)
	BUILD=$(BUILD) bash bench/run_bench.sh

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(TEST_BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
