"""The window skipper of node scenarios (node_clock.py) jumps only when every node is waiting on a window, every node
has read the chain past the last change, and two looks agree; and only to the first moment a waiting item can move."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

import node_clock
from node_clock import WindowSkipper
from verity.chain.protocol import TaskStatus


class _Client:
    def __init__(self):
        self.time, self.block = 1_000, 50
        self.jobs = "jobs"
        self.tasks = {7: SimpleNamespace(status=TaskStatus.REVEALED)}
        self.claims = {7: SimpleNamespace(epoch=0, challengeDeadline=1_060, revealGrace=30)}

    def now(self):
        return self.time

    def block_number(self):
        return self.block


def _read(client, contract, fn, tid):
    return client.tasks[tid] if fn == "getTask" else client.claims[tid]


@pytest.fixture
def world(tmp_path, monkeypatch):
    client, calls = _Client(), []
    monkeypatch.setattr(node_clock, "read", _read)
    monkeypatch.setattr(node_clock, "rpc_call", lambda url, method, params=None: calls.append((method, params)))
    nodes = [SimpleNamespace(name=n, killed=False, proc=SimpleNamespace(poll=lambda: None)) for n in ("s", "v")]

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


@pytest.mark.parametrize("phase", ["assigned", "trained", "watching", "disputing", "seated", "vote_committed"])
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
    w.nodes.append(SimpleNamespace(name="late", killed=False, proc=SimpleNamespace(poll=lambda: None)))  # no snapshot
    w.skipper.step(w.client, w.nodes)
    assert w.skipper.step(w.client, w.nodes) == 0
    w.nodes[-1].killed = True
    w.skipper.step(w.client, w.nodes)
    assert w.skipper.step(w.client, w.nodes) == 91
