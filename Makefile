# rankscope: the two set-up commands of the README.
#   make demo   install what is missing, build, and run rankscope's main job on its built-in defaults
#   make test   install what is missing, build, and run the test suite but the minutes-long end-to-end runs (label
#               long: make test-long; CI runs both)
# Other targets: make build, make pretrain (BERT and ALBERT pretrained here on real English, about 2 x 40 min on 2
# cores, into out/pretrain/{bert,albert}; the full `rankscope reproduce` then adds their E1/E2 and dynamics), make bench, make bench-stream (peak memory of a 0.85e9-parameter decoder read whole
# and streamed), make test-sanitize-parsers (the fuzz corpus replayed through the parsers under
# ASan+UBSan, run by CI), make test-sanitize (the whole suite under ASan+UBSan, run before merging), make clean.
BUILD ?= build
JOBS ?= $(shell nproc)
DEMO_OUT ?= out/demo

SANITIZE_BUILD ?= $(BUILD)/sanitize
SANITIZE_PARSERS_BUILD ?= $(BUILD)/sanitize-parsers

.PHONY: deps configure build demo pretrain test test-long test-sanitize test-sanitize-parsers bench bench-stream clean

deps:
	@bash scripts/install-deps.sh

# The torch of the build: the project virtual environment's PyPI torch 2.13.0 (.venv, made by install-deps) by
# default; TORCH=system builds against Debian's libtorch-dev 1.13 and Debian's Python instead (README: build matrix).
TORCH ?= venv
VENV_PYTHON ?= $(CURDIR)/.venv/bin/python
ifeq ($(TORCH),system)
TORCH_CMAKE_ARGS = -DPython_EXECUTABLE=/usr/bin/python3
else
TORCH_CMAKE_ARGS = -DPython_EXECUTABLE=$(VENV_PYTHON) -DCMAKE_PREFIX_PATH="$$($(VENV_PYTHON) -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
endif

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DRANKSCOPE_BUILD_PYTHON=ON -DRANKSCOPE_MPI=ON $(TORCH_CMAKE_ARGS) > /dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The demo builds only what it runs: the command line and its SentencePiece helper (not the tests, benchmarks or the
# Python module).
demo: configure
	@cmake --build $(BUILD) -j $(JOBS) --target rankscope rankscope-spm
	$(BUILD)/bin/rankscope reproduce --quick --out $(DEMO_OUT)

PRETRAIN_OUT ?= out/pretrain
pretrain: build
	$(BUILD)/bin/rankscope pretrain --arch bert --out $(PRETRAIN_OUT)/bert
	$(BUILD)/bin/rankscope pretrain --arch albert --out $(PRETRAIN_OUT)/albert
	$(BUILD)/bin/rankscope dynamics --checkpoints $(PRETRAIN_OUT)/bert --out $(PRETRAIN_OUT)/bert/dynamics
	$(BUILD)/bin/rankscope dynamics --checkpoints $(PRETRAIN_OUT)/albert --out $(PRETRAIN_OUT)/albert/dynamics

test: build
	cd $(BUILD) && ctest --output-on-failure -j 2 -LE long

# The end-to-end runs of label `long` (the quick reproduction, killed and resumed: ~2.5 min); CI runs them after make test.
test-long: build
	cd $(BUILD) && ctest --output-on-failure -j 2 -L long

# The same suite built with -fsanitize=address,undefined (libtorch itself is not instrumented; the Python module is
# left out: an instrumented extension cannot load into an uninstrumented Python; so is MPI, whose library's own
# allocations at exit would drown LeakSanitizer's report: the sweep test checks the "built without MPI" error
# there instead). On 2 cores (2026-12-07, 428b602): the tests 27 min (1634 s; test_cli_limits 494 s), after a
# build of 20 min from scratch (1187 s, measured at 72e71ce); 2026-12-05: the tests 16 min.
test-sanitize: deps
	@cmake -S . -B $(SANITIZE_BUILD) -DCMAKE_BUILD_TYPE=Release -DRANKSCOPE_SANITIZE=ON -DRANKSCOPE_BUILD_BENCH=OFF -DRANKSCOPE_BUILD_PYTHON=OFF -DRANKSCOPE_MPI=OFF $(TORCH_CMAKE_ARGS) > /dev/null
	@cmake --build $(SANITIZE_BUILD) -j $(JOBS)
	cd $(SANITIZE_BUILD) && ctest --output-on-failure -j 2

# The parsers of outside files (torch-free) built with g++ -fsanitize=address,undefined, and every input of
# tests/fuzz_corpus/ (seeds and each input that once broke a parser) replayed through them; about a minute.
test-sanitize-parsers: deps
	@cmake -S . -B $(SANITIZE_PARSERS_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRANKSCOPE_BUILD_FUZZ=ON -DRANKSCOPE_FUZZ_ENGINE=replay > /dev/null
	@cmake --build $(SANITIZE_PARSERS_BUILD) -j $(JOBS)
	cd $(SANITIZE_PARSERS_BUILD) && ctest --output-on-failure

bench: build
	/usr/bin/python3 bench/compare_torch.py $(BUILD)
	$(VENV_PYTHON) bench/end_to_end.py $(BUILD)

bench-stream: build
	/usr/bin/python3 bench/streamed_memory.py $(BUILD)

clean:
	rm -rf $(BUILD)
