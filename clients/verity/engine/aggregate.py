"""AGGREGATE tasks: merge a round's final states into the next round's input.

Rules (manifest `aggregation.rule`), applied to every `model/…` tensor:
- `mean`: weighted by each shard's sample count;
- `median`: coordinate-wise; with an even count, the mean of the two middle values;
- `trimmed_mean`: coordinate-wise, drop floor(trim · m) values at each end, mean the rest.
Determinism whatever order the inputs arrive in: inputs are sorted by
(state hash, weight) before reducing, all arithmetic is float64 on the CPU in
that fixed order, and the result is rounded to float32 once. The output is a
step-0 state (fresh optimizer, step 0), hashed like any other.

AGGREGATE trace (docs/protocol.md): h_0 = keccak256(abi.encode(bytes32[] finals))
over the accepted finals in shard order, h_1 = the aggregated state's hash.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from eth_abi import encode
from eth_hash.auto import keccak

from verity.errors import StateInvalid
from verity.engine import merkle
from verity.engine.checkpoint import load_checkpoint
from verity.engine.manifest import Manifest
from verity.engine.state import TrainState


def _reduce(stack: torch.Tensor, weights: torch.Tensor, rule: str, trim: float) -> torch.Tensor:
    """stack: (m, …) float64 in canonical input order; returns the reduced tensor."""
    m = stack.shape[0]
    if rule == "mean":
        acc = torch.zeros_like(stack[0])
        for i in range(m):  # a fixed left-to-right order, not a library reduction
            acc += stack[i] * weights[i]
        return acc / weights.sum()
    s = stack.sort(dim=0).values  # per coordinate; sorting makes input order irrelevant
    if rule == "median":
        lo, hi = (m - 1) // 2, m // 2
        return (s[lo] + s[hi]) / 2
    cut = math.floor(trim * m)
    kept = s[cut:m - cut]
    acc = torch.zeros_like(kept[0])
    for i in range(kept.shape[0]):
        acc += kept[i]
    return acc / kept.shape[0]


def aggregate_states(manifest: Manifest, finals: list[TrainState], samples: list[int]) -> TrainState:
    """Merge final states (any order; `samples[i]` is the weight of `finals[i]`)."""
    if not finals or len(finals) != len(samples):
        raise StateInvalid("aggregate", f"{len(finals)} states for {len(samples)} weights")
    order = sorted(range(len(finals)), key=lambda i: (finals[i].hash, samples[i]))
    states = [finals[i] for i in order]
    weights = torch.tensor([float(samples[i]) for i in order], dtype=torch.float64)
    rule, trim = manifest.aggregation.rule, manifest.aggregation.trim
    out = {}
    for name in sorted(states[0].model_tensors()):
        ts = [s.tensors[f"model/{name}"] for s in states]
        if not ts[0].is_floating_point():
            if any(not torch.equal(t, ts[0]) for t in ts):
                raise StateInvalid("aggregate", f"integer tensor model/{name} differs between inputs")
            out[f"model/{name}"] = ts[0].clone()
            continue
        stack = torch.stack([t.to(torch.float64) for t in ts])
        out[f"model/{name}"] = _reduce(stack, weights, rule, trim).to(ts[0].dtype).contiguous()
    return TrainState(out)


def aggregate_input_hash(finals: list[bytes]) -> bytes:
    """h_0 of an AGGREGATE task: keccak256(abi.encode(bytes32[] finals)), shard order."""
    return keccak(encode(["bytes32[]"], [finals]))


@dataclass
class AggregateResult:
    trace: list[bytes]  # [h_0, h_1]
    root: bytes
    state: TrainState


def run_aggregate(manifest: Manifest, finals: list[bytes], final_hashes: list[bytes]) -> AggregateResult:
    """The AGGREGATE task: `finals[i]` are the checkpoint bytes of shard i's
    accepted final state, `final_hashes[i]` its accepted hash (in shard order)."""
    if len(finals) != len(manifest.shards) or len(final_hashes) != len(manifest.shards):
        raise StateInvalid("aggregate", f"expected {len(manifest.shards)} finals, got {len(finals)}")
    states = [load_checkpoint(b, manifest, expected_hash=h, source=f"final of shard {i}")
              for i, (b, h) in enumerate(zip(finals, final_hashes))]
    with torch.no_grad():
        state = aggregate_states(manifest, states, [s.samples for s in manifest.shards])
    trace = [aggregate_input_hash(final_hashes), state.hash]
    return AggregateResult(trace, merkle.root(trace), state)
