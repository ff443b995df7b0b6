"""Unit tests of the node's pure parts (no chain, no IPFS)."""
from __future__ import annotations

import os

import pytest

from verity.chain.events import MAX_RANGE, EventCursor
from verity.errors import CapacityExceeded, ManifestInvalid, ProfileUnsupported, VerityError
from verity.node.app import role_mask
from verity.node.keyfile import read_key_file
from verity.node.dispute import first_divergence
from verity.node.faults import BadFault, Faults
from verity.node.phases import IllegalTransition, Phase
from verity.node.snapshot import Snapshot, SnapshotStore, WorkItem


def _item(phase=Phase.ASSIGNED):
    return WorkItem(key="task:1:0", kind="solve", phase=phase, task_id=1)


def test_phase_table_allows_the_solver_path_and_refuses_going_back():
    snap = Snapshot()
    item = _item()
    for dst in (Phase.TRAINED, Phase.COMMITTED, Phase.REVEALED, Phase.DONE):
        snap.move(item, dst)
    assert item.phase == Phase.DONE
    with pytest.raises(IllegalTransition, match="done -> committed"):
        snap.move(item, Phase.COMMITTED)


def test_abandon_prefers_lost_and_falls_back_to_done():
    snap = Snapshot()
    solve, watch = _item(), WorkItem(key="watch:1", kind="watch", phase=Phase.WATCHING, task_id=1)
    snap.abandon(solve, "ManifestInvalid: bad")
    snap.abandon(watch, "CidNotFound")
    assert (solve.phase, watch.phase) == (Phase.LOST, Phase.DONE)
    assert solve.data["abandoned"].startswith("ManifestInvalid")


def test_snapshot_round_trips_and_old_snapshots_load_with_defaults(tmp_path):
    store = SnapshotStore(tmp_path)
    snap = Snapshot(address="0xabc", next_block=42)
    snap.items["task:1:0"] = _item()
    store.save(snap)
    assert store.load() == snap
    (tmp_path / "snapshot.json").write_text('{"version": 1, "next_block": 7}')  # written by an older node
    old = store.load()
    assert old.next_block == 7 and old.items == {} and old.active_tasks == []


def test_faults_parse_and_reject_unknown_specs():
    f = Faults.parse(["bitflip@step=15", "silent-in-dispute"])
    assert f.bitflip_step == 15 and f.silent_in_dispute and not f.lazy and bool(f)
    assert not Faults.parse([])
    with pytest.raises(BadFault, match="unknown fault"):
        Faults.parse(["flip-everything"])


def test_sybil_challenge_fault_parses_and_is_named_in_the_error_succeeds():
    f = Faults.parse(["sybil-challenge", " silent-in-dispute "])
    assert f.sybil_challenge and f.silent_in_dispute and not f.withhold_checkpoint and not f.lazy
    assert not Faults().sybil_challenge  # off unless asked for
    with pytest.raises(BadFault, match="sybil-challenge"):
        Faults.parse(["sybil-challenges"])


def test_sybil_claim_is_a_valid_challenge_that_differs_only_at_the_last_leaf_succeeds():
    """The TEST-ONLY sybil claim must pass challengeOptimistic's checks (leaf 0 = the task input and leaf n, both
    proved against its root; a final unlike the candidate's), or the node test of P1 would test nothing."""
    from types import SimpleNamespace

    from verity.engine import merkle
    from verity.node.context import Bundle
    from verity.node.verifier import VerifierRole

    trace = [bytes([i]) * 32 for i in range(4)]
    theirs = Bundle(trace, {0: "Qm0", 1: "Qm1", 2: "Qm2", 3: "Qm3"}, 10,
                    {"version": 1, "job": 1, "round": 0, "index": 0, "k": 10, "steps": 30, "final": "Qm3"})
    stored = []
    storage = SimpleNamespace(put_json=lambda doc: stored.append(doc) or "QmSybil")
    ctx = SimpleNamespace(bundle=lambda cid, root: theirs, storage=storage)
    claim = SimpleNamespace(resultCid=b"\1" * 32, root=merkle.root(trace), finalHash=trace[-1])
    item = WorkItem(key="watch:7:0", kind="watch", phase=Phase.WATCHING, task_id=7, data={"epoch": 0})
    data = VerifierRole(ctx)._sybil_claim(item, claim)
    ours = [bytes.fromhex(h[2:]) for h in data["trace"]]
    root, n = bytes.fromhex(data["root"][2:]), len(ours) - 1
    assert ours[:-1] == trace[:-1] and ours[-1] != trace[-1] and data["final"] == data["trace"][-1]
    assert merkle.verify(root, 0, trace[0], merkle.proof(ours, 0))
    assert merkle.verify(root, n, ours[-1], merkle.proof(ours, n))
    assert data["cid"] == "QmSybil" and stored[0]["trace"] == data["trace"]
    assert stored[0]["checkpoints"] == {"0": "Qm0", "1": "Qm1", "2": "Qm2"} and "final" not in stored[0]


