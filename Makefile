# SPDX-License-Identifier: MIT
# Every task a contributor runs, each calling the project's own scripts and the tools
# in ./.venv (`make setup` makes it).  `make` alone prints this list.  Arguments for
# pytest go in ARGS: make test-fast ARGS="-x tests/core/test_core.py".
#
# A target is listed by `make help` through its `## what it does` comment;
# tests/repo/test_habits.py checks that every target has one.

BIN := .venv/bin
ARGS ?=
C_SOURCES := src/*.c src/*.h tests/core/c/*.c tests/core/c/*.h
# The benchmarks `make bench` runs (benchmarks/bench_NAME.py), and their arguments:
# quick smoke runs by default, `make bench BENCH_ARGS=` for the measurements the README
# reports.
BENCHMARKS ?= core run capture warm template runner join import plot
BENCH_ARGS ?= --quick

.DEFAULT_GOAL := help
.PHONY: help setup test-fast test lint fmt docs sanitize stress cgroup-v2 bench wheels clean

help: ## list the targets
	@awk -F ':.*## ' '/^[a-z0-9-]+:.*## / { printf "  %-10s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

setup: ## OS packages and ./.venv (scripts/setup.sh), then pysandbox with its test tools
	bash scripts/setup.sh
	PYSANDBOX_STRICT=1 $(BIN)/python -m pip install -q ".[test]"

test-fast: ## reinstall, then the suite without the slow tests, in parallel
	PYSANDBOX_STRICT=1 $(BIN)/python -m pip install -q .
	$(BIN)/pytest -n auto -m "not slow" $(ARGS)

test: ## the full check, exactly what CI runs (scripts/test.sh)
	bash scripts/test.sh $(ARGS)

lint: ## ruff, clang-format and mypy --strict, at the pinned versions; changes nothing
	$(BIN)/ruff check . && $(BIN)/ruff format --check .
	$(BIN)/clang-format --dry-run -Werror $(C_SOURCES) && $(BIN)/mypy --strict pysandbox

fmt: ## fix what ruff can, format the Python and the C
	$(BIN)/ruff check --fix . && $(BIN)/ruff format .
	$(BIN)/clang-format -i $(C_SOURCES)

# Sphinx runs from docs/ so that autodoc imports the installed package (the compiled core
# is only there), which is reinstalled first so the API reference is the tree's.
docs: ## reinstall, then the documentation site into docs/_build/html, warnings as errors
	PYSANDBOX_STRICT=1 $(BIN)/python -m pip install -q .
	cd docs && ../$(BIN)/python -m sphinx -W --keep-going -b html . _build/html

sanitize: ## the C-heavy tests under ASan and UBSan (scripts/sanitize.sh)
	bash scripts/sanitize.sh $(ARGS)

stress: ## the suite several times beside a CPU hog (scripts/stress-test.sh; N=runs)
	bash scripts/stress-test.sh $(ARGS)

cgroup-v2: ## the suite and the selftest in the cgroup v2 VM lab (scripts/test-cgroup-v2.sh)
	bash scripts/test-cgroup-v2.sh $(ARGS)

bench: ## the benchmarks, quick (BENCH_ARGS= for full runs, BENCHMARKS=run for one)
	for name in $(BENCHMARKS); do $(BIN)/python benchmarks/bench_$$name.py $(BENCH_ARGS) || exit; done

wheels: ## the manylinux wheels users install, into dist/ (scripts/build-wheels.sh)
	bash scripts/build-wheels.sh dist

clean: ## build outputs and caches (not the virtual environments)
	rm -rf build dist docs/_build *.egg-info pysandbox/_init pysandbox/*.so .mypy_cache .ruff_cache .pytest_cache
	find . -path './.venv*' -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +
