# Verity: two commands matter.
#   make demo   set everything up (if needed) and run a whole job on the local devnet
#   make test   set everything up (if needed) and run every test (forge + pytest)
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
NODE_BIN := $(CURDIR)/anvil/node_modules/.bin
export PATH := $(CURDIR)/$(BIN):$(NODE_BIN):$(PATH)
export SOLCX_BINARY_PATH := $(CURDIR)/anvil/solc-bin
export PYTHONHASHSEED := 0

.PHONY: setup test test-forge test-py demo bench gas clean

setup: $(VENV)/.installed anvil/node_modules/.installed

$(VENV)/.installed: requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.lock
	$(BIN)/pip install -q --no-deps -e .
	touch $@

anvil/node_modules/.installed: anvil/package.json anvil/package-lock.json
	cd anvil && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# forge beside pytest (two xdist workers); each judged by its own summary line (scripts/test_all.sh).
test: setup
	BIN=$(BIN) scripts/test_all.sh

test-forge:
	scripts/forge_test.sh

# Two workers, one per core (README, "Other commands": the node tests are CPU-bound).
test-py:
	$(BIN)/pytest -n 2 --dist worksteal

demo: setup
	$(BIN)/verity demo

bench: setup
	$(BIN)/python scripts/bench_engine.py

gas: setup
	$(BIN)/python scripts/gas_report.py

clean:
	rm -rf .build .verity
