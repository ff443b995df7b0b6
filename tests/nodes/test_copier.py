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

from node_builders import conserved, wait_for
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
