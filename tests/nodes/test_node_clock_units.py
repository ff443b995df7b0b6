"""The window skipper of node scenarios (node_clock.py) jumps only when every node is waiting on a window, every node
has read the chain past the last change, and two looks agree; and only to the first moment a waiting item can move."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

import node_clock
from node_clock import WindowSkipper
from verity.chain import TxFailed
from verity.chain.protocol import DisputePhase, ReplicaStatus, TaskStatus


class _Client:
    def __init__(self):
        self.time, self.block = 1_000, 50
        self.jobs, self.game, self.dispute_lens = "jobs", "game", "dispute_lens"
        self.disputes = [SimpleNamespace(phase=DisputePhase.RESOLVED)]
        self.replicas = {}
        self.tasks = {7: SimpleNamespace(status=TaskStatus.REVEALED)}
        self.tasks.update({t: SimpleNamespace(status=TaskStatus.ACCEPTED) for t in range(1, 7)})
        self.claims = {7: SimpleNamespace(epoch=0, challengeDeadline=1_060, revealGrace=30)}
        self.reads = []
        self.drawable = set()  # Open tasks whose assign() would succeed
        self.txs = {}  # block number -> transactions in it (0 if absent)
        self.w3 = SimpleNamespace(eth=SimpleNamespace(get_block_transaction_count=lambda b: self.txs.get(b, 0)))

    def now(self):
        return self.time

    def block_number(self):
        return self.block


def _read(client, contract, fn, *args):
    client.reads.append((fn, *args))
    if fn == "taskCount":
        return max(client.tasks)
    if fn == "disputeCount":
        return len(client.disputes)
    if fn == "getDispute":
        return client.disputes[args[0] - 1]
    if fn == "getReplicas":
        return client.replicas.get(args[0], [])
    if fn == "assign":
        if args[0] not in client.drawable:
            raise TxFailed("assign", "DrawPending")
        return ()
    return client.tasks[args[0]] if fn == "getTask" else client.claims[args[0]]


@pytest.fixture
def world(tmp_path, monkeypatch):
    client, calls = _Client(), []
    monkeypatch.setattr(node_clock, "read", _read)
    monkeypatch.setattr(node_clock, "rpc_call", lambda url, method, params=None: calls.append((method, params)))
    nodes = [SimpleNamespace(name=n, killed=False, proc=SimpleNamespace(poll=lambda: None), address="0x" + c * 40)
             for n, c in (("s", "1"), ("v", "2"))]

    def snap(name, next_block, **items):
        path = tmp_path / "nodes" / name / "snapshot.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"next_block": next_block, "items": {k: dict(v, task_id=7) for k, v in items.items()}}
        path.write_text(json.dumps(doc))

    return SimpleNamespace(client=client, calls=calls, nodes=nodes, snap=snap,
                           skipper=WindowSkipper("http://x", tmp_path))


def _both_waiting(w, next_block):
    w.snap("s", next_block, **{"task:7:0": {"kind": "solve", "phase": "revealed"}})
    w.snap("v", next_block, **{"watch:7:0": {"kind": "watch", "phase": "done"}})


def test_skipper_jumpsToWindowPlusGrace_whenTwoLooksAgreeAndCursorsPassedTheHead_succeeds(world):
    w = world
    _both_waiting(w, 51)
    assert w.skipper.step(w.client, w.nodes) == 0          # first look: nothing to compare with
    w.client.block = 52
    assert w.skipper.step(w.client, w.nodes) == 91         # to 1_060 + 30 + 1
    assert w.calls == [("evm_increaseTime", [91]), ("evm_mine", None)]


def test_skipper_waits_whileANodeHasNotReadTheLastChange_succeeds(world):
    w = world
    _both_waiting(w, 51)
    w.skipper.step(w.client, w.nodes)
    w.snap("v", 50, **{"watch:7:0": {"kind": "watch", "phase": "done"}})  # behind the head the first look read
    assert w.skipper.step(w.client, w.nodes) == 0 and w.calls == []


@pytest.mark.parametrize("phase", ["assigned", "trained", "watching", "seated", "vote_committed"])
def test_skipper_neverJumps_whileANodeIsBusy_succeeds(world, phase):
    w = world
    w.snap("s", 51, **{"task:7:0": {"kind": "solve", "phase": "revealed"}})
    w.snap("v", 51, **{"x:7": {"kind": "watch" if phase == "watching" else "seat", "phase": phase}})
    for _ in range(3):
        assert w.skipper.step(w.client, w.nodes) == 0
    assert w.calls == []


def test_skipper_stopsAtTheWindowForACommittedChallenge_thenLetsItReveal_succeeds(world):
    w = world
    w.snap("s", 51, **{"task:7:0": {"kind": "solve", "phase": "revealed"}})
    w.snap("v", 51, **{"watch:7:0": {"kind": "watch", "phase": "challenge_committed", "data": {"epoch": 0}}})
    w.skipper.step(w.client, w.nodes)
    assert w.skipper.step(w.client, w.nodes) == 61         # the window's end, not the grace's: the reveal is due then
    w.client.time = 1_061
    for _ in range(3):
        assert w.skipper.step(w.client, w.nodes) == 0      # the challenger must reveal now: no further jump


def test_skipper_ignoresKilledNodes_andHoldsForOneNotStartedYet_succeeds(world):
    w = world
    _both_waiting(w, 51)
    w.nodes.append(SimpleNamespace(name="late", killed=False, proc=SimpleNamespace(poll=lambda: None),
                                   address="0x" + "3" * 40))  # no snapshot
    w.skipper.step(w.client, w.nodes)
    assert w.skipper.step(w.client, w.nodes) == 0
    w.nodes[-1].killed = True
    w.skipper.step(w.client, w.nodes)
    assert w.skipper.step(w.client, w.nodes) == 91


def test_skipper_jumpsForACandidateNoNodeHoldsAnItemFor_readsSettledTasksOnce_succeeds(world):
    """A dispute's winner becomes the candidate with a fresh window: its task is Revealed on-chain while every node's
    item about it is done. The window is still only a wait."""
    w = world
    w.client.claims[7] = SimpleNamespace(epoch=1, challengeDeadline=1_100, revealGrace=30)
    w.snap("s", 51, **{"task:7:0": {"kind": "solve", "phase": "lost"}})
    w.snap("v", 51, **{"watch:7:1": {"kind": "watch", "phase": "done"}})
    w.skipper.step(w.client, w.nodes)
    w.client.block = 52
    assert w.skipper.step(w.client, w.nodes) == 131         # to 1_100 + 30 + 1
    assert sum(1 for r in w.client.reads if r[0] == "getTask" and r[1] < 7) == 6  # accepted tasks: read once


def test_skipper_waitsOnALookThatSawAnotherEpoch_succeeds(world):
    w = world
    _both_waiting(w, 51)
    w.skipper.step(w.client, w.nodes)
    w.client.claims[7] = SimpleNamespace(epoch=1, challengeDeadline=1_100, revealGrace=30)  # replaced in between
    assert w.skipper.step(w.client, w.nodes) == 0 and w.calls == []
    assert w.skipper.step(w.client, w.nodes) == 131


def test_skipper_skipsNothing_withoutARevealedTask_succeeds(world):
    w = world
    w.client.tasks[7] = SimpleNamespace(status=TaskStatus.ASSIGNED)
    w.snap("s", 51, **{"task:7:0": {"kind": "solve", "phase": "committed"}})
    w.snap("v", 51)
    for _ in range(3):
        assert w.skipper.step(w.client, w.nodes) == 0
    assert w.calls == []


def test_skipper_neverJumps_whileADisputeIsOpenOrATaskContested_succeeds(world):
    w = world
    _both_waiting(w, 51)
    w.client.disputes.append(SimpleNamespace(phase=DisputePhase.JUDGING))
    for _ in range(3):
        assert w.skipper.step(w.client, w.nodes) == 0
    w.client.disputes[-1].phase = DisputePhase.RESOLVED
    w.client.tasks[8] = SimpleNamespace(status=TaskStatus.CONTESTED)
    for _ in range(3):
        assert w.skipper.step(w.client, w.nodes) == 0
    assert w.calls == []
    w.client.tasks[8].status = TaskStatus.ACCEPTED
    w.skipper.step(w.client, w.nodes)
    assert w.skipper.step(w.client, w.nodes) == 91
    assert sum(1 for r in w.client.reads if r == ("getDispute", 1)) == 1  # a resolved dispute is read once


def test_skipper_aDisputeItem_holds_butATaskItemFollowingAnEndedDispute_doesNot_succeeds(world):
    """A contest's winner keeps its solve item `disputing` while it waits out its fresh window."""
    w = world
    w.snap("s", 51, **{"task:7:0": {"kind": "solve", "phase": "disputing"}, "dispute:1": {"kind": "dispute",
                                                                                           "phase": "disputing"}})
    w.snap("v", 51, **{"watch:7:0": {"kind": "watch", "phase": "disputing"}})
    for _ in range(3):
        assert w.skipper.step(w.client, w.nodes) == 0
    w.snap("s", 52, **{"task:7:0": {"kind": "solve", "phase": "disputing"}, "dispute:1": {"kind": "dispute",
                                                                                           "phase": "done"}})
    w.snap("v", 52, **{"watch:7:0": {"kind": "watch", "phase": "disputing"}})
    w.client.block = 51
    w.skipper.step(w.client, w.nodes)
    assert w.skipper.step(w.client, w.nodes) == 91


