"""Explicit phases of a node's work items and the legal transitions between them.

A work item is one thing a node is responsible for on-chain: a task replica it
solves, a dispute it is a party to, a referee seat, or an optimistic result it
checks. Each moves only along the edges below; anything else is a bug and
raises, so a node can never, e.g., reveal twice or commit after revealing.
"""
from __future__ import annotations

from enum import Enum

from verity.errors import VerityError


class Phase(str, Enum):
    # solver: a replica slot assigned to this node
    ASSIGNED = "assigned"          # seen TaskAssigned for us
    TRAINED = "trained"            # result computed, bundle stored on IPFS
    COMMITTED = "committed"        # commitment on-chain (replicated tasks)
    REVEALED = "revealed"          # root/final revealed (or submitted, optimistic)
    # verifier: an optimistic result under watch
    WATCHING = "watching"          # result seen, re-execution pending or skipped
    # parties and referees
    DISPUTING = "disputing"        # a dispute involving us is open
    VOTE_COMMITTED = "vote_committed"
    VOTE_REVEALED = "vote_revealed"
    # terminal
    DONE = "done"                  # accepted / resolved / not needed
    LOST = "lost"                  # slot taken away (late) or dispute lost


TERMINAL = frozenset({Phase.DONE, Phase.LOST})

TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    Phase.ASSIGNED: frozenset({Phase.TRAINED, Phase.VOTE_COMMITTED, Phase.LOST, Phase.DONE}),  # solve slot or referee seat
    Phase.TRAINED: frozenset({Phase.COMMITTED, Phase.REVEALED, Phase.LOST, Phase.DONE}),
    Phase.COMMITTED: frozenset({Phase.REVEALED, Phase.LOST, Phase.DONE}),
    Phase.REVEALED: frozenset({Phase.DISPUTING, Phase.DONE, Phase.LOST}),
    Phase.WATCHING: frozenset({Phase.DISPUTING, Phase.DONE}),
    Phase.DISPUTING: frozenset({Phase.DONE, Phase.LOST}),
    Phase.VOTE_COMMITTED: frozenset({Phase.VOTE_REVEALED, Phase.DONE, Phase.LOST}),
    Phase.VOTE_REVEALED: frozenset({Phase.DONE, Phase.LOST}),
    Phase.DONE: frozenset(),
    Phase.LOST: frozenset(),
}


class IllegalTransition(VerityError):
    def __init__(self, key: str, src: Phase, dst: Phase):
        super().__init__(f"work item {key}: illegal transition {src.value} -> {dst.value}")


def check_transition(key: str, src: Phase, dst: Phase) -> None:
    if dst not in TRANSITIONS[src]:
        raise IllegalTransition(key, src, dst)