def test_role_mask():
    assert role_mask("solver,verifier,referee") == 7 and role_mask("referee") == 4
    with pytest.raises(VerityError, match="unknown roles"):
        role_mask("miner")


def test_first_divergence_finds_the_first_agreeing_then_differing_pair():
    a = [b"\x00", b"\x01", b"\x02", b"\x03"]
    b = [b"\x00", b"\x01", b"\xff", b"\xfe"]
    assert first_divergence(a, b, 0, 3) == 1
    assert first_divergence(a, a, 0, 3) is None


def test_key_file_must_be_private_and_hex(tmp_path):
    key = tmp_path / "key"
    key.write_text("0x" + "ab" * 32)
    os.chmod(key, 0o644)
    with pytest.raises(VerityError, match="readable by others"):
        read_key_file(key)
    os.chmod(key, 0o600)
    assert read_key_file(key) == "0x" + "ab" * 32
    key.write_text("not a key")
    with pytest.raises(VerityError, match="32-byte hex"):
        read_key_file(key)


class _FakeEth:
    def __init__(self, head):
        self.block_number, self.ranges = head, []

    def get_logs(self, params):
        self.ranges.append((params["fromBlock"], params["toBlock"]))
        return []


class _FakeW3:
    def __init__(self, head):
        self.eth = _FakeEth(head)


def test_event_cursor_reads_bounded_ranges_and_advances():
    w3 = _FakeW3(head=2 * MAX_RANGE + 10)
    cursor = EventCursor(w3, {}, next_block=5)
    assert cursor.poll() == []
    assert w3.eth.ranges == [(5, MAX_RANGE + 4), (MAX_RANGE + 5, 2 * MAX_RANGE + 4), (2 * MAX_RANGE + 5, 2 * MAX_RANGE + 10)]
    assert cursor.next_block == 2 * MAX_RANGE + 11
    assert cursor.poll() == [] and len(w3.eth.ranges) == 3  # nothing new: no request


class _Cursor:
    def __init__(self, fail: bool):
        self.fail, self.next_block = fail, 0

    def poll(self):
        if self.fail:
            raise RuntimeError("handler bug")  # a bug; an outage (ConnectionError) never halts the node
        return []


class _Handler:
    kinds = ("solve",)

    def __init__(self, exc):
        self.exc, self.calls, self.declined, self.notes = exc, 0, [], []

    def on_event(self, snap, ev):
        pass

    def decline(self, item, why, invalid_inputs=True, note=""):  # SolverRole.decline sends JobRegistry.decline
        self.declined.append((item.task_id, why, invalid_inputs))
        self.notes.append(note)

    def advance(self, snap, item):
        self.calls += 1
        raise self.exc


def _loop(tmp_path, cursor, handler, snap=None):
    from verity.node.loop import NodeLoop

    return NodeLoop(cursor, SnapshotStore(tmp_path), snap or Snapshot(), [handler], poll_interval=0, max_failures=3)


def test_loop_stops_with_a_clear_message_after_n_failed_ticks(tmp_path):
    from verity.node.loop import NodeHalted

    with pytest.raises(NodeHalted, match="3 consecutive failed ticks; last error: handler bug"):
        _loop(tmp_path, _Cursor(fail=True), _Handler(None)).run(max_seconds=5)


def test_loop_abandons_an_item_with_bad_inputs_at_once_and_retries_others_a_bounded_number_of_times(tmp_path, caplog):
    from verity.errors import ManifestInvalid

    snap = Snapshot()
    snap.items["task:1:0"] = _item()
    bad = _Handler(ManifestInvalid("model", "not an object"))
    loop = _loop(tmp_path, _Cursor(fail=False), bad, snap)
    with caplog.at_level("ERROR", logger="verity.node"):
        loop.tick()
    assert snap.items["task:1:0"].phase == Phase.LOST and bad.calls == 1
    assert snap.items["task:1:0"].data["abandoned"].startswith("declined: ManifestInvalid")
    # the slot is given back, as the poster's invalid inputs
    assert bad.declined == [(1, "ManifestInvalid: manifest field 'model': not an object", True)]
    assert bad.notes == ["invalid manifest: model"]

    snap2 = Snapshot()
    snap2.items["task:2:0"] = _item()
    flaky = _Handler(RuntimeError("unexpected"))
    loop2 = _loop(tmp_path / "b", _Cursor(fail=False), flaky, snap2)
    for _ in range(loop2.item_attempts - 1):
        loop2.tick()
    assert flaky.declined == []  # a transient failure keeps the slot while retries last (it may still commit in time)
    for _ in range(3):
        loop2.tick()  # never raises: the node keeps running
    assert snap2.items["task:2:0"].phase == Phase.LOST and flaky.calls == loop2.item_attempts
    # given up before it started, the slot is declined (unslashed within the grace) rather than left to be reported
    # late; running out of retries is this node's trouble, not the poster's
    assert flaky.declined == [(1, "RuntimeError: unexpected", False)]
    assert SnapshotStore(tmp_path / "b").load().items["task:2:0"].phase == Phase.LOST  # persisted


