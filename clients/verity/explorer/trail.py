"""A dispute's trail, told from its events (DESIGN §6): who challenged whom over which task, how the bisection
narrowed the disagreement to one checkpoint and then one step, which referees the panel seated, who committed and
what each revealed, the panel's verdict, and how it ended (winner, loser, slashes and credits in the resolving
transaction). Pure: fed `DecodedEvent`s in chain order, no chain access."""
from __future__ import annotations

from dataclasses import dataclass, field

from verity.chain.protocol import REFEREE_SLASH_REASONS, DisputeOutcome, DisputePhase, Verdict

PHASE_TEXT = {DisputePhase.BISECT0: "bisecting the checkpoints", DisputePhase.STEP_ROOTS: "submitting step roots",
              DisputePhase.BISECT1: "bisecting the steps", DisputePhase.JUDGING: "referees recompute the step",
              DisputePhase.RESOLVED: "resolved"}


def hex32(value) -> str:
    return "0x" + bytes(value).hex() if isinstance(value, (bytes, bytearray)) else str(value)


@dataclass
class Entry:
    block: int
    kind: str        # opened, phase, leaf, checkpoint, steproot, step, panel, seated, commit, reveal, verdict, slash, …
    text: str        # what happened; node addresses appear in `who`, named by the page
    who: str = ""    # the node that acted (or was acted on), if any


@dataclass
class Vote:
    referee: str
    committed: bool = False
    vote: str = ""   # the revealed bytes32 (the referee's recomputed state hash)
    side: str = ""   # "challenger", "defender" or "neither", by comparing with the pinpointed claims


@dataclass
class Trail:
    dispute_id: int
    task_id: int
    challenger: str
    defender: str
    opened_block: int
    phase: str = "bisecting the checkpoints"
    checkpoint: int | None = None          # the disagreement lies between checkpoint `checkpoint` and the next
    step: int | None = None                # the pinpointed training step
    claims: tuple[str, str] = ("", "")     # (challenger's, defender's) state hash after that step
    agreed: str = ""                       # the state both agree on before it
    votes: dict[str, Vote] = field(default_factory=dict)
    verdict: str = ""                      # the panel's decision (for the challenger / defender / neither / none)
    outcome: str = "open"                  # open, challenger wins, defender wins, both lose, voided, abandoned (stale)
    winner: str = ""
    loser: str = ""
    slashes: list[tuple[str, int]] = field(default_factory=list)   # (node, wei) in the resolving transaction
    credits: list[tuple[str, int]] = field(default_factory=list)   # (payee, wei) in the resolving transaction
    entries: list[Entry] = field(default_factory=list)

    @property
    def pinpointed(self) -> str:
        parts = []
        if self.checkpoint is not None:
            parts.append(f"checkpoint {self.checkpoint}→{self.checkpoint + 1}")
        if self.step is not None:
            parts.append(f"step {self.step}")
        return ", ".join(parts) or "not yet"

    @property
    def revealed(self) -> list[Vote]:
        return [v for v in self.votes.values() if v.vote]


def _side(trail: Trail, vote: str) -> str:
    a, b = trail.claims
    return "challenger" if vote == a and a else "defender" if vote == b and b else "neither"


def build_trails(events) -> dict[int, Trail]:
    """dispute id -> its trail, from events in chain order (any mix of contracts and jobs)."""
    events = list(events)
    trails: dict[int, Trail] = {}
    # tx hash -> the dispute resolved in it: its slashes and credits may be logged before DisputeResolved
    resolving_id = {ev.tx_hash: ev.args["disputeId"] for ev in events if ev.name == "DisputeResolved"}
    resolving: dict[str, Trail] = {}
    for ev in events:
        if ev.tx_hash in resolving_id and resolving_id[ev.tx_hash] in trails:
            resolving[ev.tx_hash] = trails[resolving_id[ev.tx_hash]]
        a = ev.args
        did = a.get("disputeId")
        if ev.name == "DisputeOpened":
            t = trails[did] = Trail(did, a["taskId"], a["challenger"], a["defender"], ev.block)
            t.entries.append(Entry(ev.block, "opened", f"challenged task {a['taskId']}'s result (the defender's)",
                                   a["challenger"]))
            continue
        if ev.tx_hash in resolving and ev.name in ("StakeSlashed", "Credited"):
            t = resolving[ev.tx_hash]
            who = a["node"] if ev.name == "StakeSlashed" else a["to"]
            amount = int(a["amount"])
            (t.slashes if ev.name == "StakeSlashed" else t.credits).append((who, amount))
            t.entries.append(Entry(ev.block, "slash" if ev.name == "StakeSlashed" else "credit",
                                   f"{'slashed' if ev.name == 'StakeSlashed' else 'credited'} {amount / 1e18:g} VRT",
                                   who))
            continue
        t = trails.get(did) if did is not None else None
        if t is None:
            continue
        _apply(t, ev)
    return trails


