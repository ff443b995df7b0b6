"""Optimistic tasks, verifier challenges (commit, then reveal), late replicas and cancellation on a real anvil.

Protocol v2 (docs/protocol-v2.md): a challenge is committed, then revealed in a later block (P6); any number of
challenges may run against one candidate (P1); a winning challenger's result becomes the candidate and waits out
its own window (P3); disputes against a replaced candidate are stale and abandoned.
"""
from __future__ import annotations

import pytest
from ape import reverts

from verity.chain.protocol import POSTER_BOND

from chain_builders import (
    E18, DisputeOutcome, JobStatus, ReplicaStatus, TaskStatus, Trace, accept_aggregate, aggregate_input, challenge,
    commit_challenge, finalize_after_window, h32, mine_past, opened, paid_in, rand32, reveal_challenge, seat_panel,
    seats, vote,
)

pytestmark = pytest.mark.integration

STAKE = 100 * E18
PAYMENT = 10 * E18
NODE_STAKE = 1_000 * E18
LONG_WINDOW = (0, 0, 600)  # execution, reveal (defaults), challenge: room for several challenges


@pytest.fixture(scope="module")
def workers(nodes, accounts):
    """Six nodes with every role (4 GiB) and one big-memory node (8 GiB)."""
    small = nodes.add(accounts[2:8], memory_mb=4096, extra=50 * E18)  # extra: challenger bonds
    big = nodes.add(accounts[8:9], memory_mb=8192)
    return small + big


def _initial(system, task_id) -> bytes:
    return h32(system.jobs.getTask(task_id).inputHash)


def _others(workers, *exclude) -> list:
    out = {a.address for a in exclude}
    return [w for w in workers[:-1] if w.address not in out]


def _optimistic(poster, system, **kw):
    """A replication-1 job whose shard 0 was submitted with `trace(H)`; returns (job, task id, solver, H)."""
    job = poster.post(replication=1, payment=PAYMENT, stake=STAKE, **kw)
    tid = system.jobs.taskOf(job.id, 0, 0)
    H = Trace.random(_initial(system, tid), job.n)
    return job, tid, poster.node_of(tid, 0), H


def test_optimistic_job_challenge_window_then_finalize(system, workers, poster, chain, conserved):
    jobs, escrow, token = system.jobs, system.escrow, system.token
    job, tid, solver, H = _optimistic(poster, system)
    assert escrow.escrowOf(job.id) == PAYMENT * 1 * 2 * 1 + POSTER_BOND == job.params.escrow()
    r = poster.submit(tid, H)
    deadline = [e.deadline for e in r.events.filter(jobs.ChallengeWindowOpened)][0]
    assert jobs.getTask(tid).status == TaskStatus.REVEALED and jobs.getTask(tid).challengeDeadline == deadline
    # Past the window but inside the reveal grace: a challenge committed in time could still be revealed.
    mine_past(chain, deadline)
    with reverts(jobs.ChallengeWindowOpen):
        jobs.finalize(tid, sender=poster.account)
    bal = token.balanceOf(solver)
    r = finalize_after_window(system, chain, tid, poster.account)
    # P10: accepted and released, but paid only once its consumer (the AGGREGATE) is accepted.
    assert jobs.getTask(tid).status == TaskStatus.ACCEPTED and token.balanceOf(solver) == bal
    assert not list(r.events.filter(escrow.PaymentSent))
    assert jobs.getReplica(tid, 0).status == ReplicaStatus.ACCEPTED
    # The AGGREGATE task follows the same optimistic path and completes the job.
    agg = jobs.taskOf(job.id, 0, 1)
    assert h32(jobs.getTask(agg).inputHash) == aggregate_input([H.final])
    model = Trace([aggregate_input([H.final]), rand32()])
    poster.submit(agg, model, cid=b"\x11" * 32)
    r = finalize_after_window(system, chain, agg, poster.account)
    assert [h32(e.modelHash) for e in r.events.filter(jobs.JobCompleted)] == [model.final]
    agg_solver = jobs.getReplica(agg, 0).node
    assert [e.to for e in r.events.filter(escrow.PaymentSent)] == [solver.address, agg_solver]
    assert jobs.getJob(job.id).status == JobStatus.COMPLETED and escrow.escrowOf(job.id) == POSTER_BOND  # reclaimable
    assert system.registry.getNode(solver).locked == STAKE * sum(
        1 for x in jobs.getReplicas(agg) if x.node == solver.address and x.status == ReplicaStatus.ASSIGNED)
    system.escrow_backed()
    conserved()


