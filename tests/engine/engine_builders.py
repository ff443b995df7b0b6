"""Builders for engine tests (imported by conftest, the tests and _task.py)."""
from __future__ import annotations

import json

from verity.engine.checkpoint import initial_state
from verity.engine.data import load_shard
from verity.engine.datasets import char_corpus, digits, make_shards
from verity.engine.manifest import load_manifest

CID = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"
TEXT = ("To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer "
        "the slings and arrows of outrageous fortune, or to take arms against a sea of troubles. ") * 8


def manifest_doc(arch: str = "mlp", **overrides) -> dict:
    """A valid manifest document; `overrides` replace top-level fields."""
    models = {
        "mlp": ({"arch": "mlp", "config": {"in_features": 64, "hidden": [64], "out_features": 10}},
                {"task": "classification", "x_shape": [64], "x_dtype": "float32", "num_classes": 10}),
        "cnn": ({"arch": "cnn", "config": {"in_channels": 1, "height": 8, "width": 8, "channels": [8, 16], "num_classes": 10}},
                {"task": "classification", "x_shape": [1, 8, 8], "x_dtype": "float32", "num_classes": 10}),
        "gpt": ({"arch": "gpt", "config": {"vocab_size": len(set(TEXT)), "block_size": 32, "n_layer": 2, "n_head": 2, "n_embd": 32}},
                {"task": "lm", "x_shape": [32], "x_dtype": "int64", "y_shape": [32], "vocab_size": len(set(TEXT))}),
    }
    model, data = models[arch]
    doc = {
        "schema_version": 1, "model": model, "init": {"seed": 7}, "data": data,
        "shards": [{"cid": CID, "samples": 539}] * 3,
        "optimizer": {"name": "adam", "lr": 0.003}, "batch_size": 32,
        "steps_per_round": 40, "rounds": 2, "checkpoint_interval": 10,
    }
    doc.update(overrides)
    return doc


def build_manifest(arch: str = "mlp", **overrides):
    return load_manifest(json.dumps(manifest_doc(arch, **overrides)).encode())


def digits_shards(image: bool = False) -> dict[str, bytes]:
    x, y = digits(image=image)
    return make_shards(x, y, task="classification", n_shards=3, eval_fraction=0.1, seed=0)


def char_shards() -> dict[str, bytes]:
    x, y, vocab = char_corpus(TEXT, 32, 8)
    return make_shards(x, y, task="lm", n_shards=2, eval_fraction=0.1, seed=0, vocab=vocab)
