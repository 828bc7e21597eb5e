# gpunode: `make demo` runs site.yml on a simulated GPU node; `make test` runs
# lint, unit tests and every molecule scenario. Both set themselves up first
# (Debian packages, a Docker engine, .venv with pinned packages, the image).
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
VENV ?= .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export PY_COLORS := 0
export ANSIBLE_FORCE_COLOR := 0
export NO_COLOR := 1
SCENARIOS ?= $(sort $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml))))

.PHONY: help bootstrap image lint unit molecule test demo demo-clean bench test-cluster

help:
	@echo "make demo          run site.yml twice on a simulated GPU node"
	@echo "make test          lint + unit tests + every molecule scenario ($(SCENARIOS))"
	@echo "make lint | unit | molecule [SCENARIOS='default ...'] | bench | test-cluster"

bootstrap:
	@bash scripts/bootstrap.sh

image: bootstrap
	@bash tests/simnode/build-image.sh

lint: bootstrap
	ruff check .
	yamllint -s .
	ansible-lint

unit: bootstrap
	pytest -q tests/unit

molecule: image
	@bash scripts/run-molecule.sh $(SCENARIOS)

test: lint unit molecule

demo: image
	@bash scripts/demo.sh

demo-clean:
	@bash scripts/demo.sh --clean

# ends with the no-op ratios of issue 14 (benchmarks/bench_noop.py --help; e.g. BENCH_NOOP_ARGS='--rounds 3')
bench: bootstrap
	@for b in $(filter-out benchmarks/bench_noop.py,$(sort $(wildcard benchmarks/bench_*.py))); do python "$$b"; done
	@python benchmarks/bench_noop.py $(BENCH_NOOP_ARGS)

test-cluster: bootstrap
	@bash tests/cluster/run.sh