def _side(party, used=0, since=0):
    return SimpleNamespace(party=party, clock=SimpleNamespace(used=used, since=since))


SILENT, HONEST, ZERO = "0x" + "5" * 40, "0x" + "a" * 40, "0x" + "0" * 40


def _silent_dispute(w, *, running_b=True, running_a=False, co_defender=ZERO):
    """Dispute 2: the silent node is the defender (B); its clock started at 1_000 with 10 s used of 30."""
    w.nodes.append(SimpleNamespace(name="silent", killed=False, proc=SimpleNamespace(poll=lambda: None),
                                   args=["--fault", "silent-in-dispute"], address=SILENT))
    w.snap("silent", 51, **{"dispute:2": {"kind": "dispute", "phase": "disputing", "dispute_id": 2}})
    w.snap("s", 51, **{"dispute:2": {"kind": "dispute", "phase": "disputing", "dispute_id": 2}})
    w.snap("v", 51)
    w.client.disputes.append(SimpleNamespace(
        phase=DisputePhase.BISECT0, allowance=30, coDefender=co_defender, taskId=7,
        sides=[_side(HONEST, 5, 990 if running_a else 0), _side(SILENT, 10, 1_000 if running_b else 0)]))


def test_skipper_jumpsToASilentPartysClockRunningOut_succeeds(world):
    w = world
    _silent_dispute(w)
    w.skipper.step(w.client, w.nodes)
    assert w.skipper.step(w.client, w.nodes) == 21          # 1_000 + 30 - 10 + 1, before the task's window end
    assert w.calls == [("evm_increaseTime", [21]), ("evm_mine", None)]


