"""P10 through real nodes: a solver paid for nothing it never published.

The solver withholds its checkpoints (its result bundle names them, IPFS never gets them). Its optimistic result is
right, so nobody can challenge it and it is accepted; but the AGGREGATE's solver cannot fetch the final state, so it
recomputes the shard, reports it unavailable on-chain before submitting, and the withholder's payment is burned. Its
stake is untouched: availability cannot be proven on-chain, so it only ever costs the pay."""
from __future__ import annotations

import secrets

import pytest

from node_builders import conserved, wait_for
from verity.chain.protocol import ROLE_VERIFIER, TaskKind, TaskStatus
from verity.chain.views import read

pytestmark = pytest.mark.integration


def test_withheld_result_is_recomputed_reported_and_its_pay_burned_succeeds(net):
    withholder = net.start_node("withholder", 1, roles="solver", faults=["withhold-checkpoint"])
    net.wait_registered(1)
    c = net.client()
    stake0 = 1_000 * 10**18  # `verity node run`'s default --stake: registered with the minimum, then topped up
    wait_for(lambda: read(c, c.registry, "getNode", withholder.address).stake == stake0, 60, "the top-up")
    # Only the withholder is registered when the shard is drawn, so it solves it. A seed of its own: checkpoints are
    # content-addressed, so the same job run honestly by another test on this IPFS node would serve the withheld bytes.
    job_id = net.post(shards=1, rounds=1, steps=20, k=10, replication=1, challenge_window=15, execution_window=120,
                      seed=secrets.randbelow(2**31))
    shard = c.call(c.jobs.functions.taskOf(job_id, 0, 0))
    wait_for(lambda: TaskStatus(read(c, c.jobs, "getTask", shard).status) == TaskStatus.REVEALED, 90,
             "the withholder's result")
    assert read(c, c.jobs, "getReplica", shard, 0).node == withholder.address
    # Its operator stops it and takes the solver role away, so the AGGREGATE's solver is the honest node (the
    # withholder holds the shard's state locally and would aggregate from it without any report).
    withholder.kill()
    n = read(c, c.registry, "getNode", withholder.address)
    own = net.client(1)
    own.transact(own.registry.functions.updateNode(ROLE_VERIFIER, n.deviceClass, n.memoryMb, n.throughput, n.profiles,
                                                   n.multiaddr))
    honest = net.start_node("honest", 2, roles="solver")
    net.wait_registered(2)
    net.wait_job(job_id, timeout=300)

    events = net.events()
    agg = c.call(c.jobs.functions.taskOf(job_id, 0, 1))
    assert TaskKind(read(c, c.jobs, "getTask", agg).kind) == TaskKind.AGGREGATE
    reports = [e.args for e in events if e.name == "InputUnavailable"]
    assert [(r["taskId"], r["node"], r["input"]) for r in reports] == [(agg, honest.address, 0)]
    forfeited = [e.args for e in events if e.name == "PaymentForfeited"]
    assert [(f["taskId"], f["node"]) for f in forfeited] == [(shard, withholder.address)]
    paid = [e.args["to"] for e in events if e.name == "PaymentSent" and e.contract == "JobEscrow"]
    assert paid == [honest.address]  # the AGGREGATE only
    assert read(c, c.registry, "getNode", withholder.address).stake == stake0  # never slashed
    assert "reported input 0 unavailable" in honest.text()
    total, minted, burned = conserved(c)
    assert burned == int(forfeited[0]["amount"])
