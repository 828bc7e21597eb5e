# gpunode: `make demo` runs site.yml on a simulated three-node GPU cluster; `make test` runs
# lint, unit tests and every molecule scenario. Both set themselves up first
# (Debian packages, a Docker engine, .venv with pinned packages, the image).
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
# the controller environment: .venv (the oldest ansible-core of the supported range, and
# the test stack) or .venv-newest (the newest: `make demo VENV=.venv-newest`, `make
# collection VENV=.venv-newest`, `make unit VENV=.venv-newest UNIT_ARGS=--controller-only`)
VENV ?= .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export PY_COLORS := 0
export ANSIBLE_FORCE_COLOR := 0
export NO_COLOR := 1
SCENARIOS ?= $(sort $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml))))
# simulated node images the scenarios and the demo use (gpunode-<flavor>-systemd)
IMAGE_FLAVORS ?= $(sort $(patsubst gpunode-%-systemd,%,$(shell grep -ohE 'gpunode-[a-z0-9-]+-systemd' \
  molecule/*/molecule.yml .config/molecule/config.yml scripts/demo.sh)))
# steps run side by side (default: the CPU count)
TEST_JOBS ?= $(shell nproc)
export TEST_JOBS

.PHONY: help bootstrap bootstrap-newest image lint unit unit-lock molecule test ci demo demo-clean bench test-cluster

help:
	@echo "make demo          run site.yml (check, twice) on a simulated 3-node GPU cluster"
	@echo "make test          lint + unit tests + every molecule scenario, $(TEST_JOBS) at a time ($(SCENARIOS))"
	@echo "make lint | unit [UNIT_PYTHONS='3.8 ...'] | unit-lock | molecule [SCENARIOS='default ...'] | bench | test-cluster"
	@echo "VENV=.venv-newest  demo, collection or unit (UNIT_ARGS=--controller-only) on the newest ansible-core"
	@echo "make ee            check execution-environment.yml (ansible-builder create + its content in a clean venv)"

bootstrap:
	@VENV=$(VENV) bash scripts/bootstrap.sh

# .venv-newest: the newest ansible-core of the supported range (requirements-newest.txt, Python 3.12)
bootstrap-newest:
	@VENV=.venv-newest bash scripts/bootstrap.sh

image: bootstrap
	@bash tests/simnode/build-image.sh $(IMAGE_FLAVORS)

# every linter runs, scripts/check_function_length.py (no function of the code that
# ships over 60 lines: ruff has no line-count rule) and scripts/check_node_access.py (no
# file or process access outside module_utils/gpunode/host/); any finding fails. Ends with
# the size of the house (scripts/house_figures.py: code lines, statements, module options)
lint: bootstrap
	@status=0; set -x; ruff check . || status=1; python scripts/check_function_length.py || status=1; \
	python scripts/check_node_access.py || status=1; \
	yamllint -s . || status=1; ansible-lint || status=1; python scripts/house_figures.py || status=1; \
	exit $$status

# unit tests of target code on every target Python (3.8-3.13, one pinned
# virtualenv each, ansible.module_utils only; 3.14: Debian sid's python3 in a
# container, with .venv-newest's module_utils) and the controller-side tests on
# the controller's Python ($(VENV)), in a random order; prints per interpreter how many ran
unit: bootstrap bootstrap-newest
	python scripts/unit-tests.py $(UNIT_ARGS)

# re-pin requirements-unit/py3.X.txt after editing requirements-unit.in
unit-lock: bootstrap
	python scripts/unit-tests.py --lock

# scenarios side by side; each waits only for the images it uses
molecule: bootstrap
	python scripts/run-tests.py $(addprefix molecule:,$(SCENARIOS))

# lint, the unit tests and every scenario side by side (scripts/run-tests.py:
# longest first, a log per step in .cache/test/, a summary with times)
test: bootstrap bootstrap-newest
	python scripts/run-tests.py lint unit $(addprefix molecule:,$(SCENARIOS))

# what CI runs (.ci/run): make test's steps and, in the same schedule (TEST_JOBS at a time, the
# longest first), the newest ansible-core's controller-side unit tests, make demo on it, and
# make collection on the oldest and the newest (scripts/run-tests.py CI_STEPS)
ci: bootstrap bootstrap-newest
	python scripts/run-tests.py lint unit $(addprefix molecule:,$(SCENARIOS)) \
	  unit:newest demo:newest collection collection:newest

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

# The AWX/AAP execution environment (execution-environment.yml): builds the collection,
# writes ansible-builder's build context and installs its content into a clean virtualenv
# that runs the demo's check run (or, without the demo's nodes, a syntax check); docs/AWX.md.
.PHONY: ee
ee: bootstrap
	@bash scripts/test-ee.sh

# The Galaxy collection: check the sources' licence headers and module docs, build
# build/<namespace>-<name>-<version>.tar.gz from this playbook project
# (collection/galaxy.yml), install it into a temporary collections path, use it by
# FQCN, and run ansible-test sanity on it (no ignore entry but gpu_node_condition's `message`,
# scripts/collection_sanity.py ALLOWED_IGNORES). Every step runs; any failure fails.
# COLLECTION_TEST_ARGS, e.g. "-- --allow-missing-pythons" or "-- --controller-python-only" (CI's
# collection:newest: compile and import on the controller's Python only), go to scripts/test-collection.sh.
.PHONY: collection
collection: bootstrap
	@status=0; python scripts/check_boilerplate.py || status=1; \
	python scripts/build_collection.py && bash scripts/test-collection.sh $(COLLECTION_TEST_ARGS) || status=1; \
	exit $$status
