# Noema — every target is listed by `make help`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help setup run test test-unit test-integration lint typecheck check schemas openapi deploy-auth golden lock bench-ingest clean

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  %-18s %s\n", $$1, $$2}'

# Packages are listed so that adding one re-runs the editable install (its import map is static).
$(STAMP): requirements.lock pyproject.toml $(wildcard libs/*/__init__.py schemas/*/__init__.py services/*/__init__.py sdk/*/__init__.py)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -e .
	@touch $(STAMP)

setup: $(STAMP) ## Create .venv and install the pinned dependencies (requirements.lock) and Noema

run: $(STAMP) ## Start Noema on the embedded default (NATS + PostgreSQL in ./var); Ctrl-C stops it
	$(BIN)/noemactl up

test: $(STAMP) ## Run every test: unit, integration (real NATS + PostgreSQL), e2e
	$(BIN)/python -m pytest

test-unit: $(STAMP) ## Run the fast tier: unit tests and the in-memory half of the contract suites (no servers)
	$(BIN)/python -m pytest tests/unit tests/contract -m "not integration"

test-integration: $(STAMP) ## Run the integration and e2e tests only
	$(BIN)/python -m pytest tests/integration tests/e2e

lint: $(STAMP) ## ruff (lint + format check)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP) ## mypy --strict on libs/, services/, schemas/
	$(BIN)/mypy

check: lint typecheck test ## Lint, typecheck and test

schemas: $(STAMP) ## Regenerate schemas/json and schemas/asyncapi.json from the msgspec Structs
	$(BIN)/python -m noema_events.generate

openapi: $(STAMP) ## Regenerate schemas/openapi.json from the operator API's route table and Structs
	$(BIN)/python -m noema_api.openapi

deploy-auth: $(STAMP) ## Regenerate deploy/nats/auth.conf and auth-values.yaml from libs/noema/identities.py
	$(BIN)/python -m noema.natsconfig

golden: $(STAMP) ## Write golden samples for event versions that have none (never overwrites)
	$(BIN)/python -m noema_events.golden

lock: ## Re-pin requirements.lock from pyproject.toml
	$(BIN)/uv pip compile pyproject.toml --extra dev -o requirements.lock --python-version 3.11

bench-ingest: $(STAMP) ## Ingest benchmark (end-to-end vs raw pipe), prints JSON
	$(BIN)/python -m bench.ingest --out bench/results/ingest.json

clean: ## Remove the virtualenv and caches (not ./var)
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
