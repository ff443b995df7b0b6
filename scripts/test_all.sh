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
forge_pid=
if [ "$FORGE" = 1 ]; then
  nice -n 10 scripts/forge_test.sh > "$forge_log" 2>&1 &
  forge_pid=$!
fi
# ape compiles the contracts once here: two workers compiling into one .build/ at the same time could race.
"$BIN/ape" compile > .build/ape-compile.log 2>&1 || { cat .build/ape-compile.log; echo "ape compile failed"; }

declare -A marker=([unit]="not integration" [chain]="integration and not scenario" [scenario]="scenario")
summary=()
py_rc=0
for tier in ${TIERS//,/ }; do
  [ -n "${marker[$tier]:-}" ] || { echo "unknown tier '$tier' (unit, chain, scenario)"; exit 2; }
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
