"""Clock control for node scenarios: move the chain past a window once every party has acted, instead of sleeping.

While a test waits for its job (`Net.wait_job`), a `WindowSkipper` looks at what every running node says it is
doing (its persisted snapshot, `<state dir>/nodes/<name>/snapshot.json`) and at the chain. When no node has work in
hand and every one of them has read the chain past the last change it made, the only thing left is a deadline
passing: the skipper jumps the chain clock (anvil `evm_increaseTime` + `evm_mine`) to the first moment one of the
waiting items can move on, exactly as a quiet stretch of a real chain would.

What it reads:
- the chain: every task that is Revealed (a candidate result, the first one or one a dispute put in place) waits for
  its challenge window and reveal grace to pass, when a keeper can finalize it. That is the target, unless a node has
  committed a challenge against it (verity.node.phases: a watch item `challenge_committed` of that epoch): then the
  target is the window's end, when the challenge may be revealed.
- the chain again: a task Contested (two replicas disagree) or a dispute not yet resolved holds every jump, with
  one exception: a dispute whose every running chess clock belongs to a node started with the TEST-ONLY fault
  `silent-in-dispute` (and, for the defender's side, no co-defender that could move for it) waits for nothing but
  that clock to run out, so its expiry is a target too (then the other party claims the timeout).
- a replica slot of an Assigned task held by a node the test killed, or by a copier (`copy-result`, which never
  computes), waits for nothing but its deadline (then a keeper reports it late and the slot is drawn again): that
  deadline is a target too.
- the chain, for what a node must do at once whatever its snapshot says (found by CI): a replica slot whose reveal
  window is open (every replica committed, e.g. both finished training in the same second and neither saw the
  other's commit; or the partner revealed), an Open task whose draw a keeper can make now (`assign` would succeed),
  and a slot drawn for a node whose snapshot has no item for it yet (drawn after the node's last save): each holds
  every jump.
- the nodes' items: busy ones (training, re-executing, a seat, a dispute item) hold every jump. A solve or watch item
  whose dispute has ended stays `disputing` until its task is accepted (a contest's winner waits out its fresh window
  there): the chain says whether a dispute is still open, so those two are neutral. Everything else (done, a
  commitment waiting for a partner, a fee check waiting for its epoch) is neutral too. A test
  about such a wait (a node late, a silent party, a decline grace) keeps real time: `wait_job(..., skip_windows=False)`.

A jump happens only after two observations in a row agree: the same waiting items, nothing busy, and in the second
every node has handled every block up to the head read at the end of the first (so an event a node has not seen yet,
e.g. a window that just opened for a verifier that has not decided whether to check it, holds the jump). The same
Revealed tasks (and epochs) must be seen in both looks, and no
transaction may have been mined since the second look began (ticker blocks are empty). A paused
(SIGSTOP) node never advances its cursor, so it holds every jump too; killed nodes are left out.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from verity.chain import TxFailed
from verity.chain.protocol import DisputePhase, ReplicaStatus, TaskStatus
from verity.chain.views import read
from verity.devnet.ticker import rpc_call

BUSY = {"assigned", "trained", "watching", "disputing", "seated", "vote_committed", "vote_revealed"}
FOLLOWING = {("solve", "disputing"), ("watch", "disputing")}  # a dispute seen from a task's item: the chain decides
MARGIN = 1  # seconds past a deadline (the contracts compare with `>`)
SETTLED = {TaskStatus.ACCEPTED, TaskStatus.CANCELLED}
MOVES = {DisputePhase.BISECT0, DisputePhase.STEP_ROOTS, DisputePhase.BISECT1}  # phases played on the parties' clocks
SILENT_FAULT = "silent-in-dispute"
COPY_FAULT = "copy-result"
ZERO = "0x" + "0" * 40


@dataclass(frozen=True)
class Window:
    task_id: int
    epoch: int
    deadline: int   # challenge deadline (chain time)
    grace: int      # reveal grace after it


@dataclass
class Observation:
    windows: frozenset      # Window of every Revealed task
    challenged: frozenset   # (task id, epoch) with a committed, unrevealed challenge
    silent: frozenset       # (dispute id, chain time its silent clock runs out): disputes waiting only on that
    late: frozenset         # (task id, slot, deadline) of replica slots held by killed nodes
    cursors: dict           # node name -> next block it will read
    busy: bool
    head: int               # read after the snapshots: every state seen here was mined at or before it
    start: int              # read before them: a transaction mined after it may have changed what they say


@dataclass
class ChainLook:
    windows: set            # Window of every Revealed task
    contested: set          # ids of Contested tasks
    late: set               # (task id, slot, deadline) of slots dead nodes (or copiers) hold
    assigned: set           # (task id, slot, node) of Assigned slots live nodes hold: each must have its item
    moving: bool            # a live node must act now whatever its snapshot says (a reveal due, a draw ready)


@dataclass
class WindowSkipper:
    rpc_url: str
    state_root: Path
    jumps: list = field(default_factory=list)   # (from chain time, seconds jumped): how much waiting was skipped
    _last: Observation | None = None
    _settled: set = field(default_factory=set)  # task ids Accepted or Cancelled: never read again
    _resolved: set = field(default_factory=set)  # dispute ids resolved: never read again

    def step(self, client, nodes) -> int:
        """One look; jumps when two looks agree that only a window is left. Returns the seconds jumped (0 if none)."""
        obs = self._observe(client, nodes)
        last, self._last = self._last, obs
        if obs.busy or last is None or last.busy or not (obs.windows or obs.silent or obs.late):
            return 0
        if (obs.windows, obs.challenged, obs.silent, obs.late) != (last.windows, last.challenged, last.silent,
                                                                   last.late):
            return 0
        if any(obs.cursors.get(name, 0) <= last.head for name in obs.cursors):
            return 0
        now = client.now()
        targets = ([self._target(w, obs.challenged, now) for w in obs.windows] + [t for _, t in obs.silent]
                   + [deadline + MARGIN for _, _, deadline in obs.late])
        if min(targets) <= now:
            return 0  # something can move already (a keeper will finalize, a challenger reveal): nothing to skip
        delta = min(targets) - now
        if not _quiet_since(client, obs.start):
            return 0  # a transaction landed after this look began (a draw, a commit): look again first
        rpc_call(self.rpc_url, "evm_increaseTime", [delta])
        rpc_call(self.rpc_url, "evm_mine")
        self.jumps.append((now, delta))
        self._last = None  # the nodes must see the new block before the next jump
        return delta

    def _observe(self, client, nodes) -> Observation:
        start = client.block_number()
        live = [n for n in nodes if not n.killed and n.proc.poll() is None]
        dead = {_address(n) for n in nodes if n not in live}
        silent_parties = {_address(n) for n in live if SILENT_FAULT in getattr(n, "args", ())}
        disputes_open, silent, silent_tasks = self._disputes(client, silent_parties)
        # a copier (--fault copy-result) never computes: like a killed node's, its slot waits only for its deadline
        copiers = {_address(n) for n in live if COPY_FAULT in getattr(n, "args", ())}
        challenged, cursors, busy, seen = set(), {}, disputes_open, {}
        for node in live:
            copier = _address(node) in copiers
            snap = self._snapshot(node.name)
            if snap is None:
                busy = True  # not started yet: it has read nothing
                continue
            cursors[node.name] = int(snap.get("next_block", 0))
            seen[_address(node)] = set(snap.get("items", {}))
            for item in snap.get("items", {}).values():
                phase, kind = item.get("phase"), item.get("kind")
                if kind == "dispute" and int(item.get("dispute_id") or 0) in {d for d, _ in silent}:
                    continue  # its only move left is the silent party's, or the timeout claim after the jump
                if copier and (kind, phase) == ("solve", "assigned"):
                    continue  # it only lists pins for something to copy
                if phase in BUSY and (kind, phase) not in FOLLOWING:
                    busy = True
                elif (kind, phase) == ("watch", "challenge_committed"):
                    epoch = item.get("data", {}).get("epoch")
                    challenged.add((int(item.get("task_id", 0)), None if epoch is None else int(epoch)))
        look = self._scan_chain(client, dead | copiers, {_address(n) for n in live})
        busy = busy or bool(look.contested - silent_tasks)  # a contest is a dispute: only a silent one's clock may be skipped
        # the chain, read after the snapshots, is ahead of them where a node still has a move to make at once
        busy = busy or look.moving or any(f"task:{t}:{s}" not in seen.get(a, ()) for t, s, a in look.assigned)
        head = client.block_number()
        return Observation(look.windows, frozenset(challenged), frozenset(silent), frozenset(look.late), cursors,
                           busy, head, start)

    def _scan_chain(self, client, dead: set, live: set) -> ChainLook:
        """The Window of every Revealed task, the ids of the Contested ones, the slots `dead` nodes hold, and what
        `live` nodes must do at once: a slot drawn for one (its item must exist), a reveal due (every replica
        committed, or the partner revealed: the node publishes and reveals now), a draw a keeper can make now."""
        look = ChainLook(set(), set(), set(), set(), False)
        for tid in range(1, int(read(client, client.jobs, "taskCount")) + 1):
            if tid in self._settled:
                continue
            status = TaskStatus(read(client, client.jobs, "getTask", tid).status)
            if status in SETTLED:
                self._settled.add(tid)
            elif status == TaskStatus.CONTESTED:
                look.contested.add(tid)
            elif status in (TaskStatus.ASSIGNED, TaskStatus.OPEN):
                self._slots(client, tid, dead, live, look)
                if status == TaskStatus.OPEN and _can_draw(client, tid):
                    look.moving = True
            elif status == TaskStatus.REVEALED:
                try:
                    claim = read(client, client.jobs, "claimOf", tid)
                except TxFailed:
                    continue  # settled between the two reads (claimOf reverts unless Revealed)
                look.windows.add(Window(tid, int(claim.epoch), int(claim.challengeDeadline), int(claim.revealGrace)))
        look.windows = frozenset(look.windows)
        return look

    @staticmethod
    def _slots(client, tid: int, dead: set, live: set, look: ChainLook) -> None:
        for slot, rep in enumerate(read(client, client.jobs, "getReplicas", tid)):
            node, rstatus, deadline = str(rep.node).lower(), ReplicaStatus(rep.status), int(rep.deadline)
            if node in dead:
                if deadline and rstatus in (ReplicaStatus.ASSIGNED, ReplicaStatus.COMMITTED):
                    look.late.add((tid, slot, deadline))
            elif node in live:
                if rstatus == ReplicaStatus.ASSIGNED:
                    look.assigned.add((tid, slot, node))
                elif rstatus == ReplicaStatus.COMMITTED and deadline:
                    look.moving = True  # its reveal window is open (found by CI: both replicas committed at once)

    def _disputes(self, client, silent_parties: set) -> tuple[bool, set, set]:
        """Whether a dispute is open that someone may move in; (id, expiry) of those only a silent clock holds, and
        their tasks."""
        busy, silent, tasks = False, set(), set()
        for did in range(1, int(read(client, client.game, "disputeCount")) + 1):
            if did in self._resolved:
                continue
            d = read(client, client.dispute_lens, "getDispute", did)
            phase = DisputePhase(d.phase)
            if phase == DisputePhase.RESOLVED:
                self._resolved.add(did)
            elif (expiry := _silent_expiry(d, phase, silent_parties)) is not None:
                silent.add((did, expiry))
                tasks.add(int(d.taskId))
            else:
                busy = True
        return busy, silent, tasks

    def _snapshot(self, name: str) -> dict | None:
        path = self.state_root / "nodes" / name / "snapshot.json"
        try:
            return json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None  # not written yet, or caught between write and rename (never: os.replace is atomic)

    @staticmethod
    def _target(window: Window, challenged: frozenset, now: int) -> int:
        """The chain time from which `window`'s task can move on: its reveal time if a challenge against this epoch
        is committed, else its finalize time."""
        if {(window.task_id, window.epoch), (window.task_id, None)} & challenged:
            if now > window.deadline:
                return now  # the reveal is due now: not a window to skip
            return window.deadline + MARGIN
        return window.deadline + window.grace + MARGIN


def _can_draw(client, tid: int) -> bool:
    """`assign` would succeed now (its draw is readable and finds a node): a keeper makes it at its next tick."""
    try:
        read(client, client.jobs, "assign", tid)
    except TxFailed:
        return False  # not readable yet, or nobody eligible: the wait is for blocks, or for nothing a jump changes
    return True


def _quiet_since(client, block: int) -> bool:
    """No transaction was mined after `block` (the devnet ticker's blocks are empty)."""
    top = client.block_number()
    return all(client.w3.eth.get_block_transaction_count(b) == 0 for b in range(block + 1, top + 1))


def _address(node) -> str:
    return str(node.address).lower()


def _silent_expiry(d, phase: DisputePhase, silent_parties: set) -> int | None:
    """When the first running clock of dispute `d` runs out, if every running clock is a silent party's (ChessClock:
    a clock runs while `since` != 0; it has run out once used + (now - since) > allowance); else None."""
    if phase not in MOVES or not silent_parties:
        return None
    expiries = []
    for i, side in enumerate(d.sides):
        used, since = int(side.clock.used), int(side.clock.since)
        if since == 0:
            continue
        movers = {str(side.party).lower()}
        if i == 1 and str(d.coDefender).lower() != ZERO:
            movers.add(str(d.coDefender).lower())  # may move for the defender
        if not movers <= silent_parties:
            return None  # an honest party's clock runs: it is about to move
        expiries.append(since + int(d.allowance) - used + MARGIN)
    return min(expiries) if expiries else None
