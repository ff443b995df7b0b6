"""Disputes on a real anvil: public-trace path, clock timeout, panel outcomes, non-revealing referee.

Nodes: four solver/verifier nodes and three referee-only nodes, so the panel of a
replicated dispute is always the three referees and both parties are solvers.
"""
from __future__ import annotations

import pytest
from ape import reverts

from chain_builders import (
    E18, O_BOTH, O_CHALLENGER, P_RESOLVED, P_STEPROOTS, P_VOTING, R_ASSIGNED, R_SLASHED, ROLE_REFEREE,
    ROLE_SOLVER, ROLE_VERIFIER, T_ACCEPTED, T_ASSIGNED, contest, h32, rand32, vote,
)

pytestmark = pytest.mark.integration

STAKE = 100 * E18
NODE_STAKE = 1_000 * E18


@pytest.fixture(scope="module")
def solvers(nodes, accounts):
    return nodes.add(accounts[2:6], roles=ROLE_SOLVER | ROLE_VERIFIER, stake=NODE_STAKE)


@pytest.fixture(scope="module")
def referees(nodes, accounts, solvers):
    return nodes.add(accounts[6:9], roles=ROLE_REFEREE, stake=NODE_STAKE)


@pytest.fixture
def contested(poster, solvers, referees):
    """Builder: `contested(**kw)` -> a Contest (slot 0 honest, slot 1 cheater) on a fresh job."""
    return lambda **kw: contest(poster, stake=STAKE, **kw)


def _open_public(system, c):
    """Honest party A opens with a level-0 pinpoint; both submit step roots. Returns the dispute id."""
    game = system.game
    r = game.openDisputeWithPinpoint(c.task_id, c.H.pinpoint(c.C, c.segment), sender=c.honest)
    did = [e.disputeId for e in r.events.filter(game.DisputeOpened)][0]
    pin = list(r.events.filter(game.CheckpointPinpointed))
    assert [(e.index, h32(e.claimA), h32(e.claimB)) for e in pin] == [(c.segment, c.H.hashes[c.segment + 1],
                                                                      c.C.hashes[c.segment + 1])]
    assert game.getDispute(did).phase == P_STEPROOTS
    for party, s in ((c.honest, c.sH), (c.cheater, c.sC)):
        game.submitStepRoot(did, s.root, s.proof(0), s.proof(s.n), sender=party)
    return did


def _held(jobs, c, node) -> int:
    """Replicas `node` holds in the job's AGGREGATE task (created when the disputed shard is accepted)."""
    agg = jobs.taskOf(c.job.id, 0, 1)
    return sum(1 for x in jobs.getReplicas(agg) if x.node == node.address and x.status == R_ASSIGNED)


def _game_backed(system):
    game = system.game
    assert system.token.balanceOf(game) == game.totalCredits() + game.totalBonds()


