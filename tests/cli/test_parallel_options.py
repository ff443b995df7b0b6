"""Submit options of module-parallel jobs, the outer optimizer and the declared per-step budget (submit/modules.py):
each bad value names the option a user typed, before anything is uploaded or spent; good values land in the
manifest the nodes validate."""
from __future__ import annotations

import json

import pytest

from verity.engine.manifest import load_manifest
from verity.submit.prepare import JobSpec, plan_job
from verity.submit.modules import execution_window_for, parse_modules, parse_plan
from verity.submit.options import BadJobSpec

MODULES = "body=layers.0.;head=layers.1."


def test_modules_and_round_robin_plan_land_in_the_manifest_succeeds():
    prepared = plan_job(JobSpec(modules=MODULES, shards=4, outer_lr=0.7, outer_momentum=0.9))
    m = load_manifest(prepared.manifest_bytes)
    assert [(x.name, x.params) for x in m.modules] == [("body", ["layers.0."]), ("head", ["layers.1."])]
    assert [list(e) for e in m.module_plan] == [["body"], ["head"], ["body"], ["head"]]
    assert (m.aggregation.outer.lr, m.aggregation.outer.momentum, m.aggregation.outer.nesterov) == (0.7, 0.9, True)


def test_explicit_plan_may_train_several_modules_per_task_succeeds():
    mods = parse_modules(MODULES)
    assert parse_plan("body,head;head", mods, 2) == [["body", "head"], ["head"]]


def test_plain_job_manifest_has_no_parallel_fields_succeeds():
    doc = json.loads(plan_job(JobSpec(shards=2)).manifest_bytes)
    assert "modules" not in doc and "module_plan" not in doc and "outer" not in doc["aggregation"]
    assert "step_budget_ms" not in doc["hardware"]


@pytest.mark.parametrize("fields, option, why", [
    ({"modules": "body"}, "--modules", "is not name=prefix"),
    ({"modules": "Body=layers.0."}, "--modules", "is not name=prefix"),
    ({"modules": "a=layers.0.;a=layers.1."}, "--modules", "named twice"),
    ({"modules": "body=nope."}, "--modules", "matches no parameter"),           # the manifest's own check
    ({"modules": "a=layers.;b=layers.1."}, "--modules", "already in module"),   # overlapping modules
    ({"module_plan": "a;b"}, "--module-plan", "needs --modules"),
    ({"modules": MODULES, "module_plan": "body"}, "--module-plan", "1 entries for 4 shards"),
    ({"modules": MODULES, "module_plan": "body;tail;body;head"}, "--module-plan", "unknown module 'tail'"),
    ({"modules": MODULES, "module_plan": "body;body;body;body"}, "--modules", "trained by no task"),
    ({"modules": MODULES, "shards": 1}, "--module-plan", "cannot train 2 modules round-robin"),
    ({"outer_lr": -1.0}, "--outer-lr", "not in [0, 10]"),
    ({"outer_lr": 0.7, "outer_momentum": 1.0}, "--outer-momentum", "not in [0, 1)"),
    ({"step_budget_ms": -5}, "--step-budget-ms", "not in 0..3600000"),
])
def test_bad_parallel_option_names_the_option_fails(fields, option, why):
    spec = JobSpec(**{"shards": 4, **fields})
    with pytest.raises(BadJobSpec) as err:
        plan_job(spec)
    assert str(err.value).startswith(option) and why in str(err.value)


def test_step_budget_sets_a_window_the_declared_work_fits_in_succeeds():
    spec = JobSpec(steps=400, step_budget_ms=150)  # 60 s of declared work
    window = execution_window_for(spec)
    assert window * 0.75 >= 60 and window == 80 + 30   # ceil(60 / 0.75) + MIN_EXECUTION_WINDOW
    assert plan_job(JobSpec(shards=2, steps=400, step_budget_ms=150)).post_params().executionWindow == window
    assert execution_window_for(JobSpec(steps=400, step_budget_ms=150, execution_window=500)) == 500  # given wins
    assert execution_window_for(JobSpec(steps=400)) == 0  # undeclared: the registry's default
    m = load_manifest(plan_job(JobSpec(shards=2, steps=400, step_budget_ms=150)).manifest_bytes)
    assert m.hardware.step_budget_ms == 150


def test_module_job_asks_the_chain_only_for_its_smallest_tasks_memory_succeeds():
    from verity.engine.estimate import estimate_task_memory

    prepared = plan_job(JobSpec(modules=MODULES, shards=4))
    m = load_manifest(prepared.manifest_bytes)
    smallest = min(estimate_task_memory(m, i) for i in range(4))
    assert m.hardware.min_memory_mb == -(-smallest // (1 << 20)) == prepared.post_params().minMemoryMb
    assert plan_job(JobSpec(shards=2)).post_params().minMemoryMb == 1024  # whole-model jobs: the manifest's default
