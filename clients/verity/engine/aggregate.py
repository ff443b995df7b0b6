"""AGGREGATE tasks: merge a round's final states into the next round's input.

Rules (manifest `aggregation.rule`), applied to every `model/…` tensor:
- `mean`: weighted by each shard's sample count;
- `median`: coordinate-wise; with an even count, the mean of the two middle values;
- `trimmed_mean`: coordinate-wise, drop floor(trim · m) values at each end, mean the rest.
Determinism whatever order the inputs arrive in: inputs are sorted by
(state hash, weight) before reducing, all arithmetic is float64 on the CPU in
that fixed order, and the result is rounded to float32 once. The output is a
step-0 state (fresh optimizer, step 0), hashed like any other.

Module jobs (manifest `modules`) and jobs with an outer optimizer
(`aggregation.outer`) also need the round's input state: module M's
parameters are reduced over the finals of the tasks whose plan includes M
(each final's task index is in its state), every other tensor (frozen
parameters, buffers) is the round input's value, and the outer step
(engine/outer.py) then moves from the round input towards the merged model
and adds the `outer/…/momentum` tensors to the output. Jobs with neither keep
the rule above for every `model/…` tensor, bit for bit.

AGGREGATE trace (docs/protocol.md): h_0 = keccak256(abi.encode(bytes32[] finals))
over the accepted finals in shard order, h_1 = the aggregated state's hash.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from eth_abi import encode
from eth_hash.auto import keccak

from verity.errors import HashMismatch, StateInvalid
from verity.engine import merkle
from verity.engine.checkpoint import load_checkpoint
from verity.engine.manifest import Manifest
from verity.engine.modules import module_params, trained_params
from verity.engine.outer import apply_outer
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


def needs_round_input(manifest: Manifest) -> bool:
    """Whether an AGGREGATE of this job reads the round's input state (modules or an outer optimizer)."""
    return manifest.modules is not None or manifest.aggregation.outer is not None


def aggregate_states(manifest: Manifest, finals: list[TrainState], samples: list[int],
                     round_input: TrainState | None = None) -> TrainState:
    """Merge final states (any order; `samples[i]` is the weight of `finals[i]`). `round_input`:
    the round's step-0 input state, required exactly when `needs_round_input(manifest)`."""
    if not finals or len(finals) != len(samples):
        raise StateInvalid("aggregate", f"{len(finals)} states for {len(samples)} weights")
    if needs_round_input(manifest):
        return _aggregate_with_input(manifest, finals, samples, round_input)
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


def _aggregate_with_input(manifest: Manifest, finals: list[TrainState], samples: list[int],
                          round_input: TrainState | None) -> TrainState:
    if round_input is None:
        raise StateInvalid("round input", "this job (modules or aggregation.outer) merges relative to the "
                                          "round's input state: pass round_input")
    if round_input.step != 0:
        raise StateInvalid("round input", f"must be a step-0 state, found step {round_input.step}")
    order = sorted(range(len(finals)), key=lambda i: (finals[i].hash, samples[i]))
    rule, trim = manifest.aggregation.rule, manifest.aggregation.trim
    if manifest.modules is None:   # whole model: every task trains every parameter
        groups = {None: (sorted(trained_params(manifest)), order)}
    else:
        index = [f.task.index if f.task is not None else None for f in finals]
        if any(i is None or not 0 <= i < len(manifest.module_plan) for i in index):
            raise StateInvalid("aggregate", "a module job's finals must be step > 0 states of the job's shard "
                                            f"tasks (they name their task), got indices {index}")
        groups = {}
        for name, params in module_params(manifest).items():
            mine = [i for i in order if name in manifest.module_plan[index[i]]]
            if not mine:
                raise StateInvalid("aggregate", f"no final of a task that trains module {name!r}")
            groups[name] = (sorted(params), mine)
    merged: dict[str, torch.Tensor] = {}
    for params, mine in groups.values():
        weights = torch.tensor([float(samples[i]) for i in mine], dtype=torch.float64)
        for p in params:
            stack = torch.stack([finals[i].tensors[f"model/{p}"].to(torch.float64) for i in mine])
            merged[p] = _reduce(stack, weights, rule, trim)
    # frozen parameters and buffers: the round input's value; no optim/ (fresh), no stale outer/
    out = {k: v.clone() for k, v in round_input.tensors.items() if k.startswith("model/")}
    if manifest.aggregation.outer is None:
        for p, t in merged.items():
            out[f"model/{p}"] = t.to(out[f"model/{p}"].dtype).contiguous()
    else:
        out.update(apply_outer(manifest.aggregation.outer, round_input.tensors, merged))
    return TrainState(out)


def aggregate_input_hash(finals: list[bytes]) -> bytes:
    """h_0 of an AGGREGATE task: keccak256(abi.encode(bytes32[] finals)), shard order."""
    return keccak(encode(["bytes32[]"], [finals]))


@dataclass
class AggregateResult:
    trace: list[bytes]  # [h_0, h_1]
    root: bytes
    state: TrainState


def _round_input(manifest: Manifest, round_input: bytes | TrainState | None,
                 round_input_hash: bytes | None) -> TrainState | None:
    if not needs_round_input(manifest):
        return None
    if round_input is None:
        raise StateInvalid("round input", "this job (modules or aggregation.outer) needs the round's input "
                                          "state to aggregate: pass round_input (and round_input_hash)")
    state = round_input if isinstance(round_input, TrainState) else load_checkpoint(
        round_input, manifest, expected_hash=round_input_hash, source="round input")
    if round_input_hash is not None and state.hash != round_input_hash:
        raise HashMismatch("round input", round_input_hash, state.hash)
    return state


def run_aggregate(manifest: Manifest, finals: list[bytes], final_hashes: list[bytes],
                  round_input: bytes | TrainState | None = None, round_input_hash: bytes | None = None
                  ) -> AggregateResult:
    """The AGGREGATE task: `finals[i]` are the checkpoint bytes of shard i's
    accepted final state, `final_hashes[i]` its accepted hash (in shard order).
    `round_input` (checkpoint bytes or a state) and its on-chain hash `round_input_hash`:
    the round's input, required for module jobs and jobs with an outer optimizer,
    ignored otherwise. h_0 stays keccak(finals) either way."""
    if len(finals) != len(manifest.shards) or len(final_hashes) != len(manifest.shards):
        raise StateInvalid("aggregate", f"expected {len(manifest.shards)} finals, got {len(finals)}")
    start = _round_input(manifest, round_input, round_input_hash)
    states = [load_checkpoint(b, manifest, expected_hash=h, source=f"final of shard {i}")
              for i, (b, h) in enumerate(zip(finals, final_hashes))]
    if manifest.modules is not None:
        for i, s in enumerate(states):
            if s.task is None or s.task.index != i:
                raise StateInvalid(f"final of shard {i}", f"belongs to task {s.task}, not shard index {i}")
    with torch.no_grad():
        state = aggregate_states(manifest, states, [s.samples for s in manifest.shards], start)
    trace = [aggregate_input_hash(final_hashes), state.hash]
    return AggregateResult(trace, merkle.root(trace), state)