def test_challengeOptimistic_copied_by_another_verifier_reverts(system, workers, poster, chain, conserved):
    """A copier of the commit and of the reveal earns nothing: the commitment binds the challenger's address."""
    jobs, game = system.jobs, system.game
    job, tid, solver, H = _optimistic(poster, system, steps=8, k=2)
    poster.submit(tid, H.diverging(3))  # a wrong result
    verifier, copier = _others(workers, solver)[:2]
    ch = commit_challenge(system, verifier, tid, H)
    system.game.commitChallenge(ch.commitment, sender=copier)  # copies the commit transaction too
    chain.mine()
    with reverts(game.ChallengeNotCommitted):
        reveal_challenge(system, ch, sender=copier)  # the same challengeOptimistic arguments, from the copier
    assert jobs.getTask(tid).openDisputes == 0 and system.registry.getNode(copier).locked == 0
    r = reveal_challenge(system, ch)  # the challenger's own reveal still works
    did = opened(system, r)
    d = system.dispute_lens.getDispute(did)
    assert d.taskId == tid and jobs.getTask(tid).openDisputes == 1
    assert [(e.challenger, e.defender) for e in r.events.filter(game.DisputeOpened)] == [
        (verifier.address, solver.address)]
    # The same commitment cannot be revealed twice.
    with reverts(game.ChallengeNotCommitted):
        reveal_challenge(system, ch)
    conserved()


def test_challengeOptimistic_committed_in_window_revealed_in_grace_succeeds(system, workers, poster, chain):
    """P1: a challenge committed by the deadline may be revealed during the reveal grace; one committed after the
    deadline may not; finalize waits for the revealed one."""
    jobs = system.jobs
    job, tid, solver, H = _optimistic(poster, system, steps=8, k=2)
    poster.submit(tid, H.diverging(3))
    early, late = _others(workers, solver)[:2]
    ch = commit_challenge(system, early, tid, H)
    deadline = jobs.getTask(tid).challengeDeadline
    mine_past(chain, deadline)
    assert chain.blocks.head.timestamp <= deadline + jobs.getJob(job.id).revealWindow
    tardy = commit_challenge(system, late, tid, H)
    chain.mine()
    with reverts():
        reveal_challenge(system, tardy)  # committed after the window closed
    r = reveal_challenge(system, ch)
    assert opened(system, r) and jobs.getTask(tid).openDisputes == 1
    with reverts(jobs.DisputesPending):
        finalize_after_window(system, chain, tid, poster.account)


