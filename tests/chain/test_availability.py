"""P10 on a real anvil: a result is paid only once the task that consumed it found its bundle available.

A shard's payment waits for its round's AGGREGATE; the AGGREGATE's replicas say, before their own result, which
shards no accepted bundle yielded (JobRegistry.reportUnavailable). When every accepted AGGREGATE replica said so
of a shard, that shard's payments are burned (nobody gains by a report); otherwise they are paid."""
from __future__ import annotations

import pytest
from ape import reverts

from chain_builders import E18, ReplicaStatus, TaskStatus, Trace, finalize_after_window, h32, rand32

pytestmark = pytest.mark.integration

PAYMENT = 10 * E18
STAKE = 100 * E18
NODE_STAKE = 1_000 * E18  # Nodes.add's default


@pytest.fixture(scope="module")
def eight_nodes(nodes, accounts):
    return nodes.add(accounts[2:10])


def _two_shards_accepted(system, poster, chain):
    """A 2-shard, 1-round, replication-2 job whose shards are accepted; returns (job, shard task ids, AGGREGATE id,
    what each shard's finalize sent to each payee: its balance delta over that transaction)."""
    token = system.token
    job = poster.post(shards=2, rounds=1, replication=2, payment=PAYMENT, stake=STAKE)
    shards = [system.jobs.taskOf(job.id, 0, i) for i in range(2)]
    received: dict[str, int] = {}
    for tid in shards:
        H = Trace.random(h32(system.jobs.getTask(tid).inputHash), job.n)
        poster.run_replicated(tid, [H, H])
        payees = {r.node for r in system.jobs.getReplicas(tid)}
        before = {n: token.balanceOf(n) for n in payees}
        finalize_after_window(system, chain, tid, poster.account)
        for n in payees:
            received[n] = received.get(n, 0) + token.balanceOf(n) - before[n]
    agg = system.jobs.taskOf(job.id, 0, 2)
    poster.draw(agg)
    return job, shards, agg, received


def _run_aggregate(system, poster, chain, agg, report: dict[int, list[int]]):
    """Each AGGREGATE slot reports its listed inputs unavailable, then commits; both reveal; finalize after the
    window. Returns the finalize receipt."""
    jobs = system.jobs
    trace = Trace([h32(jobs.getTask(agg).inputHash), rand32()])
    for slot, inputs in report.items():
        node = poster.node_of(agg, slot)
        for index in inputs:
            r = jobs.reportUnavailable(agg, index, sender=node)
            assert [(e.node, e.slot, e.input) for e in r.events.filter(jobs.InputUnavailable)] == [
                (node.address, slot, index)]
    poster.run_replicated(agg, [trace, trace])
    return finalize_after_window(system, chain, agg, poster.account)


def _payees(system, task_id) -> list[str]:
    return [r.node for r in system.jobs.getReplicas(task_id) if r.status == ReplicaStatus.ACCEPTED]


def test_every_consumer_reports_a_withheld_shard_its_pay_is_burned_succeeds(system, eight_nodes, poster, chain,
                                                                            conserved):
    jobs, escrow, token = system.jobs, system.escrow, system.token
    job, shards, agg, received = _two_shards_accepted(system, poster, chain)
    assert all(received[n] == 0 for tid in shards for n in _payees(system, tid))  # deferred until consumed
    supply = token.totalSupply()

    r = _run_aggregate(system, poster, chain, agg, {0: [1], 1: [1]})

    assert jobs.getTask(agg).status == TaskStatus.ACCEPTED
    forfeited = [(e.taskId, e.node) for e in r.events.filter(jobs.PaymentForfeited)]
    assert sorted(forfeited) == sorted((shards[1], n) for n in _payees(system, shards[1]))
    sent_to = [e.to for e in r.events.filter(escrow.PaymentSent)]
    assert sorted(sent_to) == sorted(_payees(system, shards[0]) + _payees(system, agg))
    assert supply - token.totalSupply() == 2 * PAYMENT
    for n in _payees(system, shards[1]):  # never slashed: withholding costs the pay, not the stake
        assert system.registry.getNode(n).stake == NODE_STAKE
    system.escrow_backed()
    conserved()


def test_one_consumer_that_fetched_the_bundle_keeps_the_shard_paid_succeeds(system, eight_nodes, poster, chain,
                                                                           conserved):
    jobs, escrow = system.jobs, system.escrow
    job, shards, agg, _ = _two_shards_accepted(system, poster, chain)
    r = _run_aggregate(system, poster, chain, agg, {0: [0, 1]})  # slot 1 found both bundles
    assert not list(r.events.filter(jobs.PaymentForfeited))
    sent_to = [e.to for e in r.events.filter(escrow.PaymentSent)]
    assert sorted(sent_to) == sorted(_payees(system, shards[0]) + _payees(system, shards[1]) + _payees(system, agg))
    conserved()


def test_reportUnavailable_bad_index_or_not_a_holder_reverts(system, eight_nodes, poster, chain):
    jobs = system.jobs
    job, shards, agg, _ = _two_shards_accepted(system, poster, chain)
    holder = poster.node_of(agg, 0)
    with reverts(jobs.NoSuchInput):
        jobs.reportUnavailable(agg, 2, sender=holder)  # two shards: inputs 0 and 1
    outsider = next(a for a in eight_nodes if a.address not in {r.node for r in jobs.getReplicas(agg)})
    with reverts(jobs.NotReplica):
        jobs.reportUnavailable(agg, 0, sender=outsider)
    with reverts(jobs.NoSuchInput):
        jobs.reportUnavailable(shards[0], 0, sender=holder)  # a round-0 shard consumes nothing on-chain
