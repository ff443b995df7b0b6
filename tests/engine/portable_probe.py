"""Digest every portable op (forward and backward) on fixed awkward inputs; print JSON.

Run in separate processes with different thread counts, ATen CPU capability
(ATEN_CPU_CAPABILITY=default), BLAS settings or devices: the "portable"
digests must all be equal (test_portable_ops.py asserts it), while the
"native" digests of the matching torch ops record whether plain torch differs
on this machine. Inputs come from numpy's integer generator and are built
with exact arithmetic, so they cannot depend on the configuration either
(torch.randn's CPU kernel itself is vectorised per ISA).

usage: python portable_probe.py [--threads N] [--device cpu|cuda]
"""
from __future__ import annotations

import argparse
import hashlib
import json

import numpy as np
import torch

from verity.engine import portable as P


def digest(t: torch.Tensor) -> str:
    return hashlib.sha256(t.detach().to("cpu").contiguous().numpy().tobytes()).hexdigest()[:32]


def rand(shape, seed: int, lo: int = -3, hi: int = 3, device: str = "cpu") -> torch.Tensor:
    """Signed 24-bit mantissas times 2**[lo, hi]: exact float32, a few binades of range."""
    rng = np.random.default_rng(seed)
    mant = rng.integers(-(2 ** 24) + 1, 2 ** 24, size=shape).astype(np.float64) / 2.0 ** 24
    scaled = np.ldexp(mant, rng.integers(lo, hi + 1, size=shape))
    return torch.from_numpy(np.asarray(scaled, dtype=np.float32)).to(device)


def _grads(fn, inputs, seed: int, device: str):
    leaves = [x.clone().requires_grad_(True) for x in inputs]
    out = fn(*leaves)
    out.backward(rand(tuple(out.shape), seed, device=device))
    return out, [x.grad for x in leaves]


def probe(device: str) -> dict:
    def r(shape, seed, lo=-3, hi=3):
        return rand(shape, seed, lo, hi, device)

    cases = {
        "matmul": (P.matmul, torch.matmul, [r((3, 37, 129), 1), r((129, 67), 2)]),
        "matmul_big": (P.matmul, torch.matmul, [r((257, 515), 3), r((515, 131), 4)]),
        "matmul_batched": (P.matmul, torch.matmul, [r((2, 1, 19, 45), 5), r((3, 45, 23), 6)]),
        "linear": (P.linear, torch.nn.functional.linear, [r((5, 33, 130), 7), r((91, 130), 8), r((91,), 9)]),
        "sum": (lambda x: P.sum(x, 0), lambda x: x.sum(0), [r((70001, 3), 10)]),
        "sum_all": (P.sum, torch.sum, [r((300, 333), 11)]),
        "mean": (lambda x: P.mean(x, -1), lambda x: x.mean(-1), [r((17, 12345), 12)]),
        "exp": (P.exp, torch.exp, [r((200003,), 13, -2, 6)]),
        "log": (lambda x: P.log(x.abs()), lambda x: torch.log(x.abs()), [r((200003,), 14, -40, 40)]),
        "tanh": (P.tanh, torch.tanh, [r((200003,), 15, -6, 3)]),
        "erf": (P.erf, torch.erf, [r((200003,), 16, -6, 2)]),
        "mlp": (lambda x, w, b: P.mean(P.tanh(P.linear(x, w, b))),
                lambda x, w, b: torch.tanh(torch.nn.functional.linear(x, w, b)).mean(),
                [r((64, 64), 17), r((128, 64), 18, -6, -3), r((128,), 19)]),
    }
    portable, native = {}, {}
    for i, (name, (fp, fn, inputs)) in enumerate(cases.items()):
        out, grads = _grads(fp, inputs, 100 + i, device)
        portable[name] = digest(out)
        for j, g in enumerate(grads):
            portable[f"{name}.grad{j}"] = digest(g)
        nout, ngrads = _grads(fn, inputs, 100 + i, device)
        native[name] = digest(nout)
        for j, g in enumerate(ngrads):
            native[f"{name}.grad{j}"] = digest(g)
    return {"portable": portable, "native": native,
            "capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
            "device": device}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(json.dumps(probe(args.device)))


if __name__ == "__main__":
    main()
