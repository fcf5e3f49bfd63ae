# hakiri developer entry points. `make test` is what CI runs (via .ci/run).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: help check-prereqs check-test-prereqs venv venv-dev run test test-unit lint clean

help:
	@echo "make check-prereqs  check Python >= 3.11 and Java >= 17 (all that make run needs)"
	@echo "make check-test-prereqs  the same, and the PostgreSQL server binaries the tests start"
	@echo "make run            install hakiri into $(VENV), apply the demo project into .hakiri/context"
	@echo "make test           lint + layer contract + whole suite on Spark + conformance suite on Sail"
	@echo "make test-unit      fast tests only (no JVM, no PostgreSQL)"
	@echo "make lint           ruff check, ruff format --check, import-linter layers"
	@echo "make clean          remove $(VENV) and caches"

check-prereqs:
	@PYTHON="$(PYTHON)" scripts/check-prereqs.sh

check-test-prereqs:
	@PYTHON="$(PYTHON)" scripts/check-prereqs.sh --test

# The stamps depend on pyproject.toml, so changing dependencies reinstalls and
# an unchanged tree skips pip entirely.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	@touch $@

# The dev install includes the runtime one, so it satisfies both stamps.
$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(VENV)/.installed $@

venv: $(VENV)/.installed
venv-dev: $(VENV)/.installed-dev

# The demo project at the root loads data/ into the local Delta context store
# (.hakiri/context), no server needed; a second run prints "no changes". With
# HAKIRI_DEMO_PG_URL set, the same pipelines also load into that PostgreSQL.
run: check-prereqs venv
	$(BIN)/hakiri validate
	$(BIN)/hakiri apply
	$(BIN)/hakiri context tables
	@if [ -n "$$HAKIRI_DEMO_PG_URL" ]; then \
		$(BIN)/hakiri apply --project examples/postgres; \
	fi

# CI runs this: the linters and the import-layer contract first, then every test on Apache
# Spark, on two workers (pytest-xdist; each starts its own PostgreSQL and local Spark Connect
# server, the path every command takes), then the conformance suite again on Sail (tests
# marked spark_only say why they are Spark's alone).
test: check-test-prereqs venv-dev
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -n 2 --dist worksteal
	HAKIRI_TEST_ENGINE=sail $(BIN)/python -m pytest -n 2 --dist worksteal tests/integration

test-unit: venv-dev
	$(BIN)/python -m pytest -m "not integration"

lint: venv-dev
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/lint-imports

clean:
	rm -rf $(VENV) build dist .pytest_cache .ruff_cache .hypothesis spark-warehouse
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	find . -name '*.egg-info' -type d -prune -exec rm -rf {} +
