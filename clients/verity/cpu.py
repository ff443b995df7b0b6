"""What this x86 CPU can run, read from /proc/cpuinfo without importing torch.

ATen takes `ATEN_CPU_CAPABILITY` at its word: asked for kernels the CPU lacks (AVX-512 on an AVX2-only AMD EPYC,
seen here) it runs them and the process dies of SIGILL at the first such kernel. So a capability is only ever pinned
when the CPU has it (`widest_aten_capability`)."""
from __future__ import annotations

from pathlib import Path

# The instruction sets each ATen capability level is compiled for (aten/src/ATen/native/DispatchStub.cpp).
LEVELS = (("avx512", frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq"})),
          ("avx2", frozenset({"avx2", "fma"})))


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The first processor's flags; empty where there is no /proc/cpuinfo or no x86 `flags` line (e.g. on ARM)."""
    try:
        with open(cpuinfo, errors="replace") as fh:  # stops at the first processor's flags: read at every import
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def supports(level: str, flags: frozenset[str] | None = None) -> bool:
    """True if the CPU has every instruction set ATen's `level` kernels use ("default" always)."""
    if level == "default":
        return True
    have = cpu_flags() if flags is None else flags
    return dict(LEVELS)[level] <= have


def widest_aten_capability(flags: frozenset[str] | None = None) -> str:
    """The widest ATen capability level this CPU runs: "avx512", "avx2" or "default"."""
    have = cpu_flags() if flags is None else flags
    return next((level for level, needs in LEVELS if needs <= have), "default")
