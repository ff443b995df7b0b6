"""Clock control for node scenarios: move the chain past a window once every party has acted, instead of sleeping.

While a test waits for its job (`Net.wait_job`), a `WindowSkipper` looks at what every running node says it is
doing (its persisted snapshot, `<state dir>/nodes/<name>/snapshot.json`) and at the chain. When no node has work in
hand and every one of them has read the chain past the last change it made, the only thing left is a deadline
passing: the skipper jumps the chain clock (anvil `evm_increaseTime` + `evm_mine`) to the first moment one of the
waiting items can move on, exactly as a quiet stretch of a real chain would.

What a node's items say (verity.node.phases):
- busy: training, re-executing, a seat, a dispute or a contest in progress, a challenge to reveal now. Nothing jumps.
- waiting on a window: a solver's revealed result (until the challenge window and the reveal grace pass, when the
  task can be finalized) and a verifier's committed challenge (until the window closes and it may reveal). Each
  gives a target time.
- neutral: everything else (done, a commitment waiting for a partner, a fee check waiting for its epoch). A test about
  such a wait (a node late, a silent party, a decline grace) keeps real time: `wait_job(..., skip_windows=False)`.

A jump happens only after two observations in a row agree: the same waiting items, nothing busy, and in the second
every node has handled every block up to the head read at the end of the first (so an event a node has not seen yet,
e.g. a window that just opened for a verifier that has not decided whether to check it, holds the jump). A paused
(SIGSTOP) node never advances its cursor, so it holds every jump too; killed nodes are left out.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from verity.chain import TxFailed
from verity.chain.protocol import TaskStatus
from verity.chain.views import read
from verity.devnet.ticker import rpc_call

BUSY = {"assigned", "trained", "watching", "disputing", "seated", "vote_committed", "vote_revealed"}
MARGIN = 1  # seconds past a deadline (the contracts compare with `>`)


@dataclass
class Observation:
    waiting: frozenset      # (node, item key, phase) of items waiting on a window
    cursors: dict           # node name -> next block it will read
    busy: bool
    head: int               # read after the snapshots: every state seen here was mined at or before it


@dataclass
class WindowSkipper:
    rpc_url: str
    state_root: Path
    jumps: list = field(default_factory=list)   # (from chain time, seconds jumped): how much waiting was skipped
    _last: Observation | None = None

    def step(self, client, nodes) -> int:
        """One look; jumps when two looks agree that only a window is left. Returns the seconds jumped (0 if none)."""
        obs, items = self._observe(client, nodes)
        last, self._last = self._last, obs
        if obs.busy or last is None or last.busy or obs.waiting != last.waiting or not obs.waiting:
            return 0
        if any(obs.cursors.get(name, 0) <= last.head for name in obs.cursors):
            return 0
        now = client.now()
        targets = [t for t in (self._target(client, item, now) for item in items) if t is not None]
        if not targets or min(targets) <= now:
            return 0  # something can move already (a keeper will finalize): nothing to skip
        delta = min(targets) - now
        rpc_call(self.rpc_url, "evm_increaseTime", [delta])
        rpc_call(self.rpc_url, "evm_mine")
        self.jumps.append((now, delta))
        self._last = None  # the nodes must see the new block before the next jump
        return delta

    def _observe(self, client, nodes) -> tuple[Observation, list]:
        waiting, cursors, items, busy = set(), {}, [], False
        for node in nodes:
            if node.killed or node.proc.poll() is not None:
                continue
            snap = self._snapshot(node.name)
            if snap is None:
                busy = True  # not started yet: it has read nothing
                continue
            cursors[node.name] = int(snap.get("next_block", 0))
            for key, item in snap.get("items", {}).items():
                phase, kind = item.get("phase"), item.get("kind")
                if phase in BUSY:
                    busy = True
                elif (kind, phase) in (("solve", "revealed"), ("watch", "challenge_committed")):
                    waiting.add((node.name, key, phase))
                    items.append(item)
        head = client.block_number()
        return Observation(frozenset(waiting), cursors, busy, head), items

    def _snapshot(self, name: str) -> dict | None:
        path = self.state_root / "nodes" / name / "snapshot.json"
        try:
            return json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None  # not written yet, or caught between write and rename (never: os.replace is atomic)

    @staticmethod
    def _target(client, item: dict, now: int) -> int | None:
        """The chain time from which `item` can move on, or None if that is not a window passing."""
        tid = int(item.get("task_id", 0))
        task = read(client, client.jobs, "getTask", tid)
        if TaskStatus(task.status) != TaskStatus.REVEALED:
            return None  # contested, accepted or reopened: the nodes act on it without any window
        try:
            claim = read(client, client.jobs, "claimOf", tid)
        except TxFailed:
            return None  # settled between the two reads (claimOf reverts unless Revealed)
        deadline = int(claim.challengeDeadline)
        if item["kind"] == "watch":
            if int(item.get("data", {}).get("epoch", claim.epoch)) != int(claim.epoch):
                return None
            if now > deadline:
                return now  # its reveal is due now: not a window to skip
            return deadline + MARGIN
        return deadline + int(claim.revealGrace) + MARGIN