def _apply(t: Trail, ev) -> None:
    a, add = ev.args, t.entries.append
    if ev.name == "DisputePhaseChanged":
        t.phase = PHASE_TEXT.get(DisputePhase(a["phase"]), DisputePhase(a["phase"]).name.lower())
        add(Entry(ev.block, "phase", t.phase))
    elif ev.name == "LeafRequested":
        level = "checkpoint" if a["level"] == 0 else "step"
        add(Entry(ev.block, "leaf", f"asked both parties for {level} {a['index']}"))
    elif ev.name == "LeafRevealed":
        level = "checkpoint" if a["level"] == 0 else "step"
        add(Entry(ev.block, "leaf", f"revealed its {level} {a['index']} hash {hex32(a['leafHash'])[:18]}…", a["party"]))
    elif ev.name == "CheckpointPinpointed":
        t.checkpoint = int(a["index"])
        add(Entry(ev.block, "checkpoint", f"pinpointed: the parties agree on checkpoint {t.checkpoint} and disagree on "
                                          f"checkpoint {t.checkpoint + 1}"))
    elif ev.name == "StepRootSubmitted":
        add(Entry(ev.block, "steproot", "submitted the Merkle root of its steps in that segment", a["party"]))
    elif ev.name == "StepPinpointed":
        t.step, t.agreed = int(a["step"]), hex32(a["agreed"])
        t.claims = (hex32(a["claimA"]), hex32(a["claimB"]))
        add(Entry(ev.block, "step", f"pinpointed step {t.step}: both agree on the state before it, disagree after it"))
    elif ev.name == "PanelOpened":
        add(Entry(ev.block, "panel", "referee panel opened (waits for a random draw)"))
    elif ev.name == "RefereesSeated":
        for r in a["referees"]:
            t.votes.setdefault(r, Vote(r))
        add(Entry(ev.block, "seated", f"{len(a['referees'])} referees seated"))
    elif ev.name == "VoteCommitted":
        t.votes.setdefault(a["referee"], Vote(a["referee"])).committed = True
        add(Entry(ev.block, "commit", "committed a sealed vote", a["referee"]))
    elif ev.name == "RevealOpened" and ev.contract == "RefereePanel":
        add(Entry(ev.block, "panel", "votes may be revealed"))
    elif ev.name == "VoteRevealed":
        v = t.votes.setdefault(a["referee"], Vote(a["referee"], committed=True))
        v.vote = hex32(a["vote"])
        v.side = _side(t, v.vote)
        add(Entry(ev.block, "reveal", f"revealed a vote for the {v.side}", a["referee"]))
    elif ev.name == "PanelDecided":
        verdict = Verdict(a["verdict"])
        t.verdict = {Verdict.FOR_A: "for the challenger", Verdict.FOR_B: "for the defender",
                     Verdict.NEITHER: "for neither", Verdict.NO_DECISION: "no decision"}.get(verdict, verdict.name.lower())
        add(Entry(ev.block, "verdict", f"panel decided {t.verdict}"))
    elif ev.name == "RefereeSlashed":
        reason = REFEREE_SLASH_REASONS.get(int(a["reason"]), f"reason {a['reason']}")
        add(Entry(ev.block, "slash", f"referee slashed {int(a['amount']) / 1e18:g} VRT ({reason})", a["referee"]))
    elif ev.name == "DisputeResolved":
        t.outcome = DisputeOutcome(a["outcome"]).name.lower().replace("_", " ")
        t.winner, t.loser, t.phase = a["winner"], a["loser"], "resolved"
        add(Entry(ev.block, "resolved", f"resolved: {t.outcome}", a["winner"] if int(a["winner"], 16) else ""))
    elif ev.name == "DisputeAbandoned":
        t.outcome, t.phase = "abandoned (stale)", "abandoned"
        add(Entry(ev.block, "resolved", "abandoned: the task's candidate changed while it ran (nobody slashed)"))
