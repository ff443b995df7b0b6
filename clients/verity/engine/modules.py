"""Which parameters a TRAIN task trains (manifest `modules` + `module_plan`).

A module is a named set of parameter-name prefixes ("h.0.", "lm_head."); shard
task i trains the union of the modules `module_plan[i]` names, every round.
Parameters no module names are frozen for the whole job. Without modules every
task trains every parameter (the whole-model case, today's behaviour).

The trainer (what requires grad, what the optimizer holds), the checkpoint
layout (which optim/ and outer/ tensors a state may hold) and the aggregator
(which finals a module is merged from) all resolve the same sets here, so a
solver, a verifier and an aggregator cannot disagree about them. Everything
is a pure function of the manifest, cached on the fields it reads.
"""
from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

import torch
from pydantic import TypeAdapter

from verity.engine.models import ModelSpec, build_model

if TYPE_CHECKING:  # manifest.py imports this module for its cross-checks
    from verity.engine.manifest import Manifest

_SPEC = TypeAdapter(ModelSpec)


@lru_cache(maxsize=64)
def _shapes(spec_json: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    model = build_model(_SPEC.validate_json(spec_json), "meta")
    return tuple((n, tuple(p.shape)) for n, p in model.named_parameters())


def parameter_shapes(spec) -> dict[str, tuple[int, ...]]:
    """name -> shape of every parameter of `spec`'s model, in named_parameters() order
    (built on the meta device, nothing allocated)."""
    return dict(_shapes(spec.model_dump_json()))


def matching(prefix: str, names) -> list[str]:
    """The parameter names a module prefix selects (plain string prefix: end it with '.')."""
    return [n for n in names if n.startswith(prefix)]


@lru_cache(maxsize=256)
def _module_params(spec_json: str, modules: tuple[tuple[str, tuple[str, ...]], ...]) -> dict[str, tuple[str, ...]]:
    names = [n for n, _ in _shapes(spec_json)]
    return {name: tuple(n for n in names if any(n.startswith(p) for p in prefixes)) for name, prefixes in modules}


def _key(manifest: "Manifest") -> tuple[str, tuple[tuple[str, tuple[str, ...]], ...]]:
    mods = tuple((m.name, tuple(m.params)) for m in manifest.modules or ())
    return manifest.model.model_dump_json(), mods


def module_params(manifest: "Manifest") -> dict[str, tuple[str, ...]]:
    """module name -> the parameter names it holds (model order); {} without modules."""
    return _module_params(*_key(manifest))


def trained_params(manifest: "Manifest", index: int | None = None) -> frozenset[str]:
    """The parameters shard task `index` trains; `index=None`: those some task of the job
    trains (the union). Whole-model jobs: every parameter. ValueError for an index outside
    the job's shards in a module job."""
    spec_json, mods = _key(manifest)
    if manifest.modules is None:
        return frozenset(n for n, _ in _shapes(spec_json))
    by_module = _module_params(spec_json, mods)
    if index is None:
        return frozenset(n for names in by_module.values() for n in names)
    if not 0 <= index < len(manifest.module_plan):
        raise ValueError(f"task index {index} outside the module plan (0..{len(manifest.module_plan) - 1})")
    return frozenset(n for m in manifest.module_plan[index] for n in by_module[m])


def trained_in_order(manifest: "Manifest", index: int | None = None) -> list[str]:
    """trained_params in named_parameters() order: the optimizer's parameter order."""
    chosen = trained_params(manifest, index)
    return [n for n, _ in _shapes(manifest.model.model_dump_json()) if n in chosen]


def trainers_of(manifest: "Manifest", module: str) -> list[int]:
    """The shard task indices whose plan includes `module`."""
    return [i for i, plan in enumerate(manifest.module_plan or ()) if module in plan]


def set_trainable(manifest: "Manifest", model: torch.nn.Module, index: int) -> None:
    """Set requires_grad on `model`'s parameters: True exactly for what task `index` trains."""
    chosen = trained_params(manifest, index)
    for name, p in model.named_parameters():
        p.requires_grad_(name in chosen)
