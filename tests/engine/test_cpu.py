"""ATen capability levels are pinned only where the CPU has them (verity.cpu): ATen would run them anyway and die."""
from __future__ import annotations

import subprocess
import sys

from verity.cpu import cpu_flags, supports, widest_aten_capability

AVX2 = "fpu sse sse2 avx avx2 fma"
AVX512 = AVX2 + " avx512f avx512bw avx512vl avx512dq"


def _cpuinfo(tmp_path, flags: str | None):
    path = tmp_path / "cpuinfo"
    path.write_text("processor\t: 0\nmodel name\t: x\n" + (f"flags\t\t: {flags}\n" if flags is not None else ""))
    return path


def test_cpuFlags_firstProcessorsFlags_succeeds(tmp_path):
    assert cpu_flags(_cpuinfo(tmp_path, AVX2)) == frozenset(AVX2.split())
    assert cpu_flags(_cpuinfo(tmp_path, None)) == frozenset()          # ARM: no x86 flags line
    assert cpu_flags(tmp_path / "missing") == frozenset()


def test_widestCapability_eachLevelNeedsAllItsSets_succeeds(tmp_path):
    assert widest_aten_capability(cpu_flags(_cpuinfo(tmp_path, AVX512))) == "avx512"
    assert widest_aten_capability(cpu_flags(_cpuinfo(tmp_path, AVX512.replace(" avx512bw", "")))) == "avx2"
    assert widest_aten_capability(cpu_flags(_cpuinfo(tmp_path, AVX2))) == "avx2"
    assert widest_aten_capability(cpu_flags(_cpuinfo(tmp_path, "fpu sse sse2 avx"))) == "default"
    assert supports("default", frozenset()) and not supports("avx2", frozenset({"avx2"}))


def test_importVerity_pinsAvx2OnlyWhereTheCpuHasIt_succeeds():
    code = "import os, verity; print(os.environ.get('ATEN_CPU_CAPABILITY', '-'))"
    env = {"PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == ("avx2" if supports("avx2") else "-")
