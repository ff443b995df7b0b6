"""A whole job on a real anvil: 2 shards x 2 rounds, replication 2, driven by test accounts.

Protocol v2: equal reveals make a task Revealed (agreement is not finality, P2); it is accepted by finalize()
after its challenge window and the reveal grace. Escrow lives on JobEscrow, which sends each payment to its payee
at once (PaymentSent): a payee's balance grows in the transaction that settles its task."""
from __future__ import annotations

import pytest

from verity.chain.protocol import POSTER_BOND

from chain_builders import (
    E18, JobStatus, ReplicaStatus, TaskKind, TaskStatus, Trace, aggregate_input, escrow_for, finalize_after_window,
    h32, paid_in, rand32,
)

pytestmark = pytest.mark.integration

PAYMENT = 10 * E18
STAKE = 100 * E18


@pytest.fixture(scope="module")
def eight_nodes(nodes, accounts):
    return nodes.add(accounts[2:10])


def _run_task(poster, system, chain, task_id: int, trace: Trace, cid: bytes, paid: list[str]):
    """Both replicas commit and reveal the same trace; the task waits out its window, then finalize accepts it.
    `paid`: the nodes this acceptance pays. P10: a task is paid once its consumer is accepted (a shard by its
    round's AGGREGATE, an AGGREGATE by the next round's last shard), the last AGGREGATE at once.
    Returns (finalize receipt, what it sent to each payee), each payee's balance delta over it checked."""
    jobs, escrow, token = system.jobs, system.escrow, system.token
    assigned = {s: poster.node_of(task_id, s).address for s in range(2)}
    assert assigned[0] != assigned[1]
    receipts = poster.run_replicated(task_id, [trace, trace], [cid, cid])
    windows = list(receipts[-1].events.filter(jobs.ChallengeWindowOpened))
    t = jobs.getTask(task_id)
    assert t.status == TaskStatus.REVEALED and [e.deadline for e in windows] == [t.challengeDeadline]
    assert not list(receipts[-1].events.filter(jobs.TaskAccepted))
    watched = set(paid) | set(assigned.values())
    before = {n: token.balanceOf(n) for n in watched}
    last = finalize_after_window(system, chain, task_id, poster.account)
    accepted = list(last.events.filter(jobs.TaskAccepted))
    assert [(e.taskId, h32(e.finalHash), h32(e.resultCid)) for e in accepted][:1] == [(task_id, trace.final, cid)]
    sent_to = [e.to for e in last.events.filter(escrow.PaymentSent)]
    assert sorted(sent_to) == sorted(paid)
    sent = paid_in(system, last)
    assert {n: token.balanceOf(n) - before[n] for n in watched} == {n: sent.get(n, 0) for n in watched}
    t = jobs.getTask(task_id)
    assert t.status == TaskStatus.ACCEPTED and h32(t.finalHash) == trace.final
    assert [r.status for r in jobs.getReplicas(task_id)] == [ReplicaStatus.ACCEPTED] * 2
    system.escrow_backed()
    return last, sent


