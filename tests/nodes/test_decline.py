"""Issue 9 (poisoned jobs cycle for ever) through real node processes: a job whose manifest is malformed used to
have every drawn solver reported late and fined in turn. Now each drawn solver declines its slot (JobRegistry.
decline, within the first quarter of the execution window): nobody is slashed or counted late, a decliner is never
drawn for the task again, and once no eligible solver is left the poster can cancel for a full refund."""
from __future__ import annotations

import hashlib

import pytest

from node_builders import SUBMITTER, conserved, post_raw, wait_for
from verity.chain import TxFailed
from verity.chain.protocol import JobStatus
from verity.chain.views import read

pytestmark = pytest.mark.integration


def test_a_poisoned_job_is_declined_by_every_drawn_solver_and_nobody_is_slashed(net):
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

    def cancelled():
        try:
            c.transact(c.jobs.functions.cancelJob(job_id))
        except TxFailed:
            return False
        return True

    wait_for(cancelled, 120, "the job to become cancellable (every solver declined, none left)", poll=2)
    assert JobStatus(read(c, c.jobs, "getJob", job_id).status) == JobStatus.CANCELLED
    events = net.events()
    assert not [e for e in events if e.name in ("ReplicaLate", "StakeSlashed")]
    assert len([e for e in events if e.name == "ReplicaDeclined"]) == 3  # each once: a decliner is not drawn again
    for s in solvers:
        rep = read(c, c.registry, "reputationOf", s.address)
        assert (rep.tasksLate, rep.totalSlashed) == (0, 0)
        assert "declined task" in " ".join(s.text().split())
    assert c.call(c.token.functions.balanceOf(c.address)) - before == 2 * 2 * 10**18  # full escrow back
    conserved(c)