def test_honest_wins_public_trace_path_with_bisection(system, contested, referees, conserved):
    game, jobs, registry, token = system.game, system.jobs, system.registry, system.token
    c = contested(n=8, k=4, diverge=5, step=2)
    did = _open_public(system, c)
    # Level 1 by bisection: [0, 4] -> mid 2 (agreed) -> mid 3 (differs) -> step 2 pinpointed.
    for idx in (2, 3):
        assert game.getDispute(did).mid == idx
        game.revealLeaf(did, 1, idx, c.sH.hashes[idx], c.sH.proof(idx), sender=c.honest)
        r = game.revealLeaf(did, 1, idx, c.sC.hashes[idx], c.sC.proof(idx), sender=c.cheater)
    stepped = list(r.events.filter(game.StepPinpointed))
    assert [e.step for e in stepped] == [c.segment * 4 + c.step]
    d = game.getDispute(did)
    assert d.phase == P_VOTING and game.disputedStep(did) == c.segment * 4 + c.step
    panel = list(game.panelOf(did))
    assert sorted(panel) == sorted(a.address for a in referees)
    for ref in referees:
        assert registry.getNode(ref).locked == game.refereeStake()

    honest_vote = c.sH.hashes[c.step + 1]
    vote(game, did, {ref: honest_vote for ref in referees})
    burned0 = token.totalBurned()
    r = game.resolve(did, sender=c.honest)
    res = list(r.events.filter(game.DisputeResolved))
    assert [(e.winner, e.loser, e.outcome) for e in res] == [(c.honest.address, c.cheater.address, O_CHALLENGER)]

    # Slashed pot = the cheater's task stake: 50% winner, 25% split over 3 revealing referees, rest burned.
    each = (STAKE * 2_500 // 10_000) // 3
    assert game.credits(c.honest) == STAKE // 2
    for ref in referees:
        assert game.credits(ref) == each and registry.getNode(ref).locked == 0
    assert token.totalBurned() - burned0 == STAKE - STAKE // 2 - 3 * each
    assert registry.getNode(c.cheater).stake == NODE_STAKE - STAKE
    assert registry.getNode(c.cheater).locked == STAKE * _held(jobs, c, c.cheater)
    # The honest node's task lock is released (it may hold a new lock if drawn for the AGGREGATE task).
    assert registry.getNode(c.honest).locked == STAKE * _held(jobs, c, c.honest)
    assert registry.reputationOf(c.cheater).disputesLost == 1 and registry.reputationOf(c.honest).disputesWon == 1

    # The task is accepted with the honest result; only the honest replica is paid.
    t = jobs.getTask(c.task_id)
    assert t.status == T_ACCEPTED and h32(t.finalHash) == c.H.final
    assert [x.status for x in jobs.getReplicas(c.task_id)][1] == R_SLASHED
    assert jobs.credits(c.honest) == c.job.params[7] and jobs.credits(c.cheater) == 0
    _game_backed(system)

    before = token.balanceOf(c.honest)
    game.withdraw(sender=c.honest)
    jobs.withdrawPayment(sender=c.honest)
    assert token.balanceOf(c.honest) == before + STAKE // 2 + c.job.params[7]
    for ref in referees:
        game.withdraw(sender=ref)
    _game_backed(system)
    conserved()


def test_level1_pinpoint_and_timeout_of_a_silent_party(system, contested, chain, conserved):
    """The cheater never submits its step root; its clock runs out and anyone may call timeout."""
    game, registry, token, jobs = system.game, system.registry, system.token, system.jobs
    c = contested(n=8, k=4, diverge=3, step=0)
    r = game.openDisputeWithPinpoint(c.task_id, c.H.pinpoint(c.C, c.segment), sender=c.honest)
    did = [e.disputeId for e in r.events.filter(game.DisputeOpened)][0]
    game.submitStepRoot(did, c.sH.root, c.sH.proof(0), c.sH.proof(c.sH.n), sender=c.honest)
    with reverts(game.ClockNotExpired):
        game.timeout(did, sender=c.honest)
    a_left, b_left = game.clocksRemaining(did)
    # A's clock ran only from the opening block to its step root (blocks take wall-clock timestamps: ≤ a few s)
    # and is stopped now; B's keeps running.
    assert game.clockAllowance() - 5 <= a_left <= game.clockAllowance() and 0 < b_left <= game.clockAllowance()
    chain.mine(deltatime=game.clockAllowance() + 5)
    assert game.clocksRemaining(did) == (a_left, 0)  # A's stopped clock did not move; B's ran out
    burned0 = token.totalBurned()
    r = game.timeout(did, sender=c.honest)
    assert [(e.winner, e.outcome) for e in r.events.filter(game.DisputeResolved)] == [(c.honest.address, O_CHALLENGER)]
    assert game.getDispute(did).phase == P_RESOLVED
    # No panel was seated: half the pot to the winner, the rest burned.
    assert game.credits(c.honest) == STAKE // 2 and token.totalBurned() - burned0 == STAKE // 2
    assert registry.getNode(c.cheater).stake == NODE_STAKE - STAKE
    assert jobs.getTask(c.task_id).status == T_ACCEPTED
    _game_backed(system)
    conserved()


def test_panel_matches_neither_party_both_lose_and_task_is_redrawn(system, contested, referees, conserved):
    game, registry, token, jobs = system.game, system.registry, system.token, system.jobs
    c = contested(n=4, k=2, diverge=2, step=0)
    did = _open_public(system, c)
    # k = 2, step 0: the level-1 pinpoint at index 0 (agreed leaf 0, claims at leaf 1).
    game.pinpoint(did, c.sH.pinpoint(c.sC, 0), sender=c.cheater)
    assert game.getDispute(did).phase == P_VOTING
    third = rand32()
    vote(game, did, {ref: third for ref in referees})
    burned0 = token.totalBurned()
    r = game.resolve(did, sender=referees[0])
    assert [e.outcome for e in r.events.filter(game.DisputeResolved)] == [O_BOTH]
    pot = 2 * STAKE
    each = (pot * 2_500 // 10_000) // 3
    for ref in referees:
        assert game.credits(ref) == each
    assert token.totalBurned() - burned0 == pot - 3 * each
    for p in (c.honest, c.cheater):
        assert registry.getNode(p).stake == NODE_STAKE - STAKE and registry.getNode(p).locked == 0
        assert registry.reputationOf(p).disputesLost == 1
    # Both replicas banned, slots drawn again from the two other solvers.
    assert list(r.events.filter(jobs.TaskReopened))
    redrawn = {e.node for e in r.events.filter(jobs.TaskAssigned)}
    assert len(redrawn) == 2 and not redrawn & {c.honest.address, c.cheater.address}
    assert jobs.getTask(c.task_id).status == T_ASSIGNED
    assert [x.status for x in jobs.getReplicas(c.task_id)] == [R_ASSIGNED, R_ASSIGNED]
    assert jobs.getJob(c.job.id).escrow == jobs.escrowFor(c.job.params[7], 2, 1, 1)  # nobody was paid yet
    _game_backed(system)
    conserved()


def test_non_revealing_referee_is_slashed(system, contested, referees, chain, conserved):
    game, registry, token = system.game, system.registry, system.token
    c = contested(n=4, k=2, diverge=4, step=1)
    did = _open_public(system, c)
    game.pinpoint(did, c.sH.pinpoint(c.sC, 1), sender=c.honest)
    honest_vote = c.sH.hashes[2]
    silent = referees[2]
    vote(game, did, {ref: honest_vote for ref in referees}, reveal=set(referees[:2]))
    with reverts(game.VotingNotOver):
        game.resolve(did, sender=c.honest)
    chain.mine(deltatime=game.getDispute(did).revealDeadline - chain.blocks.head.timestamp + 1)
    burned0 = token.totalBurned()
    r = game.resolve(did, sender=c.honest)
    assert [e.outcome for e in r.events.filter(game.DisputeResolved)] == [O_CHALLENGER]
    penalty = game.refereeStake() * game.refereeSlashBps() // 10_000
    each = (STAKE * 2_500 // 10_000) // 2
    assert game.credits(silent) == 0
    assert registry.getNode(silent).stake == NODE_STAKE - penalty and registry.getNode(silent).locked == 0
    assert registry.reputationOf(silent).tasksLate == 1
    for ref in referees[:2]:
        assert game.credits(ref) == each and registry.getNode(ref).stake == NODE_STAKE
    assert token.totalBurned() - burned0 == (STAKE - STAKE // 2 - 2 * each) + penalty
    _game_backed(system)
    conserved()
