"""Task memory and FLOP estimates: the documented formulas, worked by hand for small MLPs."""
import pytest

from verity.engine.estimate import estimate_step_flops, estimate_task_memory, task_memory_breakdown

from engine_builders import build_manifest, build_module_manifest, outer


def test_estimate_task_memory_whole_mlp_by_hand():
    m = build_manifest("mlp")                                    # 64-64-10, Adam, batch 32, 539 samples
    p = 64 * 64 + 64 + 64 * 10 + 10
    want = {
        "parameters": 4 * p, "gradients": 4 * p, "optimizer": 4 * 2 * p, "outer": 0,
        "activations": 4 * 32 * (64 + 2 * 64 + 2 * 10 + 2 * 64),
        "data": 539 * (64 * 4 + 8),
        "checkpoints": 3 * 4 * (p + 2 * p),
    }
    assert task_memory_breakdown(m, 0) == want
    assert estimate_task_memory(m, 0) == sum(want.values())
    sgd = build_manifest("mlp", optimizer={"name": "sgd", "lr": 0.1})
    assert task_memory_breakdown(sgd, 0)["optimizer"] == 0
    portable = build_manifest("mlp", determinism="portable-f32")
    assert task_memory_breakdown(portable, 0)["activations"] == 2 * want["activations"]


def test_estimate_task_memory_module_task_counts_its_modules():
    m = build_module_manifest(aggregation=outer())              # 64-32-32-10, layers.0 frozen
    p = (64 * 32 + 32) + (32 * 32 + 32) + (32 * 10 + 10)
    head, body = 32 * 10 + 10, 32 * 32 + 32
    b0, b1 = task_memory_breakdown(m, 0), task_memory_breakdown(m, 1)
    assert b0["parameters"] == b1["parameters"] == 4 * p
    assert (b0["gradients"], b0["optimizer"]) == (4 * head, 8 * head)
    assert (b1["gradients"], b1["optimizer"]) == (4 * (head + body), 8 * (head + body))
    assert b0["outer"] == 4 * (head + body)                      # momentum for what the job trains
    assert estimate_task_memory(m, 0) < estimate_task_memory(m, 1)
    with pytest.raises(ValueError, match="outside"):
        estimate_task_memory(m, 3)
    with pytest.raises(ValueError, match="outside the job's shards"):
        estimate_step_flops(build_manifest("mlp"), 3)


def test_estimate_step_flops_by_hand():
    whole = build_manifest("mlp")                                # every GEMM: forward, input grad, weight grad
    assert estimate_step_flops(whole, 0) == 32 * 3 * (2 * 64 * 64 + 2 * 64 * 10)
    m = build_module_manifest()
    l0, l1, l2 = 2 * 64 * 32, 2 * 32 * 32, 2 * 32 * 10
    assert estimate_step_flops(m, 0) == 32 * (l0 + l1 + 3 * l2)           # head only: backward stops there
    assert estimate_step_flops(m, 2) == 32 * (l0 + 3 * l1 + 2 * l2)       # body: input grad through the head
    gpt = build_module_manifest("gpt")
    assert estimate_step_flops(gpt, 0) < estimate_step_flops(gpt, 1)      # top < b0 + top
    assert estimate_step_flops(gpt, 0) < estimate_step_flops(gpt, 2)      # embeddings: grads through every block


def test_estimate_activations_skip_frozen_leading_stages():
    """A task whose first trained layer is deep keeps nothing for backward in the frozen layers before it."""
    m = build_module_manifest()                                  # 64-32-32-10; task 0 trains the head only
    whole = build_manifest("mlp", model={"arch": "mlp", "config": {"in_features": 64, "hidden": [32, 32],
                                                                   "out_features": 10}})
    full = task_memory_breakdown(whole, 0)["activations"]
    assert full == 4 * 32 * (64 + 2 * (32 + 32) + 2 * 10 + 2 * 64)
    head = task_memory_breakdown(m, 0)["activations"]
    assert head == 4 * 32 * (2 * 10 + 2 * 64)                    # the last layer's output and the loss only
    assert head < task_memory_breakdown(m, 1)["activations"] <= full
