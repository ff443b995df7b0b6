"""Fixed data for the explorer's unit tests: one job's dispute told as the chain's events would tell it, and the
readers' objects its pages are rendered from."""
from __future__ import annotations

from types import SimpleNamespace

from verity.chain.events import DecodedEvent
from verity.job.history import ReplicaRow
from verity.job.view import JobReport, RoundMetric, TaskRow

CHALLENGER = "0x" + "a1" * 20
DEFENDER = "0x" + "b2" * 20
REFEREES = ["0x" + f"c{i}" * 20 for i in range(3)]
GAME = "0x" + "9e" * 20
NAMES = {CHALLENGER: "solver-4", DEFENDER: "solver-1", REFEREES[0]: "verifier-1", REFEREES[1]: "verifier-2",
         REFEREES[2]: "a-node-with-a-really-long-name-that-must-never-be-cut-short"}
CLAIM_A, CLAIM_B, AGREED = b"\x0a" * 32, b"\x0b" * 32, b"\x01" * 32


def ev(block: int, contract: str, name: str, tx: str = "", **args) -> DecodedEvent:
    return DecodedEvent(contract, name, args, block, 0, tx or f"0x{block:064x}")


def dispute_events(resolved: bool = True) -> list[DecodedEvent]:
    """Dispute 1 over task 2 of job 1: checkpoint 1→2, step 14, three referees, the defender wins."""
    out = [
        ev(10, "JobRegistry", "TaskCreated", taskId=2, jobId=1, round=0, index=1, kind=1, inputHash=b"\0" * 32),
        ev(20, "DisputeGame", "DisputeOpened", disputeId=1, taskId=2, challenger=CHALLENGER, defender=DEFENDER),
        ev(20, "DisputeGame", "DisputePhaseChanged", disputeId=1, phase=1, at=100),
        ev(21, "DisputeGame", "LeafRequested", disputeId=1, level=0, index=2),
        ev(22, "DisputeGame", "LeafRevealed", disputeId=1, party=CHALLENGER, level=0, index=2, leafHash=b"\x02" * 32),
        ev(23, "DisputeGame", "CheckpointPinpointed", disputeId=1, index=1, agreed=AGREED, claimA=CLAIM_A, claimB=CLAIM_B),
        ev(24, "DisputeGame", "StepRootSubmitted", disputeId=1, party=DEFENDER, stepRoot=b"\x03" * 32),
        ev(26, "DisputeGame", "StepPinpointed", disputeId=1, step=14, agreed=AGREED, claimA=CLAIM_A, claimB=CLAIM_B),
        ev(27, "RefereePanel", "PanelOpened", disputeId=1, requestId=5),
        ev(29, "RefereePanel", "RefereesSeated", disputeId=1, referees=REFEREES, commitDeadline=200),
        *[ev(30 + i, "RefereePanel", "VoteCommitted", disputeId=1, referee=r) for i, r in enumerate(REFEREES)],
        ev(33, "RefereePanel", "RevealOpened", disputeId=1, revealDeadline=300),
        # two referees recompute the defender's state; one revealed nothing yet
        ev(34, "RefereePanel", "VoteRevealed", disputeId=1, referee=REFEREES[0], vote=CLAIM_B),
        ev(35, "RefereePanel", "VoteRevealed", disputeId=1, referee=REFEREES[1], vote=CLAIM_B),
        ev(34, "JobRegistry", "RevealOpened", taskId=2, deadline=999),   # the task's, not the panel's
    ]
    if resolved:
        tx = "0xresolve"
        out += [  # the slash is logged before DisputeResolved in the same transaction
            ev(36, "NodeRegistry", "StakeSlashed", tx, node=CHALLENGER, to=GAME, amount=10 * 10**18),
            ev(36, "DisputeGame", "Credited", tx, to=DEFENDER, amount=5 * 10**18),
            ev(36, "RefereePanel", "PanelDecided", tx, disputeId=1, verdict=2, majorityVote=CLAIM_B),
            ev(36, "DisputeGame", "DisputeResolved", tx, disputeId=1, taskId=2, winner=DEFENDER, loser=CHALLENGER,
               outcome=2),
        ]
    return out


def job_report() -> JobReport:
    rows = [TaskRow(1, 0, 0, "train", "accepted", [ReplicaRow(0, DEFENDER, "accepted"), ReplicaRow(1, REFEREES[2], "accepted")]),
            TaskRow(2, 0, 1, "train", "contested", [ReplicaRow(0, CHALLENGER, "slashed", fined=10 * 10**18),
                                                    ReplicaRow(1, DEFENDER, "revealed")], dispute="#1 step 14"),
            TaskRow(3, 0, 2, "aggregate", "open", [ReplicaRow(0, "0x" + "00" * 20, "empty")])]
    return JobReport(1, "active", 0, 2, 2, tasks=rows, metrics=[RoundMetric(0, 0.4656, 0.896), RoundMetric(1, 0.2039, 0.933)],
                     escrow=7 * 10**18, submitter="0x" + "5e" * 20, replication=2)


def node_status(address: str = DEFENDER):
    from verity.node.status import NodeStatus

    node = SimpleNamespace(slot=1, roles=5, lastSeen=90, stake=1000 * 10**18, locked=10 * 10**18, pendingUnstake=0,
                           unbondingEnds=0, deviceClass=0, memoryMb=4096, region=1, bandwidthMbps=100)
    rep = SimpleNamespace(tasksCompleted=8, tasksLate=0, disputesWon=3, disputesLost=0, totalSlashed=0)
    return NodeStatus(address, node, rep, 100, 5 * 10**18, 12 * 10**18, (10**21, 10**21, 10_000, 9_500),
                      {"tasks": 7 * 10**18, "disputes": 5 * 10**18}, {1: 7 * 10**18})
