"""Unit tests: who owns a node's state dir (locks, name ↔ account), which chain its snapshot belongs to,
how NodeHalted counts failed ticks, and the hidden TEST-ONLY --fault switch."""
from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from verity.node.loop import NodeHalted, NodeLoop
from verity.node.phases import Phase
from verity.node.snapshot import ChainBinding, Snapshot, SnapshotStore, WorkItem
from verity.node.statedir import ExclusiveLock, NameBound, NodeLocked, StateDirClaim, bind_account

ME, OTHER = "0x" + "aa" * 20, "0x" + "bb" * 20


def test_second_claim_of_a_state_dir_is_refused_naming_the_holder_fails(tmp_path):
    with StateDirClaim(tmp_path, tmp_path / "nodes" / "solver-1", "solver-1", ME):
        with pytest.raises(NodeLocked, match=rf"node state dir .*solver-1 is already in use .*pid {os.getpid()} node solver-1"):
            StateDirClaim(tmp_path, tmp_path / "nodes" / "solver-1", "solver-1", ME).__enter__()
        with pytest.raises(NodeLocked, match=f"account {ME} is already in use"):  # same key under another name
            StateDirClaim(tmp_path, tmp_path / "nodes" / "solver-x", "solver-x", ME).__enter__()
    with StateDirClaim(tmp_path, tmp_path / "nodes" / "solver-1", "solver-1", ME):  # released on exit
        pass


def test_lock_is_released_when_its_holder_dies_succeeds(tmp_path):
    path = tmp_path / "node.lock"
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time\n"
                               f"fd = os.open({str(path)!r}, os.O_RDWR | os.O_CREAT)\n"
                               "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, b'pid x')\n"
                               "print('locked', flush=True); time.sleep(60)"], stdout=subprocess.PIPE)
    assert holder.stdout.readline().strip() == b"locked"
    with pytest.raises(NodeLocked, match="pid x"):
        ExclusiveLock(path, "node state dir").acquire("test")
    holder.kill()  # SIGKILL: no clean-up code runs, the kernel drops the flock
    holder.wait()
    ExclusiveLock(path, "node state dir").acquire("test").release()


def test_name_bound_to_another_account_is_refused_fails(tmp_path):
    bind_account(tmp_path, "solver-1", ME)
    bind_account(tmp_path, "solver-1", ME.upper().replace("0X", "0x"))  # same account, other case
    with pytest.raises(NameBound, match=f"node name 'solver-1' belongs to account {ME} .*not {OTHER}"):
        bind_account(tmp_path, "solver-1", OTHER)
    legacy = tmp_path / "legacy"  # a state dir from before the account file: the snapshot's address counts
    with pytest.raises(NameBound, match="snapshot.json"):
        bind_account(legacy, "old", OTHER, legacy_address=ME)
    assert not (legacy / "account").exists()


def _binding(genesis="0x01", registry="0xr@5"):
    return ChainBinding(chain_id=31337, genesis_hash=genesis, contracts={"NodeRegistry": registry})


def _snap_with_work(binding):
    snap = Snapshot(address=ME, next_block=900, chain=binding, active_tasks=[3])
    snap.items["task:3:0"] = WorkItem(key="task:3:0", kind="solve", phase=Phase.COMMITTED, task_id=3)
    return snap


@pytest.mark.parametrize("changed", [dict(genesis="0x02"), dict(registry="0xr@77")], ids=["restarted", "redeployed"])
def test_snapshot_of_another_chain_drops_stale_work_and_resets_the_cursor_succeeds(changed, caplog):
    caplog.set_level(logging.WARNING, logger="verity.node")
    fresh = _snap_with_work(_binding()).bind(_binding(**changed))
    assert fresh.items == {} and fresh.next_block == 0 and fresh.active_tasks == []
    assert fresh.address == ME and fresh.chain == _binding(**changed)
    assert "chain was restarted or redeployed" in caplog.text and "dropping 1 stale work item(s) (task:3:0)" in caplog.text


def test_snapshot_of_the_same_chain_or_an_unbound_one_is_kept_succeeds(tmp_path):
    same = _snap_with_work(_binding())
    assert same.bind(_binding()) is same and same.next_block == 900 and "task:3:0" in same.items
    old = _snap_with_work(None)  # written before bindings existed
    assert old.bind(_binding()) is old and old.chain == _binding() and "task:3:0" in old.items
    store = SnapshotStore(tmp_path)
    store.save(old)
    assert store.load().chain == _binding()


