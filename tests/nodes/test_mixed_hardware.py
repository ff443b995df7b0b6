"""Issue 10 through real node processes: two honest replicas on different CPU kernels agree under portable-f32.

One solver runs ATen's default kernels (ATEN_CPU_CAPABILITY=default, what a CPU without AVX2 runs), the other
the AVX2 kernels; under a native profile their float32 traces differ from the first checkpoint (measured in
tests/engine/test_portable_training.py), and the replica the referees did not share would be slashed. Under
portable-f32 both reveal the same final hash, the verifier on a third configuration agrees, nobody disputes and
nobody is slashed."""
from __future__ import annotations

import pytest

from node_builders import conserved
from verity.chain.protocol import TaskStatus
from verity.chain.views import read

pytestmark = pytest.mark.integration


def test_portable_replicas_on_different_kernels_agree_and_nobody_is_slashed(net):
    solvers = [net.start_node("solver-avx2", 1, roles="solver"),
               net.start_node("solver-default", 2, roles="solver", extra_env={"ATEN_CPU_CAPABILITY": "default"})]
    verifier = net.start_node("verifier-2threads", 3, roles="verifier", extra_env={"OMP_NUM_THREADS": "2"})
    for i in (4, 5, 6):
        net.start_node(f"referee-{i}", i, roles="referee")
    net.wait_registered(6)
    job_id = net.post(shards=1, rounds=1, steps=20, k=10, replication=2, execution_window=120, profile="portable-f32")
    net.wait_job(job_id, timeout=360)

    events = net.events()
    train = 1  # shard 0 of round 0
    reveals = [e.args for e in events if e.name == "ResultRevealed" and e.args["taskId"] == train]
    assert {r["node"] for r in reveals} == {s.address for s in solvers}  # both kernels' nodes were the replicas
    assert len({bytes(r["finalHash"]) for r in reveals}) == 1 and len({bytes(r["root"]) for r in reveals}) == 1
    assert not [e for e in events if e.name in ("TaskContested", "ChallengeCommitted", "DisputeOpened")]
    assert not [e for e in events if e.name == "StakeSlashed"]
    c = net.client()
    assert TaskStatus(read(c, c.jobs, "getTask", train).status) == TaskStatus.ACCEPTED
    assert "agrees" in " ".join(verifier.text().split()) or "no challenge" in " ".join(verifier.text().split())
    conserved(c)
