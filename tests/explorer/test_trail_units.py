"""The dispute trail is told from events alone: the pinpointed checkpoint and step, who committed and how each
referee voted, the verdict, and the slashes and credits of the resolving transaction."""
from __future__ import annotations

from explorer_fixtures import CHALLENGER, DEFENDER, REFEREES, dispute_events, ev

from verity.explorer.trail import build_trails


def test_buildTrails_resolvedDispute_pinpointsStepAndCountsVotes_succeeds():
    trails = build_trails(dispute_events())
    assert list(trails) == [1]
    t = trails[1]
    assert (t.task_id, t.challenger, t.defender) == (2, CHALLENGER, DEFENDER)
    assert (t.checkpoint, t.step) == (1, 14)
    assert t.pinpointed == "checkpoint 1→2, step 14"
    assert all(v.committed for v in t.votes.values()) and set(t.votes) == set(REFEREES)
    assert [(v.referee, v.side) for v in t.revealed] == [(REFEREES[0], "defender"), (REFEREES[1], "defender")]
    assert t.verdict == "for the defender"
    assert (t.outcome, t.winner, t.loser, t.phase) == ("defender wins", DEFENDER, CHALLENGER, "resolved")
    # StakeSlashed and Credited came before DisputeResolved in the same transaction
    assert t.slashes == [(CHALLENGER, 10 * 10**18)] and t.credits == [(DEFENDER, 5 * 10**18)]
    kinds = [e.kind for e in t.entries]
    assert kinds.index("checkpoint") < kinds.index("step") < kinds.index("seated") < kinds.index("commit") \
        < kinds.index("reveal") < kinds.index("verdict") < kinds.index("resolved")
    assert kinds.count("panel") == 2   # PanelOpened and the panel's RevealOpened; the task's RevealOpened is not its


def test_buildTrails_openDispute_showsItsProgress_succeeds():
    t = build_trails(dispute_events(resolved=False))[1]
    assert t.outcome == "open" and t.phase == "bisecting the checkpoints" and not t.slashes
    assert [v.side for v in t.votes.values()] == ["defender", "defender", ""]


def test_buildTrails_abandonedAndUnrelatedEvents_succeeds():
    events = [ev(5, "NodeRegistry", "StakeSlashed", node=CHALLENGER, to=DEFENDER, amount=1),   # no dispute of ours
              ev(6, "DisputeGame", "DisputeOpened", disputeId=7, taskId=3, challenger=CHALLENGER, defender=DEFENDER),
              ev(7, "DisputeGame", "StepPinpointed", disputeId=8, step=1, agreed=b"", claimA=b"", claimB=b""),  # unknown
              ev(8, "DisputeGame", "DisputeAbandoned", disputeId=7, taskId=3, epoch=2)]
    trails = build_trails(events)
    assert list(trails) == [7]
    assert trails[7].outcome == "abandoned (stale)" and trails[7].step is None and trails[7].pinpointed == "not yet"


def test_buildTrails_voteForNeitherClaim_succeeds():
    events = dispute_events(resolved=False)
    events.append(ev(40, "RefereePanel", "VoteRevealed", disputeId=1, referee=REFEREES[2], vote=b"\x0f" * 32))
    assert build_trails(events)[1].votes[REFEREES[2]].side == "neither"