def test_skipper_aContestOnlyASilentClockHolds_isSkippedButAnotherContestHolds_succeeds(world):
    w = world
    _silent_dispute(w)
    w.client.tasks[7] = SimpleNamespace(status=TaskStatus.CONTESTED)  # the silent replica's contest
    w.skipper.step(w.client, w.nodes)
    assert w.skipper.step(w.client, w.nodes) == 21
    w.client.tasks[8] = SimpleNamespace(status=TaskStatus.CONTESTED)  # a contest whose dispute is not open yet
    for _ in range(3):
        assert w.skipper.step(w.client, w.nodes) == 0


@pytest.mark.parametrize("case", ["honest clock runs too", "honest co-defender may move", "no fault"])
def test_skipper_holds_whileSomeoneElseMayMoveInTheDispute_succeeds(world, case):
    w = world
    _silent_dispute(w, running_a=case == "honest clock runs too",
                    co_defender=HONEST if case == "honest co-defender may move" else ZERO)
    if case == "no fault":
        w.nodes[-1].args = []
    for _ in range(3):
        assert w.skipper.step(w.client, w.nodes) == 0
    assert w.calls == []


def test_skipper_jumpsToTheDeadlineOfASlotAKilledNodeHolds_succeeds(world):
    """The victim was killed mid-task; its partner committed and waits. Only the victim's deadline is left."""
    w = world
    victim, partner = "0x" + "d" * 40, "0x" + "e" * 40
    w.nodes[0].address, w.nodes[1].address = partner, "0x" + "f" * 40
    w.nodes.append(SimpleNamespace(name="victim", killed=True, proc=SimpleNamespace(poll=lambda: -9), address=victim))
    w.client.tasks[7] = SimpleNamespace(status=TaskStatus.ASSIGNED)
    w.client.replicas[7] = [SimpleNamespace(node=partner, status=ReplicaStatus.COMMITTED, deadline=0),
                            SimpleNamespace(node=victim, status=ReplicaStatus.ASSIGNED, deadline=1_030)]
    w.snap("s", 51, **{"task:7:0": {"kind": "solve", "phase": "committed"}})
    w.snap("v", 51)
    w.skipper.step(w.client, w.nodes)
    assert w.skipper.step(w.client, w.nodes) == 31          # to 1_030 + 1: a keeper reports the victim late
    w.nodes[-1].killed, w.nodes[-1].proc = False, SimpleNamespace(poll=lambda: None)  # restarted: it works again
    w.snap("victim", 52, **{"task:7:1": {"kind": "solve", "phase": "assigned"}})
    for _ in range(3):
        assert w.skipper.step(w.client, w.nodes) == 0


