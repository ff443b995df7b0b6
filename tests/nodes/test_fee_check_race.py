"""Issue 23, item 8 through real node processes: a solver that fabricates and submits at once still meets a fee check.

A verification fee is paid only for a check committed before any result of the task is public (ResultPublic), and a
verifier at sampling rate 0 checks a task only because its fee ticket sampled it. Before the result floor a solver
that never trains (TEST-ONLY `lazy`) submitted as soon as it was drawn; the fee-paid verifier, also a solver and so
waiting for the draw before re-executing (it never checks a task that may become its own), lost the commit race, ended
its check "too late" and, unsampled, never looked again: the fabricated result was accepted and paid.

Here the job declares a result floor (`--result-floor`; a job with a verification pot gets one by default): no
result leaves a replica earlier than that after its assignment, the verifier's blind check lands first, and the verifier challenges
the fabricated result it already knows is wrong. The cheater is drawn alone (the only node in the job's region), so
every result of the job is its own; the test follows its TRAIN task."""
from __future__ import annotations

import pytest

from node_builders import SUBMITTER, conserved, wait_for, warp_to
from verity.chain.protocol import DisputeOutcome, TaskStatus
from verity.chain.views import read

pytestmark = pytest.mark.integration

TRAIN = 1  # shard 0 of round 0
FEE = 10**18
FLOOR = 15
ZERO32 = b"\0" * 32


def test_a_solver_that_fabricates_and_submits_at_once_meets_a_paid_fee_check_succeeds(net):
    cheat = net.start_node("lazy", 1, roles="solver", faults=["lazy"], options=("--region", "europe"))
    auditor = net.start_node("auditor", 2, roles="solver,verifier", options=("--sample-rate", "0"))
    for i in (3, 4, 5):
        net.start_node(f"referee-{i}", i, roles="referee")
    net.wait_registered(5)
    c = net.client()
    epoch_s = c.call(c.fees.functions.epochSeconds())
    chain = wait_for(lambda: (ch := c.call(c.fees.functions.chainOf(auditor.address)))[0] != ZERO32 and ch, 60,
                     "the auditor's fee key chain anchor")
    warp_to(c, (chain[2] + 1) * epoch_s)  # tasks of the anchor epoch have no ticket
    net.next_epoch()  # every node is drawn from here on
    # 15 s: the automatic floor (4 s for this tiny task) is the devnet's quiet-machine figure; under a loaded CI
    # machine the auditor's check took longer, and this test is about the floor, not about its default
    job_id = net.post(shards=1, rounds=1, steps=20, k=10, replication=1, challenge_window=30, execution_window=60,
                      region="europe", verification_fee=FEE / 10**18, fee_sample_rate=1.0, result_floor=FLOOR)
    sub = net.client(SUBMITTER)  # funded here, as `verity job submit` does after posting (fund_pot_web3)
    sub.transact(sub.token.functions.approve(sub.fees.address, 5 * FEE))
    sub.transact(sub.fees.functions.fund(job_id, 5 * FEE, FEE, 2, 10_000))  # every verifier sampled for a fee
    # the TRAIN task only: the job's AGGREGATE is the cheater's too (alone in its region), and once it is caught
    # there as well nobody is left to draw
    net.wait_until(lambda: TaskStatus(read(c, c.jobs, "getTask", TRAIN).status) == TaskStatus.ACCEPTED, 300,
                   "the TRAIN task's acceptance")

    events = net.events()
    submitted = [e for e in events if e.name == "ResultRevealed" and e.args["taskId"] == TRAIN]
    checked = [e for e in events if e.name == "CheckCommitted" and e.args["taskId"] == TRAIN]
    assert submitted and submitted[0].args["node"] == cheat.address
    assert checked and checked[0].block < submitted[0].block, \
        f"the fee check (blocks {[e.block for e in checked]}) was not committed before the fabricated result " \
        f"(block {submitted[0].block})"
    wrong = bytes(submitted[0].args["finalHash"])
    resolved = [e.args for e in events if e.name == "DisputeResolved" and e.args["taskId"] == TRAIN]
    assert [(DisputeOutcome(r["outcome"]), r["winner"], r["loser"]) for r in resolved] == \
        [(DisputeOutcome.CHALLENGER_WINS, auditor.address, cheat.address)], resolved
    accepted = [e.args for e in events if e.name == "TaskAccepted" and e.args["taskId"] == TRAIN]
    assert len(accepted) == 1 and bytes(accepted[0]["finalHash"]) != wrong
    task = read(c, c.jobs, "getTask", TRAIN)
    assert TaskStatus(task.status) == TaskStatus.ACCEPTED and task.candidate == auditor.address
    assert read(c, c.lens, "reputationOf", cheat.address).totalSlashed > 0
    assert read(c, c.lens, "reputationOf", auditor.address).totalSlashed == 0
    assert read(c, c.jobs, "getJob", job_id).resultFloor == FLOOR
    conserved(c)