def test_challengeOptimistic_two_concurrent_challenges_both_lose_then_finalize_succeeds(
        system, workers, poster, chain, conserved):
    """P1: two challenges run against one (honest) result at once; finalize waits for both to end."""
    jobs, game, registry, escrow, token = system.jobs, system.game, system.registry, system.escrow, system.token
    job, tid, solver, H = _optimistic(poster, system, steps=8, k=2, windows=LONG_WINDOW)
    poster.submit(tid, H)
    v1, v2 = _others(workers, solver)[:2]
    wrong = {v1: H.diverging(2), v2: H.diverging(3)}
    dids = {}
    for v, X in wrong.items():
        dids[v], _, _ = challenge(system, chain, v, tid, X)
    assert jobs.getTask(tid).openDisputes == 2 and len(set(dids.values())) == 2
    bond = game.challengerBond()
    assert game.totalBonds() == 2 * bond
    # The public path in each: the defender pinpoints the first differing checkpoint and submits its step root;
    # the challengers stay silent and lose on time.
    for v, X in wrong.items():
        i = next(j for j in range(H.n) if X.hashes[j + 1] != H.hashes[j + 1])
        game.pinpoint(dids[v], X.pinpoint(H, i), sender=solver)  # party A = the challenger
        sH = Trace([H.hashes[i], rand32(), H.hashes[i + 1]])
        game.submitStepRoot(dids[v], sH.root, sH.proof(0), sH.proof(2), sender=solver)
    mine_past(chain, chain.blocks.head.timestamp + game.clockAllowance())
    burned0 = token.totalBurned()
    bal0 = token.balanceOf(solver)
    r = game.timeout(dids[v1], sender=solver)
    assert [e.outcome for e in r.events.filter(game.DisputeResolved)] == [DisputeOutcome.DEFENDER_WINS]
    assert jobs.getTask(tid).openDisputes == 1
    with reverts(jobs.DisputesPending):
        finalize_after_window(system, chain, tid, poster.account)
    share = (STAKE + bond) * game.winnerShareBps() // 10_000
    assert token.balanceOf(solver) - bal0 == share  # the first loser's pot: the winner's share, paid at once
    game.timeout(dids[v2], sender=solver)
    assert jobs.getTask(tid).openDisputes == 0 and jobs.getTask(tid).status == TaskStatus.REVEALED
    # Each losing challenger lost its task stake and its bond: the pot, half to the defender, no referees.
    pot = STAKE + bond
    assert token.balanceOf(solver) - bal0 == 2 * (pot * game.winnerShareBps() // 10_000)
    assert token.totalBurned() - burned0 == 2 * (pot - pot * game.winnerShareBps() // 10_000)
    for v in wrong:
        assert registry.getNode(v).locked == 0 and registry.getNode(v).stake == NODE_STAKE - STAKE
    assert game.totalBonds() == 0
    bal = token.balanceOf(solver)
    r = finalize_after_window(system, chain, tid, poster.account)
    assert jobs.getTask(tid).status == TaskStatus.ACCEPTED and token.balanceOf(solver) == bal  # P10: deferred
    assert solver.address not in paid_in(system, r)
    assert accept_aggregate(system, chain, poster, job.id)[1] == [solver.address]
    assert token.balanceOf(game) == game.totalBonds() == 0  # rewards and bonds were paid at once
    conserved()


def test_challengeOptimistic_winner_becomes_candidate_and_stale_dispute_abandoned_succeeds(
        system, workers, poster, chain, conserved):
    """P3: the winning challenger's result is only a candidate with a fresh window; a dispute opened against the
    replaced result is stale: abandon releases its challenger unslashed with the bond back."""
    jobs, game, registry, token, escrow, panel = (system.jobs, system.game, system.registry, system.token,
                                                  system.escrow, system.panel)
    job, tid, solver, H = _optimistic(poster, system, steps=8, k=2, windows=LONG_WINDOW)
    C = H.diverging(3)
    poster.submit(tid, C)  # a wrong result
    honest, other = _others(workers, solver)[:2]
    X = H.diverging(2)  # another (wrong) challenge of the same result
    did_x, _, _ = challenge(system, chain, other, tid, X)
    bal0 = token.balanceOf(honest)
    did, ch, r = challenge(system, chain, honest, tid, H)
    bond = game.challengerBond()
    assert token.balanceOf(honest) == bal0 - bond and jobs.getTask(tid).openDisputes == 2
    assert registry.getNode(honest).locked >= STAKE
    epoch0 = jobs.getTask(tid).epoch

    # Public path: checkpoint 2 -> 3, both step roots, the step pinpointed, a panel of three recomputes it.
    game.pinpoint(did, H.pinpoint(C, 2), sender=honest)
    sH = Trace([H.hashes[2], rand32(), H.hashes[3]])
    sC = Trace([H.hashes[2], rand32(), C.hashes[3]])
    game.submitStepRoot(did, sH.root, sH.proof(0), sH.proof(2), sender=honest)
    game.submitStepRoot(did, sC.root, sC.proof(0), sC.proof(2), sender=solver)
    game.pinpoint(did, sH.pinpoint(sC, 0), sender=honest)
    seat_panel(system, chain, did)
    referees = [poster.by_address[a] for a in seats(system, did)]
    assert len(referees) == 3 and not {solver.address, honest.address} & {p.address for p in referees}
    burned0 = token.totalBurned()
    voted0 = {a.address: token.balanceOf(a) for a in (honest, *referees)}
    receipts = vote(system, did, {p: sH.hashes[1] for p in referees})
    last = receipts[-1]
    assert [(e.winner, e.outcome) for e in last.events.filter(game.DisputeResolved)] == [
        (honest.address, DisputeOutcome.CHALLENGER_WINS)]

    reward = STAKE * game.refereeShareBps() // 10_000
    each = reward // 3
    win = STAKE * game.winnerShareBps() // 10_000
    assert token.balanceOf(honest) - voted0[honest.address] == win + bond  # winner share + bond back, paid at once
    for p in referees:
        assert token.balanceOf(p) - voted0[p.address] == each
    assert token.totalBurned() - burned0 == STAKE - win - 3 * each
    assert registry.getNode(solver).stake == NODE_STAKE - STAKE
    assert jobs.getReplica(tid, 0).status == ReplicaStatus.SLASHED

    # The winner is the candidate, with its own window; the epoch moved on.
    t = jobs.getTask(tid)
    assert t.status == TaskStatus.REVEALED and t.candidate == honest.address and t.epoch == epoch0 + 1
    assert h32(t.finalHash) == H.final and h32(t.candidateRoot) == H.root and t.openDisputes == 0
    assert [(e.candidate, e.epoch) for e in last.events.filter(jobs.CandidateReplaced)] == [(honest.address, t.epoch)]
    claim = jobs.claimOf(tid)
    assert claim.defender == honest.address and h32(claim.root) == H.root

    # The other challenge was against the replaced result: stale.
    other0 = token.balanceOf(other)
    r = game.abandon(did_x, sender=solver)
    assert [e.disputeId for e in r.events.filter(game.DisputeAbandoned)] == [did_x]
    assert token.balanceOf(other) - other0 == bond and registry.getNode(other).locked == 0  # the bond back at once
    assert registry.getNode(other).stake == NODE_STAKE

    with reverts(jobs.ChallengeWindowOpen):
        jobs.finalize(tid, sender=poster.account)
    bal = token.balanceOf(honest)
    r = finalize_after_window(system, chain, tid, poster.account)
    assert jobs.getTask(tid).status == TaskStatus.ACCEPTED and token.balanceOf(honest) == bal  # P10: deferred
    assert honest.address not in paid_in(system, r)
    r, paid = accept_aggregate(system, chain, poster, job.id)
    assert paid == [honest.address]  # the challenger did the work
    assert game.totalBonds() == 0
    earned = paid_in(system, r)[honest.address]  # PAYMENT, plus the AGGREGATE's if it was drawn for it
    assert token.balanceOf(honest) == bal + earned  # sent at once: nothing to withdraw from the escrow
    assert token.balanceOf(honest) == bal0 + win + earned  # bond returned too, with nothing to withdraw from the game
    system.panel_backed()
    system.escrow_backed()
    conserved()


def test_challengeOptimistic_colluding_replicas_agreement_is_not_final_succeeds(system, workers, poster, chain,
                                                                                  conserved):
    """P2: two replicas that agree on a wrong result only make a candidate; a verifier's challenge beats both (the
    second replica is the co-defender) and its result becomes the candidate."""
    jobs, game, escrow = system.jobs, system.game, system.escrow
    job = poster.post(replication=2, payment=PAYMENT, stake=STAKE, steps=8, k=2)
    tid = jobs.taskOf(job.id, 0, 0)
    H = Trace.random(_initial(system, tid), job.n)
    C = H.diverging(3)
    a, b = poster.node_of(tid, 0), poster.node_of(tid, 1)
    poster.run_replicated(tid, [C, C])  # the same wrong trace: agreement
    assert jobs.getTask(tid).status == TaskStatus.REVEALED
    claim = jobs.claimOf(tid)
    assert {claim.defender, claim.coDefender} == {a.address, b.address} and h32(claim.finalHash) == C.final
    verifier = _others(workers, a, b)[0]
    with reverts(game.ChallengerIsDefender):
        reveal_challenge(system, commit_challenge(system, b, tid, H))  # a replica cannot challenge its own claim
    did, _, _ = challenge(system, chain, verifier, tid, H)
    defender = poster.by_address[claim.defender]
    game.pinpoint(did, H.pinpoint(C, 2), sender=verifier)
    sH = Trace([H.hashes[2], rand32(), H.hashes[3]])
    sC = Trace([H.hashes[2], rand32(), C.hashes[3]])
    game.submitStepRoot(did, sH.root, sH.proof(0), sH.proof(2), sender=verifier)
    game.submitStepRoot(did, sC.root, sC.proof(0), sC.proof(2), sender=defender)
    game.pinpoint(did, sH.pinpoint(sC, 0), sender=verifier)
    seat_panel(system, chain, did)
    referees = [poster.by_address[x] for x in seats(system, did)]
    assert not {a.address, b.address, verifier.address} & {p.address for p in referees}
    r = vote(system, did, {p: sH.hashes[1] for p in referees})[-1]
    assert [(e.winner, e.outcome) for e in r.events.filter(game.DisputeResolved)] == [
        (verifier.address, DisputeOutcome.CHALLENGER_WINS)]
    t = jobs.getTask(tid)
    assert t.status == TaskStatus.REVEALED and t.candidate == verifier.address and h32(t.finalHash) == H.final
    statuses = {x.node: x.status for x in jobs.getReplicas(tid)}
    assert statuses[defender.address] == ReplicaStatus.SLASHED
    assert statuses[claim.coDefender] in (ReplicaStatus.SLASHED, ReplicaStatus.VOIDED)
    finalize_after_window(system, chain, tid, poster.account)
    assert accept_aggregate(system, chain, poster, job.id)[1] == [verifier.address]  # neither a nor b
    system.escrow_backed()
    conserved()


def test_late_replica_reported_and_slot_redrawn(system, workers, poster, chain, conserved):
    jobs, registry, token, escrow = system.jobs, system.registry, system.token, system.escrow
    job = poster.post(replication=2, payment=PAYMENT, stake=STAKE)
    tid = jobs.taskOf(job.id, 0, 0)
    first, late = poster.node_of(tid, 0), poster.node_of(tid, 1)
    H = Trace.random(_initial(system, tid), job.n)
    poster.commit(tid, 0, H)
    deadline = jobs.getReplica(tid, 1).deadline
    with reverts(jobs.SlotNotLate):
        jobs.reportLate(tid, 1, sender=poster.account)
    mine_past(chain, deadline)
    burned0 = token.totalBurned()
    r = jobs.reportLate(tid, 1, sender=poster.account)
    slashed = STAKE * jobs.lateSlashBps() // 10_000
    assert [(e.node, e.slot, e.slashed) for e in r.events.filter(jobs.ReplicaLate)] == [(late.address, 1, slashed)]
    assert not list(r.events.filter(jobs.TaskAssigned)) and jobs.getTask(tid).status == TaskStatus.OPEN
    redrawn = [(e.slot, e.node) for e in poster.draw(tid).events.filter(jobs.TaskAssigned)]
    assert len(redrawn) == 1 and redrawn[0][0] == 1 and redrawn[0][1] not in (first.address, late.address)
    assert token.totalBurned() - burned0 == slashed
    n = registry.getNode(late)
    assert n.stake == NODE_STAKE - slashed and n.locked == 0
    assert system.lens.reputationOf(late).tasksLate == 1
    assert late.address in list(jobs.bannedOf(tid))

    # The newcomer is the last to commit: its reveal also reveals the first's equal commitment; equal results
    # wait out the window, then finalize accepts.
    poster.reveal(tid, 1, H)
    assert jobs.getTask(tid).status == TaskStatus.REVEALED
    finalize_after_window(system, chain, tid, poster.account)
    assert jobs.getTask(tid).status == TaskStatus.ACCEPTED
    paid = accept_aggregate(system, chain, poster, job.id)[1]
    assert sorted(paid) == sorted([first.address, redrawn[0][1]]) and late.address not in paid
    conserved()


def test_cancel_before_any_assignment_refunds_everything(system, workers, poster, conserved):
    jobs, token, escrow = system.jobs, system.token, system.escrow
    job = poster.post(replication=2, payment=PAYMENT, stake=STAKE, memory_mb=1 << 30)
    tid = jobs.taskOf(job.id, 0, 0)
    assert job.draws == [] and jobs.getTask(tid).status == TaskStatus.OPEN
    with reverts(jobs.NoEligibleNode):
        jobs.assign(tid, sender=poster.account)
    amount = escrow.escrowOf(job.id)
    before = token.balanceOf(poster.account)
    r = jobs.cancelJob(job.id, sender=poster.account)
    assert [e.refund for e in r.events.filter(jobs.JobCancelled)] == [amount]
    assert token.balanceOf(poster.account) == before + amount
    assert jobs.getJob(job.id).status == JobStatus.CANCELLED and jobs.getTask(tid).status == TaskStatus.CANCELLED
    assert escrow.totalEscrow() == 0 and escrow.escrowOf(job.id) == 0
    conserved()


def test_cancel_starved_job_after_assignment_timeout(system, workers, poster, chain, conserved):
    jobs, registry, token, escrow = system.jobs, system.registry, system.token, system.escrow
    big = workers[-1]
    job = poster.post(replication=2, payment=PAYMENT, stake=STAKE, memory_mb=8192)  # one eligible node for 2 slots
    tid = jobs.taskOf(job.id, 0, 0)
    assert [e.node for e in job.draws[0].events.filter(jobs.TaskAssigned)] == [big.address]
    assert jobs.getTask(tid).status == TaskStatus.OPEN and registry.getNode(big).locked == STAKE
    with reverts(jobs.CancelNotAllowed):
        jobs.cancelJob(job.id, sender=poster.account)
    mine_past(chain, jobs.getTask(tid).openSince + jobs.assignmentTimeout())
    before = token.balanceOf(poster.account)
    amount = escrow.escrowOf(job.id)
    jobs.cancelJob(job.id, sender=poster.account)
    assert token.balanceOf(poster.account) == before + amount
    assert registry.getNode(big).locked == 0
    assert [x.status for x in jobs.getReplicas(tid)][0] == ReplicaStatus.VOIDED
    conserved()
