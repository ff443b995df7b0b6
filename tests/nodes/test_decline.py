"""Issue 9 (poisoned jobs cycle for ever) through real node processes: a job whose manifest is malformed used to
have every drawn solver reported late and fined in turn. Now each drawn solver declines its slot (JobRegistry.
decline, within the first quarter of the execution window): nobody is slashed or counted late, a decliner is never
drawn for the task again, and once FAIL_DECLINES distinct solvers refused the task for invalid inputs the job is
Failed: the decliners share the poster's bond and the rest of the escrow goes back to the poster."""
from __future__ import annotations

import hashlib

import pytest

from node_builders import SUBMITTER, conserved, post_raw, wait_for
from verity.chain.protocol import FAIL_DECLINES, POSTER_BOND, JobStatus
from verity.chain.views import read

pytestmark = pytest.mark.integration


def test_a_poisoned_job_is_declined_by_three_solvers_and_failed_and_nobody_is_slashed(net):
    solvers = [net.start_node(f"solver-{i}", i, roles="solver") for i in (1, 2, 3)]
    net.wait_registered(3)
    malformed = b'{"schema_version": 1, "model": "not an object"}'
    job_id = post_raw(net, malformed, hashlib.sha256(b"y").digest(), shards=1, rounds=1, steps=20, k=10,
                      replication=2, execution_window=60)
    c = net.client(SUBMITTER)
    before = c.call(c.token.functions.balanceOf(c.address))

    def declined():
        return {e.args["node"] for e in net.events() if e.name == "ReplicaDeclined"}

    addresses = {s.address for s in solvers}
    wait_for(lambda: declined() == addresses, 180, "every solver to be drawn once and decline", poll=2)

    wait_for(lambda: JobStatus(read(c, c.jobs, "getJob", job_id).status) == JobStatus.FAILED, 60,
             "the job to be failed after three invalid-input declines", poll=1)
    events = net.events()
    assert not [e for e in events if e.name in ("ReplicaLate", "StakeSlashed")]
    assert len([e for e in events if e.name == "ReplicaDeclined"]) == 3  # each once: a decliner is not drawn again
    for s in solvers:
        rep = read(c, c.lens, "reputationOf", s.address)
        assert (rep.tasksLate, rep.totalSlashed) == (0, 0)
        assert "declined task" in " ".join(s.text().split())
    share = POSTER_BOND // FAIL_DECLINES
    bond_paid = {e.args["to"]: e.args["amount"] for e in events
                 if e.name == "PaymentSent" and e.contract == "JobEscrow" and e.args["jobId"] == job_id}
    assert bond_paid == {s.address: share for s in solvers}  # each decliner got a third of the bond (sent at once)
    failed = [e for e in events if e.name == "JobFailed"]
    assert len(failed) == 1 and failed[0].args["jobId"] == job_id
    # the payments (2 replicas x (1 shard + 1 aggregate)) and what is left of the bond come back
    assert c.call(c.token.functions.balanceOf(c.address)) - before == 2 * 2 * 10**18 + POSTER_BOND - 3 * share
    conserved(c)


def test_three_sybil_decliners_neither_fail_an_honest_job_nor_take_its_bond(net):
    """Issue 23, item 8: three identities refusing every slot as "invalid inputs" (TEST-ONLY `decline-invalid`) beside
    two honest solvers. In v2 a job failed on three such refusals while no replica had committed, and the refusers
    shared the poster's bond. Now a refusal fails the job only when no drawn node still holds a slot of the task, and
    each bets its share of the bond from its own stake: the honest solvers complete the job, and every refusal of a
    task they completed is burned. (Both slots are drawn together, so with two honest solvers an honest one always
    holds a slot when a third refusal lands.)"""
    sybils = [net.start_node(f"sybil-{i}", i, roles="solver", faults=["decline-invalid"]) for i in (1, 2, 3)]
    for i in (4, 5):
        net.start_node(f"solver-{i}", i, roles="solver")
    net.wait_registered(5)
    net.next_epoch()
    c = net.client()
    stakes = {s.address: read(c, c.registry, "getNode", s.address).stake for s in sybils}
    # three tasks (2 shards + the AGGREGATE): each first draw misses every sybil with probability 2/5 x 1/4, so the
    # job sees no refusal at all about once in 1,000 runs
    job_id = net.post(shards=2, rounds=1, steps=20, k=10, replication=2, execution_window=60)
    net.wait_job(job_id, timeout=300)

    events = net.events()
    refused = [e.args for e in events if e.name == "ReplicaDeclined"]
    assert refused and {r["node"] for r in refused} <= set(stakes), refused  # only the sybils refused
    assert not [e for e in events if e.name == "JobFailed"]
    assert not [e for e in events if e.name == "PaymentSent" and e.args["to"] in stakes]  # no bond share, no pay
    bet = POSTER_BOND // FAIL_DECLINES
    burned = {}
    for r in refused:  # the first FAIL_DECLINES refusals of a task bet; its completion burned each
        task_refusals = [x["node"] for x in refused if x["taskId"] == r["taskId"]][:FAIL_DECLINES]
        if r["node"] in task_refusals:
            burned[r["node"]] = burned.get(r["node"], 0) + bet
    assert sum(burned.values()) > 0
    for address, stake in stakes.items():
        node = read(c, c.registry, "getNode", address)
        assert node.stake == stake - burned.get(address, 0), (address, burned)
        assert node.locked == 0
    for s in sybils:  # a sybil the draws never picked has nothing to refuse
        if s.address in {r["node"] for r in refused}:
            assert "TEST-ONLY decline-invalid" in " ".join(s.text().split())
    conserved(c)