class _FlakyCursor:
    """Fails the ticks whose numbers are in `failing` (1-based), with a bug (not an outage: an unreachable
    endpoint never counts towards NodeHalted, tests/nodes/test_outage_units.py)."""

    def __init__(self, failing):
        self.failing, self.calls, self.next_block = set(failing), 0, 0

    def poll(self):
        self.calls += 1
        if self.calls in self.failing:
            raise RuntimeError(f"handler bug (tick {self.calls})")
        return []


def _loop(tmp_path, cursor):
    return NodeLoop(cursor, SnapshotStore(tmp_path), Snapshot(), [], poll_interval=0, max_failures=3)


def test_node_halts_only_after_max_failures_consecutive_failed_ticks_fails(tmp_path):
    cursor = _FlakyCursor(failing={1, 2, 4, 5, 7, 8, 9, 10})  # 2 in a row, success, 2, success, then 3 in a row
    loop = _loop(tmp_path, cursor)
    with pytest.raises(NodeHalted, match="3 consecutive failed ticks; last error: handler bug \\(tick 9\\)"):
        loop.run(max_seconds=10)
    assert cursor.calls == 9 and loop.failures == 3


def test_failure_count_resets_after_a_successful_tick_succeeds(tmp_path):
    loop = _loop(tmp_path, _FlakyCursor(failing={1, 2, 4, 5}))
    for _ in range(3):
        loop.tick_guarded()
    assert loop.failures == 0
    loop.tick_guarded()
    assert loop.failures == 1


def test_an_unreachable_service_inside_an_item_fails_the_tick_not_the_item_succeeds(tmp_path):
    class Handler:
        kinds = ("solve",)

        def on_event(self, snap, ev):
            pass

        def advance(self, snap, item):
            raise ConnectionError("connection refused")

    loop = NodeLoop(_FlakyCursor(()), SnapshotStore(tmp_path), Snapshot(), [Handler()], max_failures=3)
    loop.snap.items["task:1:0"] = WorkItem(key="task:1:0", kind="solve", phase=Phase.ASSIGNED, task_id=1)
    loop.tick_guarded()
    assert loop.failures == 0 and loop.outage is not None  # an outage: backoff, not a failed tick
    assert loop.snap.items["task:1:0"].attempts == 0


def _verity(*args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k != "VERITY_ENABLE_FAULTS"}
    env.update(COLUMNS="200", **(env_extra or {}))
    return subprocess.run([sys.executable, "-m", "verity", "node", "run", *args], env=env, capture_output=True,
                          text=True, timeout=60)


def test_fault_switch_is_hidden_and_refused_unless_enabled_fails():
    assert "--fault" not in _verity("--help").stdout
    out = _verity("--name", "x", "--account", "1", "--fault", "lazy")
    assert out.returncode == 1 and "set VERITY_ENABLE_FAULTS=1" in " ".join(out.stderr.split())
    assert "--fault" in _verity("--help", env_extra={"VERITY_ENABLE_FAULTS": "1"}).stdout


def _fake_ctx(genesis: bytes):
    from types import SimpleNamespace as N

    from verity.node.faults import Faults
    from verity.node.work import WorkPool

    eth = N(chain_id=31337, get_block=lambda n: {"hash": genesis})
    dep = N(contracts={"NodeRegistry": N(address="0xR", block=5)}, start_block=5)
    return N(me=ME, faults=Faults(), work=WorkPool(inline=True), chain=N(w3=N(eth=eth), deployments=dep, contracts={}))


def test_node_started_on_a_restarted_chain_forgets_the_old_one_and_its_checkpoints_succeeds(tmp_path):
    from verity.node.app import NodeConfig, build_loop
    from verity.settings import Settings

    cfg = NodeConfig(name="solver-1", roles="solver", settings=Settings(state_dir=tmp_path))
    loop = build_loop(_fake_ctx(b"\x01" * 32), cfg)
    loop.snap.items["task:3:0"] = WorkItem(key="task:3:0", kind="solve", phase=Phase.TRAINED, task_id=3)
    loop.snap.next_block = 900
    loop.store.save(loop.snap)
    (cfg.state_dir / "solve" / "3").mkdir(parents=True)
    again = build_loop(_fake_ctx(b"\x01" * 32), cfg)  # same chain: everything kept
    assert "task:3:0" in again.snap.items and again.cursor.next_block == 900 and (cfg.state_dir / "solve").exists()
    restarted = build_loop(_fake_ctx(b"\x02" * 32), cfg)
    assert restarted.snap.items == {} and restarted.cursor.next_block == 5 and restarted.snap.address == ME
    assert not (cfg.state_dir / "solve").exists()  # task 3 of the new chain is another task
    assert SnapshotStore(cfg.state_dir).load().chain.genesis_hash == "0x" + "02" * 32