def test_skipper_jumpsToTheDeadlineOfASlotACopierHolds_butAnHonestAssignedSlotHolds_succeeds(world):
    """A copier (--fault copy-result) never computes: its assigned slot waits only for its deadline, like a killed
    node's; the same slot held by an honest node that is training holds every jump."""
    w = world
    copier, partner = "0x" + "c" * 40, "0x" + "e" * 40
    w.nodes[0].address, w.nodes[1].address = partner, "0x" + "f" * 40
    w.nodes.append(SimpleNamespace(name="copier", killed=False, proc=SimpleNamespace(poll=lambda: None),
                                   args=["--fault", "copy-result"], address=copier))
    w.client.tasks[7] = SimpleNamespace(status=TaskStatus.ASSIGNED)
    w.client.replicas[7] = [SimpleNamespace(node=partner, status=ReplicaStatus.COMMITTED, deadline=0),
                            SimpleNamespace(node=copier, status=ReplicaStatus.ASSIGNED, deadline=1_030)]
    w.snap("s", 51, **{"task:7:0": {"kind": "solve", "phase": "committed"}})
    w.snap("v", 51)
    w.snap("copier", 51, **{"task:7:1": {"kind": "solve", "phase": "assigned"}})
    w.skipper.step(w.client, w.nodes)
    assert w.skipper.step(w.client, w.nodes) == 31          # to 1_030 + 1: a keeper reports the copier late
    w.nodes[-1].args = []  # the same slot held by an honest node: it is training
    w.snap("copier", 52, **{"task:7:1": {"kind": "solve", "phase": "assigned"}})
    for _ in range(3):
        assert w.skipper.step(w.client, w.nodes) == 0


def _task_8(w, *replicas):
    """Task 8 Assigned beside task 7's window: `replicas` are (holder node index, status, deadline)."""
    w.client.tasks[8] = SimpleNamespace(status=TaskStatus.ASSIGNED)
    w.client.replicas[8] = [SimpleNamespace(node=w.nodes[i].address, status=st, deadline=d) for i, st, d in replicas]


