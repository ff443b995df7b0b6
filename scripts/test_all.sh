#!/usr/bin/env bash
# `make test`: forge beside pytest's three tiers, each judged by its own summary line.
#
# forge (scripts/forge_test.sh: the unit and fuzz suites, then the invariant campaign) runs in the background at a
# lower CPU priority into .build/forge-run.log: it is pure throughput, while the node scenarios have windows to meet.
# pytest runs its tiers one after the other on two xdist workers, each only if the one before passed (fail fast):
#   unit      -m "not integration"             no service: engine, storage, clients, CLI parsing
#   chain     -m "integration and not scenario" a real anvil and/or IPFS node (ape's chain fixtures, devnet parts)
#   scenario  -m scenario                      real `verity node run` processes on a devnet (tests/nodes' `net`)
# (markers: tests/conftest.py). Extra arguments go to every tier, e.g. `scripts/test_all.sh -k dispute`.
# TIERS=unit,chain (any subset, in that order) runs only those tiers and no forge; FORGE=0 skips forge.
# Exit status: nonzero if any tier or forge failed; a tier that collected nothing (pytest's 5) is a failure too.
set -uo pipefail
cd "$(dirname "$0")/.."
# run by hand too (not only by make): the venv, node tools, the solc-js front and hash seed that make exports
source ./env.sh
export PYTHONHASHSEED=${PYTHONHASHSEED:-0}
BIN=${BIN:-.venv/bin}
TIERS=${TIERS:-unit,chain,scenario}
FORGE=${FORGE:-$([ "$TIERS" = unit,chain,scenario ] && echo 1 || echo 0)}
mkdir -p .build
forge_log=.build/forge-run.log
started=$(date +%s)
# SETUP=1 (make test): install what is missing here, ordered for a clean clone's critical path. pip (~95 s, mostly
# downloads and unpacking) runs in the background while npm (~25 s) installs the node tools; forge needs only those,
# so its compile (~250 s of one core under solc-js) starts before the venv is ready instead of after it.
py_setup_pid=
browser_pid=
if [ "${SETUP:-0}" = 1 ]; then
  ${MAKE:-make} --no-print-directory -s .venv/.installed > .build/setup-python.log 2>&1 &
  py_setup_pid=$!
  # the explorer's browser tests' chromium (apt, beside pip); a failure shows in those tests, which name the fix
  ${MAKE:-make} --no-print-directory -s browser > .build/setup-browser.log 2>&1 &
  browser_pid=$!
  ${MAKE:-make} --no-print-directory -s anvil/node_modules/.installed || { echo "npm setup failed"; exit 2; }
fi
forge_pid=
if [ "$FORGE" = 1 ]; then
  nice -n 10 scripts/forge_test.sh > "$forge_log" 2>&1 &
  forge_pid=$!
fi
if [ -n "$py_setup_pid" ] && ! wait "$py_setup_pid"; then
  cat .build/setup-python.log; echo "python setup failed"
  [ -z "$forge_pid" ] || { pkill -P "$forge_pid"; kill "$forge_pid"; } 2>/dev/null
  exit 2
fi
[ -z "$browser_pid" ] || wait "$browser_pid" || cat .build/setup-browser.log
echo "set-up done after $(($(date +%s) - started)) s"
# ape compiles the contracts once, for the chain and scenario tiers (two workers compiling into one .build/ at the
# same time could race); the unit tier needs no contract, so the compile runs beside it.
# A contract newer than ape's manifest makes it a full compile (verity.devnet.deploy.drop_stale_build: ape's
# incremental compile once kept a stale contract type); a clean clone has no manifest.
"$BIN/python" -c "from verity.devnet.deploy import drop_stale_build; drop_stale_build()"
"$BIN/ape" compile > .build/ape-compile.log 2>&1 &
compile_pid=$!
compiled=
wait_compile() {
  [ -z "$compiled" ] || return 0
  compiled=1
  wait "$compile_pid" || { cat .build/ape-compile.log; echo "ape compile failed"; }
}

declare -A marker=([unit]="not integration" [chain]="integration and not scenario" [scenario]="scenario")
summary=()
py_rc=0
for tier in ${TIERS//,/ }; do
  [ -n "${marker[$tier]:-}" ] || { echo "unknown tier '$tier' (unit, chain, scenario)"; exit 2; }
  [ "$tier" = unit ] || wait_compile
  echo "==================== pytest tier: $tier (-m \"${marker[$tier]}\") ===================="
  # worksteal, not load: scenario tests take 20-90 s each, and an idle worker takes queued ones from the busy one
  # instead of waiting out the other's queue at the end.
  "$BIN/pytest" -n 2 --dist worksteal -m "${marker[$tier]}" "$@" 2>&1 | tee .build/pytest-$tier.log
  rc=${PIPESTATUS[0]}
  line=$(grep -aE '^=+ .*(passed|failed|error|no tests ran).* in [0-9.]+s' .build/pytest-$tier.log | tail -1)
  summary+=("pytest $tier: ${line:-no summary line} (exit $rc)")
  if [ "$rc" -ne 0 ]; then
    py_rc=$rc
    echo "tier $tier failed (exit $rc): later tiers not run"
    break
  fi
done
py_done=$(date +%s)
wait_compile

forge_rc=0
if [ -n "$forge_pid" ]; then
  if [ "$py_rc" -ne 0 ]; then
    pkill -P "$forge_pid" 2>/dev/null; kill "$forge_pid" 2>/dev/null  # fail fast: no need for the campaign
  fi
  wait "$forge_pid"
  forge_rc=$?
  echo "==================== forge (ran beside pytest; also in $forge_log) ===================="
  cat "$forge_log"
fi
echo "==================== summary ===================="
for line in "${summary[@]}"; do echo "$line"; done
if [ -n "$forge_pid" ]; then
  grep -a '^forge summary:' "$forge_log" || echo "forge: no summary line (failed or stopped, see above)"
fi
end=$(date +%s)
echo "wall: pytest tiers $((py_done - started)) s, everything $((end - started)) s"
echo "pytest exit status: $py_rc; forge exit status: $forge_rc"
[ "$py_rc" -eq 0 ] && [ "$forge_rc" -eq 0 ]
