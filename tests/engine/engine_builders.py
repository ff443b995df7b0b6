"""Builders for engine tests (imported by conftest, the tests and _task.py).

The manifests and shards are the engine's reference-task builders (verity.engine.reference), so the
roots these tests see are the ones tests/vectors/ records."""
from __future__ import annotations

import json

from verity.engine.manifest import load_manifest
from verity.engine.reference import CID, TEXT, build_manifest, char_shards, digits_shards, manifest_doc

__all__ = ["CID", "TEXT", "build_manifest", "char_shards", "digits_shards", "manifest_doc",
           "MODULE_JOBS", "module_manifest_doc", "build_module_manifest", "outer"]


# ------------------------------------------------------------------ module-parallel jobs
MODULE_JOBS = {
    # mlp 64-32-32-10: layers.0 in no module (a frozen input layer), body and head trained
    "mlp": ({"arch": "mlp", "config": {"in_features": 64, "hidden": [32, 32], "out_features": 10}},
            [{"name": "body", "params": ["layers.1."]}, {"name": "head", "params": ["layers.2."]}],
            [["head"], ["body", "head"], ["body"]]),
    # the reference gpt (2 blocks): every parameter in a module
    "gpt": (None,
            [{"name": "emb", "params": ["wte.", "wpe."]}, {"name": "b0", "params": ["h.0."]},
             {"name": "top", "params": ["h.1.", "ln_f.", "lm_head."]}],
            [["top"], ["b0", "top"], ["emb"]]),
}


def module_manifest_doc(arch: str = "mlp", **overrides) -> dict:
    """A valid module-parallel manifest document (3 shards, see MODULE_JOBS); `overrides` replace
    top-level fields (`modules`, `module_plan` included)."""
    model, modules, plan = MODULE_JOBS[arch]
    fields = {"modules": modules, "module_plan": plan, **({"model": model} if model else {})}
    return manifest_doc(arch, **{**fields, **overrides})


def build_module_manifest(arch: str = "mlp", **overrides):
    return load_manifest(json.dumps(module_manifest_doc(arch, **overrides)).encode())


def outer(lr: float = 0.7, momentum: float = 0.9, nesterov: bool = True, rule: str = "mean") -> dict:
    """An `aggregation` section with a DiLoCo outer optimizer."""
    return {"rule": rule, "outer": {"lr": lr, "momentum": momentum, "nesterov": nesterov}}
