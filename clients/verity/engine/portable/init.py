"""Initial weights for the portable-f32 profile, from integer random draws and exact or basic ops.

Why: torch's own samplers are not portable. uniform_ computes
`u * (to - from) + from` in scalar code that the AVX2 build of ATen
contracts into an FMA and the default build does not, and normal_ uses
SLEEF's vectorised log/cos only in the AVX2 build; measured here, the native
CNN and GPT initial states differ under ATEN_CPU_CAPABILITY=default (the MLP
happened not to, its bounds being powers of two). Here the only random draws
are 24-bit integers from torch.randint on a CPU generator (integer
arithmetic on the same mt19937 stream everywhere) and everything after is
exact or one correctly rounded op at a time:

  uniform(-b, b)  u = k * 2**-23 - 1 (exact, in [-1, 1)), then u * b in float64, rounded to float32
  normal(0, s)    Marsaglia's polar method on such u pairs: accept 0 < q < 1 for
                  q = u1*u1 + u2*u2, then u * sqrt(-2 log(q) / q) with the portable log

The distributions are those of the native initialisers (fan-in uniform for
MLP/CNN, GPT-2's normal init), but the draws differ, so a portable job's
initial state is not the native one's for the same seed.
"""
from __future__ import annotations

import math

import torch

from verity.engine import models as native
from verity.engine.decoder import Decoder, _is_norm, init_plan
from verity.engine.resnet import ResNet
from verity.engine.portable import transcendental as T
from verity.engine.portable.bits import f32, sqrt_f32

_BITS = 24


def _draw(shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    return torch.randint(0, 1 << _BITS, shape, generator=g, dtype=torch.int64)


def uniform_(t: torch.Tensor, bound: float, g: torch.Generator) -> torch.Tensor:
    """t ~ U(-bound, bound) on a 2**-23 grid, portably."""
    u = _draw(tuple(t.shape), g).to(torch.float64).mul_(2.0 ** (1 - _BITS)).sub_(1.0)   # exact
    return t.copy_(u.mul_(bound).to(torch.float32))


def normal_(t: torch.Tensor, std: float, g: torch.Generator) -> torch.Tensor:
    """t ~ N(0, std**2) by the polar method, portably (rejection loop in a fixed draw order)."""
    n, parts, have = t.numel(), [], 0
    while have < n:
        pairs = (n - have + 1) // 2
        u = _draw((2, pairs + pairs // 3 + 8), g).to(torch.float32).mul_(2.0 ** (1 - _BITS)).sub_(1.0)  # exact
        q = u[0] * u[0]
        q.add_(u[1] * u[1])
        ok = (q > 0).logical_and_(q < 1)
        u, q = u[:, ok], q[ok]
        f = T.log(q).mul_(-2.0)                                # exact doubling
        f = sqrt_f32(f / q)                                    # IEEE division, correctly rounded sqrt
        z = (u * f).transpose(0, 1).reshape(-1)                # pairs in draw order
        parts.append(z)
        have += z.numel()
    z = torch.cat(parts)[:n].reshape(t.shape)
    return t.copy_(z.mul_(f32(std)))


def _fan_in_(layer: torch.nn.Module, g: torch.Generator) -> None:
    bound = 1.0 / math.sqrt(layer.weight[0].numel())         # Python float ops: IEEE double everywhere
    uniform_(layer.weight, bound, g)
    if layer.bias is not None:
        uniform_(layer.bias, bound, g)


@torch.no_grad()
def init_weights(model: torch.nn.Module, g: torch.Generator) -> None:
    """Fill a zoo model's parameters (on the CPU) from `g`, in the native init's order and distributions."""
    if isinstance(model, native.MLP):
        for layer in model.layers:
            _fan_in_(layer, g)
    elif isinstance(model, native.CNN):
        for layer in [*model.convs, model.head]:
            _fan_in_(layer, g)
    elif isinstance(model, native.GPT):
        proj_std = 0.02 / math.sqrt(2 * model.cfg.n_layer)
        for name, p in model.named_parameters():
            if name.endswith("c_proj.weight"):
                normal_(p, proj_std, g)
            elif name.startswith("ln") or ".ln_" in name:
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("weight"):
                normal_(p, 0.02, g)
            else:
                p.zero_()
    elif isinstance(model, ResNet):
        from verity.engine.portable.resnet import init_portable
        init_portable(model, g)
    elif isinstance(model, Decoder):
        for name, p, std in init_plan(model):           # the native init's order and distributions
            if std is None:
                p.fill_(1.0 if name.endswith("weight") and _is_norm(name) else 0.0)
            else:
                normal_(p, std, g)
    else:
        raise TypeError(f"no portable init for {type(model).__name__}")
