"""Issue 11 through real node processes, a real anvil and a real IPFS node: a module-parallel job with a DiLoCo
outer optimizer. Each shard task trains one module of the digits MLP (the other is loaded frozen), AGGREGATE
merges each module from the task that trained it and applies the outer step, whose momentum travels in the
round's aggregate state; the replicas of every task agree, so nothing is disputed and the job completes."""
from __future__ import annotations

import pytest

from verity.chain.protocol import TaskStatus
from verity.chain.views import read
from verity.cid import digest_to_cid
from verity.engine.checkpoint import checkpoint_cap, initial_state, load_checkpoint
from verity.job.view import JobReader

from node_builders import conserved

pytestmark = pytest.mark.integration


def _accepted_final(reader: JobReader, rnd: int, index: int):
    c, m = reader.chain, reader.manifest
    tid = c.call(c.jobs.functions.taskOf(reader.job_id, rnd, index))
    t = read(c, c.jobs, "getTask", tid)
    assert TaskStatus(t.status) == TaskStatus.ACCEPTED
    bundle = reader.storage.get_json(digest_to_cid(t.resultCid))
    data = reader.storage.get_bytes(bundle["final"], max_bytes=checkpoint_cap(m))
    return load_checkpoint(data, m, expected_hash=bytes(t.finalHash), source=f"task {tid}")


def test_module_job_with_outer_optimizer_trains_each_module_on_its_own_nodes(net):
    for i in (1, 2):
        net.start_node(f"solver-{i}", i, roles="solver,referee")
    net.wait_registered(2)
    job_id = net.post(shards=2, rounds=2, steps=20, k=10, replication=2, modules="body=layers.0.;head=layers.1.",
                      outer_lr=0.7, outer_momentum=0.9)
    net.wait_job(job_id, timeout=300)

    c = net.client()
    reader = JobReader(c, net.storage(), job_id)
    m = reader.manifest
    assert [list(e) for e in m.module_plan] == [["body"], ["head"]]
    start = initial_state(m)
    body, head = _accepted_final(reader, 0, 0), _accepted_final(reader, 0, 1)
    # a task carries optimizer state for its own module only, and leaves the other module as it found it
    assert {k.split("/")[1] for k in body.tensors if k.startswith("optim/")} == {"layers.0.weight", "layers.0.bias"}
    assert {k.split("/")[1] for k in head.tensors if k.startswith("optim/")} == {"layers.1.weight", "layers.1.bias"}
    for name in ("layers.1.weight", "layers.1.bias"):
        assert body.tensors[f"model/{name}"].equal(start.tensors[f"model/{name}"])
    for name in ("layers.0.weight", "layers.0.bias"):
        assert head.tensors[f"model/{name}"].equal(start.tensors[f"model/{name}"])
        assert not body.tensors[f"model/{name}"].equal(start.tensors[f"model/{name}"])  # the body did train

    # the round's global model carries the outer momentum, hashed with it; the next round started from it
    global0 = load_checkpoint(reader.round_model(0), m, source="round 0 model")
    momentum = {k for k in global0.tensors if k.startswith("outer/")}
    assert momentum and all(k.endswith("/momentum") for k in momentum)
    first_of_round1 = read(c, c.jobs, "getTask", c.call(c.jobs.functions.taskOf(job_id, 1, 0)))
    assert bytes(first_of_round1.inputHash) == global0.hash
    assert reader.metric(1).accuracy > 0.3  # 10 classes: chance is 0.1
    assert not [e for e in net.events() if e.name in ("DisputeOpened", "ReplicaDeclined", "StakeSlashed")]
    logs = " ".join(" ".join(n.text().split()) for n in net.nodes)
    assert "fits: about" in logs  # each solver estimated the task before training it (node/feasibility.py)
    conserved(c)
