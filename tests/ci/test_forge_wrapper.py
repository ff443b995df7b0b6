"""scripts/forge_test.sh turns every way forge can 'pass' without testing into a failure.

A fake `forge` on PATH replays what the real one printed in each case (the
solc-js crash of a clean clone exited 0 and ran no test)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "forge_test.sh"
GOOD = "Ran 9 test suites in 4.28s (7.51s CPU time): 134 tests passed, 0 failed, 0 skipped (134 total tests)"


def run_with_fake_forge(tmp_path: Path, output: str, rc: int = 0) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "forge"
    (tmp_path / "out.txt").write_text(output)
    fake.write_text(f"#!/usr/bin/env bash\ncat {tmp_path / 'out.txt'}\nexit {rc}\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "FORGE_TEST_LOG": str(tmp_path / "forge-test.log"),
           "CONTRACT_SIZES": "0"}  # never the real run's log (make test runs both)
    return subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)


def test_forgeWrapper_realSummary_succeeds(tmp_path):
    res = run_with_fake_forge(tmp_path, f"Compiling 45 files with Solc 0.8.28\n{GOOD}\n")
    assert res.returncode == 0, res.stderr
    assert "forge summary: Ran 9 test suites" in res.stdout


@pytest.mark.parametrize("output, rc, why", [
    ("Compiling 209 files with Solc 0.8.28\nError: solc exited with exit status: 1\n"
     "RuntimeError: memory access out of bounds\n", 0, "compiler failed"),
    ("Compiling 45 files with Solc 0.8.28\nNo tests found in project!\n", 0, "no 'Ran N test suites' line"),
    ("Ran 0 test suites in 0.01s (0.00s CPU time): 0 tests passed, 0 failed, 0 skipped (0 total tests)\n", 0,
     "ran no test"),
    (GOOD.replace("134 tests passed, 0 failed", "133 tests passed, 1 failed") + "\n", 0, "1 forge tests failed"),
    (f"{GOOD}\n", 1, "exited with 1"),
])
def test_forgeWrapper_hiddenFailure_fails(tmp_path, output, rc, why):
    res = run_with_fake_forge(tmp_path, output, rc)
    assert res.returncode == 1
    assert why in res.stderr
