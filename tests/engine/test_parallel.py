"""Micro-batches and data-parallel steps (engine/trainer.py, engine/parallel.py): under portable-f32 a task run
over 2 gloo processes has the single-process trace, bit for bit.

Run as a script, this file is the rank-0 process of test_kill_rank0_then_resume:
    python test_parallel.py WORKDIR KILL_AT    # SIGKILL itself once checkpoint KILL_AT is on disk
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from engine_builders import build_manifest, char_shards, digits_shards  # noqa: E402

from verity.engine import parallel  # noqa: E402
from verity.engine.checkpoint import initial_state  # noqa: E402
from verity.engine.data import load_shard  # noqa: E402
from verity.engine.manifest import load_manifest, manifest_bytes  # noqa: E402
from verity.engine.parallel import WorkerFailed, check_workers, usable_workers  # noqa: E402
from verity.engine.runner import checkpoint_path, run_task  # noqa: E402
from verity.engine.state import TaskRef  # noqa: E402
from verity.engine.trainer import Trainer, sum_in_order  # noqa: E402
from verity.errors import ManifestInvalid  # noqa: E402

TASK = TaskRef(job=5, round=0, index=1)
PORTABLE = "portable-f32"


def mlp(micro_batches=None, steps=8, k=4, **kw):
    extra = {} if micro_batches is None else {"micro_batches": micro_batches}
    m = build_manifest("mlp", determinism=PORTABLE, steps_per_round=steps, checkpoint_interval=k, **extra, **kw)
    return m, load_shard(digits_shards()["shard-000"], m.data, samples=539)


def helpers_of(workdir: Path) -> list[int]:
    """Pids of live helper processes serving `workdir` (their command line names its rendezvous file)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().decode(errors="replace")
                state = (d / "stat").read_text().split(") ")[-1][:1]
            except OSError:
                continue
            if str(workdir) in cmd and "helper_main" in cmd and state != "Z":
                out.append(int(d.name))
    return out


def wait_gone(workdir: Path, seconds: float = 15) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := helpers_of(workdir)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


# ------------------------------------------------------------------ manifest
def test_micro_batches_validated_and_omitted_when_unset():
    plain = build_manifest("mlp")
    assert plain.micro_batches is None and b"micro_batches" not in manifest_bytes(plain)
    two = build_manifest("mlp", micro_batches=2)
    assert b'"micro_batches":2' in manifest_bytes(two)
    assert load_manifest(manifest_bytes(two)) == two
    for bad, why in ((3, "power of two"), (0, "greater than or equal"), (128, "less than or equal"),
                     (64, "does not divide batch_size")):     # batch_size is 32
        with pytest.raises(ManifestInvalid, match=why) as e:
            build_manifest("mlp", micro_batches=bad)
        assert e.value.field == "micro_batches"
    assert build_manifest("mlp", batch_size=64, micro_batches=64).micro_batches == 64


def test_workers_must_divide_micro_batches():
    m1, m4 = build_manifest("mlp"), build_manifest("mlp", micro_batches=4)
    assert check_workers(m1, 1) == 1 and check_workers(m4, 2) == 2 and check_workers(m4, 4) == 4
    for m, w in ((m1, 2), (m4, 3), (m4, 8)):
        with pytest.raises(ValueError, match="cannot share"):
            check_workers(m, w)
    assert [usable_workers(m4, w) for w in (1, 2, 3, 4, 16)] == [1, 2, 2, 4, 4]
    assert usable_workers(m1, 8) == 1


def test_workers_refused_without_micro_batches(tmp_path):
    m, shard = mlp()
    with pytest.raises(ValueError, match="micro_batches is 1"):
        run_task(m, initial_state(m), shard, TASK, tmp_path, workers=2)
    assert not tmp_path.joinpath("task.json").exists()   # refused before touching the workdir


# ------------------------------------------------------------------ the step's definition
def test_sum_in_order_left_to_right_and_skips_none():
    a, b, c = (torch.tensor([1e8, -0.0]), torch.tensor([1.0, -0.0]), torch.tensor([-1e8, -0.0]))
    (s,) = sum_in_order([[a], [b], [c]])
    assert s.tolist() == [0.0, -0.0] and str(s[1].item()) == "-0.0"   # ((1e8 + 1) - 1e8) in float32: 0
    assert sum_in_order([[None, a], [None, b]])[0] is None
    (only,) = sum_in_order([[None], [b]])
    assert str(only[1].item()) == "-0.0"          # None is skipped, not read as +0.0 (0.0 + -0.0 = +0.0)
    assert a.tolist() == [1e8, -0.0]                                       # inputs untouched


def test_micro_batches_one_is_the_plain_step(tmp_path):
    """micro_batches=1 runs the unchanged step: the same trace as a manifest without the field."""
    m0, shard = mlp()
    m1, _ = mlp(micro_batches=1)
    s0 = initial_state(m0)
    assert run_task(m0, s0, shard, TASK, tmp_path / "a").trace == run_task(m1, s0, shard, TASK, tmp_path / "b").trace


def test_micro_batch_step_matches_its_definition():
    """One M=2 step by hand: grads of the two half-batches' losses / 2, summed g_0 + g_1, then Adam."""
    m, shard = mlp(micro_batches=2)
    s0 = initial_state(m)
    t = Trainer(m, shard, TASK, "cpu")
    t.load(s0)
    ref = Trainer(m, shard, TASK, "cpu")
    ref.load(s0)
    idx = ref.batch_indices()
    params = ref.trained_parameters()
    gs = []
    for half in (idx[:16], idx[16:]):
        loss = ref.loss(ref.model(ref.x[half]), ref.y[half]) * 0.5
        gs.append(torch.autograd.grad(loss, params))
    for p, g0, g1 in zip(params, *gs):
        p.grad = g0 + g1
    ref.opt.step()
    ref.step += 1
    t.train_step()
    assert t.hash() == ref.hash()


