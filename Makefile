# Two entry points: `make demo` (the main job) and `make test` (lint and the import layers, types,
# the documentation site, the claims of every committed report, the whole test suite).
# Each bootstraps its own virtual environment and installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
LINT_PATHS := $(wildcard src tests benchmarks examples scripts docs)

.PHONY: demo test test-other-blas lint typecheck docs claims bench wheel-check clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-base: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[dev,flower,torch]"
	touch $@ $(VENV)/.installed-base

$(VENV)/.installed-docs: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[docs]"
	touch $@ $(VENV)/.installed-base

demo: $(VENV)/.installed-base
	$(BIN)/adcs reproduce --quick

lint: $(VENV)/.installed-test
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)
	$(BIN)/lint-imports

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy

# The documentation site (mkdocs.yml), built strictly: a broken link or docstring fails it.
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# Every committed report under results/ agrees with its raw files: the generated ones regenerate
# byte for byte, the hand-written ones state numbers and comparisons only through checked markers.
claims: $(VENV)/.installed-test
	$(BIN)/python scripts/check_claims.py

# The Deployment Runtime's tests (mostly waiting out Flower's heartbeats) run beside the rest.
test: lint typecheck docs claims
	bash scripts/run_tests.sh $(BIN)

# The tests that compare floats within a tolerance (marked `numeric`), again under an OpenBLAS
# kernel other than the machine's own: a bound that holds on one kernel only is a guess.
test-other-blas: $(VENV)/.installed-test
	OPENBLAS_CORETYPE=$$($(BIN)/python scripts/other_blas.py) sh -c \
	  '$(BIN)/python scripts/other_blas.py --check && bash scripts/run_tests.sh $(BIN) numeric'

# Build the wheel, install it in a fresh environment, run `adcs reproduce --quick` from it.
wheel-check: $(BIN)/python
	bash scripts/check_wheel.sh $(BIN)/python $(WHEEL_ARGS)

bench: $(VENV)/.installed-base
	$(BIN)/adcs bench map
	$(BIN)/adcs bench sim

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache site
