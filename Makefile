# Noema — every target is listed by `make help`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The LangChain/LangGraph recipe's own environment (examples/langchain/requirements.lock):
# langchain-mcp-adapters needs the MCP SDK below 2, Noema's server 2.3.0.
LANGCHAIN_VENV  ?= .venv-langchain
LANGCHAIN_STAMP := $(LANGCHAIN_VENV)/.installed
# The Node clients the tests drive (tests/node/package-lock.json): the MCP TypeScript SDK, the MCP
# Inspector's CLI, nats.js v3.
NODE_STAMP := tests/node/node_modules/.installed

.DEFAULT_GOAL := help
.PHONY: help setup browser node run test test-fast test-unit test-integration coverage lint typecheck check schemas openapi deploy-auth deploy-files golden lock bench-ingest clean

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-18s %s\n", $$1, $$2}'

# Packages are listed so that adding one re-runs the editable install (its import map is static).
# requirements.lock installs the SDK (sdk/, its own distribution) editable from this tree.
$(STAMP): requirements.lock pyproject.toml sdk/pyproject.toml $(wildcard libs/*/__init__.py schemas/*/__init__.py services/*/__init__.py sdk/*/__init__.py)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $(STAMP)

$(LANGCHAIN_STAMP): examples/langchain/requirements.lock
	$(PYTHON) -m venv $(LANGCHAIN_VENV)
	$(LANGCHAIN_VENV)/bin/pip install --quiet --disable-pip-version-check -r examples/langchain/requirements.lock
	@touch $(LANGCHAIN_STAMP)

$(NODE_STAMP): tests/node/package.json tests/node/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		cd tests/node && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.installed; \
	else \
		echo "make setup: no npm on PATH. The tests with Node clients (tests/integration/test_node_clients.py)" >&2; \
		echo "  need Node 20 or later and npm: install them (Debian: apt-get install nodejs npm), then run make setup again." >&2; \
	fi

node: $(NODE_STAMP) ## Install the Node clients the tests drive (tests/node, npm ci from its lock)

setup: $(STAMP) $(LANGCHAIN_STAMP) $(NODE_STAMP) browser ## Create .venv (requirements.lock and Noema), .venv-langchain (the LangChain recipe's), tests/node's Node clients, and install chromium

# The explorer's browser test drives a system chromium through Playwright (whose own browser downloads
# are not used): Debian's package, installed here when none is on PATH and apt-get can (root); anyone
# else is told what to install. Nothing is done when chromium is already there.
browser: ## Install Debian's chromium for the explorer's browser test, unless a chromium is on PATH
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; then \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; } || \
		echo "make setup: installing Debian's chromium failed (above); Noema is set up, but the explorer's browser test will fail until a chromium is on PATH" >&2; \
	else \
		echo "make setup: no chromium on PATH. The explorer's browser test (tests/e2e/test_explorer_browser.py)" >&2; \
		echo "  needs one: install Debian's chromium package (sudo apt-get install --no-install-recommends chromium)," >&2; \
		echo "  or your system's Chromium as a command named chromium on PATH, then run make setup again." >&2; \
	fi

run: $(STAMP) ## Start Noema on the embedded default (NATS + PostgreSQL in ./var); Ctrl-C stops it
	$(BIN)/noemactl up

# The fast tier: unit and contract tests, no server (a test that takes the `servers` fixture is marked
# integration by tests/conftest.py, so it cannot land here); every other test needs servers or
# processes, or takes a while, and is marked integration or slow.
FAST := not integration and not slow

# The real-server tier waits on its servers far more than it computes, so it runs in TEST_WORKERS
# processes, each with servers of its own (pytest-xdist). A module's tests stay in one process (its
# fixtures are made once) unless it is marked `spread`; the fault tests, which time outages and kills,
# are two groups (lanes, tests/conftest.py): in each, one process runs them one at a time, from the
# start, beside the other lane and the rest. The longest modules start first. TEST_WORKERS=0 runs
# everything in one process.
TEST_WORKERS ?= 4
REAL := -m "integration or slow"
ifeq ($(TEST_WORKERS),0)
REAL_TIERS = $(BIN)/python -m pytest $(REAL)
else
REAL_TIERS = $(BIN)/python -m pytest $(REAL) -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder
endif

test: $(STAMP) $(LANGCHAIN_STAMP) $(NODE_STAMP) ## Run every test: the fast tier first (stops on a failure), then the rest once
	$(BIN)/python -m pytest -m "$(FAST)"
	$(REAL_TIERS)

test-fast: $(STAMP) ## The fast tier only: unit and contract tests, no servers (under a minute)
	$(BIN)/python -m pytest -m "$(FAST)"

test-unit: test-fast ## Same as test-fast (its former name)

coverage: $(STAMP) ## The fast tier's line coverage of libs/ and services/ (pytest-cov): each module's, then the TOTAL
	$(BIN)/python -m pytest -m "$(FAST)" -q -p no:cacheprovider --cov=libs --cov=services --cov-report=term:skip-covered

test-integration: $(STAMP) $(LANGCHAIN_STAMP) $(NODE_STAMP) ## Everything but the fast tier: integration, e2e, faults (real NATS + PostgreSQL)
	$(REAL_TIERS)

lint: $(STAMP) ## ruff (lint + format check)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP) ## mypy --strict on libs/, schemas/, services/, sdk/, tests/, bench/
	$(BIN)/mypy

check: lint typecheck test ## Lint, typecheck and test

schemas: $(STAMP) ## Regenerate schemas/json and schemas/asyncapi.json from the msgspec Structs
	$(BIN)/python -m noema_service.documents

openapi: $(STAMP) ## Regenerate schemas/openapi.json from the operator API's route table and Structs
	$(BIN)/python -m noema_api.routes

deploy-auth: $(STAMP) ## Regenerate deploy/nats/auth.conf and auth-values.yaml from libs/noema/runtime/identities.py
	$(BIN)/python -m noema.runtime.natsconfig

deploy-files: deploy-auth ## Regenerate every generated file of deploy/: the NATS authorization and the KEDA ScaledObjects (for DEPLOY_PARTITIONS)
	$(BIN)/python -m noema.runtime.kedaconfig

golden: $(STAMP) ## Write golden samples for event versions that have none (never overwrites)
	$(BIN)/python -m noema_events.golden

# requirements-runtime.lock: the runtime dependencies alone (what the image installs beside the two
# wheels), at the versions of requirements.lock (its pins are the constraints), without the SDK,
# which comes as a wheel.
lock: ## Re-pin requirements.lock (development), requirements-runtime.lock (the image) and the LangChain recipe's lock
	$(BIN)/uv pip compile pyproject.toml --extra dev -o requirements.lock --python-version 3.11
	grep -v '^-e ' requirements.lock > $(VENV)/lock-constraints.txt
	$(BIN)/uv pip compile pyproject.toml -c $(VENV)/lock-constraints.txt --no-emit-package noema-sdk \
		--no-annotate --custom-compile-command "make lock" -o requirements-runtime.lock --python-version 3.11
	$(BIN)/uv pip compile examples/langchain/requirements.in --custom-compile-command "make lock" \
		-o examples/langchain/requirements.lock --python-version 3.11

bench-ingest: $(STAMP) ## Ingest benchmark (end-to-end vs raw pipe), prints JSON
	$(BIN)/python -m bench.ingest --out bench/results/ingest.json

clean: ## Remove the virtualenvs, tests/node/node_modules and caches (not ./var)
	rm -rf $(VENV) $(LANGCHAIN_VENV) tests/node/node_modules .pytest_cache .mypy_cache .ruff_cache
