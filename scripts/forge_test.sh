#!/usr/bin/env bash
# Run forge's tests and fail loudly when they did not really run.
#
# forge exits 0 when the solc-js front crashes mid-compile (it then runs no
# test at all), so its exit code alone proves nothing: this wrapper also
# requires forge's own summary line with at least one test suite and one
# passed test, and no compiler error. Extra arguments go to `forge test`.
# Then the deployed sizes: docs/contracts.md's table must match the build and every contract must stay under the
# project's 20,480-byte bar (scripts/contract_sizes.py; CONTRACT_SIZES=0 skips it, as the wrapper's own tests do).
set -uo pipefail
cd "$(dirname "$0")/.."
# FORGE_TEST_LOG: where forge's output is kept (tests of this wrapper, which run beside the real one under
# `make test`, point it elsewhere: two writers on one log corrupt it).
log=${FORGE_TEST_LOG:-.build/forge-test.log}
mkdir -p "$(dirname "$log")"
forge test "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
summary=$(grep -aE '^Ran [0-9]+ test suites? ' "$log" | tail -1)
fail() { echo "forge_test.sh: FAILED: $*" >&2; exit 1; }
[ "$rc" -eq 0 ] || fail "forge test exited with $rc"
if grep -aqE 'Error: (solc|Compiler run failed|Compilation failed)|Compiler run failed|RuntimeError' "$log"; then
  fail "the Solidity compiler failed (see $log); no result of this run can be trusted"
fi
[ -n "$summary" ] || fail "forge printed no 'Ran N test suites' line: nothing was compiled or tested"
[[ "$summary" =~ :\ ([0-9]+)\ tests\ passed,\ ([0-9]+)\ failed ]] || fail "unreadable summary: $summary"
passed=${BASH_REMATCH[1]}; failed=${BASH_REMATCH[2]}
[ "$passed" -gt 0 ] || fail "forge ran no test ($summary)"
[ "$failed" -eq 0 ] || fail "$failed forge tests failed ($summary)"
if [ "${CONTRACT_SIZES:-1}" = 1 ]; then
  python3 scripts/contract_sizes.py --check > /dev/null || fail "contract sizes (scripts/contract_sizes.py --check)"
fi
echo "forge summary: $summary"
