"""node/feasibility.py: a drawn solver checks, inside the decline grace, that the job's window covers the work the
manifest declares (else the poster's inputs are invalid) and that this node can hold and finish the task (else it
declines without blaming the poster). A module task needs memory only for its own modules (issue 11: a node too
small for the whole model still trains one module). Real manifests and estimates; no chain."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from verity.engine.estimate import estimate_step_flops, estimate_task_memory
from verity.engine.reference import build_manifest
from verity.errors import CapacityExceeded, ManifestInvalid
from verity.node.feasibility import MIB, SAFETY, check_declared_window, check_task_fits, doctor_speeds

GPT_MODULES = {"modules": [{"name": "embed", "params": ["wte.", "wpe."]}, {"name": "blocks", "params": ["h."]},
                           {"name": "head", "params": ["ln_f.", "lm_head."]}],
               "module_plan": [["embed", "blocks"], ["head"], ["blocks"]]}
GPT_BIG = {"model": {"arch": "gpt", "config": {"vocab_size": 40, "block_size": 32, "n_layer": 4, "n_head": 4,
                                              "n_embd": 256}}}


def _gpt(**over):
    from verity.engine.reference import manifest_doc

    doc = manifest_doc("gpt")
    doc["model"]["config"].update(GPT_BIG["model"]["config"], vocab_size=doc["model"]["config"]["vocab_size"])
    return build_manifest("gpt", model=doc["model"], **over)


def test_declared_work_longer_than_the_window_is_the_posters_fault_fails():
    m = build_manifest("mlp", steps_per_round=400, hardware={"device_class": "cpu", "min_memory_mb": 1024,
                                                             "step_budget_ms": 150})
    check_declared_window(m, 110)   # 60 s of work fit in the 82.5 s left after the 25 % grace
    check_declared_window(m, 80)    # exactly fits: 60 s after the grace
    with pytest.raises(ManifestInvalid, match="60 s of declared work.*leaves 59 s") as err:
        check_declared_window(m, 79)
    assert err.value.field == "hardware.step_budget_ms"
    check_declared_window(build_manifest("mlp"), 30)   # no declaration: nothing to contradict


def test_task_over_the_nodes_memory_is_declined_as_capacity_fails():
    m = build_manifest("mlp")
    need = estimate_task_memory(m, 0)
    fit = check_task_fits(m, 0, execution_window=120, seconds_left=90, memory_mb=need // MIB + 1, speeds=None)
    assert fit.memory_bytes == need and fit.seconds is None
    with pytest.raises(CapacityExceeded, match="needs about"):
        check_task_fits(m, 0, execution_window=120, seconds_left=90, memory_mb=need // MIB - 1 or 0, speeds=None)


def test_module_task_fits_a_node_too_small_for_the_whole_model_succeeds():
    whole, modular = _gpt(), _gpt(**GPT_MODULES)
    full = estimate_task_memory(whole, 1)
    head = estimate_task_memory(modular, 1)
    assert head < full
    memory_mb = (head + full) // 2 // MIB  # between the two
    with pytest.raises(CapacityExceeded):
        check_task_fits(whole, 1, execution_window=600, seconds_left=500, memory_mb=memory_mb, speeds=None)
    check_task_fits(modular, 1, execution_window=600, seconds_left=500, memory_mb=memory_mb, speeds=None)


def test_task_too_slow_for_the_time_left_is_declined_as_capacity_fails():
    m = build_manifest("mlp", steps_per_round=400)
    flops = estimate_step_flops(m, 0)
    speed = flops / 10.0  # 10 ms per step: 4 s of training
    ok = check_task_fits(m, 0, execution_window=120, seconds_left=4 * SAFETY + 0.1, memory_mb=1 << 20,
                         speeds={m.determinism: speed})
    assert ok.seconds == pytest.approx(4.0)
    with pytest.raises(CapacityExceeded, match="4 s of training"):
        check_task_fits(m, 0, execution_window=120, seconds_left=4 * SAFETY - 0.1, memory_mb=1 << 20,
                        speeds={m.determinism: speed})
    # no measurement for the job's profile: only memory is checked
    assert check_task_fits(m, 0, execution_window=120, seconds_left=1, memory_mb=1 << 20,
                           speeds={"portable-f32": speed}).seconds is None


def test_doctor_speeds_take_the_slowest_reference_task_of_each_served_profile_succeeds():
    from verity.engine.reference import reference_manifest

    tasks = {a: SimpleNamespace(ms_per_step=ms) for a, ms in (("mlp", 1.0), ("cnn", 2.0), ("gpt", 4.0))}
    checks = {"cpu-f32-strict": SimpleNamespace(ok=True, tasks=tasks),
              "portable-f32": SimpleNamespace(ok=False, tasks=tasks)}
    speeds = doctor_speeds(checks)
    assert set(speeds) == {"cpu-f32-strict"}
    rates = [estimate_step_flops(reference_manifest("cpu-f32-strict", a), 0) / t.ms_per_step for a, t in tasks.items()]
    assert speeds["cpu-f32-strict"] == min(rates)
