"""Determinism profiles: what a job pins so two honest nodes agree bit for bit.

`check_environment(name)` refuses (ProfileUnsupported) when this process
cannot honour a profile; `apply_profile(name)` checks and then sets every
process-wide knob; `deterministic(name)` does the same for a `with` block and
restores the previous settings afterwards. What each profile pins is listed
in docs/engine.md; the step RNG (no global RNG anywhere) lives in state.py.
The native profiles are hardware classes: each pins what changes a native
kernel's bits (torch release, ATen's CPU kernel level, the BLAS's
reproducibility branch, threads, CUDA architecture) and refuses to run where
any pin differs, so a job under a native class is served only by nodes of
that class. portable-f32 computes with verity.engine.portable instead, so it
pins none of them: a job chooses speed (a native class) or openness (portable).
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
BLAS_MODE_ENV = "MKL_CBWR"   # MKL's conditional numerical reproducibility branch, read once when MKL starts
DEFAULT_BLAS_MODE = "COMPATIBLE"   # what `verity` sets before torch loads, unless the operator set another


def cpu_vendor() -> str | None:
    """The CPU's vendor string (GenuineIntel, AuthenticAMD, ...) from /proc/cpuinfo; None where unknown."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        return None
    return None


@dataclass(frozen=True)
class HardwareClass:
    """What a native profile pins beyond torch's release and its thread count.

    aten_capability: the kernel level ATen dispatches (torch.backends.cpu.get_cpu_capability()); a CPU with
        more (AVX512) is pinned down with ATEN_CPU_CAPABILITY, one with less cannot serve the class.
    blas_mode: MKL_CBWR's value. "COMPATIBLE" is MKL's one branch that runs the same SSE2 code on Intel and
        non-Intel CPUs alike; MKL honours its ISA branches (MKL_CBWR=AVX2, ...) only on Intel CPUs and silently
        runs its AUTO branch elsewhere (MKL developer guide, "Getting Started with Conditional Numerical
        Reproducibility"; measured: vectors recorded under MKL_CBWR=AVX2 on an AMD EPYC did not match an
        Intel Xeon, and MKL's float32 sqrt differs per branch in 23k-674k of 4M inputs).
    onednn: whether torch may use oneDNN (its CPU convolutions and some matmuls). oneDNN picks kernels by
        ISA and blocks by the cache sizes it detects, on its own (measured: its AVX-512 kernels change the
        CNN's and the GPT's traces on the same Xeon), so the class runs torch's own im2col + BLAS instead.
    cuda_capability: the GPU's compute capability (major, minor); kernels and cuBLAS heuristics differ per arch.
    """
    name: str
    aten_capability: str | None = None
    blas_mode: str | None = None
    onednn: bool = True
    cuda_capability: tuple[int, int] | None = None


@dataclass(frozen=True)
class Profile:
    name: str
    device: str             # "cpu", "cuda", or "any" (the job's hardware.device_class decides)
    torch_version: str      # exact release, local build tag ignored ("2.13.0" matches "2.13.0+cpu")
    num_threads: int | None  # intra-op threads; None: left as the operator set them
    interop_threads: int | None
    portable: bool = False  # models, loss and optimizer built on verity.engine.portable ops
    hardware: HardwareClass | None = None  # native profiles: the class they pin; portable: None (no pins)

    def pins(self) -> dict:
        """Everything this profile pins, for `verity node doctor` and docs/engine.md."""
        hw = self.hardware or HardwareClass("any")
        return {"class": hw.name, "torch": self.torch_version, "device": self.device, "threads": self.num_threads,
                "aten_capability": hw.aten_capability, "blas_mode": hw.blas_mode and f"{BLAS_MODE_ENV}={hw.blas_mode}",
                "onednn": hw.onednn if hw.aten_capability else None,
                "cuda_capability": ".".join(map(str, hw.cuda_capability)) if hw.cuda_capability else None}


PROFILES = {
    # x86-64 (Intel or AMD) with ATen's AVX2 kernels, MKL's vendor-neutral COMPATIBLE branch and no oneDNN,
    # one thread (measured: ATen's default kernels, another MKL branch, oneDNN's AVX-512 kernels and two
    # threads each change a trace)
    "cpu-f32-strict": Profile("cpu-f32-strict", "cpu", "2.13.0", num_threads=1, interop_threads=1,
                              hardware=HardwareClass("x86-64-avx2", aten_capability="AVX2",
                                                     blas_mode=DEFAULT_BLAS_MODE, onednn=False)),
    # NVIDIA Hopper (H100/H200, sm_90), deterministic cuBLAS workspace, no TF32
    "cuda-f32-strict": Profile("cuda-f32-strict", "cuda", "2.13.0", num_threads=1, interop_threads=1,
                               hardware=HardwareClass("cuda-sm90", cuda_capability=(9, 0))),
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
    hw = p.hardware or HardwareClass("any")
    if hw.aten_capability is not None and torch.backends.cpu.get_cpu_capability() != hw.aten_capability:
        raise ProfileUnsupported(name, f"ATen runs {torch.backends.cpu.get_cpu_capability()} kernels, class {hw.name} "
                                       f"pins {hw.aten_capability}: start the process with "
                                       f"ATEN_CPU_CAPABILITY={hw.aten_capability.lower()} (the CPU must support it)")
    if hw.blas_mode is not None and os.environ.get(BLAS_MODE_ENV) != hw.blas_mode:
        raise ProfileUnsupported(name, f"{BLAS_MODE_ENV} is {os.environ.get(BLAS_MODE_ENV)!r}, class {hw.name} pins "
                                       f"{hw.blas_mode!r}: start the process with {BLAS_MODE_ENV}={hw.blas_mode}")
    if p.device == "cuda":
        if not torch.cuda.is_available():
            raise ProfileUnsupported(name, "no CUDA device is available")
        if hw.cuda_capability is not None and torch.cuda.get_device_capability() != hw.cuda_capability:
            raise ProfileUnsupported(name, f"the GPU has compute capability {torch.cuda.get_device_capability()}, "
                                           f"class {hw.name} pins {hw.cuda_capability}")
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
        "mkldnn": torch.backends.mkldnn.enabled,
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
    torch.backends.mkldnn.enabled = s["mkldnn"]


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
    if p.hardware is not None and p.device == "cpu":
        torch.backends.mkldnn.enabled = p.hardware.onednn   # off: convolutions by im2col + the pinned BLAS
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
        "cpu_vendor": cpu_vendor(),
        "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY"),
    }
