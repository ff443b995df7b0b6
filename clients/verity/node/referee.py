"""Referee role: recompute the one disputed step and commit-reveal the result."""
from __future__ import annotations

import logging
import secrets

from eth_abi import encode
from eth_utils import keccak

from verity.chain import TxFailed
from verity.chain.views import DisputePhase, read
from verity.node.compute import referee_vote
from verity.node.context import NodeContext
from verity.node.phases import Phase
from verity.node.snapshot import Snapshot, WorkItem

log = logging.getLogger("verity.node.referee")


def vote_commitment(vote: bytes, salt: bytes, referee: str) -> bytes:
    return keccak(encode(["bytes32", "bytes32", "address"], [vote, salt, referee]))


class RefereeRole:
    kinds = ("seat",)

    def __init__(self, ctx: NodeContext):
        self.ctx = ctx

    def on_event(self, snap: Snapshot, ev) -> None:
        if ev.name != "RefereesDrawn":
            return
        if self.ctx.me.lower() not in [a.lower() for a in ev.args["referees"]]:
            return
        did = int(ev.args["disputeId"])
        key = f"seat:{did}"
        if key not in snap.items:
            snap.items[key] = WorkItem(key=key, kind="seat", phase=Phase.ASSIGNED, dispute_id=did)
            log.info("seated as referee in dispute %d", did)

    def advance(self, snap: Snapshot, item: WorkItem) -> None:
        ctx, c = self.ctx, self.ctx.chain
        d = ctx.dispute(item.dispute_id)
        if DisputePhase(d.phase) != DisputePhase.VOTING:
            snap.move(item, Phase.DONE)
            return
        seat = read(c, c.game, "voteOf", item.dispute_id, ctx.me)
        if item.phase == Phase.ASSIGNED:
            if "vote" not in item.data:
                task = ctx.task(d.taskId)
                vote = ctx.work.poll(item.key, lambda: referee_vote(ctx, task, d), urgent=True,
                                     what=f"recomputing the disputed step of dispute {item.dispute_id}")
                if vote is None:
                    item.data["computing"] = "recomputing the step"
                    return
                item.data.pop("computing", None)
                item.data.update(vote="0x" + vote.hex(), salt="0x" + secrets.token_bytes(32).hex(), task_id=int(d.taskId))
                return  # persisted before committing: a crash can't leave a commitment we can't open
            if seat.commitment == b"\x00" * 32:
                vote, salt = bytes.fromhex(item.data["vote"][2:]), bytes.fromhex(item.data["salt"][2:])
                c.transact(c.game.functions.commitVote(item.dispute_id, vote_commitment(vote, salt, ctx.me)))
            snap.move(item, Phase.VOTE_COMMITTED)
            log.info("dispute %d: vote committed", item.dispute_id)
            return
        if item.phase == Phase.VOTE_COMMITTED:
            panel = read(c, c.game, "panelOf", item.dispute_id)
            if d.committedVotes < len(panel) and ctx.chain.now() <= int(d.commitDeadline):
                return  # reveal opens when every referee committed or the commit window closed
            if not seat.revealed:
                vote, salt = bytes.fromhex(item.data["vote"][2:]), bytes.fromhex(item.data["salt"][2:])
                try:
                    c.transact(c.game.functions.revealVote(item.dispute_id, vote, salt))
                except TxFailed as exc:
                    log.warning("dispute %d: reveal failed: %s", item.dispute_id, exc)
                    raise
            snap.move(item, Phase.VOTE_REVEALED)
            log.info("dispute %d: vote revealed", item.dispute_id)
            return
        if item.phase == Phase.VOTE_REVEALED:
            panel = read(c, c.game, "panelOf", item.dispute_id)
            if d.revealedVotes == len(panel) or ctx.chain.now() > int(d.revealDeadline):
                try:
                    c.transact(c.game.functions.resolve(item.dispute_id))
                except TxFailed as exc:
                    log.debug("%s", exc)
