#!/usr/bin/env bash
# `make test`: forge and pytest side by side, each judged by its own summary.
#
# forge (CPU-bound, ~3 min) runs in the background into .build/forge-run.log while pytest runs on two
# xdist workers in the foreground (most integration tests wait on chain clocks and node processes, not
# the CPU), so pytest's progress stays visible; forge's whole output is printed once pytest is done.
# Exit status: nonzero if either failed (scripts/forge_test.sh already fails when forge compiled or ran
# nothing; pytest's 5, no tests collected, is a failure too).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
mkdir -p .build
forge_log=.build/forge-run.log
scripts/forge_test.sh > "$forge_log" 2>&1 &
forge_pid=$!
# ape compiles the contracts once here: two workers compiling into one .build/ at the same time could race.
"$BIN/ape" compile > .build/ape-compile.log 2>&1 || { cat .build/ape-compile.log; echo "ape compile failed"; }
# worksteal, not load: the node tests take 60-180 s each, and an idle worker takes queued ones from the busy one
# instead of waiting out the other's queue at the end.
"$BIN/pytest" -n 2 --dist worksteal "$@"
py_rc=$?
wait "$forge_pid"
forge_rc=$?
echo "==================== forge (ran beside pytest; also in $forge_log) ===================="
cat "$forge_log"
echo "==================== summary ===================="
grep -a '^forge summary:' "$forge_log" || echo "forge: no summary line (failed, see above)"
echo "pytest exit status: $py_rc; forge exit status: $forge_rc"
[ "$py_rc" -eq 0 ] && [ "$forge_rc" -eq 0 ]
