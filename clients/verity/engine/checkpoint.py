"""Checkpoint files: a state as safetensors, with the model config embedded.

Format `verity-checkpoint` version 1: the state's tensors under their state
names (`model/…`, `optim/<param>/<key>`, and in step-0 states of jobs with an
outer optimizer `outer/<param>/momentum`) and `__metadata__`:
    format "verity-checkpoint", version "1", state_version "1",
    step, job, round, index (decimal; empty strings for a step-0 state),
    model (JSON of the manifest's model spec), optimizer (JSON),
    state_hash (hex sha256 of the canonical serialisation, state.py).
`load_checkpoint` re-derives everything from the manifest (names, shapes,
dtypes, byte and element caps) and recomputes the hash; nothing else in the
file is trusted.
"""
from __future__ import annotations

import json
from typing import BinaryIO

import torch

from verity.errors import HashMismatch, StateInvalid
from verity.engine.determinism import is_portable
from verity.engine.manifest import Manifest
from verity.engine.models import build_model, init_model
from verity.engine.modules import trained_params
from verity.engine.outer import OUTER_PREFIX, momentum_name
from verity.engine.state import STATE_VERSION, TaskRef, TrainState
from verity.engine.tensorfile import read_safetensors, safetensors_bytes, write_safetensors

CHECKPOINT_FORMAT = "verity-checkpoint"
CHECKPOINT_VERSION = 1


def optimizer_keys(manifest: Manifest) -> list[str]:
    """Per-parameter optimizer state keys once the optimizer has stepped."""
    opt = manifest.optimizer
    if opt.name == "sgd":
        return ["momentum_buffer"] if opt.momentum > 0 else []
    return ["exp_avg", "exp_avg_sq", "step"]


def layout(manifest: Manifest, index: int | None = None) -> dict[str, tuple[torch.dtype, tuple[int, ...]]]:
    """Every tensor a state of this job may hold, with its dtype and shape: optimizer state
    only for the parameters shard task `index` trains (`None`: any task of the job; the same
    for a whole-model job), outer momentum (step-0 states only) for every parameter the job trains."""
    model = build_model(manifest.model, "meta")
    out = {f"model/{k}": (v.dtype, tuple(v.shape)) for k, v in model.state_dict().items()}
    trained = trained_params(manifest, index)
    for name, p in model.named_parameters():
        if name not in trained:
            continue
        for key in optimizer_keys(manifest):
            out[f"optim/{name}/{key}"] = (torch.float32, () if key == "step" else tuple(p.shape))
    if manifest.aggregation.outer is not None:
        for name in trained_params(manifest):
            out[momentum_name(name)] = (torch.float32, tuple(dict(model.named_parameters())[name].shape))
    return out


def _metadata(state: TrainState, manifest: Manifest) -> dict[str, str]:
    t = state.task
    return {
        "format": CHECKPOINT_FORMAT, "version": str(CHECKPOINT_VERSION), "state_version": str(STATE_VERSION),
        "step": str(state.step),
        "job": str(t.job) if t else "", "round": str(t.round) if t else "", "index": str(t.index) if t else "",
        "model": manifest.model.model_dump_json(), "optimizer": manifest.optimizer.model_dump_json(),
        "state_hash": state.hash.hex(),
    }


def write_checkpoint(f: BinaryIO, state: TrainState, manifest: Manifest) -> None:
    write_safetensors(f, state.tensors, _metadata(state, manifest))


def checkpoint_bytes(state: TrainState, manifest: Manifest) -> bytes:
    return safetensors_bytes(state.tensors, _metadata(state, manifest))


def _caps(lay: dict) -> tuple[int, int]:
    elements = sum(torch.Size(s).numel() for _, s in lay.values())
    return elements * 8 + (1 << 20), elements  # bytes: generous for header and dtypes


def checkpoint_cap(manifest: Manifest) -> int:
    """The byte cap of one checkpoint (or initial weights file) of this manifest's model."""
    return _caps(layout(manifest))[0]


