"""`verity node doctor` run as an operator runs it, in a fresh process with an empty result cache: the
portable profile's reference roots match tests/vectors on this machine whatever ATen's kernel level, and
a process on ATen's default kernels is told it cannot serve the x86-64-avx2 class (cpu-f32-strict)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from verity.engine.reference import ARCHES

VECTORS = Path(__file__).resolve().parents[2] / "tests" / "vectors"


def _doctor(tmp_path: Path, *args: str, **env: str) -> tuple[int, dict]:
    full = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "OMP_NUM_THREADS")}
    full.update(env, XDG_CACHE_HOME=str(tmp_path / "cache"), COLUMNS="200")
    proc = subprocess.run([sys.executable, "-m", "verity", "node", "doctor", "--json", *args],
                          capture_output=True, text=True, timeout=300, env=full)
    assert proc.stdout.strip(), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def _assert_portable_matches(result: dict) -> None:
    want = json.loads((VECTORS / "portable-f32.json").read_text())["tasks"]
    p = result["profiles"]["portable-f32"]
    assert p["ok"] is True and p["reason"] is None and set(p) == {"ok", "reason", "tasks"}
    assert set(p["tasks"]) == set(ARCHES)
    for arch, t in p["tasks"].items():
        assert set(t) == {"root", "matches", "ms_per_step", "cal_ms_per_step"}
        assert re.fullmatch(r"[0-9a-f]{64}", t["root"]) and t["root"] == want[arch]["root"], arch
        assert t["matches"] is True and isinstance(t["ms_per_step"], float) and t["ms_per_step"] > 0
        assert t["cal_ms_per_step"] > 0  # the family's larger task, timed for the node's estimates


def test_nodeDoctor_portableJson_rootsMatchVectorsThenCached_succeeds(tmp_path):
    rc, result = _doctor(tmp_path, "--profile", "portable-f32", "--threads", "2")
    assert rc == 0 and set(result) == {"profiles"} and set(result["profiles"]) == {"portable-f32"}
    _assert_portable_matches(result)
    cached = list((tmp_path / "cache" / "verity" / "doctor").glob("*.json"))
    assert len(cached) == 1                                      # one key: this profile, 2 threads, this machine
    again_rc, again = _doctor(tmp_path, "--profile", "portable-f32", "--threads", "2")
    assert again_rc == 0 and again == result                    # read back: same roots and timings
    assert list((tmp_path / "cache" / "verity" / "doctor").glob("*.json")) == cached


def test_nodeDoctor_atenDefault_portableOkStrictRefused_fails(tmp_path):
    rc, result = _doctor(tmp_path, ATEN_CPU_CAPABILITY="default")
    assert rc == 0 and list(result["profiles"]) == ["cpu-f32-strict", "cuda-f32-strict", "portable-f32"]
    _assert_portable_matches(result)
    strict = result["profiles"]["cpu-f32-strict"]
    assert strict["ok"] is False and strict["tasks"] == {} and "ATEN_CPU_CAPABILITY" in strict["reason"]
    rc, only_strict = _doctor(tmp_path, "--profile", "cpu-f32-strict", ATEN_CPU_CAPABILITY="default")
    assert rc == 1 and only_strict["profiles"]["cpu-f32-strict"]["ok"] is False
