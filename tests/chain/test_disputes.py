"""Replicated contests on a real anvil: public-trace path, clock timeout, panel outcomes, non-revealing referee.

Nodes: four solver/verifier nodes and three referee-only nodes, so the panel of a
replicated dispute is always the three referees and both parties are solvers.
Protocol v2: after the step is pinpointed the game opens a RefereePanel; it is seated from a block hash drawn
after the request (mine past the randomness delay, then `seat`); referees commit and reveal on the panel,
which decides when every seat revealed. The contest's winner only becomes the task's candidate, with a fresh
challenge window (P3); finalize accepts it afterwards.
"""
from __future__ import annotations

import pytest
from ape import reverts

from chain_builders import (
    E18, ROLE_REFEREE, ROLE_SOLVER, ROLE_VERIFIER, DisputeOutcome, DisputePhase, PanelPhase, ReplicaStatus,
    TaskStatus, Verdict, accept_aggregate, contest, escrow_for, finalize_after_window, h32, mine_past, opened, paid_in,
    rand32, seat_panel, seats, vote,
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
    did = opened(system, r)
    pin = list(r.events.filter(game.CheckpointPinpointed))
    assert [(e.index, h32(e.claimA), h32(e.claimB)) for e in pin] == [(c.segment, c.H.hashes[c.segment + 1],
                                                                      c.C.hashes[c.segment + 1])]
    assert system.dispute_lens.getDispute(did).phase == DisputePhase.STEP_ROOTS
    for party, s in ((c.honest, c.sH), (c.cheater, c.sC)):
        game.submitStepRoot(did, s.root, s.proof(0), s.proof(s.n), sender=party)
    return did


def _held(jobs, c, node) -> int:
    """Replicas `node` holds in the job's AGGREGATE task (created when the disputed shard is accepted)."""
    agg = jobs.taskOf(c.job.id, 0, 1)
    return sum(1 for x in jobs.getReplicas(agg) if x.node == node.address and x.status == ReplicaStatus.ASSIGNED)


def _game_backed(system):
    game = system.game
    assert system.token.balanceOf(game) == game.totalBonds()  # rewards and returned bonds are paid at once
    system.panel_backed()


def _winner_is_candidate(system, chain, c, winner, submitter):
    """P3: the contest's winner is the candidate with a fresh window; finalize accepts it afterwards."""
    jobs = system.jobs
    t = jobs.getTask(c.task_id)
    assert t.status == TaskStatus.REVEALED and t.openDisputes == 0
    claim = jobs.claimOf(c.task_id)  # the result a challenge would now dispute: the winner's
    assert h32(claim.finalHash) == c.H.final and h32(claim.root) == c.H.root and claim.defender == winner.address
    assert claim.coDefender == "0x" + "00" * 20 and claim.challengeDeadline == t.challengeDeadline
    with reverts(jobs.ChallengeWindowOpen):
        jobs.finalize(c.task_id, sender=submitter)
    return finalize_after_window(system, chain, c.task_id, submitter)


def _judging(system, chain, c, did, referees):
    """The step was pinpointed: the game is Judging and the panel waits for randomness; seat it."""
    panel, registry = system.panel, system.registry
    assert system.dispute_lens.getDispute(did).phase == DisputePhase.JUDGING
    assert panel.panelOf(did).phase == PanelPhase.SEATING
    with reverts(panel.SeatingRandomnessPending):
        panel.seat(did, sender=c.honest)  # the deciding block is not mined yet: nobody can pick it
    r = seat_panel(system, chain, did, sender=c.honest)
    seated = seats(system, did)
    assert sorted(seated) == sorted(a.address for a in referees)
    assert [sorted(e.referees) for e in r.events.filter(panel.RefereesSeated)] == [sorted(seated)]
    assert panel.panelOf(did).phase == PanelPhase.COMMITTING
    for ref in referees:
        assert registry.getNode(ref).locked == panel.refereeStake()
    return seated


def test_honest_wins_public_trace_path_with_bisection(system, contested, referees, chain, submitter, conserved):
    game, jobs, registry, token, panel = system.game, system.jobs, system.registry, system.token, system.panel
    c = contested(n=8, k=4, diverge=5, step=2)
    assert jobs.getTask(c.task_id).status == TaskStatus.CONTESTED
    did = _open_public(system, c)
    # Level 1 by bisection: [0, 4] -> mid 2 (agreed) -> mid 3 (differs) -> step 2 pinpointed.
    for idx in (2, 3):
        assert system.dispute_lens.getDispute(did).mid == idx
        game.revealLeaf(did, 1, idx, c.sH.hashes[idx], c.sH.proof(idx), sender=c.honest)
        r = game.revealLeaf(did, 1, idx, c.sC.hashes[idx], c.sC.proof(idx), sender=c.cheater)
    stepped = list(r.events.filter(game.StepPinpointed))
    assert [e.step for e in stepped] == [c.segment * 4 + c.step]
    assert system.dispute_lens.disputedStep(did) == c.segment * 4 + c.step
    _judging(system, chain, c, did, referees)

    honest_vote = c.sH.hashes[c.step + 1]
    burned0 = token.totalBurned()
    bal0 = {a.address: token.balanceOf(a) for a in (c.honest, *referees)}
    r = vote(system, did, {ref: honest_vote for ref in referees})[-1]  # the last reveal decides
    assert [e.verdict for e in r.events.filter(panel.PanelDecided)] == [Verdict.FOR_A]
    res = list(r.events.filter(game.DisputeResolved))
    assert [(e.winner, e.loser, e.outcome) for e in res] == [(c.honest.address, c.cheater.address,
                                                              DisputeOutcome.CHALLENGER_WINS)]

    # Slashed pot = the cheater's task stake: the winner's share, the referees' share split over 3, rest burned.
    win = STAKE * game.winnerShareBps() // 10_000
    each = (STAKE * game.refereeShareBps() // 10_000) // 3
    assert token.balanceOf(c.honest) - bal0[c.honest.address] == win  # paid at once
    for ref in referees:
        assert token.balanceOf(ref) - bal0[ref.address] == each and registry.getNode(ref).locked == 0
    assert token.totalBurned() - burned0 == STAKE - win - 3 * each
    assert registry.getNode(c.cheater).stake == NODE_STAKE - STAKE
    assert system.lens.reputationOf(c.cheater).disputesLost == 1 and system.lens.reputationOf(c.honest).disputesWon == 1
    assert [x.status for x in jobs.getReplicas(c.task_id)][1] == ReplicaStatus.SLASHED

    # The winner's result is only a candidate: it is accepted after its own window; only the honest replica is paid.
    bal = token.balanceOf(c.honest)
    r = _winner_is_candidate(system, chain, c, c.honest, submitter)
    t = jobs.getTask(c.task_id)
    assert t.status == TaskStatus.ACCEPTED and h32(t.finalHash) == c.H.final
    # P10: paid once the AGGREGATE that consumes it is accepted
    assert token.balanceOf(c.honest) == bal and c.honest.address not in paid_in(system, r)
    assert registry.getNode(c.cheater).locked == STAKE * _held(jobs, c, c.cheater)
    # The honest node's task lock is released (it may hold a new lock if drawn for the AGGREGATE task).
    assert registry.getNode(c.honest).locked == STAKE * _held(jobs, c, c.honest)
    _game_backed(system)

    before = token.balanceOf(c.honest)
    r, paid = accept_aggregate(system, chain, c.poster, c.job.id)
    assert paid == [c.honest.address]  # not the cheater
    earned = paid_in(system, r)[c.honest.address]  # + the AGGREGATE's pay if drawn for it
    assert earned >= c.job.params.paymentPerTask
    assert token.balanceOf(c.honest) == before + earned  # sent at once: nothing to withdraw from the escrow
    assert token.balanceOf(c.honest) == bal0[c.honest.address] + win + earned  # nothing to withdraw from the game
    _game_backed(system)
    system.escrow_backed()
    conserved()


def test_level1_pinpoint_and_timeout_of_a_silent_party(system, contested, chain, submitter, conserved):
    """The cheater never submits its step root; its clock runs out and anyone may call timeout."""
    game, registry, token, jobs = system.game, system.registry, system.token, system.jobs
    c = contested(n=8, k=4, diverge=3, step=0)
    r = game.openDisputeWithPinpoint(c.task_id, c.H.pinpoint(c.C, c.segment), sender=c.honest)
    did = opened(system, r)
    game.submitStepRoot(did, c.sH.root, c.sH.proof(0), c.sH.proof(c.sH.n), sender=c.honest)
    with reverts(game.ClockNotExpired):
        game.timeout(did, sender=c.honest)
    a_left, b_left = system.dispute_lens.clocksRemaining(did)
    # A's clock ran only from the opening block to its step root (blocks take wall-clock timestamps: ≤ a few s)
    # and is stopped now; B's keeps running.
    assert game.clockAllowance() - 5 <= a_left <= game.clockAllowance() and 0 < b_left <= game.clockAllowance()
    chain.mine(deltatime=game.clockAllowance() + 5)
    assert system.dispute_lens.clocksRemaining(did) == (a_left, 0)  # A's stopped clock did not move; B's ran out
    burned0 = token.totalBurned()
    bal0 = token.balanceOf(c.honest)
    r = game.timeout(did, sender=c.honest)
    assert [(e.winner, e.outcome) for e in r.events.filter(game.DisputeResolved)] == [
        (c.honest.address, DisputeOutcome.CHALLENGER_WINS)]
    assert system.dispute_lens.getDispute(did).phase == DisputePhase.RESOLVED
    # No panel was seated: the winner's share to the winner, the rest burned.
    win = STAKE * game.winnerShareBps() // 10_000
    assert token.balanceOf(c.honest) - bal0 == win and token.totalBurned() - burned0 == STAKE - win
    assert registry.getNode(c.cheater).stake == NODE_STAKE - STAKE
    _winner_is_candidate(system, chain, c, c.honest, submitter)
    assert jobs.getTask(c.task_id).status == TaskStatus.ACCEPTED
    _game_backed(system)
    conserved()


def test_panel_matches_neither_party_both_lose_and_task_is_redrawn(system, contested, referees, chain, conserved):
    game, registry, token, jobs, panel, escrow = (system.game, system.registry, system.token, system.jobs,
                                                  system.panel, system.escrow)
    c = contested(n=4, k=2, diverge=2, step=0)
    did = _open_public(system, c)
    # k = 2, step 0: the level-1 pinpoint at index 0 (agreed leaf 0, claims at leaf 1).
    game.pinpoint(did, c.sH.pinpoint(c.sC, 0), sender=c.cheater)
    _judging(system, chain, c, did, referees)
    third = rand32()
    burned0 = token.totalBurned()
    bal0 = {ref.address: token.balanceOf(ref) for ref in referees}
    r = vote(system, did, {ref: third for ref in referees})[-1]
    assert [e.outcome for e in r.events.filter(game.DisputeResolved)] == [DisputeOutcome.BOTH_LOSE]
    pot = 2 * STAKE
    each = (pot * game.refereeShareBps() // 10_000) // 3
    for ref in referees:
        assert token.balanceOf(ref) - bal0[ref.address] == each
    assert token.totalBurned() - burned0 == pot - 3 * each
    for p in (c.honest, c.cheater):
        assert registry.getNode(p).stake == NODE_STAKE - STAKE and registry.getNode(p).locked == 0
        assert system.lens.reputationOf(p).disputesLost == 1
    # Both replicas banned, slots drawn again from the two other solvers.
    assert list(r.events.filter(jobs.TaskReopened))
    assert jobs.getTask(c.task_id).status == TaskStatus.OPEN  # P4: the redraw waits for fresh randomness
    redrawn = {e.node for e in c.poster.draw(c.task_id).events.filter(jobs.TaskAssigned)}
    assert len(redrawn) == 2 and not redrawn & {c.honest.address, c.cheater.address}
    assert jobs.getTask(c.task_id).status == TaskStatus.ASSIGNED
    assert [x.status for x in jobs.getReplicas(c.task_id)] == [ReplicaStatus.ASSIGNED] * 2
    assert escrow.escrowOf(c.job.id) == escrow_for(c.job.params.paymentPerTask, 2, 1, 1)  # nobody was paid yet
    _game_backed(system)
    conserved()


def test_advance_slashes_non_revealing_referee_and_majority_decides(system, contested, referees, chain, conserved):
    game, registry, token, panel = system.game, system.registry, system.token, system.panel
    c = contested(n=4, k=2, diverge=4, step=1)
    did = _open_public(system, c)
    game.pinpoint(did, c.sH.pinpoint(c.sC, 1), sender=c.honest)
    _judging(system, chain, c, did, referees)
    honest_vote = c.sH.hashes[2]
    silent = referees[2]
    vote(system, did, {ref: honest_vote for ref in referees}, reveal=set(referees[:2]))
    assert panel.panelOf(did).phase == PanelPhase.REVEALING
    with reverts(panel.NothingToAdvance):
        panel.advance(did, sender=c.honest)
    mine_past(chain, panel.panelOf(did).revealDeadline)
    burned0 = token.totalBurned()
    bal0 = {ref.address: token.balanceOf(ref) for ref in referees}
    r = panel.advance(did, sender=c.honest)
    assert [(e.referee, e.reason) for e in r.events.filter(panel.RefereeSlashed)] == [(silent.address, 2)]
    assert [e.outcome for e in r.events.filter(game.DisputeResolved)] == [DisputeOutcome.CHALLENGER_WINS]
    penalty = panel.refereeStake() * panel.noShowSlashBps() // 10_000
    win = STAKE * game.winnerShareBps() // 10_000
    reward = STAKE * game.refereeShareBps() // 10_000
    each = reward // 2
    assert token.balanceOf(silent) == bal0[silent.address]  # paid nothing
    assert registry.getNode(silent).stake == NODE_STAKE - penalty and registry.getNode(silent).locked == 0
    assert system.lens.reputationOf(silent).tasksLate == 1
    for ref in referees[:2]:
        assert token.balanceOf(ref) - bal0[ref.address] == each and registry.getNode(ref).stake == NODE_STAKE
    assert token.totalBurned() - burned0 == (STAKE - win - 2 * each) + penalty
    _game_backed(system)
    conserved()