def test_whole_job_two_shards_two_rounds(system, eight_nodes, poster, submitter, chain, conserved):
    jobs, registry, token, escrow_c = system.jobs, system.registry, system.token, system.escrow
    initial = rand32()
    job = poster.post(shards=2, rounds=2, replication=2, steps=8, k=2, payment=PAYMENT, stake=STAKE, initial=initial)
    escrow = escrow_for(PAYMENT, 2, 2, 2)
    assert escrow == PAYMENT * 2 * 3 * 2 + POSTER_BOND == job.params.escrow()
    assert escrow_c.escrowOf(job.id) == escrow and token.balanceOf(escrow_c) == escrow and token.balanceOf(jobs) == 0
    posted = [e for e in job.receipt.events.filter(jobs.JobPosted)]
    assert posted[0].escrow == escrow and posted[0].submitter == submitter.address
    conserved()

    round_input = initial
    receipt = job.receipt
    draws = job.draws
    start = {n.address: token.balanceOf(n) for n in eight_nodes}  # nodes pay nothing in this job: no bonds
    pay_expected: dict[str, int] = {}
    received: dict[str, int] = {}  # what JobEscrow sent so far, from each finalize's PaymentSent events

    def settle(sent: dict[str, int]) -> None:
        for node, amount in sent.items():
            received[node] = received.get(node, 0) + amount

    prev_agg: list[str] = []  # the previous AGGREGATE's replicas: paid when this round's last shard is accepted
    for rnd in range(2):
        created = {e.index: e for e in receipt.events.filter(jobs.TaskCreated)}
        assert sorted(created) == [0, 1]
        assert not list(receipt.events.filter(jobs.TaskAssigned))  # P4: creating a task only requests its draw
        shard_ids = [jobs.taskOf(job.id, rnd, i) for i in range(2)]
        draws = draws or [poster.draw(tid) for tid in shard_ids]
        # Who got what comes from TaskAssigned, as a node would learn it.
        assigned = poster.assigned(*draws)
        draws = []
        assert sorted(assigned) == sorted(shard_ids) and all(len(v) == 2 for v in assigned.values())
        for i, tid in enumerate(shard_ids):
            assert h32(created[i].inputHash) == round_input and created[i].kind == TaskKind.TRAIN
            assert h32(jobs.getTask(tid).inputHash) == round_input
            for node in assigned[tid].values():
                assert registry.getNode(node).locked >= STAKE

        finals = []
        last = None
        for i, tid in enumerate(shard_ids):
            trace = Trace.random(round_input, 4)
            for node in assigned[tid].values():
                pay_expected[node] = pay_expected.get(node, 0) + PAYMENT
            last, sent = _run_task(poster, system, chain, tid, trace, rand32(), prev_agg if i == 1 else [])
            settle(sent)
            for node in assigned[tid].values():
                assert received.get(node, 0) < pay_expected[node]  # deferred until the AGGREGATE is accepted
            finals.append(trace.final)

        # The second shard's acceptance creates the AGGREGATE task over the finals in shard order.
        agg_created = list(last.events.filter(jobs.TaskCreated))
        agg_id = jobs.taskOf(job.id, rnd, 2)
        assert [(e.taskId, e.index, e.kind) for e in agg_created] == [(agg_id, 2, TaskKind.AGGREGATE)]
        agg_in = aggregate_input(finals)
        assert h32(agg_created[0].inputHash) == agg_in
        assert not list(last.events.filter(jobs.TaskAssigned))  # the last finalizer cannot pick the slots (P4)
        agg_assigned = poster.assigned(poster.draw(agg_id))[agg_id]
        assert len(agg_assigned) == 2
        for node in agg_assigned.values():
            pay_expected[node] = pay_expected.get(node, 0) + PAYMENT

        model_state, model_cid = rand32(), rand32()
        shard_nodes = [node for tid in shard_ids for node in assigned[tid].values()]
        own = list(agg_assigned.values())
        receipt, sent = _run_task(poster, system, chain, agg_id, Trace([agg_in, model_state]), model_cid,
                                  shard_nodes + (own if rnd == 1 else []))
        settle(sent)
        prev_agg = own
        if rnd == 0:
            adv = list(receipt.events.filter(jobs.RoundAdvanced))
            assert [(e.jobId, e.round, h32(e.inputHash)) for e in adv] == [(job.id, 1, model_state)]
            assert jobs.getJob(job.id).currentRound == 1
            round_input = model_state
        else:
            done = list(receipt.events.filter(jobs.JobCompleted))
            assert [(e.jobId, h32(e.modelHash), h32(e.modelCid)) for e in done] == [(job.id, model_state, model_cid)]
        conserved()

    j = jobs.getJob(job.id)
    assert j.status == JobStatus.COMPLETED and h32(j.modelHash) == model_state and h32(j.modelCid) == model_cid
    # every escrowed payment went to an accepted replica; the poster bond waits for reclaimEscrow
    assert escrow_c.escrowOf(job.id) == POSTER_BOND and escrow_c.totalEscrow() == POSTER_BOND
    assert sum(pay_expected.values()) == escrow - POSTER_BOND
    for node, amount in pay_expected.items():
        assert received.get(node, 0) == amount
    assert sum(received.values()) == escrow - POSTER_BOND

    # Pushed payments: every paid node's wallet grew by exactly its payments over the job, with no withdraw.
    for node, amount in pay_expected.items():
        assert token.balanceOf(node) == start[node] + amount
    assert token.balanceOf(escrow_c) == POSTER_BOND
    # The poster takes its bond back: nothing is left in the escrow.
    before = token.balanceOf(submitter)
    reclaimed = jobs.reclaimEscrow(job.id, sender=submitter)
    assert [e.amount for e in reclaimed.events.filter(jobs.EscrowReclaimed)] == [POSTER_BOND]
    assert token.balanceOf(submitter) == before + POSTER_BOND and token.balanceOf(escrow_c) == 0

    # Every lock released, reputation counts the 6 tasks x 2 replicas, nothing burned.
    for n in eight_nodes:
        assert registry.getNode(n).locked == 0
    assert sum(system.lens.reputationOf(n).tasksCompleted for n in eight_nodes) == 12
    acc = conserved()
    assert acc["burned"] == 0
