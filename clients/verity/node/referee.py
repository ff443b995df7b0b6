"""Referee role: recompute the one disputed step and commit-reveal it on the RefereePanel.

The panel emits RefereesSeated(disputeId, referees[], commitDeadline) each time its seats are
(re)filled, with the whole seat list; a node listed there holds a seat (`seat:<dispute>`). It
recomputes h_{s+1} from the agreed checkpoint h_s (compute.referee_vote, which never fails on a
party's bad data: P9), persists vote and salt, commits `vote_commitment(disputeId, vote, salt, me)`
while the panel is Committing, and reveals once it is Revealing. Seating and advancing the panel
after a window are the keeper's (anyone may call them).
"""
from __future__ import annotations

import logging
import secrets

from verity.chain import TxFailed
from verity.chain.protocol import PanelPhase, vote_commitment
from verity.chain.views import read
from verity.node.compute import referee_vote
from verity.node.context import NodeContext
from verity.node.loop import SAVE_AND_GO_ON
from verity.node.phases import Phase
from verity.node.snapshot import Snapshot, WorkItem

log = logging.getLogger("verity.node.referee")

__all__ = ["RefereeRole", "vote_commitment"]
REVEAL_GAS = 3_000_000


def _b(hexstr: str) -> bytes:
    return bytes.fromhex(hexstr.removeprefix("0x"))


class RefereeRole:
    kinds = ("seat",)

    def __init__(self, ctx: NodeContext):
        self.ctx = ctx

    def on_event(self, snap: Snapshot, ev) -> None:
        if ev.name != "RefereesSeated" or ev.contract != "RefereePanel":
            return
        if self.ctx.me.lower() not in [a.lower() for a in ev.args["referees"]]:
            return
        did = int(ev.args["disputeId"])
        key = f"seat:{did}"
        if did not in snap.active_panels:
            snap.active_panels.append(did)  # the keeper advances the panel if other seats stay silent
        if key not in snap.items:
            snap.items[key] = WorkItem(key=key, kind="seat", phase=Phase.SEATED, dispute_id=did)
            log.info("seated as referee in dispute %d (commit by %d)", did, int(ev.args["commitDeadline"]))

    def advance(self, snap: Snapshot, item: WorkItem) -> str | None:
        ctx, c = self.ctx, self.ctx.chain
        if "vote" not in item.data and ctx.work.running(item.key):
            return  # recomputing the step: four reads a tick would only slow it; the panel is read once it is done
        panel = read(c, c.panel, "panelOf", item.dispute_id)
        phase = PanelPhase(panel.phase)
        seat = read(c, c.panel, "voteOf", item.dispute_id, ctx.me)
        if phase in (PanelPhase.DECIDED, PanelPhase.NONE):
            snap.move(item, Phase.DONE, verdict=int(panel.verdict), majority="0x" + bytes(panel.majorityVote).hex())
            log.info("dispute %d: panel decided (verdict %d)", item.dispute_id, int(panel.verdict))
            return
        if not seat.seated:  # unseated: we missed a window and were slashed (or the seat was redrawn)
            snap.move(item, Phase.LOST, reason="unseated")
            log.warning("dispute %d: no longer seated on the panel", item.dispute_id)
            return
        if item.phase in (Phase.SEATED, Phase.ASSIGNED):
            if "vote" not in item.data:
                d = ctx.dispute(item.dispute_id)
                task = ctx.task(d.taskId)
                vote = ctx.work.poll(item.key, lambda: referee_vote(ctx, task, d), urgent=True,
                                     what=f"recomputing the disputed step of dispute {item.dispute_id}")
                if vote is None:
                    item.data["computing"] = "recomputing the step"
                    return
                item.data.pop("computing", None)
                item.data.update(vote="0x" + vote.hex(), salt="0x" + secrets.token_bytes(32).hex(), task_id=int(d.taskId))
                return SAVE_AND_GO_ON  # persisted before committing (a crash can't leave a commitment we can't open),
                # then committed in this same tick: the panel's commit window is short
            if seat.committed:
                snap.move(item, Phase.VOTE_COMMITTED)
                return
            if phase != PanelPhase.COMMITTING or c.now() > int(panel.commitDeadline):
                return  # seating again after a redraw, or the keeper must advance past the commit window first
            vote, salt = _b(item.data["vote"]), _b(item.data["salt"])
            c.transact(c.panel.functions.commitVote(item.dispute_id, vote_commitment(item.dispute_id, vote, salt, ctx.me)),
                       gas=REVEAL_GAS)  # the last commitment opens the reveal phase
            snap.move(item, Phase.VOTE_COMMITTED)
            log.info("dispute %d: vote committed", item.dispute_id)
            return
        if item.phase == Phase.VOTE_COMMITTED:
            if seat.revealed:
                snap.move(item, Phase.VOTE_REVEALED)
                return
            if phase != PanelPhase.REVEALING or c.now() > int(panel.revealDeadline):
                return  # reveals open once every seat committed
            vote, salt = _b(item.data["vote"]), _b(item.data["salt"])
            try:
                # explicit gas: estimated while other seats are still unrevealed, ours may land as the last reveal,
                # which decides the panel and settles the dispute (far more gas than the estimate)
                c.transact(c.panel.functions.revealVote(item.dispute_id, vote, salt), gas=REVEAL_GAS)
            except TxFailed as exc:
                log.warning("dispute %d: reveal failed: %s", item.dispute_id, exc)
                raise
            snap.move(item, Phase.VOTE_REVEALED)
            log.info("dispute %d: vote revealed", item.dispute_id)
            return
        # VOTE_REVEALED: wait for the decision (the last reveal, or the keeper's advance after the reveal window)