def test_loop_gives_up_a_committed_item_without_declining(tmp_path):
    snap = Snapshot()
    snap.items["task:1:0"] = _item(Phase.COMMITTED)
    flaky = _Handler(RuntimeError("unexpected"))
    loop = _loop(tmp_path, _Cursor(fail=False), flaky, snap)
    for _ in range(loop.item_attempts + 1):
        loop.tick()
    assert snap.items["task:1:0"].phase == Phase.LOST
    assert flaky.declined == []  # committed: the slot is no longer the node's to decline


def test_loop_declines_work_it_cannot_do_without_blaming_the_poster(tmp_path):
    from verity.errors import CapacityExceeded

    snap = Snapshot()
    snap.items["task:1:0"] = _item()
    big = _Handler(CapacityExceeded("task 1", "needs 9000 MB, this node has 512", note="memory 9000/512 MB"))
    _loop(tmp_path, _Cursor(fail=False), big, snap).tick()
    assert snap.items["task:1:0"].phase == Phase.LOST and big.calls == 1  # permanent: not retried
    assert big.declined == [(1, "CapacityExceeded: task 1: needs 9000 MB, this node has 512", False)]
    assert big.notes == ["memory 9000/512 MB"]  # the numbers go on-chain with the decline


def _failure_levels(caplog, tmp_path, exc, item=None, ticks=1) -> list[str]:
    """The levels of the loop's own "task:1:0: …" lines while `exc` fails the item (a solve item) `ticks` times."""
    item = item or _item()
    snap = Snapshot()
    snap.items[item.key] = item
    handler = _Handler(exc)
    handler.kinds = (item.kind,)
    loop = _loop(tmp_path, _Cursor(fail=False), handler, snap)
    with caplog.at_level("INFO", logger="verity.node"):
        for _ in range(ticks):
            loop.tick()
    return [r.levelname for r in caplog.records if r.name == "verity.node" and r.getMessage().startswith("task:1:0: ")]


@pytest.mark.parametrize("exc", [
    CapacityExceeded("task 1", "needs 9000 MB, this node has 512", note="memory 9000/512 MB"),
    ProfileUnsupported("cuda-det", "no GPU here"),
    ManifestInvalid("model", "not an object"),
], ids=["capacity", "profile", "invalid-inputs"])
def test_itemFailed_routineDecline_logsInfo_succeeds(tmp_path, caplog, exc):
    """A decline of work this node cannot do or inputs it cannot use is routine: its "giving up" line is INFO, not a
    WARNING in front of the INFO "declined" line (issue 26)."""
    assert _failure_levels(caplog, tmp_path, exc) == ["INFO"]
    assert "giving up" in caplog.text


def test_itemFailed_retriesOrBareValueError_stayWarnings_succeeds(tmp_path, caplog):
    assert _failure_levels(caplog, tmp_path / "bare", ValueError("shape mismatch")) == ["WARNING"]  # perhaps a bug
    caplog.clear()
    # an item that declines nothing (a watch) gives up with a warning
    watch = WorkItem(key="task:1:0", kind="watch", phase=Phase.WATCHING, task_id=1)
    assert _failure_levels(caplog, tmp_path / "watch", ManifestInvalid("model", "not an object"), item=watch) == \
        ["WARNING"]
    caplog.clear()
    assert _failure_levels(caplog, tmp_path / "flaky", RuntimeError("unexpected"), ticks=3) == ["WARNING"] * 3


@pytest.mark.parametrize("on_chain, phase, fresh", [
    ("ours", Phase.LOST, True), ("another", Phase.LOST, False), ("ours-committed", Phase.LOST, False),
    ("ours", Phase.COMMITTED, True),  # a crash lost the move to LOST after the withdrawal was mined
    ("ours", Phase.TRAINED, False),  # still our first holding
])
def test_solver_drawn_again_into_a_withdrawn_slot_gets_a_fresh_item(on_chain, phase, fresh):
    """JobRegistry.withdrawCommitted clears the slot, so the withdrawer may be drawn into it again: its ended item must
    give way to a fresh one (else the node never commits and is reported late), but only while the slot is ours and
    Assigned on-chain (a TaskAssigned read again after a restart for a slot that ended since is not)."""
    from types import SimpleNamespace

    from verity.chain.protocol import ReplicaStatus
    from verity.node.solver import SolverRole

    me = "0x00000000000000000000000000000000000000aa"
    holder = me if on_chain.startswith("ours") else "0x00000000000000000000000000000000000000bb"
    status = ReplicaStatus.COMMITTED if on_chain.endswith("committed") else ReplicaStatus.ASSIGNED
    ctx = SimpleNamespace(me=me, replicas=lambda tid: [SimpleNamespace(node=holder, status=int(status))])
    snap = Snapshot(address=me)
    snap.items["task:1:0"] = _item(phase)
    ev = SimpleNamespace(name="TaskAssigned", args={"taskId": 1, "slot": 0, "node": me})
    SolverRole(ctx).on_event(snap, ev)
    assert (snap.items["task:1:0"].phase == Phase.ASSIGNED) is (fresh or phase == Phase.ASSIGNED)
    assert (snap.items["task:1:0"].phase != phase) is fresh
