"""Verity off-chain clients: engine, storage, chain access, nodes and CLI."""
__version__ = "0.1.0"

import warnings as _warnings

# ipfshttpclient 0.7 passes urllib3 a parameter urllib3 2 deprecates; harmless, and noisy in every command.
_warnings.filterwarnings("ignore", message="The 'strict' parameter is no longer needed", category=FutureWarning)

import os as _os

# The cpu-f32-strict hardware class pins MKL's COMPATIBLE reproducibility branch, the one that computes the same bits
# on Intel and AMD CPUs (verity.engine.determinism). MKL reads MKL_CBWR once, when it starts, so it is set here,
# before any of our code can reach a BLAS call; an operator's own value wins (and the profile check then says whether
# this process can serve the class). A node that serves only portable-f32 may start with MKL_CBWR=AUTO: its exact
# float64 GEMMs give the same bits on any branch, and MKL's fastest is 2-3x faster than COMPATIBLE.
_os.environ.setdefault("MKL_CBWR", "COMPATIBLE")

# It pins ATen's AVX2 kernels too, where the CPU has AVX2: an AVX-512 machine then runs the class's AVX2 kernels. ATen
# reads ATEN_CPU_CAPABILITY once, at the first kernel it dispatches, and does not check it against the CPU (asked for
# kernels the CPU lacks, the process dies of SIGILL), so a CPU without AVX2 keeps its own (and cannot serve the
# class; verity.cpu). Portable jobs do not depend on it. An operator's own value wins here too.
from verity.cpu import supports as _supports

if _supports("avx2"):
    _os.environ.setdefault("ATEN_CPU_CAPABILITY", "avx2")
