# The two commands of the README: `make run` and `make test`. Both start from nothing:
# they create .venv with the machine's python3 and install what they need into it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test test-sqlite test-fast soak screenshots lint typecheck bench bench-quick clean

# On CI a missing PostgreSQL is installed (Debian's package) rather than reported.
ifdef CI
export FELTDB_INSTALL_PG := 1
export FELTDB_INSTALL_CHROMIUM := 1
endif

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

## run: install, then start the server (./feltdb.sqlite3, http://127.0.0.1:8700), a sample
## worker (examples/hello_worker.py) and a trickle of submitted work, so that work flows;
## Ctrl-C stops them. The tour of the authority alone is `$(BIN)/feltdb demo`.
run: $(VENV)/.installed
	BIN=$(BIN) scripts/run-sample

## test: install everything, lint, type-check, and run every test on SQLite and on a
## throwaway PostgreSQL cluster (scripts/with-postgres starts it, and stops it at the end),
## the browser tests in Debian's Chromium (scripts/ensure-chromium; installed on CI).
## $(PARALLEL): two pytest-xdist workers, a test file (or a package sharing one server) each
## at a time; much of the suite waits on processes, sockets and fsync, so two overlap well on
## 2 cores. Every worker but the first runs its own throwaway PostgreSQL (tests/conftest.py).
## In collection order (not xdist's biggest-count-first): the few long reliability files are
## handed out early and the many short unit files last, so both workers end together.
PARALLEL := -n 2 --dist loadfile --no-loadscope-reorder
test: lint typecheck
	scripts/ensure-chromium
	scripts/with-postgres $(BIN)/pytest $(PARALLEL)

## test-sqlite: every test that needs no PostgreSQL (the postgres-marked ones deselected)
test-sqlite: $(VENV)/.installed-dev
	$(BIN)/pytest $(PARALLEL) -m "not postgres"

## test-fast: every test but the multi-process ones, on both backends
test-fast: $(VENV)/.installed-dev
	scripts/with-postgres $(BIN)/pytest $(PARALLEL) -m "not multiprocess"

## soak: the reliability suites (tests/reliability) at their long size, FELTDB_SOAK=1: 241
## SIGKILLs per backend, the stateful model, races, faults, schemathesis and the security
## soak; writes their figures to $(SOAK_FIGURES) and into docs/reliability.md. About 30
## minutes on 2 cores.
SOAK_FIGURES := tests/reliability/results/soak.jsonl
soak: $(VENV)/.installed-dev
	rm -f $(SOAK_FIGURES)
	FELTDB_SOAK=1 FELTDB_FIGURES=$(abspath $(SOAK_FIGURES)) \
		scripts/with-postgres $(BIN)/pytest tests/reliability -p no:cacheprovider
	$(BIN)/python tests/reliability/report.py $(SOAK_FIGURES) docs/reliability.md

## screenshots: the dashboard's pictures in the README (docs/screenshots/), taken by the
## browser test that takes them on every run (elsewhere, into a temporary folder)
screenshots: $(VENV)/.installed-dev
	scripts/ensure-chromium
	FELTDB_SCREENSHOTS=docs $(BIN)/pytest tests/browser/test_dashboard.py -k screenshots -p no:cacheprovider
	FELTDB_SCREENSHOTS=docs $(BIN)/pytest tests/browser/test_operator_views.py -p no:cacheprovider
	FELTDB_SCREENSHOTS=docs $(BIN)/pytest tests/browser/test_schedule_page.py -p no:cacheprovider

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy src

## bench: the benchmark suite (opt-in; never part of `make test`): feltdb against huey,
## persist-queue, pgqueuer and procrastinate (installed into bench/.peers-venv), on SQLite and
## a throwaway PostgreSQL; writes bench/results/all.json, docs/benchmarks.md and its plots
bench: $(VENV)/.installed-dev
	$(BIN)/python bench/run_all.py

## bench-quick: the same suite, small: 1,000 workloads (300 over HTTP), one round, backlogs up
## to 100,000; about ten minutes on 2 cores
bench-quick: $(VENV)/.installed-dev
	$(BIN)/python bench/run_all.py --workloads 1000 --http-workloads 300 --rounds 1 \
		--max-backlog 100000

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
