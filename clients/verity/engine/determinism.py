"""Determinism profiles: what a job pins so two honest nodes agree bit for bit.

`check_environment(name)` refuses (ProfileUnsupported) when this process
cannot honour a profile; `apply_profile(name)` checks and then sets every
process-wide knob; `deterministic(name)` does the same for a `with` block and
restores the previous settings afterwards. What each profile pins is listed
in docs/engine.md; the step RNG (no global RNG anywhere) lives in state.py.
The native profiles pin threads and rely on the same ISA level and build;
portable-f32 computes with verity.engine.portable instead, so it needs no
thread, ISA or device pin.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import torch

from verity.errors import ProfileUnsupported

CUBLAS_WORKSPACE = ":4096:8"


ANY_DEVICE = "any"


@dataclass(frozen=True)
class Profile:
    name: str
    device: str             # "cpu", "cuda", or "any" (the job's hardware.device_class decides)
    torch_version: str      # exact release, local build tag ignored ("2.13.0" matches "2.13.0+cpu")
    num_threads: int | None  # intra-op threads; None: left as the operator set them
    interop_threads: int | None
    portable: bool = False  # models, loss and optimizer built on verity.engine.portable ops


PROFILES = {
    "cpu-f32-strict": Profile("cpu-f32-strict", "cpu", "2.13.0", num_threads=1, interop_threads=1),
    "cuda-f32-strict": Profile("cuda-f32-strict", "cuda", "2.13.0", num_threads=1, interop_threads=1),
    # Bits depend only on the manifest: every op is exact or a fixed sequence of
    # correctly rounded IEEE operations, so threads, ATen ISA level, BLAS and
    # device may be anything (docs/engine.md, "Portable profile").
    "portable-f32": Profile("portable-f32", ANY_DEVICE, "2.13.0", num_threads=None, interop_threads=None,
                            portable=True),
}


def is_portable(name: str) -> bool:
    """Whether a job under profile `name` trains with the portable ops (unknown names: False)."""
    p = PROFILES.get(name)
    return p is not None and p.portable


def job_device(profile: Profile, device_class: str) -> str:
    """The torch device a job runs on: the profile's own, or the manifest's device class for a
    device-agnostic profile (portable-f32 gives the same bits on either)."""
    return device_class if profile.device == ANY_DEVICE else profile.device


def get_profile(name: str) -> Profile:
    if name not in PROFILES:
        raise ProfileUnsupported(name, f"unknown profile (known: {', '.join(PROFILES)})")
    return PROFILES[name]


def check_environment(name: str) -> Profile:
    """The profile, if this process can run it; else ProfileUnsupported saying why."""
    p = get_profile(name)
    installed = torch.__version__.split("+")[0]
    if installed != p.torch_version:
        raise ProfileUnsupported(name, f"needs torch {p.torch_version}, this process has {torch.__version__}")
    if p.device == "cuda":
        if not torch.cuda.is_available():
            raise ProfileUnsupported(name, "no CUDA device is available")
        ws = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
        if ws != CUBLAS_WORKSPACE and torch.cuda.is_initialized():
            raise ProfileUnsupported(name, f"CUBLAS_WORKSPACE_CONFIG is {ws!r} and CUDA is already initialised; "
                                           f"start the process with CUBLAS_WORKSPACE_CONFIG={CUBLAS_WORKSPACE}")
    return p


def _snapshot() -> dict:
    return {
        "threads": torch.get_num_threads(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_tf32": torch.backends.cudnn.allow_tf32,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "dtype": torch.get_default_dtype(),
    }


def _restore(s: dict) -> None:
    torch.set_num_threads(s["threads"])
    torch.use_deterministic_algorithms(s["deterministic"])
    torch.set_float32_matmul_precision(s["matmul_precision"])
    torch.backends.cuda.matmul.allow_tf32 = s["cuda_tf32"]
    torch.backends.cudnn.allow_tf32 = s["cudnn_tf32"]
    torch.backends.cudnn.deterministic = s["cudnn_deterministic"]
    torch.backends.cudnn.benchmark = s["cudnn_benchmark"]
    torch.set_default_dtype(s["dtype"])


def apply_profile(name: str) -> Profile:
    """Check, then pin every process-wide setting the profile names."""
    p = check_environment(name)
    if p.device == "cuda" or (p.device == ANY_DEVICE and not torch.cuda.is_initialized()):
        # read when cuBLAS starts; portable-f32's float64 GEMMs are exact with any workspace,
        # but deterministic-algorithms mode refuses cuBLAS without this setting
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE
    if p.num_threads is not None:
        torch.set_num_threads(p.num_threads)
    if p.interop_threads is not None and torch.get_num_interop_threads() != p.interop_threads:
        try:
            torch.set_num_interop_threads(p.interop_threads)
        except RuntimeError:
            pass  # the pool already started; inter-op threads only schedule whole ops, never split a reduction
    if p.portable:
        torch.set_flush_denormal(False)  # the portable ops produce subnormals; flushing would change bits
    torch.use_deterministic_algorithms(True)
    torch.set_float32_matmul_precision("highest")  # no TF32 / bf16 inside float32 matmuls
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.set_default_dtype(torch.float32)
    return p


@contextmanager
def deterministic(name: str) -> Iterator[Profile]:
    saved = _snapshot()
    try:
        yield apply_profile(name)
    finally:
        _restore(saved)


def environment_fingerprint() -> dict:
    """What a node reports next to its results, to explain a mismatch later."""
    return {
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "mkl_cbwr": os.environ.get("MKL_CBWR"),
        "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY"),
    }
