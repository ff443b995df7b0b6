"""v2 through real node processes: two colluding replicas agree on a wrong result; agreement is not finality (P2),
so an honest verifier's committed challenge catches it, the referee panel decides, the challenger's result becomes
the candidate (P3) and the job completes with it."""
from __future__ import annotations

import pytest

from node_builders import conserved
from verity.chain.protocol import DisputeOutcome, TaskStatus
from verity.chain.views import read

pytestmark = pytest.mark.integration


def test_colluding_replicas_agree_on_a_wrong_result_and_a_verifier_catches_it_succeeds(net):
    flippers = [net.start_node(f"flipper-{i}", i, roles="solver", faults=["bitflip@step=15"]) for i in (1, 2)]
    verifier = net.start_node("verifier", 3, roles="verifier")
    for i in (4, 5, 6):
        net.start_node(f"referee-{i}", i, roles="referee")
    net.wait_registered(6)
    job_id = net.post(shards=1, rounds=1, steps=20, k=10, replication=2, execution_window=60)
    net.wait_job(job_id, timeout=360)

    events = net.events()
    cheaters = {f.address for f in flippers}
    train = 1  # shard 0 of round 0
    reveals = [e.args for e in events if e.name == "ResultRevealed" and e.args["taskId"] == train]
    assert {r["node"] for r in reveals} == cheaters and len({r["finalHash"] for r in reveals}) == 1  # they agreed
    assert not any(e.name == "TaskContested" and e.args["taskId"] == train for e in events)

    committed = [e for e in events if e.name == "ChallengeCommitted" and e.args["challenger"] == verifier.address]
    opened = [e for e in events if e.name == "DisputeOpened" and e.args["taskId"] == train]
    assert len(committed) == 1 and len(opened) == 1
    assert opened[0].block > committed[0].block  # the reveal came in a later block (P6)
    did = opened[0].args["disputeId"]
    assert opened[0].args["challenger"] == verifier.address and opened[0].args["defender"] in cheaters
    c = net.client()
    d = read(c, c.dispute_lens, "getDispute", did)
    assert {opened[0].args["defender"], d.coDefender} == cheaters  # the other replica defends the same trace

    assert [e.args["step"] for e in events if e.name == "StepPinpointed"] == [14]
    seated = [e.args for e in events if e.name == "RefereesSeated" and e.args["disputeId"] == did]
    assert seated and not set(seated[-1]["referees"]) & (cheaters | {verifier.address})
    resolved = [e.args for e in events if e.name == "DisputeResolved"]
    assert len(resolved) == 1 and DisputeOutcome(resolved[0]["outcome"]) == DisputeOutcome.CHALLENGER_WINS
    assert resolved[0]["winner"] == verifier.address

    replaced = [e.args for e in events if e.name == "CandidateReplaced" and e.args["taskId"] == train]
    assert len(replaced) == 1 and replaced[0]["candidate"] == verifier.address and replaced[0]["epoch"] == 1
    task = read(c, c.jobs, "getTask", train)
    assert TaskStatus(task.status) == TaskStatus.ACCEPTED and task.candidate == verifier.address
    assert bytes(task.finalHash) == bytes(replaced[0]["finalHash"]) != bytes(reveals[0]["finalHash"])
    # fate follows claims: the replica whose per-step trace the referees judged wrong is slashed; its co-defender
    # made no step-level claim and is spared (an honest co-defender cannot be sunk by a lying defender's step root)
    steppers = {e.args["party"] for e in events if e.name == "StepRootSubmitted" and e.args["disputeId"] == did}
    loser = resolved[0]["loser"]
    assert loser in cheaters and steppers & cheaters == {loser}
    assert read(c, c.lens, "reputationOf", loser).totalSlashed > 0
    assert read(c, c.lens, "reputationOf", (cheaters - {loser}).pop()).totalSlashed == 0
    assert read(c, c.lens, "reputationOf", verifier.address).totalSlashed == 0
    assert "challenge committed" in " ".join(verifier.text().split())  # (the log wraps lines)
    conserved(c)
