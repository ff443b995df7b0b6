"""Optimistic tasks, verifier challenges, late replicas and cancellation on a real anvil."""
from __future__ import annotations

import pytest
from ape import reverts

from chain_builders import (
    E18, J_CANCELLED, J_COMPLETED, O_CHALLENGER, R_ACCEPTED, R_ASSIGNED, R_LATE, R_SLASHED, R_VOIDED, T_ACCEPTED,
    T_CANCELLED, T_CONTESTED, T_OPEN, T_REVEALED, Trace, aggregate_input, h32, rand32, vote,
)

pytestmark = pytest.mark.integration

STAKE = 100 * E18
PAYMENT = 10 * E18
NODE_STAKE = 1_000 * E18


@pytest.fixture(scope="module")
def workers(nodes, accounts):
    """Five nodes with every role (4 GiB) and one big-memory node (8 GiB)."""
    small = nodes.add(accounts[2:7], memory_mb=4096, extra=50 * E18)  # extra: challenger bonds
    big = nodes.add(accounts[7:8], memory_mb=8192)
    return small + big


def _past(chain, deadline: int) -> None:
    chain.mine(deltatime=int(deadline) - chain.blocks.head.timestamp + 1)


def _initial(system, task_id) -> bytes:
    return h32(system.jobs.getTask(task_id).inputHash)


def test_optimistic_job_challenge_window_then_finalize(system, workers, poster, chain, conserved):
    jobs = system.jobs
    job = poster.post(replication=1, payment=PAYMENT, stake=STAKE)
    assert jobs.getJob(job.id).escrow == PAYMENT * 1 * 2 * 1
    tid = jobs.taskOf(job.id, 0, 0)
    solver = poster.node_of(tid, 0)
    H = Trace.random(_initial(system, tid), job.n)
    r = poster.submit(tid, H)
    deadline = [e.deadline for e in r.events.filter(jobs.ChallengeWindowOpened)][0]
    assert jobs.getTask(tid).status == T_REVEALED and jobs.getTask(tid).challengeDeadline == deadline
    with reverts(jobs.ChallengeWindowOpen):
        jobs.finalize(tid, sender=poster.account)
    _past(chain, deadline)
    r = jobs.finalize(tid, sender=poster.account)
    assert jobs.getTask(tid).status == T_ACCEPTED and jobs.credits(solver) == PAYMENT
    assert jobs.getReplica(tid, 0).status == R_ACCEPTED
    # The AGGREGATE task follows the same optimistic path and completes the job.
    agg = jobs.taskOf(job.id, 0, 1)
    assert h32(jobs.getTask(agg).inputHash) == aggregate_input([H.final])
    model = Trace([aggregate_input([H.final]), rand32()])
    r = poster.submit(agg, model, cid=b"\x11" * 32)
    _past(chain, jobs.getTask(agg).challengeDeadline)
    r = jobs.finalize(agg, sender=poster.account)
    assert [h32(e.modelHash) for e in r.events.filter(jobs.JobCompleted)] == [model.final]
    assert jobs.getJob(job.id).status == J_COMPLETED and jobs.getJob(job.id).escrow == 0
    assert system.registry.getNode(solver).locked == STAKE * sum(
        1 for x in jobs.getReplicas(agg) if x.node == solver.address and x.status == R_ASSIGNED)
    conserved()


