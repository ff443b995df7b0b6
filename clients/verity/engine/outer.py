"""The outer optimizer of an AGGREGATE task (manifest `aggregation.outer`), DiLoCo-style.

Why: plain averaging moves the model by the mean of the shard tasks' updates;
DiLoCo treats that mean update as a pseudo-gradient and feeds it to SGD with
Nesterov momentum, which trains faster per round of communication. Per trained
parameter p (prev = the round's input value, merged = the rule's reduction):

    delta = prev - merged                          the pseudo-gradient
    v     = momentum * v_prev + delta               v_prev: from the round input; zeros in round 0
    new   = prev - lr * (delta + momentum * v)      nesterov
          = prev - lr * v                           otherwise

Every operation is elementwise float64 in exactly that order (merged stays
float64, unrounded), then `new` and `v` are each rounded to float32 once. `v`
lives in the aggregate's output state as `outer/<param>/momentum` (float32), so
the state hash binds it and the next AGGREGATE reads it back from its round
input. TRAIN tasks carry it in their step-0 state only (see docs/engine.md).
"""
from __future__ import annotations

import torch

OUTER_PREFIX = "outer/"


def momentum_name(param: str) -> str:
    """The state name of parameter `param`'s outer momentum."""
    return f"{OUTER_PREFIX}{param}/momentum"


def outer_update(prev: torch.Tensor, merged: torch.Tensor, v_prev: torch.Tensor | None, *, lr: float,
                 momentum: float, nesterov: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(new parameter, new momentum), both float32, for one tensor; see the module doc.
    `merged` is the float64 reduction, `prev` and `v_prev` the round input's float32 values."""
    p = prev.to(torch.float64)
    delta = p - merged.to(torch.float64)
    v_prev64 = torch.zeros_like(p) if v_prev is None else v_prev.to(torch.float64)  # literally zeros: -0.0 + 0.0 bits
    v = v_prev64 * momentum + delta
    step = (v * momentum + delta) if nesterov else v
    new = p - step * lr
    return new.to(torch.float32).contiguous(), v.to(torch.float32).contiguous()


def apply_outer(outer, round_input: dict[str, torch.Tensor],
                merged: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The outer step over every merged parameter: {model/<p>: new, outer/<p>/momentum: v}.

    `merged` maps parameter names to float64 reductions; `round_input` is the round input
    state's tensors (model/… and, after round 0, outer/…). `outer` is the manifest's
    aggregation.outer."""
    out = {}
    for name in sorted(merged):
        prev = round_input[f"model/{name}"]
        v_prev = round_input.get(momentum_name(name))
        out[f"model/{name}"], out[momentum_name(name)] = outer_update(
            prev, merged[name], v_prev, lr=outer.lr, momentum=outer.momentum, nesterov=outer.nesterov)
    return out
