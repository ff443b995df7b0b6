"""The model card written beside downloaded weights: its facts, and a loader that rebuilds the
model in plain PyTorch with the same outputs as Verity's model zoo."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
import torch

from verity.engine.checkpoint import checkpoint_bytes, initial_state
from verity.engine.manifest import load_manifest
from verity.engine.models import build_model
from verity.job.view import RoundMetric
from verity.model_card import CardFacts, write_model_card

CID = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"
VOCAB = " ',.:Tabcdefhilmnoqrstuw"
MODELS = {
    "mlp": ({"arch": "mlp", "config": {"in_features": 64, "hidden": [32], "out_features": 10, "activation": "gelu"}},
            {"task": "classification", "x_shape": [64], "x_dtype": "float32", "num_classes": 10}),
    "cnn": ({"arch": "cnn", "config": {"in_channels": 1, "height": 8, "width": 8, "channels": [4, 8], "num_classes": 10}},
            {"task": "classification", "x_shape": [1, 8, 8], "x_dtype": "float32", "num_classes": 10}),
    "gpt": ({"arch": "gpt", "config": {"vocab_size": len(VOCAB), "block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 16}},
            {"task": "lm", "x_shape": [16], "x_dtype": "int64", "y_shape": [16], "vocab_size": len(VOCAB)}),
    "resnet": ({"arch": "resnet", "config": {"in_channels": 1, "height": 8, "width": 8, "widths": [4, 8], "blocks": 1,
                                             "groups": 2, "num_classes": 10}},
               {"task": "classification", "x_shape": [1, 8, 8], "x_dtype": "float32", "num_classes": 10}),
    "decoder": ({"arch": "decoder", "config": {"vocab_size": len(VOCAB), "block_size": 16, "n_layer": 1, "n_head": 2,
                                               "n_kv_head": 1, "n_embd": 16}},
                {"task": "lm", "x_shape": [16], "x_dtype": "int64", "y_shape": [16], "vocab_size": len(VOCAB)}),
}


def manifest(arch: str):
    model, data = MODELS[arch]
    doc = {"schema_version": 1, "name": f"tiny {arch}", "model": model, "init": {"seed": 3}, "data": data,
           "shards": [{"cid": CID, "samples": 100}] * 2, "eval_shard": {"cid": CID, "samples": 20},
           "optimizer": {"name": "adam", "lr": 0.003}, "batch_size": 8, "steps_per_round": 20, "rounds": 2,
           "checkpoint_interval": 10}
    return load_manifest(json.dumps(doc).encode())


def written(tmp_path, arch: str):
    m = manifest(arch)
    weights = tmp_path / "model.safetensors"
    state = initial_state(m)
    weights.write_bytes(checkpoint_bytes(state, m))
    facts = CardFacts(5, m, CID, "0x" + state.hash.hex(), CID, 31337, VOCAB if arch == "gpt" else None,
                      [RoundMetric(0, 1.25, 0.5), RoundMetric(1, 0.75, 0.625)])
    return m, state, weights, write_model_card(weights, facts)


@pytest.mark.parametrize("arch", ["mlp", "cnn", "gpt", "resnet", "decoder"])
def test_loader_rebuilds_the_model_in_plain_pytorch_succeeds(tmp_path, arch):
    m, state, _, paths = written(tmp_path, arch)
    loader = tmp_path / "model_load.py"
    assert loader in paths
    source = loader.read_text()
    assert "import verity" not in source and "from verity" not in source and "init_weights" not in source
    spec = importlib.util.spec_from_file_location(f"card_loader_{arch}", loader)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    plain = mod.load()
    ours = build_model(m.model)
    ours.load_state_dict(state.model_tensors())
    ours.eval()
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, len(VOCAB), (2, 16), generator=g) if arch in ("gpt", "decoder") \
        else torch.randn(2, *m.data.x_shape, generator=g)
    with torch.no_grad():
        assert torch.equal(plain(x), ours(x))
    if arch == "gpt":
        assert mod.decode(mod.encode("To be")[0]) == "To be"


def test_loader_runs_as_a_script_succeeds(tmp_path):
    written(tmp_path, "gpt")
    proc = subprocess.run([sys.executable, "model_load.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "output shape (1, 4, 24)" in proc.stdout


def test_card_holds_config_vocab_manifest_and_final_metrics_succeeds(tmp_path):
    _, state, _, _ = written(tmp_path, "gpt")
    card = (tmp_path / "model.card.md").read_text()
    assert card.startswith("# tiny gpt — gpt")
    assert f"| manifest CID | `{CID}` |" in card
    assert f"`0x{state.hash.hex()}`" in card
    assert "| final metrics | loss 0.7500, accuracy 0.625 (round 2, held-out eval shard) |" in card
    assert '"n_embd": 16' in card
    assert json.dumps(VOCAB) in card and "24 characters; token id = position" in card
    assert "from model_load import load" in card
    cfg = json.loads((tmp_path / "model.config.json").read_text())
    assert cfg["vocab"] == VOCAB and cfg["manifest_cid"] == CID and cfg["model"]["arch"] == "gpt"
    assert [x["round"] for x in cfg["metrics"]] == [1, 2] and cfg["final"]["loss"] == 0.75


def test_card_of_a_classifier_has_no_vocabulary_succeeds(tmp_path):
    written(tmp_path, "mlp")
    card = (tmp_path / "model.card.md").read_text()
    assert "Vocabulary" not in card and '"num_classes": 10' in card