def test_verifier_challenge_wins_and_is_paid(system, workers, poster, chain, conserved):
    jobs, game, registry, token = system.jobs, system.game, system.registry, system.token
    job = poster.post(replication=1, payment=PAYMENT, stake=STAKE, steps=8, k=2)
    tid = jobs.taskOf(job.id, 0, 0)
    solver = poster.node_of(tid, 0)
    H = Trace.random(_initial(system, tid), job.n)
    C = H.diverging(3)
    poster.submit(tid, C)  # a wrong result
    verifier = next(w for w in workers if w.address != solver.address)
    bal0 = token.balanceOf(verifier)
    r = game.challengeOptimistic(tid, H.root, H.final, H.n, rand32(), H.proof(0), H.proof(H.n), sender=verifier)
    did = [e.disputeId for e in r.events.filter(game.DisputeOpened)][0]
    bond = game.challengerBond()
    assert token.balanceOf(verifier) == bal0 - bond and game.totalBonds() == bond
    assert jobs.getTask(tid).status == T_CONTESTED
    assert registry.getNode(verifier).locked >= STAKE

    # Public path: anyone pinpoints checkpoint 2 -> 3, both submit step roots, level-1 pinpoint, panel votes.
    game.pinpoint(did, H.pinpoint(C, 2), sender=verifier)
    sH = Trace([H.hashes[2], rand32(), H.hashes[3]])
    sC = Trace([H.hashes[2], rand32(), C.hashes[3]])
    game.submitStepRoot(did, sH.root, sH.proof(0), sH.proof(2), sender=verifier)
    game.submitStepRoot(did, sC.root, sC.proof(0), sC.proof(2), sender=solver)
    game.pinpoint(did, sH.pinpoint(sC, 0), sender=verifier)
    panel = [poster.by_address[a] for a in game.panelOf(did)]
    assert len(panel) == 3 and not {solver.address, verifier.address} & {p.address for p in panel}
    vote(game, did, {p: sH.hashes[1] for p in panel})
    burned0 = token.totalBurned()
    r = game.resolve(did, sender=verifier)
    assert [(e.winner, e.outcome) for e in r.events.filter(game.DisputeResolved)] == [(verifier.address, O_CHALLENGER)]

    each = (STAKE * 2_500 // 10_000) // 3
    assert game.credits(verifier) == STAKE // 2 + bond  # winner share + bond back
    assert token.totalBurned() - burned0 == STAKE - STAKE // 2 - 3 * each
    assert registry.getNode(solver).stake == NODE_STAKE - STAKE
    assert jobs.getReplica(tid, 0).status == R_SLASHED
    t = jobs.getTask(tid)
    assert t.status == T_ACCEPTED and h32(t.finalHash) == H.final
    assert jobs.credits(verifier) == PAYMENT and jobs.credits(solver) == 0  # the challenger did the work
    assert game.totalBonds() == 0
    game.withdraw(sender=verifier)
    jobs.withdrawPayment(sender=verifier)
    assert token.balanceOf(verifier) == bal0 + STAKE // 2 + PAYMENT  # bond returned too
    conserved()


def test_late_replica_reported_and_slot_redrawn(system, workers, poster, chain, conserved):
    jobs, registry, token = system.jobs, system.registry, system.token
    job = poster.post(replication=2, payment=PAYMENT, stake=STAKE)
    tid = jobs.taskOf(job.id, 0, 0)
    first, late = poster.node_of(tid, 0), poster.node_of(tid, 1)
    H = Trace.random(_initial(system, tid), job.n)
    poster.commit(tid, 0, H)
    deadline = jobs.getReplica(tid, 1).deadline
    with reverts(jobs.SlotNotLate):
        jobs.reportLate(tid, 1, sender=poster.account)
    _past(chain, deadline)
    burned0 = token.totalBurned()
    r = jobs.reportLate(tid, 1, sender=poster.account)
    slashed = STAKE * jobs.lateSlashBps() // 10_000
    assert [(e.node, e.slot, e.slashed) for e in r.events.filter(jobs.ReplicaLate)] == [(late.address, 1, slashed)]
    redrawn = [(e.slot, e.node) for e in r.events.filter(jobs.TaskAssigned)]
    assert len(redrawn) == 1 and redrawn[0][0] == 1 and redrawn[0][1] not in (first.address, late.address)
    assert token.totalBurned() - burned0 == slashed
    n = registry.getNode(late)
    assert n.stake == NODE_STAKE - slashed and n.locked == 0
    assert registry.reputationOf(late).tasksLate == 1
    assert late.address in list(jobs.bannedOf(tid))

    # The newcomer commits; reveals open for both; equal finals accept the task.
    poster.commit(tid, 1, H)
    poster.reveal(tid, 0, H)
    poster.reveal(tid, 1, H)
    assert jobs.getTask(tid).status == T_ACCEPTED
    assert jobs.credits(first) == PAYMENT and jobs.credits(redrawn[0][1]) == PAYMENT and jobs.credits(late) == 0
    conserved()


def test_cancel_before_any_assignment_refunds_everything(system, workers, poster, conserved):
    jobs, token = system.jobs, system.token
    job = poster.post(replication=2, payment=PAYMENT, stake=STAKE, memory_mb=1 << 30)
    tid = jobs.taskOf(job.id, 0, 0)
    assert list(job.receipt.events.filter(jobs.TaskAssigned)) == [] and jobs.getTask(tid).status == T_OPEN
    with reverts(jobs.NoEligibleNode):
        jobs.assign(tid, sender=poster.account)
    escrow = jobs.getJob(job.id).escrow
    before = token.balanceOf(poster.account)
    r = jobs.cancelJob(job.id, sender=poster.account)
    assert [e.refund for e in r.events.filter(jobs.JobCancelled)] == [escrow]
    assert token.balanceOf(poster.account) == before + escrow
    assert jobs.getJob(job.id).status == J_CANCELLED and jobs.getTask(tid).status == T_CANCELLED
    assert jobs.totalEscrow() == 0
    conserved()


def test_cancel_starved_job_after_assignment_timeout(system, workers, poster, chain, conserved):
    jobs, registry, token = system.jobs, system.registry, system.token
    big = workers[-1]
    job = poster.post(replication=2, payment=PAYMENT, stake=STAKE, memory_mb=8192)  # one eligible node for 2 slots
    tid = jobs.taskOf(job.id, 0, 0)
    assert [e.node for e in job.receipt.events.filter(jobs.TaskAssigned)] == [big.address]
    assert jobs.getTask(tid).status == T_OPEN and registry.getNode(big).locked == STAKE
    with reverts(jobs.CancelNotAllowed):
        jobs.cancelJob(job.id, sender=poster.account)
    _past(chain, jobs.getTask(tid).openSince + jobs.assignmentTimeout())
    before = token.balanceOf(poster.account)
    escrow = jobs.getJob(job.id).escrow
    jobs.cancelJob(job.id, sender=poster.account)
    assert token.balanceOf(poster.account) == before + escrow
    assert registry.getNode(big).locked == 0
    assert [x.status for x in jobs.getReplicas(tid)][0] == R_VOIDED
    conserved()