def _check_tensors(tensors: dict[str, torch.Tensor], lay: dict, source: str, fresh: bool) -> None:
    for name, t in tensors.items():
        if name not in lay:
            raise StateInvalid(source, f"unexpected tensor {name!r}")
        dtype, shape = lay[name]
        if t.dtype != dtype or tuple(t.shape) != shape:
            raise StateInvalid(source, f"tensor {name!r} is {t.dtype} {list(t.shape)}, expected {dtype} {list(shape)}")
    missing = [n for n in lay if n.startswith("model/") and n not in tensors]
    if missing:
        raise StateInvalid(source, f"missing model tensors {missing[:3]}{'…' if len(missing) > 3 else ''}")
    optim = [n for n in tensors if n.startswith("optim/")]
    if fresh and optim:
        raise StateInvalid(source, "a step-0 state must have a fresh optimizer (no optim/ tensors)")
    outer = {n for n in tensors if n.startswith(OUTER_PREFIX)}
    if outer and not fresh:
        raise StateInvalid(source, "outer-optimizer momentum belongs in step-0 (round input) states only")
    expected = {n for n in lay if n.startswith(OUTER_PREFIX)}
    if outer and outer != expected:
        raise StateInvalid(source, f"outer momentum for {len(outer)} of the {len(expected)} trained parameters "
                                   "(all or none)")


def load_checkpoint(data: bytes, manifest: Manifest, *, expected_hash: bytes | None = None,
                    source: str = "checkpoint") -> TrainState:
    """Validate a checkpoint of this job and return its state (CPU tensors). A step > 0 state
    may hold optimizer state only for the parameters its own task (metadata `index`) trains."""
    lay = layout(manifest)
    max_bytes, max_elements = _caps(lay)
    tensors, md = read_safetensors(data, source, StateInvalid, max_bytes=max_bytes, max_elements=max_elements,
                                   dtypes={"F32", "I64"})
    if md.get("format") != CHECKPOINT_FORMAT or md.get("version") != str(CHECKPOINT_VERSION):
        raise StateInvalid(source, f"not a {CHECKPOINT_FORMAT} v{CHECKPOINT_VERSION} file")
    if md.get("state_version") != str(STATE_VERSION):
        raise StateInvalid(source, f"state version {md.get('state_version')!r}, this client hashes v{STATE_VERSION}")
    try:
        same_model = json.loads(md.get("model", "")) == manifest.model.model_dump(mode="json")
        step = int(md["step"])
        task = None if step == 0 else TaskRef(int(md["job"]), int(md["round"]), int(md["index"]))
    except (ValueError, KeyError):
        raise StateInvalid(source, "malformed step/job/round/index/model metadata") from None
    if not same_model:
        raise StateInvalid(source, "model config in the file differs from the manifest's")
    if step < 0 or step > manifest.steps_per_round:
        raise StateInvalid(source, f"step {step} outside 0..{manifest.steps_per_round}")
    if task is not None and manifest.modules is not None:
        try:
            lay = layout(manifest, task.index)
        except ValueError as e:
            raise StateInvalid(source, str(e)) from None
    _check_tensors(tensors, lay, source, fresh=step == 0)
    state = TrainState(tensors=tensors, step=step, task=task)
    if md.get("state_hash") != state.hash.hex():
        raise StateInvalid(source, "state_hash in the metadata does not match the contents")
    if expected_hash is not None and state.hash != expected_hash:
        raise HashMismatch(source, expected_hash, state.hash)
    return state


def initial_state(manifest: Manifest, weights: bytes | None = None) -> TrainState:
    """Round 0's input state: the initial model, a fresh optimizer, step 0.
    `weights` (the bytes behind `init.weights`) is either a checkpoint of this
    job's model or a plain safetensors file with the model's state_dict names."""
    if manifest.init.seed is not None:
        model = init_model(manifest.model, manifest.init.seed, is_portable(manifest.determinism))
        return TrainState({f"model/{k}": v for k, v in model.state_dict().items()})
    if weights is None:
        raise StateInvalid("init.weights", "the manifest names an initial weights file; pass its bytes")
    lay = {k: v for k, v in layout(manifest).items() if k.startswith("model/")}
    max_bytes, max_elements = _caps(lay)
    tensors, md = read_safetensors(weights, "init.weights", StateInvalid, max_bytes=max_bytes,
                                   max_elements=max_elements, dtypes={"F32", "I64"})
    if md.get("format") == CHECKPOINT_FORMAT:
        state = load_checkpoint(weights, manifest, source="init.weights")
        return TrainState({k: v for k, v in state.tensors.items() if k.startswith("model/")})
    tensors = {f"model/{k}": v for k, v in tensors.items()}
    _check_tensors(tensors, lay, "init.weights", fresh=True)
    return TrainState(tensors)