def test_skipper_holds_whileEveryReplicaCommittedAndTheRevealsAreDue_succeeds(world):
    """Found by CI: both replicas of a task finished training in the same second, neither saw the other's commit, so
    both committed; their reveal windows opened at once. Their items say `committed` (which alone is a wait for a
    partner), but each must publish and reveal now: a jump to task 7's finalize time had both reported late."""
    w = world
    w.snap("s", 51, **{"task:7:0": {"kind": "solve", "phase": "revealed"},
                       "task:8:0": {"kind": "solve", "phase": "committed"}})
    w.snap("v", 51, **{"task:8:1": {"kind": "solve", "phase": "committed"}})
    _task_8(w, (0, ReplicaStatus.COMMITTED, 1_030), (1, ReplicaStatus.COMMITTED, 1_030))
    for _ in range(3):
        assert w.skipper.step(w.client, w.nodes) == 0
    assert w.calls == []
    # one committed replica waiting for a partner still drawing has no deadline: that is only a wait
    _task_8(w, (0, ReplicaStatus.COMMITTED, 0), (1, ReplicaStatus.ASSIGNED, 1_050))
    w.snap("v", 51, **{"task:8:1": {"kind": "solve", "phase": "assigned"}})
    w.skipper.step(w.client, w.nodes)
    assert w.skipper.step(w.client, w.nodes) == 0  # the partner trains: `assigned` is busy
    w.client.tasks[8].status = TaskStatus.OPEN
    w.client.replicas[8] = w.client.replicas[8][:1] + [SimpleNamespace(node=ZERO, status=ReplicaStatus.NONE,
                                                                       deadline=0)]
    w.snap("v", 51)
    w.skipper.step(w.client, w.nodes)
    assert w.skipper.step(w.client, w.nodes) == 91


def test_skipper_holds_forASlotDrawnForANodeThatHasNotSeenItYet_succeeds(world):
    """The chain is read after the snapshots: a slot drawn in between is not in its node's snapshot yet, though the
    node has read past the head of the previous look. Its execution window must not be jumped over."""
    w = world
    _both_waiting(w, 51)
    _task_8(w, (1, ReplicaStatus.ASSIGNED, 1_060))
    for _ in range(3):
        assert w.skipper.step(w.client, w.nodes) == 0
    w.snap("v", 52, **{"task:8:0": {"kind": "solve", "phase": "committed"}})
    w.client.replicas[8][0].status, w.client.replicas[8][0].deadline = ReplicaStatus.COMMITTED, 0
    w.skipper.step(w.client, w.nodes)
    assert w.skipper.step(w.client, w.nodes) == 91


def test_skipper_holds_whileADrawCanBeMade_notWhileNobodyIsEligible_succeeds(world):
    w = world
    _both_waiting(w, 51)
    w.client.tasks[8] = SimpleNamespace(status=TaskStatus.OPEN)
    w.client.drawable.add(8)  # a keeper assigns it at its next tick: the new holders' window starts now
    for _ in range(3):
        assert w.skipper.step(w.client, w.nodes) == 0
    w.client.drawable.clear()  # its value is not readable yet (a jump's block helps), or nobody is eligible
    w.skipper.step(w.client, w.nodes)
    assert w.skipper.step(w.client, w.nodes) == 91


def test_skipper_doesNotJump_whenATransactionLandedAfterTheLookBegan_succeeds(world):
    w = world
    _both_waiting(w, 51)
    w.skipper.step(w.client, w.nodes)
    heads = iter([50, 50, 51])  # the look's start and head, then the check before the jump: block 51 holds a tx
    w.client.block_number = lambda: next(heads, 51)
    w.client.txs[51] = 1
    assert w.skipper.step(w.client, w.nodes) == 0 and w.calls == []
    w.client.block_number = lambda: 52  # the ticker's block 52 is empty; the nodes read both
    _both_waiting(w, 53)
    assert w.skipper.step(w.client, w.nodes) == 91  # this look agrees with the last, and nothing landed since
