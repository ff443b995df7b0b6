"""Issue 23, "nothing to copy before commitments close": compute_result(publish=False) names a result's checkpoints
and bundle by CID without adding anything to IPFS, and `publish` adds exactly those bytes at reveal, under the CID
the commitment named. A replica that never trained listed its IPFS node's pins 9 s after assignment, found its
partner's bundle (job, round and index in clear), committed the same root and was paid: now there is nothing to list
until every commitment is final.

Training is replaced (run_task writes two checkpoint files); the storage is a recorder that computes CIDs as IPFS
does (verity.storage.unixfs)."""
from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

import verity.node.compute as compute_mod
from verity.chain.protocol import TaskKind
from verity.node.compute import compute_result, publish, published
from verity.node.faults import Faults
from verity.storage import canonical_json, cid_of_bytes, cid_of_file

TRACE = [bytes([i]) * 32 for i in range(3)]


class _Storage:
    def __init__(self):
        self.added = []

    def put_file(self, path):
        self.added.append(("file", str(path)))
        return cid_of_file(path)

    def put_bytes(self, data):
        self.added.append(("bytes", len(data)))
        return cid_of_bytes(data)

    def put_json(self, obj):
        self.added.append(("json", obj.get("job")))
        return cid_of_bytes(canonical_json(obj))


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    def run_task(m, start, shard, ref, workdir, *, on_checkpoint, expected_input_hash):
        for j in (1, 2):
            path = workdir / f"ckpt-{j:06d}.safetensors"
            path.write_bytes(b"weights after checkpoint %d" % j)
            on_checkpoint(SimpleNamespace(index=j, path=path))
        return SimpleNamespace(trace=list(TRACE))

    monkeypatch.setattr(compute_mod, "run_task", run_task)

    def workdir(*parts):
        path = tmp_path.joinpath(*map(str, parts))
        path.mkdir(parents=True, exist_ok=True)
        return path

    return SimpleNamespace(manifest=lambda job: SimpleNamespace(checkpoint_interval=10), workdir=workdir,
                           shard=lambda job, index: None, round_input=lambda task: b"", storage=_Storage(),
                           faults=Faults(), work=SimpleNamespace(stopping=threading.Event()))


TASK = SimpleNamespace(jobId=3, round=0, index=1, kind=TaskKind.TRAIN, inputHash=TRACE[0], n=2)


def test_unpublished_result_adds_nothing_until_published_under_the_committed_cid(ctx):
    res = compute_result(ctx, 9, TASK, publish=False)
    assert ctx.storage.added == []  # nothing to list among the pins, nothing announced
    bundle = res.unpublished["bundle"]
    assert res.result_cid == cid_of_bytes(canonical_json(bundle))
    assert bundle["trace"] == ["0x" + h.hex() for h in TRACE] and set(bundle["checkpoints"]) == {"1", "2"}

    publish(ctx, res.unpublished, res.result_cid)
    assert [kind for kind, _ in ctx.storage.added] == ["file", "file", "json"]

    published_at_once = compute_result(ctx, 9, TASK)  # the same result published at once: the same CIDs
    assert published_at_once.result_cid == res.result_cid and published_at_once.unpublished is None


def test_publish_refuses_a_bundle_that_is_not_the_committed_one_fails(ctx):
    res = compute_result(ctx, 9, TASK, publish=False)
    with pytest.raises(RuntimeError, match="not the committed"):
        publish(ctx, res.unpublished, cid_of_bytes(b"another bundle"))


def test_withheld_checkpoints_stay_unpublished_but_the_bundle_is_published(ctx):
    ctx.faults = Faults(withhold_checkpoint=True)  # TEST-ONLY fault: the bundle names checkpoints nobody can fetch
    res = compute_result(ctx, 9, TASK, publish=False)
    publish(ctx, res.unpublished, res.result_cid)
    assert [kind for kind, _ in ctx.storage.added] == ["json"]


def test_published_uploads_a_kept_result_once_and_nothing_for_a_result_published_at_once(ctx):
    from verity.node.phases import Phase
    from verity.node.snapshot import WorkItem
    from verity.node.work import WorkPool

    ctx.work = WorkPool(inline=True)  # the node runs the upload in its urgent lane; inline here
    res = compute_result(ctx, 9, TASK, publish=False)
    item = WorkItem(key="task:9:0", kind="solve", phase=Phase.TRAINED, task_id=9,
                    data={"cid": res.result_cid, "unpublished": res.unpublished})
    assert published(ctx, item) and "unpublished" not in item.data
    assert published(ctx, item)  # a reveal retried after a failed transaction uploads nothing again
    assert [kind for kind, _ in ctx.storage.added] == ["file", "file", "json"]
    ctx.storage.added.clear()
    at_once = WorkItem(key="task:9:1", kind="solve", phase=Phase.TRAINED, task_id=9, data={"cid": res.result_cid})
    assert published(ctx, at_once) and ctx.storage.added == []
