"""SGD (with momentum) and Adam/AdamW updates from separate elementwise ops, for portable-f32.

Why not torch.optim: its single-tensor kernels use fused ops (lerp_,
addcmul_, addcdiv_, add_ with alpha) that ATen's AVX2 build evaluates with
FMA and its default build without, so one update already differs by ISA.
Here every step is one correctly rounded float32 op (mul, add, sub, div,
sqrt), each its own eager kernel, so nothing is contracted. Scalars are
computed in Python double (IEEE on every platform; beta**t by repeated
squaring rather than libm's pow) and rounded to float32 once (bits.f32);
a division by a scalar is written as a multiply by its rounded reciprocal,
since CUDA turns scalar division into that multiply while the CPU divides.

State keys, shapes and dtypes are torch.optim's ("momentum_buffer";
"step" as a float32 0-dim CPU tensor, "exp_avg", "exp_avg_sq"), so the
checkpoint layout is the native profiles'. Both classes subclass
torch.optim.Optimizer for state_dict/load_state_dict and zero_grad.
"""
from __future__ import annotations

import math

import torch

from verity.engine.portable.bits import f32, sqrt_f32


def pow_int(base: float, n: int) -> float:
    """base**n for an integer n >= 0 by binary powering: a fixed sequence of IEEE double multiplies."""
    if n < 0:
        raise ValueError(f"exponent must be >= 0, got {n}")
    out, sq = 1.0, base
    while n:
        if n & 1:
            out *= sq
        sq *= sq
        n >>= 1
    return out


class PortableSGD(torch.optim.Optimizer):
    """p -= lr * d, d = grad (+ wd * p), through a momentum buffer b = momentum * b + d when momentum > 0."""

    def __init__(self, params, lr: float, momentum: float = 0.0, weight_decay: float = 0.0):
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise ValueError("portable optimizers take no closure")
        for group in self.param_groups:
            lr, mom, wd = f32(group["lr"]), f32(group["momentum"]), f32(group["weight_decay"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                d = p.grad
                if wd != 0.0:
                    d = d + p * wd
                if mom != 0.0:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:                      # torch's first step: the buffer is the gradient
                        buf = state["momentum_buffer"] = d.clone()
                    else:
                        buf.mul_(mom)
                        buf.add_(d)
                    d = buf
                p.sub_(d * lr)


class PortableAdam(torch.optim.Optimizer):
    """Adam (L2 added to the gradient) or AdamW (decoupled decay), torch's formulas, separate ops:

        m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g
        p -= (lr / (1 - b1**t)) * m / (sqrt(v) * (1 / sqrt(1 - b2**t)) + eps)
    """

    def __init__(self, params, lr: float, betas: tuple[float, float], eps: float, weight_decay: float,
                 decoupled: bool):
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                                  "decoupled": decoupled})

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise ValueError("portable optimizers take no closure")
        for group in self.param_groups:
            lr, (b1, b2), wd = group["lr"], group["betas"], group["weight_decay"]
            eps = f32(group["eps"])
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0, dtype=torch.float32)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                step_t, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
                step_t.add_(1.0)                          # exact below 2**24
                t = int(step_t.item())
                if wd != 0.0:
                    if group["decoupled"]:
                        p.mul_(f32(1.0 - lr * wd))
                    else:
                        grad = grad + p * f32(wd)
                m.mul_(f32(b1))
                m.add_(grad * f32(1.0 - b1))
                sq = grad * grad
                v.mul_(f32(b2))
                v.add_(sq.mul_(f32(1.0 - b2)))
                denom = sqrt_f32(v)
                denom.mul_(f32(1.0 / math.sqrt(1.0 - pow_int(b2, t))))
                denom.add_(eps)
                upd = m / denom                           # tensor / tensor: IEEE division
                p.sub_(upd.mul_(f32(lr / (1.0 - pow_int(b1, t)))))
