"""P1 through real node processes: a cheater cannot get its wrong optimistic result accepted by challenging it first
with its own verifier identities.

The solver flips a bit (replication 1). Two sybil verifiers of the same cheater (TEST-ONLY `sybil-challenge` +
`silent-in-dispute`) commit and reveal challenges built to lose before anyone else, then never move. The honest
verifier is frozen (SIGSTOP) until both sybil challenges are open, so its challenge is surely the later one; it still
opens beside theirs (any number may be open against one result), wins, and its result is the one accepted. The sybils
lose on their clocks and are slashed; the honest verifier is not."""
from __future__ import annotations

import pytest

from node_builders import CLOCK_ALLOWANCE, conserved, wait_for
from verity.chain.protocol import DisputeOutcome, TaskStatus
from verity.chain.views import read

pytestmark = pytest.mark.integration

TRAIN = 1  # shard 0 of round 0
# The honest verifier runs from the start (registered and staked: no start-up on the critical path) but is frozen
# before the job is posted, and resumed once both sybil challenges are open and their clocks (CLOCK_ALLOWANCE) have
# at most SYBIL_CLOCK_LEFT s left: its challenge commitment is then surely the later one, and its dispute, which opens
# only when it reveals the challenge after the window closed, cannot end before theirs do (a dispute still open when
# the candidate is replaced is abandoned unslashed). The sybils open about 2 s after the result; resumed about 21 s
# later, the honest node re-executed and committed 5 s after it under two busy background processes here, and the
# window leaves it 20 s more. (Started only at that point instead, the node's start-up and registration, 6-14 s here
# and more on CI, once ate the whole window there and the wrong result was accepted.) Each party's clock is the
# task's execution window when that is longer than CLOCK_ALLOWANCE (issue 25), so the clock advance, and with it the
# window, grows by the difference.
EXECUTION_WINDOW = 60
CHALLENGE_WINDOW = 45 + max(0, EXECUTION_WINDOW - CLOCK_ALLOWANCE)
SYBIL_CLOCK_LEFT = 9


def _opened(events, defender: str) -> list:
    return [e for e in events if e.name == "DisputeOpened" and e.args["taskId"] == TRAIN
            and e.args["defender"] == defender]


def test_sybil_verifiers_challenge_first_and_lose_while_the_honest_challenge_wins_succeeds(net):
    solver = net.start_node("flipper", 1, roles="solver", faults=["bitflip@step=15"])
    sybils = [net.start_node(f"sybil-{i}", i, roles="verifier", faults=["sybil-challenge", "silent-in-dispute"])
              for i in (2, 3)]
    for i in (5, 6, 7):
        net.start_node(f"referee-{i}", i, roles="referee")
    honest = net.start_node("verifier", 4, roles="verifier")
    net.wait_registered(7)
    wait_for(lambda: "running as verifier" in " ".join(honest.text().split()), 60, "the honest verifier to be staked")
    honest.pause()
    job_id = net.post(shards=1, rounds=1, steps=20, k=10, replication=1, challenge_window=CHALLENGE_WINDOW,
                      execution_window=EXECUTION_WINDOW)
    cheaters = {s.address for s in sybils}
    c = net.client()

    def sybil_clocks_left() -> list[int]:
        opened = [e for e in _opened(net.events(), solver.address) if e.args["challenger"] in cheaters]
        return [c.call(c.dispute_lens.functions.clocksRemaining(e.args["disputeId"]))[0] for e in opened]

    left = wait_for(lambda: len(left := sybil_clocks_left()) == 2 and left, 120, "both sybil challenges to open")
    net.advance_clock(max(left) - SYBIL_CLOCK_LEFT)  # the sybils are silent and the honest verifier paused: nobody moves
    wait_for(lambda: max(sybil_clocks_left()) <= SYBIL_CLOCK_LEFT, 60, "the sybils' clocks to run down")
    honest.resume()
    net.wait_job(job_id, timeout=360)

    events = net.events()
    wrong = next(e.args["finalHash"] for e in events if e.name == "ResultRevealed" and e.args["taskId"] == TRAIN)
    opened = _opened(events, solver.address)  # the challenges of the wrong result (epoch 0), in chain order
    assert len(opened) == 3 and {e.args["challenger"] for e in opened[:2]} == cheaters
    assert opened[2].args["challenger"] == honest.address
    committed = min(e.block for e in events
                    if e.name == "ChallengeCommitted" and e.args["challenger"] == honest.address)
    assert committed > max(e.block for e in opened[:2])  # committed after both sybil challenges were open

    resolved = {e.args["disputeId"]: e.args for e in events if e.name == "DisputeResolved"}
    ended = {e.args["disputeId"]: e.block for e in events if e.name == "DisputeResolved"}
    assert all(e.args["disputeId"] in ended for e in opened), "a challenge of the wrong result was never resolved"
    assert max(ended[e.args["disputeId"]] for e in opened[:2]) <= ended[opened[2].args["disputeId"]]
    seated = {e.args["disputeId"] for e in events if e.name == "RefereesSeated"}
    for e in opened[:2]:  # the sybils threw their disputes on their clocks: the wrong result "won" them
        r = resolved[e.args["disputeId"]]
        assert DisputeOutcome(r["outcome"]) == DisputeOutcome.DEFENDER_WINS
        assert r["winner"] == solver.address and r["loser"] == e.args["challenger"]
        assert e.args["disputeId"] not in seated
    r = resolved[opened[2].args["disputeId"]]  # ... which changed nothing for the honest challenge (P1)
    assert DisputeOutcome(r["outcome"]) == DisputeOutcome.CHALLENGER_WINS
    assert r["winner"] == honest.address and r["loser"] == solver.address
    assert not any(e.name == "DisputeAbandoned" for e in events)
    thrown = [e.args for e in events if e.name == "DisputeOpened" and e.args["challenger"] in cheaters]
    for d in thrown:  # every sybil challenge (they challenge every window: the honest result and the aggregate too)
        assert resolved[d["disputeId"]]["loser"] == d["challenger"], resolved[d["disputeId"]]
    moves = {"LeafRevealed", "StepRootSubmitted"}
    assert not any(e.name in moves and e.args["party"] in cheaters for e in events)  # they never moved

    replaced = [e.args for e in events if e.name == "CandidateReplaced" and e.args["taskId"] == TRAIN]
    assert [(x["candidate"], x["epoch"]) for x in replaced] == [(honest.address, 1)]
    accepted = [e.args for e in events if e.name == "TaskAccepted" and e.args["taskId"] == TRAIN]
    assert len(accepted) == 1 and bytes(accepted[0]["finalHash"]) == bytes(replaced[0]["finalHash"]) != bytes(wrong)
    task = read(c, c.jobs, "getTask", TRAIN)
    assert TaskStatus(task.status) == TaskStatus.ACCEPTED and task.candidate == honest.address

    for sybil in cheaters:
        rep = read(c, c.lens, "reputationOf", sybil)
        assert rep.totalSlashed > 0 and rep.disputesLost >= 1 and rep.disputesWon == 0
    rep = read(c, c.lens, "reputationOf", honest.address)
    assert rep.totalSlashed == 0 and rep.disputesLost == 0 and rep.disputesWon >= 1
    assert read(c, c.lens, "reputationOf", solver.address).totalSlashed > 0
    for sybil in sybils:
        assert "TEST-ONLY sybil-challenge" in " ".join(sybil.text().split())
    conserved(c)
