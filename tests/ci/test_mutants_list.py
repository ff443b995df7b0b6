"""scripts/mutants.py's fixed list still applies to the code: every mutant's `old` text occurs exactly once in its file
(a refactor that moves a guarded line must move its mutant too, or the mutation check silently loses it)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mutantsList_everyMutantAppliesToTheTree_succeeds():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "mutants.py"), "--list"], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "BROKEN" not in done.stdout
    total = done.stdout.strip().splitlines()[-1]
    assert int(total.split()[0]) >= 25, total  # issue 22: at least 25 seeded mutants
