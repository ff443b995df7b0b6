"""submit/fit.py: before anything is uploaded or spent, the job's largest task is estimated with a node's own rules
(issue 24, jobs that always fit): the execution window is chosen to fit it or a too-short one refused with the numbers,
nodes too small to hold it are never drawn (hardware.min_memory_mb), and a job no registered solver could hold is
refused. Real manifests and estimates; no chain (the devnet tests are in tests/cli/test_submit_cli.py)."""
from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from verity.chain.protocol import DEVICE_CPU, DEVICE_CUDA, PROFILE_BITS, ROLE_SOLVER, ROLE_VERIFIER
from verity.engine.estimate import estimate_task_memory
from verity.engine.manifest import load_manifest
from verity.submit.fit import (NODE_SAFETY, SLOW_NODE, START_S, JobFit, choose_execution_window, job_fit, network_fit,
                               window_needed)
from verity.submit.options import BadJobSpec, JobSpec
from verity.submit.prepare import plan_job

PORTABLE = PROFILE_BITS["portable-f32"]


def test_window_needed_lets_a_node_half_as_fast_keep_its_margin_succeeds():
    assert window_needed(10.0) == round(10.0 * SLOW_NODE * NODE_SAFETY) + START_S == 50
    assert window_needed(0.07) == START_S + 1


def test_a_given_window_too_short_for_the_largest_task_is_refused_with_the_numbers_fails():
    fit = JobFit(task_seconds=60.0, memory_mb=40, window_s=window_needed(60.0))
    with pytest.raises(BadJobSpec) as err:
        choose_execution_window(fit, given=120, default=120)
    msg = str(err.value)
    assert msg.startswith("--execution-window: 120 s is too short: largest task: about 60.0 s of training")
    assert msg.endswith(f"--execution-window {fit.window_s} or more, or fewer --steps")
    assert choose_execution_window(fit, given=fit.window_s, default=120) == (fit.window_s, "")


def test_no_window_given_takes_the_default_or_the_one_the_job_needs_succeeds():
    small = JobFit(2.9, 29, window_needed(2.9))
    assert choose_execution_window(small, given=0, default=120) == (0, "")   # the chain's default fits it
    big = JobFit(181.0, 200, window_needed(181.0))
    window, note = choose_execution_window(big, given=0, default=120)
    assert window == big.window_s == 563 and note.startswith("execution window 563 s (the chain's default 120 s is")
    assert choose_execution_window(big, given=0, default=120, step_budget_ms=50) == (0, "")  # the budget decides
    with pytest.raises(BadJobSpec, match="^--steps: .*over the registry's maximum"):
        choose_execution_window(JobFit(10**6, 1, window_needed(10**6)), given=0, default=120)


def _node(roles=ROLE_SOLVER, memory=4096, profiles=PORTABLE, device=DEVICE_CPU):
    return NS(roles=roles, memoryMb=memory, profiles=profiles, deviceClass=device)


def test_a_job_no_registered_solver_can_hold_is_refused_with_both_numbers_fails():
    """Issue 24: a 196M-parameter MLP needing about 9.7 GB was posted to nodes declaring 4 GB and never served."""
    fit = JobFit(30.0, 9_700, 120)
    nodes = [_node(memory=4096), _node(memory=2048), _node(roles=ROLE_VERIFIER, memory=65536),  # not a solver
             _node(memory=65536, profiles=PROFILE_BITS["cpu-f32-strict"]), _node(memory=65536, device=DEVICE_CUDA)]
    with pytest.raises(BadJobSpec) as err:
        network_fit(nodes, fit, PORTABLE, DEVICE_CPU)
    assert str(err.value).startswith("--model-config: its largest task needs about 9,700 MB, but the largest of the 2 "
                                     "registered solver(s) of this profile declares 4,096 MB")
    ok = network_fit([*nodes, _node(memory=16384)], fit, PORTABLE, DEVICE_CPU)
    assert (ok.solvers, ok.largest_mb, ok.eligible) == (3, 16384, 1) and ok.warning("portable-f32") == ""
    none = network_fit([], fit, PORTABLE, DEVICE_CPU)  # a network may not have its solvers yet: posted, with a warning
    assert none.solvers == 0 and none.warning("portable-f32").startswith("warning: no registered solver serves")


def test_plan_job_draws_only_nodes_that_can_hold_the_task_succeeds():
    big = plan_job(JobSpec(shards=2, rounds=1, steps=10, k=10, batch_size=64,
                           model_config={"in_features": 64, "hidden": [4096, 4096, 4096], "out_features": 10}))
    manifest = load_manifest(big.manifest_bytes)
    need_mb = -(-max(estimate_task_memory(manifest, i) for i in range(2)) // (1 << 20))
    assert need_mb > 1024 and manifest.hardware.min_memory_mb == big.fit.memory_mb == need_mb
    assert big.post_params().minMemoryMb == need_mb   # the draw's filter, and what job_mismatches compares
    small = plan_job(JobSpec(shards=2, rounds=1, steps=10, k=10))
    assert load_manifest(small.manifest_bytes).hardware.min_memory_mb == 1024  # the manifest default stands
    assert small.fit.task_seconds < 1 and small.fit.window_s == window_needed(small.fit.task_seconds)


def test_plan_job_estimates_the_users_default_gpt_job_in_seconds_succeeds():
    """The job that never ran: the default GPT on the user's own text. Its task takes about 3 s here
    (scripts/bench_estimate.py); the chain's 120 s default window fits it with room to spare."""
    import tempfile
    from pathlib import Path

    from sklearn import datasets

    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "own.txt"
        text.write_text("\n".join([datasets.load_digits().DESCR, datasets.load_iris().DESCR,
                                   datasets.load_wine().DESCR]))
        prepared = plan_job(JobSpec(model="gpt", dataset=str(text)))
    assert 1.0 < prepared.fit.task_seconds < 10.0 and prepared.fit.window_s < 120
    assert choose_execution_window(prepared.fit, given=0, default=120) == (0, "")
    assert job_fit(load_manifest(prepared.manifest_bytes)) == prepared.fit
