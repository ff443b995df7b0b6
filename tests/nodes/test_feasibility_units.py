"""node/feasibility.py: a drawn solver checks, inside the decline grace, that the job's window covers the work the
manifest declares (else the poster's inputs are invalid) and that this node can hold and finish the task (else it
declines without blaming the poster). A module task needs memory only for its own modules (issue 11: a node too
small for the whole model still trains one module). Real manifests and estimates; no chain."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from verity.engine.estimate import StepSpeed, estimate_step_flops, estimate_task_memory, fit_speed
from verity.engine.reference import build_manifest
from verity.errors import CapacityExceeded, ManifestInvalid
from verity.node.feasibility import MIB, SAFETY, check_declared_window, check_task_fits, doctor_speeds, unverified_family

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
    speed = {"mlp": StepSpeed(2.0, flops / 8.0)}  # 2 ms overhead + 8 ms of FLOPs per step: 4 s of training
    ok = check_task_fits(m, 0, execution_window=120, seconds_left=4 * SAFETY + 0.1, memory_mb=1 << 20,
                         speeds={m.determinism: speed})
    assert ok.seconds == pytest.approx(4.0)
    with pytest.raises(CapacityExceeded, match="4 s of training") as err:
        check_task_fits(m, 0, execution_window=120, seconds_left=4 * SAFETY - 0.1, memory_mb=1 << 20,
                        speeds={m.determinism: speed})
    assert err.value.note == "time 6/5 s"  # the decline's on-chain note: needed (with margin) / left
    # no measurement for the job's profile: only memory is checked
    assert check_task_fits(m, 0, execution_window=120, seconds_left=1, memory_mb=1 << 20,
                           speeds={"portable-f32": speed}).seconds is None
    # the profile is served but not this family (no vector recorded for it, or its root differs here): declined
    with pytest.raises(CapacityExceeded, match="no verified mlp reference under cpu-f32-strict") as err:
        check_task_fits(m, 0, execution_window=120, seconds_left=1, memory_mb=1 << 20,
                        speeds={m.determinism: {"gpt": speed["mlp"]}})
    assert err.value.note == "no mlp vector"


def test_work_already_queued_on_the_node_counts_against_a_new_slot_fails():
    """A busy node took short slots it could not start behind two long tasks and was fined twice (issue 24): the
    running and queued work's expected seconds come first."""
    m = build_manifest("mlp", steps_per_round=400)
    speed = {"mlp": StepSpeed(0.0, estimate_step_flops(m, 0) / 10.0)}  # 4 s of training
    check_task_fits(m, 0, execution_window=120, seconds_left=30, memory_mb=1 << 20, speeds={m.determinism: speed})
    with pytest.raises(CapacityExceeded, match="after 25 s of work already running or queued here") as err:
        check_task_fits(m, 0, execution_window=120, seconds_left=30, memory_mb=1 << 20,
                        speeds={m.determinism: speed}, backlog_s=25.0)
    assert err.value.note == "time 31/30 s"


