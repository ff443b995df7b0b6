import subprocess
import sys

import pytest
import torch

from verity.engine.checkpoint import initial_state
from verity.engine.data import load_shard
from verity.engine.evaluate import evaluate
from verity.engine.models import ZOO, build_model, count_parameters, init_model
from verity.engine.state import TaskRef
from verity.engine.trainer import Trainer

from engine_builders import build_manifest, char_shards, digits_shards


@pytest.mark.parametrize("arch,batch", [("mlp", (4, 64)), ("cnn", (4, 1, 8, 8)), ("gpt", None)])
def test_build_model_from_config_succeeds(arch, batch):
    m = build_manifest(arch)
    model = init_model(m.model, seed=1)
    x = torch.randint(0, m.model.config.vocab_size, (4, 32)) if arch == "gpt" else torch.rand(*batch)
    out = model(x)
    assert out.shape == ((4, 32, m.model.config.vocab_size) if arch == "gpt" else (4, 10))
    assert sum(p.numel() for p in model.parameters()) == count_parameters(m.model)
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_init_model_uses_no_global_rng():
    m = build_manifest("gpt")
    state = torch.random.get_rng_state()
    a = init_model(m.model, seed=3).state_dict()
    assert torch.equal(torch.random.get_rng_state(), state)
    torch.manual_seed(12345)
    b = init_model(m.model, seed=3).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_build_model_meta_allocates_nothing():
    big = build_manifest("mlp", model={"arch": "mlp", "config": {"in_features": 64, "hidden": [4096] * 4, "out_features": 10}})
    model = build_model(big.model, "meta")
    assert all(p.is_meta for p in model.parameters())


def test_build_model_meta_skips_random_init_and_keeps_every_parameter():
    """On meta, the layers' random initialisers are skipped (a meta normal_ would import torch._dynamo, 2.3 s of
    start-up in every process that validates a GPT manifest); shapes, names and count are the plain meta build's."""
    probe = ("import sys; from verity.engine.reference import reference_manifest; "
             "from verity.engine.models import build_model, count_parameters; "
             "m = reference_manifest('cpu-f32-strict', 'gpt'); count_parameters(m.model); build_model(m.model, 'meta'); "
             "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr[-2000:]

    for arch in ("mlp", "cnn", "gpt"):
        spec = build_manifest(arch).model
        with torch.device("meta"):
            plain = ZOO[arch](spec.config)
        ours = build_model(spec, "meta")
        assert [(n, p.shape) for n, p in ours.named_parameters()] == [(n, p.shape) for n, p in plain.named_parameters()]
        assert count_parameters(spec) == sum(p.numel() for p in plain.parameters())


def _train(m, shard, steps):
    t = Trainer(m, shard, TaskRef(1, 0, 0))
    t.load(initial_state(m))
    losses = [float(t.train_step()) for _ in range(steps)]
    return t, losses


def test_gpt_trains_on_char_shard():
    m = build_manifest("gpt")
    shard = load_shard(char_shards()["shard-000"], m.data)
    _, losses = _train(m, shard, 30)
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5


@pytest.mark.parametrize("arch", ["mlp", "cnn"])
def test_digits_model_learns(arch):
    m = build_manifest(arch, steps_per_round=200, checkpoint_interval=50)
    shards = digits_shards(image=arch == "cnn")
    shard, held = load_shard(shards["shard-000"], m.data), load_shard(shards["eval"], m.data)
    before = evaluate(m, initial_state(m), held)
    t, _ = _train(m, shard, 200)
    after = evaluate(m, t.snapshot(), held)
    assert after.loss < 0.5 * before.loss
    assert after.accuracy > 0.8, after
