"""Explicit phases of a node's work items and the legal transitions between them.

A work item is one thing a node is responsible for on-chain: a task replica it
solves, a candidate result it checks (per task and epoch), a task it checks
blind for a verification fee, a dispute it is a party to, or a referee seat. Each kind has its own transition table; anything
else is a bug and raises, so a node can never, e.g., reveal twice, commit a vote
after revealing it, or reveal a challenge it never committed.
"""
from __future__ import annotations

from enum import Enum

from verity.errors import VerityError


class Phase(str, Enum):
    # solver: a replica slot assigned to this node
    ASSIGNED = "assigned"          # seen TaskAssigned for us
    TRAINED = "trained"            # result computed, bundle stored on IPFS
    COMMITTED = "committed"        # commitment on-chain (replicated tasks)
    REVEALED = "revealed"          # root/final revealed (or submitted): waits out the challenge window
    # verifier: a candidate result (task, epoch) under watch
    WATCHING = "watching"          # window seen, re-execution pending or skipped
    CHALLENGE_COMMITTED = "challenge_committed"  # salt persisted, commitChallenge mined; reveal in a later block
    # parties and referees
    DISPUTING = "disputing"        # a dispute involving us is open
    SEATED = "seated"              # referee seat: recomputing the step, vote not committed yet
    VOTE_COMMITTED = "vote_committed"
    VOTE_REVEALED = "vote_revealed"
    # terminal
    DONE = "done"                  # accepted / resolved / not needed
    LOST = "lost"                  # slot taken away (late) or dispute lost


TERMINAL = frozenset({Phase.DONE, Phase.LOST})
_END = frozenset({Phase.DONE, Phase.LOST})

# One table per kind of work item (WorkItem.kind).
TABLES: dict[str, dict[Phase, frozenset[Phase]]] = {
    "solve": {
        Phase.ASSIGNED: frozenset({Phase.TRAINED}) | _END,
        Phase.TRAINED: frozenset({Phase.COMMITTED, Phase.REVEALED}) | _END,
        Phase.COMMITTED: frozenset({Phase.REVEALED}) | _END,
        # Revealed: the task is Revealed (window, then finalize) or Contested (one replica-vs-replica dispute)
        Phase.REVEALED: frozenset({Phase.DISPUTING}) | _END,
        # a contest's winner becomes the candidate with a fresh window: it stays here until accepted
        Phase.DISPUTING: _END,
    },
    "watch": {
        # nothing is at stake before the challenge is revealed: those phases end DONE, never LOST
        Phase.WATCHING: frozenset({Phase.CHALLENGE_COMMITTED, Phase.DONE}),
        Phase.CHALLENGE_COMMITTED: frozenset({Phase.DISPUTING, Phase.DONE}),
        Phase.DISPUTING: _END,   # LOST: our challenge lost
    },
    "dispute": {
        Phase.DISPUTING: _END,
    },
    # a fee check (verity.node.auditor): nothing is at stake, so it never ends LOST
    "audit": {
        Phase.WATCHING: frozenset({Phase.COMMITTED, Phase.DONE}),  # re-executing; salt persisted; commitCheck
        Phase.COMMITTED: frozenset({Phase.DONE}),                  # blind check committed: waits, then claims
    },
    "seat": {
        Phase.SEATED: frozenset({Phase.VOTE_COMMITTED}) | _END,
        Phase.ASSIGNED: frozenset({Phase.VOTE_COMMITTED}) | _END,  # seat items of v1 snapshots
        Phase.VOTE_COMMITTED: frozenset({Phase.VOTE_REVEALED}) | _END,
        Phase.VOTE_REVEALED: _END,
    },
}

# The union of every kind's edges (for callers that do not name a kind).
TRANSITIONS: dict[Phase, frozenset[Phase]] = {p: frozenset() for p in Phase}
for _table in TABLES.values():
    for _src, _dsts in _table.items():
        TRANSITIONS[_src] = TRANSITIONS[_src] | _dsts

# The phase a new item of each kind starts in.
INITIAL: dict[str, Phase] = {"solve": Phase.ASSIGNED, "watch": Phase.WATCHING, "dispute": Phase.DISPUTING,
                             "seat": Phase.SEATED, "audit": Phase.WATCHING}


class IllegalTransition(VerityError):
    def __init__(self, key: str, src: Phase, dst: Phase, kind: str = ""):
        super().__init__(f"work item {key}: illegal transition {src.value} -> {dst.value}"
                         + (f" for a {kind} item" if kind else ""))


def allowed(kind: str | None, src: Phase) -> frozenset[Phase]:
    """The phases an item of `kind` may move to from `src` (the union table for an unknown kind)."""
    table = TABLES.get(kind or "")
    if table is None:
        return TRANSITIONS[src]
    return table.get(src, frozenset())


def check_transition(key: str, src: Phase, dst: Phase, kind: str | None = None) -> None:
    if dst not in allowed(kind, src):
        raise IllegalTransition(key, src, dst, kind or "")