def test_memory_refusal_carries_its_numbers_in_the_note_fails():
    m = build_manifest("mlp")
    need_mb = -(-estimate_task_memory(m, 0) // MIB)
    with pytest.raises(CapacityExceeded) as err:
        check_task_fits(m, 0, execution_window=120, seconds_left=90, memory_mb=need_mb - 1, speeds=None)
    assert err.value.note == f"memory {need_mb}/{need_mb - 1} MB"


def test_work_pool_backlog_counts_running_and_queued_estimates_succeeds():
    import threading

    from verity.node.work import WorkPool

    pool, gate = WorkPool(long_threads=1), threading.Event()
    try:
        pool.poll("a", gate.wait, what="a", estimate_s=100.0)
        pool.poll("b", lambda: None, what="b", estimate_s=40.0)    # queued behind a (one long thread)
        pool.poll("u", lambda: None, what="u", urgent=True, estimate_s=999.0)  # the urgent lane is not training
        pool.poll("c", lambda: None, what="c")                      # no estimate: counts nothing
        for _ in range(200):
            if pool._jobs["a"].started:
                break
            threading.Event().wait(0.01)
        started = pool._jobs["a"].started
        assert pool.backlog_seconds(now=started + 30.0) == pytest.approx(70.0 + 40.0)
        assert pool.backlog_seconds(now=started + 500.0) == pytest.approx(40.0)  # overran: nothing left of a
    finally:
        gate.set()
        pool.close(1.0)


def test_doctor_speeds_fit_each_family_from_its_two_timed_tasks_succeeds():
    from verity.engine.reference import calibration_manifest, reference_manifest

    tasks = {a: SimpleNamespace(ms_per_step=ms, cal_ms_per_step=cal, matches=a != "decoder")
             for a, ms, cal in (("mlp", 1.0, 21.0), ("cnn", 2.0, 12.0), ("gpt", 4.0, 0.0), ("decoder", 3.0, 9.0))}
    checks = {"cpu-f32-strict": SimpleNamespace(ok=True, tasks=tasks),
              "portable-f32": SimpleNamespace(ok=False, tasks=tasks)}
    speeds = doctor_speeds(checks)
    assert set(speeds) == {"cpu-f32-strict"}
    fam = speeds["cpu-f32-strict"]
    assert "decoder" not in fam   # its root did not match (or was not recorded): not served under the profile
    for arch in ("mlp", "cnn"):
        f0 = estimate_step_flops(reference_manifest("cpu-f32-strict", arch), 0)
        f1 = estimate_step_flops(calibration_manifest("cpu-f32-strict", arch), 0)
        t = tasks[arch]
        assert fam[arch].step_ms(f0) == pytest.approx(t.ms_per_step)       # the line passes through both points
        assert fam[arch].step_ms(f1) == pytest.approx(t.cal_ms_per_step)
    # no calibration timing (an older cache): the reference task's own rate, no overhead
    g0 = estimate_step_flops(reference_manifest("cpu-f32-strict", "gpt"), 0)
    assert fam["gpt"] == StepSpeed(0.0, g0 / 4.0)


def test_fit_speed_never_returns_a_negative_overhead_or_rate_succeeds():
    assert fit_speed((100, 5.0), (1000, 14.0)) == StepSpeed(pytest.approx(4.0), pytest.approx(100.0))
    # noise: the large task no slower than the small one per FLOP -> its own rate, no overhead
    assert fit_speed((100, 5.0), (1000, 4.0)) == StepSpeed(0.0, 250.0)
    assert fit_speed((100, 0.1), (1000, 50.0)) == StepSpeed(0.0, 20.0)   # a line through them would start below 0
    with pytest.raises(ValueError):
        fit_speed((100, 5.0), (1000, 0.0))


def test_unverified_family_is_named_and_verified_ones_pass_succeeds():
    """A node serving a native class but holding no verified root for a family (the class's vector file records none,
    or its root differs here) neither checks nor audits that family's jobs: its bits could differ from the class's."""
    m = build_manifest("mlp")
    speed = StepSpeed(1.0, 1e6)
    ctx = SimpleNamespace(speeds={m.determinism: {"gpt": speed}}, manifest=lambda job_id: m)
    assert unverified_family(ctx, 1) == f"mlp under {m.determinism}"
    ctx.speeds = {m.determinism: {"mlp": speed}}
    assert unverified_family(ctx, 1) is None
    ctx.speeds = {"portable-f32": {"gpt": speed}}   # the job's profile unmeasured: the profile gate decides
    assert unverified_family(ctx, 1) is None
    assert unverified_family(SimpleNamespace(manifest=lambda job_id: m), 1) is None   # a bare context


def test_micro_batches_pay_the_per_step_overhead_each_and_a_job_that_hides_it_is_declined_fails():
    """The attack: the same FLOPs cut into micro_batches=32 make a step ~27x slower (measured here: portable mlp
    reference task, 1.51 -> 41.68 ms/step, one thread), so a node estimating the step as one pass takes a slot it
    cannot finish and is fined for lateness. Each micro-batch pays the family's fixed per-step cost."""
    from verity.engine.estimate import estimate_task_seconds

    plain = build_manifest("mlp", steps_per_round=400)
    split = build_manifest("mlp", steps_per_round=400, micro_batches=32)
    speed = {"mlp": StepSpeed(1.3, estimate_step_flops(plain, 0) / 0.2)}   # 1.3 ms fixed + 0.2 ms of FLOPs a step
    assert estimate_task_seconds(plain, 0, speed) == pytest.approx(400 * 1.5 / 1000)
    assert estimate_task_seconds(split, 0, speed) == pytest.approx(400 * (1.5 + 31 * 1.3) / 1000)
    window = 400 * 1.5 / 1000 * SAFETY + 1
    check_task_fits(plain, 0, execution_window=120, seconds_left=window, memory_mb=1 << 20,
                    speeds={plain.determinism: speed})
    with pytest.raises(CapacityExceeded, match="s of training"):
        check_task_fits(split, 0, execution_window=120, seconds_left=window, memory_mb=1 << 20,
                        speeds={split.determinism: speed})


def test_a_loaded_machine_scales_the_estimate_by_its_own_measured_contention_and_declines_fails():
    """The doctor times steps by the training thread's CPU clock (a wall clock read under load once said ~50x and was
    cached: every default GPT task was declined as 57 s of work that took 1-3 s). The load it leaves out comes back
    from this node's own runs: a task whose steps took 4x their CPU time makes the next estimate 4x longer."""
    from verity.node.feasibility import Contention

    m = build_manifest("mlp", steps_per_round=400)
    speed = {m.determinism: {"mlp": StepSpeed(1.0, estimate_step_flops(m, 0) / 1.0)}}   # 2 ms a step: 0.8 s a task
    fits = dict(execution_window=120, seconds_left=0.8 * SAFETY + 0.5, memory_mb=1 << 20, speeds=speed)
    c = Contention()
    c.observe({"train": 0.1, "train_cpu": 0.05})          # too short to tell: unchanged
    assert c.factor == 1.0
    assert check_task_fits(m, 0, contention=c.factor, **fits).seconds == pytest.approx(0.8)
    c.observe({"train": 8.0, "train_cpu": 2.0})            # steps ran 4x their CPU time
    assert c.factor == pytest.approx(2.5)                  # half way there: one busy moment is not the machine
    with pytest.raises(CapacityExceeded, match=r"x2\.5 for this machine's load"):
        check_task_fits(m, 0, contention=c.factor, **fits)
    for _ in range(3):
        c.observe({"train": 2.0, "train_cpu": 2.0})        # the load went away
    assert c.factor < 1.2
    c.observe({"train": 500.0, "train_cpu": 1.0})          # a stopped process (SIGSTOP, swap): capped
    assert c.factor <= Contention.CAP
    # two of the node's own tasks sharing the cores: the backlog already counts them one after the other
    mine = Contention()
    mine.observe({"train": 4.0, "train_cpu": 2.0}, concurrent=2)
    assert mine.factor == 1.0
    mine.observe({"train": 12.0, "train_cpu": 2.0}, concurrent=2)   # 6x: 2x its partner, 3x the machine's load
    assert mine.factor == pytest.approx(2.0)


def test_reference_timing_reads_the_cpu_clock_only_for_one_thread_on_a_cpu_succeeds():
    import torch

    from verity.engine.reference import cpu_clock_is_step_time, reference_manifest

    m = reference_manifest("portable-f32", "mlp")
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert cpu_clock_is_step_time(m)
        torch.set_num_threads(2)   # other threads' cycles would be missing from this thread's clock
        assert not cpu_clock_is_step_time(m)
    finally:
        torch.set_num_threads(threads)


def test_run_task_reports_the_step_loops_cpu_time_beside_its_wall_time_succeeds(tmp_path):
    import torch

    from verity.engine.checkpoint import initial_state
    from verity.engine.reference import TASK, reference_manifest, reference_shard
    from verity.engine.runner import run_task

    m = reference_manifest("portable-f32", "mlp")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        t = run_task(m, initial_state(m), reference_shard("mlp", m), TASK, tmp_path / "t").timings
    finally:
        torch.set_num_threads(threads)
    assert 0 < t["train_cpu"] <= t["train"] * 1.05 + 0.01, t   # one thread's CPU time never exceeds its wall time