# ------------------------------------------------------------------ data parallel == one process
@pytest.mark.parametrize("micro_batches", [2, 4])
def test_two_gloo_processes_equal_one(tmp_path, micro_batches):
    m, shard = mlp(micro_batches, steps=12, k=4)
    s0 = initial_state(m)
    one = run_task(m, s0, shard, TASK, tmp_path / "one")
    two = run_task(m, s0, shard, TASK, tmp_path / "two", workers=2)
    assert two.trace == one.trace and two.root == one.root and two.final.hash == one.final.hash
    assert [p.read_bytes() for p in two.checkpoints] == [p.read_bytes() for p in one.checkpoints]
    assert "workers_start" in two.timings
    plain = run_task(mlp(steps=12, k=4)[0], s0, shard, TASK, tmp_path / "plain")
    assert plain.trace[0] == one.trace[0] and plain.trace[1] != one.trace[1]   # micro-batching is a different step
    assert not list((tmp_path / "two").glob("rendezvous-*")) and not helpers_of(tmp_path / "two")


def test_gpt_two_processes_equal_one(tmp_path):
    m = build_manifest("gpt", determinism=PORTABLE, steps_per_round=4, checkpoint_interval=2, micro_batches=2,
                       optimizer={"name": "adamw", "lr": 0.003, "weight_decay": 0.01})
    shard = load_shard(char_shards()["shard-000"], m.data)
    s0 = initial_state(m)
    one = run_task(m, s0, shard, TASK, tmp_path / "one")
    two = run_task(m, s0, shard, TASK, tmp_path / "two", workers=2)
    assert two.trace == one.trace and two.root == one.root


def test_resume_with_workers_from_partial_workdir(tmp_path):
    """Checkpoints 0..1 on disk (from a one-process run): two processes finish the task with the same trace."""
    m, shard = mlp(2, steps=12, k=4)
    s0 = initial_state(m)
    one = run_task(m, s0, shard, TASK, tmp_path / "one")
    part = tmp_path / "part"
    part.mkdir()
    for j in (0, 1):
        checkpoint_path(part, j).write_bytes(one.checkpoints[j].read_bytes())
    (part / "task.json").write_bytes((tmp_path / "one" / "task.json").read_bytes())
    seen = []
    two = run_task(m, s0, shard, TASK, part, workers=2, on_checkpoint=lambda c: seen.append((c.index, c.resumed)))
    assert seen == [(0, True), (1, True), (2, False), (3, False)]
    assert two.trace == one.trace


# ------------------------------------------------------------------ failures are bounded and explained
def test_helper_failing_at_start_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(parallel, "_helper_command",
                        lambda rank, world, store: [sys.executable, "-c", "raise SystemExit('helper says boom')"])
    m, shard = mlp(2)
    t0 = time.monotonic()
    with pytest.raises(WorkerFailed, match="exited (before reading its inputs|during start-up)") as e:
        run_task(m, initial_state(m), shard, TASK, tmp_path, workers=2)
    assert time.monotonic() - t0 < 30
    assert e.value.rank == 1 and "helper says boom" in e.value.log
    assert not list(tmp_path.glob("rendezvous-*"))


def test_helper_killed_mid_run_is_reported(tmp_path):
    m, shard = mlp(2, steps=400, k=4)
    killed = []

    def on_checkpoint(c):
        if c.index == 1 and not killed:
            deadline = time.monotonic() + 30
            while not (pids := helpers_of(tmp_path)) and time.monotonic() < deadline:
                time.sleep(0.05)
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            killed.extend(pids)

    t0 = time.monotonic()
    with pytest.raises(WorkerFailed) as e:
        run_task(m, initial_state(m), shard, TASK, tmp_path, workers=2, on_checkpoint=on_checkpoint)
    assert killed and e.value.rank == 1 and "-9" in str(e.value)
    assert time.monotonic() - t0 < 60


def _rank0_script(workdir: Path, kill_at: int) -> None:
    m, shard = mlp(2, steps=40, k=4)

    def on_checkpoint(c):
        print(json.dumps({"checkpoint": c.index, "resumed": c.resumed}), flush=True)
        if c.index == kill_at and not c.resumed:
            os.kill(os.getpid(), signal.SIGKILL)

    r = run_task(m, initial_state(m), shard, TASK, workdir, workers=2, on_checkpoint=on_checkpoint)
    print(json.dumps({"trace": [h.hex() for h in r.trace]}), flush=True)


@pytest.mark.slow
def test_kill_rank0_then_resume(tmp_path):
    """kill -9 of rank 0: its helper exits by itself; running the task again resumes with fresh helpers and
    ends with the single-process trace."""
    work = tmp_path / "work"
    proc = subprocess.run([sys.executable, __file__, str(work), "3"], capture_output=True, text=True, timeout=180)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert checkpoint_path(work, 3).exists() and not (work / "result.json").exists()
    assert not wait_gone(work), "a helper outlived rank 0"
    m, shard = mlp(2, steps=40, k=4)
    s0 = initial_state(m)
    seen = []
    resumed = run_task(m, s0, shard, TASK, work, workers=2, on_checkpoint=lambda c: seen.append(c.resumed))
    first = seen.index(False)                  # checkpoints 0..3 at least were on disk (4 may have made it too)
    assert first >= 4 and all(seen[:first]) and not any(seen[first:])
    assert resumed.trace == run_task(m, s0, shard, TASK, tmp_path / "one").trace


if __name__ == "__main__":
    _rank0_script(Path(sys.argv[1]), int(sys.argv[2]))
