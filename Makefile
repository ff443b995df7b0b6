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

.PHONY: setup browser test test-unit test-chain test-scenario test-sweep test-forge test-py mutants demo bench gas clean

setup: $(VENV)/.installed anvil/node_modules/.installed browser

# Debian's chromium + chromium-driver for the explorer's browser test (tests/nodes/test_explorer_browser.py); nothing when present.
browser:
	@scripts/install_browser.sh

$(VENV)/.installed: requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements.lock
	$(BIN)/pip install -q --no-deps -e .
	touch $@

anvil/node_modules/.installed: anvil/package.json anvil/package-lock.json
	cd anvil && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# forge beside pytest's tiers (unit, then chain, then node scenarios; two xdist workers), each judged by its own
# summary line (scripts/test_all.sh).
# It sets up what is missing itself (SETUP=1): forge starts as soon as the node tools are in, beside pip.
test:
	BIN=$(BIN) SETUP=1 scripts/test_all.sh

# One tier alone (no forge): the tiers are the markers in tests/conftest.py.
test-unit test-chain test-scenario: setup
	BIN=$(BIN) TIERS=$(@:test-%=%) scripts/test_all.sh

# Every value of the parametrized sweeps whose default run keeps boundaries and a seeded sample.
test-sweep: setup
	$(BIN)/pytest -n 2 -m full_sweep

test-forge:
	scripts/forge_test.sh

# All of pytest in one session, without tiers: two workers, one per core.
test-py:
	$(BIN)/pytest -n 2 --dist worksteal

# The mutation check: seeded bugs, one at a time, each against the tests that should catch it (caught / missed).
mutants: setup
	$(BIN)/python scripts/mutants.py

demo: setup
	$(BIN)/verity demo

bench: setup
	$(BIN)/python scripts/bench_engine.py

gas: setup
	$(BIN)/python scripts/gas_report.py

clean:
	rm -rf .build .verity
