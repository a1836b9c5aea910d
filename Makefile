# rankscope: the two set-up commands of the README.
#   make demo   install what is missing, build, and run rankscope's main job on its built-in defaults
#   make test   install what is missing, build, and run the whole test suite
# Other targets: make build, make bench, make clean.
BUILD ?= build
JOBS ?= $(shell nproc)
DEMO_OUT ?= out/demo

.PHONY: deps configure build demo test bench clean

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DRANKSCOPE_BUILD_PYTHON=ON > /dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/rankscope reproduce --quick --out $(DEMO_OUT)

test: build
	cd $(BUILD) && ctest --output-on-failure -j 2

bench: build
	/usr/bin/python3 bench/compare_torch.py $(BUILD)

clean:
	rm -rf $(BUILD)
