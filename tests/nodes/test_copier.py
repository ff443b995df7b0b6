"""Issue 23, "results readable before the copier commits", through real node processes: a replica that never trains
and commits whatever bundle of its task it can find earns nothing.

The copier (`--fault copy-result`, verity/node/faults.py) lists the pins of the devnet's IPFS daemon (which every node
shares, the most a copier could hope for) from the moment it is drawn, and reads every small object until one is a
result bundle naming its task's job, round and index. Before the fix the honest replica's bundle was pinned before
its commit: the copier found it within seconds, committed and revealed the same root, and was accepted and paid like
its honest partner (replication 2 then meant one computation, not two). Now results are published only once every
commitment is final (compute_result(publish=False), node/compute.py): the copier finds nothing while it may still
commit, misses its deadline, is reported late, and a third solver takes its slot."""
from __future__ import annotations

import pytest

from node_builders import SUBMITTER, conserved, wait_for
from verity.chain.protocol import JobStatus
from verity.chain.views import read

pytestmark = pytest.mark.integration


def test_a_copier_replica_finds_no_result_to_copy_and_earns_nothing_succeeds(net):
    honest = net.start_node("honest", 1, roles="solver")
    copier = net.start_node("copier", 2, roles="solver", faults=["copy-result"])
    net.wait_registered(2)
    # two solvers for two slots: the copier is drawn for the training task
    # a seed no other test of this worker uses: the daemon is shared, and an identical earlier job's bundle (same
    # inputs, same deterministic result) would be a legitimate thing to find
    job_id = net.post(shards=1, rounds=1, steps=20, k=10, replication=2, execution_window=30, seed=8_675_309)
    wait_for(lambda: len({e.args["node"] for e in net.events() if e.name == "TaskAssigned"}) == 2, 60,
                 "both solvers drawn")
    spare = net.start_node("spare", 3, roles="solver")  # takes the copier's slot once it is reported late
    net.wait_registered(3)
    net.next_epoch()  # drawable from the next selection epoch on (issue 23): before the copier's slot empties
    net.wait_job(job_id, timeout=240)

    events = net.events()
    c = net.client()
    assert JobStatus(read(c, c.jobs, "getJob", job_id).status) == JobStatus.COMPLETED
    late = {e.args["node"] for e in events if e.name == "ReplicaLate"}
    paid = {e.args["to"] for e in events if e.name == "PaymentSent" and e.args["jobId"] == job_id}
    committed = {e.args["node"] for e in events if e.name in ("ResultCommitted", "ResultRevealed")}
    assert copier.address in late, "the copier should have missed its deadline with nothing to copy"
    assert copier.address not in committed, "the copier committed a result it never computed"
    assert copier.address not in paid and honest.address in paid and spare.address in paid, paid
    assert "copying bundle" not in copier.text()
    conserved(c)


def test_a_copier_auditor_finds_no_result_to_check_and_earns_nothing_succeeds(net):
    """Issue 23, item 7: a fee auditor that never re-executes (`copy-result` on a verifier) reads every pin of the
    shared daemon from the moment a task is created, looking for a bundle of that task whose final it could commit as
    its blind check. Results stay unpublished until every commitment of the task is final and a check is refused
    once any result is public (ResultPublic), so it never finds one in time: no check of its lands, while an honest
    auditor beside it commits its checks. (v2: a copying fee auditor copied 4 of 4 bundles before any reveal.)"""
    honest = [net.start_node(f"solver-{i}", i, roles="solver") for i in (1, 2)]
    copier = net.start_node("copier", 3, roles="verifier", faults=["copy-result"], options=("--sample-rate", "0"))
    auditor = net.start_node("auditor", 4, roles="verifier", options=("--sample-rate", "0"))
    net.wait_registered(4)
    c = net.client()
    epoch_s = c.call(c.fees.functions.epochSeconds())
    anchors = [wait_for(lambda n=n: (ch := c.call(c.fees.functions.chainOf(n.address)))[0] != b"\0" * 32 and ch, 60,
                        f"{n.name}'s fee key chain anchor")[2] for n in (copier, auditor)]
    gap = (max(anchors) + 1) * epoch_s - c.now()  # tasks of an anchor epoch have no ticket
    if gap > 0:
        net.advance_clock(gap + 1)
    net.next_epoch()
    job_id = net.post(shards=1, rounds=1, steps=20, k=10, replication=2, execution_window=60, seed=5_551_212,
                      verification_fee=1.0, fee_sample_rate=1.0)
    sub = net.client(SUBMITTER)
    sub.transact(sub.token.functions.approve(sub.fees.address, 10 * 10**18))
    sub.transact(sub.fees.functions.fund(job_id, 10 * 10**18, 10**18, 2, 10_000))  # every verifier sampled
    net.wait_job(job_id, timeout=240)

    events = net.events()
    checks = [e.args for e in events if e.name == "CheckCommitted"]
    assert {ch["verifier"] for ch in checks} == {auditor.address}, checks  # the honest auditor checked; the copier never
    assert "copying bundle" not in copier.text()
    assert {e.args["node"] for e in events if e.name == "ResultRevealed"} == {h.address for h in honest}
    conserved(c)
