import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from verity.engine import merkle
from verity.engine.checkpoint import checkpoint_bytes, load_checkpoint
from verity.engine.runner import advance, checkpoint_path, recompute_step, replay_segment, run_task
from verity.engine.state import TaskRef
from verity.errors import HashMismatch, StateInvalid, WorkdirConflict

HELPER = Path(__file__).with_name("_task.py")
TASK = TaskRef(job=5, round=0, index=1)


def _run_helper(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(HELPER), str(workdir), *args], capture_output=True, text=True, timeout=120)


def _trace(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    return _trace(_run_helper(tmp_path_factory.mktemp("straight")))


def test_two_processes_identical_trace_and_root(straight, tmp_path):
    again = _trace(_run_helper(tmp_path))
    assert again == straight
    assert len(straight["trace"]) == 7
    assert merkle.root([bytes.fromhex(h) for h in straight["trace"]]).hex() == straight["root"]


def test_resume_after_sigkill_equals_straight_run(straight, tmp_path):
    killed = _run_helper(tmp_path, "--kill-at", "3")
    assert killed.returncode == -signal.SIGKILL
    assert checkpoint_path(tmp_path, 3).exists() and not (tmp_path / "result.json").exists()
    checkpoint_path(tmp_path, 4).write_bytes(b"torn write")  # a corrupt later file is recomputed, not trusted
    resumed = _run_helper(tmp_path)
    events = [json.loads(line) for line in resumed.stdout.splitlines()[:-1]]
    assert [e["checkpoint"] for e in events if e["resumed"]] == [0, 1, 2, 3]
    assert [e["checkpoint"] for e in events if not e["resumed"]] == [4, 5, 6]
    assert _trace(resumed) == straight


def test_run_task_checkpoints_trace_and_callback(mlp_task, tmp_path):
    m, shard, _, s0 = mlp_task
    seen = []
    r = run_task(m, checkpoint_bytes(s0, m), shard, TASK, tmp_path, on_checkpoint=seen.append,
                 expected_input_hash=s0.hash)
    assert r.trace[0] == s0.hash and len(r.trace) == m.n_checkpoints + 1
    assert [c.index for c in seen] == list(range(m.n_checkpoints + 1))
    for j, path in enumerate(r.checkpoints):
        st = load_checkpoint(path.read_bytes(), m, expected_hash=r.trace[j])
        assert st.step == j * m.checkpoint_interval
    assert r.final.hash == r.final_hash
    bundle = r.bundle({j: f"cid{j}" for j in range(len(r.trace))})
    assert bundle["final"] == f"cid{m.n_checkpoints}" and bundle["trace"][0] == "0x" + s0.hash.hex()
    assert run_task(m, s0, shard, TASK, tmp_path).trace == r.trace  # all on disk: nothing to redo


def test_h0_is_round_input_for_every_task(mlp_task, tmp_path):
    m, shard, _, s0 = mlp_task
    a = run_task(m, s0, shard, TaskRef(5, 0, 0), tmp_path / "a")
    b = run_task(m, s0, shard, TaskRef(5, 0, 1), tmp_path / "b")
    assert a.trace[0] == b.trace[0] == s0.hash and a.trace[1] != b.trace[1]


def test_replay_segment_and_recompute_step_match_trace(mlp_task, tmp_path):
    m, shard, _, s0 = mlp_task
    r = run_task(m, s0, shard, TASK, tmp_path)
    for j in (0, 2):
        g = replay_segment(m, r.checkpoints[j].read_bytes(), shard, TASK)
        assert len(g) == m.checkpoint_interval + 1 and g[0] == r.trace[j] and g[-1] == r.trace[j + 1]
    start = load_checkpoint(r.checkpoints[1].read_bytes(), m)
    g = replay_segment(m, start, shard, TASK)
    assert recompute_step(m, start, shard, TASK).hash == g[1]
    mid = advance(m, start, shard, TASK, 4)
    assert mid.hash == g[4] and recompute_step(m, mid, shard, TASK).hash == g[5]


def test_run_task_wrong_inputs_refused(mlp_task, tmp_path):
    m, shard, _, s0 = mlp_task
    with pytest.raises(HashMismatch):
        run_task(m, s0, shard, TASK, tmp_path / "x", expected_input_hash=b"\x01" * 32)
    r = run_task(m, s0, shard, TASK, tmp_path / "y")
    with pytest.raises(StateInvalid, match="step-0"):
        run_task(m, load_checkpoint(r.checkpoints[1].read_bytes(), m), shard, TASK, tmp_path / "z")
    with pytest.raises(WorkdirConflict):
        run_task(m, s0, shard, TaskRef(5, 0, 2), tmp_path / "y")
