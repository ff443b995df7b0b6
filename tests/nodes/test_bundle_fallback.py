"""P10 node side, against fakes (no chain, no IPFS): an accepted task's final state comes from whichever source yields
it (the task's bundle, a replica's bundle with the same final, our own recomputation), each source checked; and a
verifier that agrees with a claim says whether the claim's bundle is available.

The chain and IPFS are fakes; manifests, checkpoints, bundles, the hash checks and (in one test) the training
itself are real."""
from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from verity.chain.protocol import ReplicaStatus, TaskKind, TaskStatus
from verity.cid import cid_to_digest, digest_to_cid
from verity.engine import merkle
from verity.engine.checkpoint import checkpoint_bytes, initial_state
from verity.engine.manifest import load_manifest
from verity.engine.state import TrainState
from verity.node import compute as compute_mod
from verity.node import verifier as verifier_mod
from verity.node.compute import Result, compute_result
from verity.node.context import InputRejected, NodeContext
from verity.node.phases import Phase
from verity.node.snapshot import Snapshot
from verity.node.verifier import VerifierRole, watch_key
from verity.storage import cid_of_bytes
from verity.storage.client import canonical_json
from verity.storage.errors import CidNotFound, InvalidJson, NodeUnreachable
from verity.submit.prepare import JobSpec, plan_job

ME, SOLVER = "0x" + "ab" * 20, "0x" + "cd" * 20
ZERO = b"\0" * 32
JOB = 1


# ---------------------------------------------------------------- fakes


class FakeStorage:
    """An IPFS node holding `blobs`; any other CID times out as the real client reports it (CidNotFound)."""

    def __init__(self, blobs: dict[str, bytes] | None = None, down: bool = False):
        self.blobs, self.down, self.fetched = dict(blobs or {}), down, []

    def get_bytes(self, cid, max_bytes=None, *, timeout=None):
        self.fetched.append(cid)
        if self.down:
            raise NodeUnreachable("http://ipfs", "connection refused")
        if cid not in self.blobs:
            raise CidNotFound(cid, "http://ipfs", 4.0)
        return self.blobs[cid]

    def get_json(self, cid, max_bytes=None, *, timeout=None):
        data = self.get_bytes(cid, max_bytes)
        try:
            return json.loads(data.decode())
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidJson(cid, str(exc)) from None

    def put_bytes(self, data):
        cid = cid_of_bytes(bytes(data))
        self.blobs[cid] = bytes(data)
        return cid

    def put_file(self, path):
        return self.put_bytes(Path(path).read_bytes())

    def put_json(self, obj):
        return self.put_bytes(canonical_json(obj))


class _Functions:
    def __getattr__(self, name):
        return lambda *args: (name, args)


class FakeChain:
    """Only what NodeContext's consumers and the verifier call: `taskOf` (a dict) and the clock."""

    def __init__(self):
        self.address, self.time, self.block, self.sent = ME, 1_000, 10, []
        self.jobs, self.game = SimpleNamespace(functions=_Functions()), SimpleNamespace(functions=_Functions())
        self.task_ids: dict[tuple, int] = {}

    def call(self, call):
        name, args = call
        assert name == "taskOf", f"unexpected view {name}"
        return self.task_ids[args]

    def transact(self, call, gas=None):
        self.sent.append(call)
        return {"blockNumber": self.block}

    def now(self):
        return self.time

    def block_number(self):
        return self.block


class Ctx(NodeContext):
    """A real NodeContext whose chain reads (`task`, `replicas`) come from dicts."""

    def __init__(self, storage, tmp_path, manifest, tasks=None, replicas=None):
        super().__init__(chain=FakeChain(), storage=storage, state_dir=tmp_path)
        self._manifests[JOB] = manifest
        self.tasks, self.reps = dict(tasks or {}), dict(replicas or {})

    def task(self, task_id):
        return self.tasks[task_id]

    def replicas(self, task_id):
        return self.reps.get(task_id, [])


# ---------------------------------------------------------------- a job, a final state, bundles


@pytest.fixture(scope="module")
def job():
    p = plan_job(JobSpec(shards=1, rounds=2, steps=20, k=10))
    m = load_manifest(p.manifest_bytes)
    state = initial_state(m)
    return SimpleNamespace(m=m, blobs={cid_of_bytes(b): b for b in p.blobs}, final=state.hash,
                           final_bytes=checkpoint_bytes(state, m))


def _bundle(blobs: dict, final: bytes, final_bytes: bytes | None, *, salt: int = 0, store: bool = True,
            raw: bytes | None = None):
    """A result bundle whose trace ends at `final` with its final checkpoint `final_bytes` (stored when given).
    Returns (cid digest, root). `salt` varies the trace's middle (another bundle, same final); `raw` replaces the
    bundle's bytes; `store=False` reveals a CID nobody uploads."""
    trace = [b"\x00" * 32, bytes([salt + 1]) * 32, final]
    ck = cid_of_bytes(final_bytes) if final_bytes is not None else cid_of_bytes(b"never uploaded %d" % salt)
    if final_bytes is not None:
        blobs[ck] = final_bytes
    doc = canonical_json({"version": 1, "job": JOB, "round": 0, "index": 0, "k": 10, "steps": 20,
                          "trace": ["0x" + h.hex() for h in trace], "checkpoints": {"2": ck}, "final": ck})
    doc = raw if raw is not None else doc
    if store:
        blobs[cid_of_bytes(doc)] = doc
    return cid_to_digest(cid_of_bytes(doc)), merkle.root(trace)


def _replica(digest, root, final, status=ReplicaStatus.ACCEPTED):
    return SimpleNamespace(node=SOLVER, status=status, root=root, finalHash=final, resultCid=digest)


def _task(final, digest, *, kind=TaskKind.TRAIN, rnd=0, index=0, input_hash=ZERO):
    return SimpleNamespace(jobId=JOB, round=rnd, index=index, kind=kind, n=2, status=TaskStatus.ACCEPTED,
                           inputHash=input_hash, finalHash=final, resultCid=digest, candidateRoot=ZERO)


def _fake_compute(monkeypatch, final: bytes, final_bytes: bytes, calls: list):
    """compute_result replaced by one that stores a deterministic bundle (as the real one does) and returns it."""
    def fake(ctx, task_id, task, *, label="solve"):
        calls.append((task_id, label))
        trace = [b"\x00" * 32, b"\x07" * 32, final]
        ck = ctx.storage.put_bytes(final_bytes)
        cid = ctx.storage.put_json({"version": 1, "k": 10, "trace": ["0x" + h.hex() for h in trace],
                                    "checkpoints": {"2": ck}, "final": ck})
        return Result(trace, merkle.root(trace), cid, 10)

    monkeypatch.setattr(compute_mod, "compute_result", fake)


def _messages(caplog):
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# ---------------------------------------------------------------- consumers fall back


def test_task_bundle_missing_then_a_replicas_bundle_serves_the_next_rounds_input_succeeds(tmp_path, job, caplog):
    caplog.set_level(logging.WARNING, logger="verity.node.context")
    blobs = dict(job.blobs)
    lost, lost_root = _bundle(blobs, job.final, job.final_bytes, salt=1, store=False)  # paid, never uploaded
    good, good_root = _bundle(blobs, job.final, job.final_bytes, salt=2)
    other, other_root = _bundle(blobs, b"\x55" * 32, None, salt=3)  # a replica with another final: never tried
    storage = FakeStorage(blobs)
    reps = [_replica(lost, lost_root, job.final), _replica(other, other_root, b"\x55" * 32, ReplicaStatus.SLASHED),
            _replica(good, good_root, job.final, ReplicaStatus.REVEALED)]
    ctx = Ctx(storage, tmp_path, job.m, tasks={5: _task(job.final, lost, kind=TaskKind.AGGREGATE)}, replicas={5: reps})
    ctx.chain.task_ids[(JOB, 0, 1)] = 5  # round 0's AGGREGATE task (index = number of shards)

    got = ctx.round_input(SimpleNamespace(jobId=JOB, round=1, index=0, inputHash=job.final))

    assert got == job.final_bytes
    msgs = _messages(caplog)
    assert any("task 5" in s and "the task's resultCid" in s and "CidNotFound" in s for s in msgs)
    assert any("served by replica 2's resultCid" in s for s in msgs)
    assert storage.fetched[0] == digest_to_cid(lost) and digest_to_cid(good) in storage.fetched
    assert digest_to_cid(other) not in storage.fetched  # a replica with a different final is not a source


def test_shard_finals_fall_back_per_shard_and_return_the_accepted_hashes_succeeds(tmp_path, job):
    blobs = dict(job.blobs)
    lost, lost_root = _bundle(blobs, job.final, job.final_bytes, salt=1, store=False)
    good, good_root = _bundle(blobs, job.final, job.final_bytes, salt=2)
    ctx = Ctx(FakeStorage(blobs), tmp_path, job.m, tasks={3: _task(job.final, lost)},
              replicas={3: [_replica(lost, lost_root, job.final), _replica(good, good_root, job.final)]})
    ctx.chain.task_ids[(JOB, 0, 0)] = 3
    states, hashes = ctx.shard_finals(SimpleNamespace(jobId=JOB, round=0, index=1, kind=TaskKind.AGGREGATE))
    assert states == [job.final_bytes] and hashes == [job.final]


def _not_json(blobs, job):
    return _bundle(blobs, job.final, job.final_bytes, salt=4, raw=b"\xff not json")


def _wrong_root(blobs, job):
    digest, _ = _bundle(blobs, job.final, job.final_bytes, salt=4)
    return digest, b"\x66" * 32  # the replica revealed another root than its bundle's trace


def _garbage_checkpoint(blobs, job):
    return _bundle(blobs, job.final, b"verity: not a checkpoint", salt=4)


def _other_final_in_trace(blobs, job):
    return _bundle(blobs, b"\x77" * 32, job.final_bytes, salt=4)  # its trace ends elsewhere than the accepted final


def _missing_final_checkpoint(blobs, job):
    trace = [b"\x00" * 32, b"\x05" * 32, job.final]
    doc = canonical_json({"version": 1, "k": 10, "trace": ["0x" + h.hex() for h in trace], "checkpoints": {}})
    blobs[cid_of_bytes(doc)] = doc
    return cid_to_digest(cid_of_bytes(doc)), merkle.root(trace)


@pytest.mark.parametrize("malformed", [_not_json, _wrong_root, _garbage_checkpoint, _other_final_in_trace,
                                       _missing_final_checkpoint])
def test_malformed_task_bundle_moves_on_to_the_next_source_succeeds(tmp_path, job, caplog, malformed):
    caplog.set_level(logging.WARNING, logger="verity.node.context")
    blobs = dict(job.blobs)
    bad, bad_root = malformed(blobs, job)
    good, good_root = _bundle(blobs, job.final, job.final_bytes, salt=2)
    ctx = Ctx(FakeStorage(blobs), tmp_path, job.m, tasks={3: _task(job.final, bad)},
              replicas={3: [_replica(bad, bad_root, job.final), _replica(good, good_root, job.final)]})
    assert ctx.accepted_final(3, ctx.task(3), job.m) == job.final_bytes
    msgs = _messages(caplog)
    assert any("not available from the task's resultCid" in s for s in msgs)
    assert any("served by replica 1's resultCid" in s for s in msgs)


def test_all_bundles_missing_then_recompute_serves_and_is_remembered_succeeds(tmp_path, job, caplog, monkeypatch):
    caplog.set_level(logging.WARNING, logger="verity.node.context")
    calls: list = []
    _fake_compute(monkeypatch, job.final, job.final_bytes, calls)
    blobs = dict(job.blobs)
    lost, lost_root = _bundle(blobs, job.final, job.final_bytes, salt=1, store=False)
    lost2, lost2_root = _bundle(blobs, job.final, None, salt=2)  # uploaded, but its final checkpoint never was
    storage = FakeStorage(blobs)
    ctx = Ctx(storage, tmp_path, job.m, tasks={3: _task(job.final, lost)},
              replicas={3: [_replica(lost, lost_root, job.final), _replica(lost2, lost2_root, job.final)]})

    assert ctx.accepted_final(3, ctx.task(3), job.m) == job.final_bytes
    assert calls == [(3, "recover")]
    assert any("served by our own recomputation" in s for s in _messages(caplog))
    storage.fetched.clear()
    assert ctx.accepted_final(3, ctx.task(3), job.m) == job.final_bytes  # the next consumer: no second recompute
    assert calls == [(3, "recover")] and len(storage.fetched) == 2  # our bundle, its checkpoint


def test_recomputed_input_is_reported_unavailable_by_the_consumer_succeeds(tmp_path, job, monkeypatch):
    """P10 on-chain: a consumer that had to recompute an input says so (JobRegistry.reportUnavailable, the input's
    index) before its own result counts; inputs a network source served are not reported."""
    from verity.node.solver import SolverRole

    _fake_compute(monkeypatch, job.final, job.final_bytes, [])
    blobs = dict(job.blobs)
    lost, lost_root = _bundle(blobs, job.final, job.final_bytes, salt=1, store=False)  # the only replica withheld it
    good, good_root = _bundle(blobs, job.final, job.final_bytes, salt=2)
    ctx = Ctx(FakeStorage(blobs), tmp_path, job.m,
              tasks={3: _task(job.final, lost), 5: _task(job.final, good, kind=TaskKind.AGGREGATE)},
              replicas={3: [_replica(lost, lost_root, job.final)], 5: [_replica(good, good_root, job.final)]})
    ctx.chain.task_ids.update({(JOB, 0, 0): 3, (JOB, 0, 1): 5})  # round 0: shard 0, then its AGGREGATE
    aggregate = SimpleNamespace(jobId=JOB, round=0, index=1, kind=TaskKind.AGGREGATE)
    next_train = SimpleNamespace(jobId=JOB, round=1, index=0, kind=TaskKind.TRAIN, inputHash=job.final)
    first_train = SimpleNamespace(jobId=JOB, round=0, index=0, kind=TaskKind.TRAIN)

    assert ctx.unavailable_inputs(aggregate) == []  # nothing fetched yet: nothing to report
    ctx.shard_finals(aggregate)  # shard 0's bundle is withheld: recomputed
    ctx.round_input(next_train)  # the AGGREGATE's bundle is served: fetched
    assert ctx.unavailable_inputs(aggregate) == [0]
    assert ctx.unavailable_inputs(next_train) == [] and ctx.unavailable_inputs(first_train) == []

    SolverRole(ctx)._report_unavailable(9, aggregate)
    assert ctx.chain.sent == [("reportUnavailable", (9, 0))]


def test_recompute_with_another_final_hash_is_rejected_fails(tmp_path, job, monkeypatch):
    calls: list = []
    _fake_compute(monkeypatch, b"\x42" * 32, job.final_bytes, calls)  # not what the chain accepted
    blobs = dict(job.blobs)
    lost, lost_root = _bundle(blobs, job.final, job.final_bytes, salt=1, store=False)
    ctx = Ctx(FakeStorage(blobs), tmp_path, job.m, tasks={3: _task(job.final, lost)},
              replicas={3: [_replica(lost, lost_root, job.final)]})
    with pytest.raises(InputRejected, match="recomputed result of task 3.*differs from the accepted"):
        ctx.accepted_final(3, ctx.task(3), job.m)
    assert calls == [(3, "recover")]


def test_recompute_whose_bundle_holds_another_state_is_rejected_fails(tmp_path, job, monkeypatch):
    base = initial_state(job.m)
    other = TrainState(tensors={k: v + 1 if v.is_floating_point() else v for k, v in base.tensors.items()})
    assert other.hash != job.final
    _fake_compute(monkeypatch, job.final, checkpoint_bytes(other, job.m), [])  # claims the final, stores another
    blobs = dict(job.blobs)
    lost, _ = _bundle(blobs, job.final, job.final_bytes, salt=1, store=False)
    ctx = Ctx(FakeStorage(blobs), tmp_path, job.m, tasks={3: _task(job.final, lost)})
    with pytest.raises(InputRejected, match="recomputed result of task 3: its own bundle.*HashMismatch"):
        ctx.accepted_final(3, ctx.task(3), job.m)


def test_our_ipfs_node_down_propagates_without_fallback_fails(tmp_path, job, monkeypatch):
    calls: list = []
    _fake_compute(monkeypatch, job.final, job.final_bytes, calls)
    blobs = dict(job.blobs)
    good, good_root = _bundle(blobs, job.final, job.final_bytes, salt=2)
    ctx = Ctx(FakeStorage(blobs, down=True), tmp_path, job.m, tasks={3: _task(job.final, good)},
              replicas={3: [_replica(good, good_root, job.final)]})
    with pytest.raises(ConnectionError):
        ctx.accepted_final(3, ctx.task(3), job.m)
    assert calls == []  # transient: retried on a later tick, not recomputed


def test_each_distinct_source_is_tried_once_then_one_recompute_succeeds(tmp_path, job, monkeypatch):
    calls: list = []
    _fake_compute(monkeypatch, job.final, job.final_bytes, calls)
    blobs = dict(job.blobs)
    task_cid, _ = _bundle(blobs, job.final, job.final_bytes, salt=9, store=False)
    reps = [_replica(*_bundle(blobs, job.final, job.final_bytes, salt=s, store=False), job.final) for s in (1, 2)]
    reps.append(_replica(reps[0].resultCid, reps[0].root, job.final))  # two replicas revealed the same CID
    storage = FakeStorage(blobs)
    ctx = Ctx(storage, tmp_path, job.m, tasks={3: _task(job.final, task_cid)}, replicas={3: reps})
    assert ctx.accepted_final(3, ctx.task(3), job.m) == job.final_bytes
    network = [digest_to_cid(d) for d in (task_cid, reps[0].resultCid, reps[1].resultCid)]
    assert storage.fetched[:3] == network and len(storage.fetched) == 3 + 2  # then our bundle and its checkpoint
    assert calls == [(3, "recover")]


def test_a_remembered_source_keeps_the_network_tries_within_replication_plus_one_succeeds(tmp_path, job, monkeypatch):
    calls: list = []
    _fake_compute(monkeypatch, job.final, job.final_bytes, calls)
    blobs = dict(job.blobs)
    lost = [_bundle(blobs, job.final, job.final_bytes, salt=s, store=False) for s in (1, 2, 3, 4)]
    storage = FakeStorage(blobs)
    ctx = Ctx(storage, tmp_path, job.m, tasks={3: _task(job.final, lost[0][0])},
              replicas={3: [_replica(*lost[1], job.final), _replica(*lost[2], job.final)]})
    ctx._served[(3, job.final)] = lost[3]  # served once, gone since
    assert ctx.accepted_final(3, ctx.task(3), job.m) == job.final_bytes
    tried = [digest_to_cid(lost[i][0]) for i in (3, 0, 1)]  # remembered, task, first replica: 2 + 1 in all
    assert storage.fetched[:3] == tried and len(storage.fetched) == 3 + 2 and calls == [(3, "recover")]


def test_real_recompute_reproduces_the_withheld_bundle_byte_for_byte_succeeds(tmp_path, job):
    """Determinism end to end: the bundle an honest solver made but never uploaded is recomputed, same CID."""
    task = SimpleNamespace(jobId=JOB, round=0, index=0, kind=TaskKind.TRAIN, n=2, status=TaskStatus.ACCEPTED,
                           inputHash=initial_state(job.m).hash, finalHash=ZERO, resultCid=ZERO, candidateRoot=ZERO)
    solver_storage = FakeStorage(job.blobs)
    honest = compute_result(Ctx(solver_storage, tmp_path / "solver", job.m), 3, task)
    task.finalHash, task.resultCid = honest.final, cid_to_digest(honest.result_cid)

    storage = FakeStorage(job.blobs)  # the solver's bundle and checkpoints never reached the network
    ctx = Ctx(storage, tmp_path / "consumer", job.m, tasks={3: task},
              replicas={3: [_replica(task.resultCid, honest.root, honest.final)]})
    final_bytes = ctx.accepted_final(3, task, job.m)

    assert honest.result_cid in storage.blobs  # recomputed: the same bundle bytes, now held by the consumer
    assert final_bytes == solver_storage.blobs[json.loads(storage.blobs[honest.result_cid])["final"]]


# ---------------------------------------------------------------- the verifier publishes what it agrees with


TRACE = [b"\x00" * 32, b"\x01" * 32, b"\x02" * 32]


@pytest.fixture
def verifier(tmp_path, job, monkeypatch):
    blobs = dict(job.blobs)
    ours = FakeStorage().put_json({"version": 1, "k": 10, "trace": ["0x" + h.hex() for h in TRACE],
                                   "checkpoints": {"2": cid_of_bytes(b"ck")}})
    ctx = Ctx(FakeStorage(blobs), tmp_path, job.m,
              tasks={7: SimpleNamespace(status=TaskStatus.REVEALED, epoch=0, jobId=JOB, openDisputes=0)})
    claim = SimpleNamespace(defender=SOLVER, coDefender="0x" + "00" * 20, root=merkle.root(TRACE),
                            finalHash=TRACE[-1], resultCid=cid_to_digest(ours), epoch=0, challengeDeadline=1_100,
                            revealGrace=50)
    monkeypatch.setattr(verifier_mod, "read", lambda c, contract, fn, *a: claim)
    monkeypatch.setattr(verifier_mod, "compute_result", lambda *a, **k: Result(list(TRACE), claim.root, ours, 10))
    return SimpleNamespace(role=VerifierRole(ctx), ctx=ctx, claim=claim, blobs=blobs, snap=Snapshot())


def _verdict(v):
    v.role.on_event(v.snap, SimpleNamespace(name="ChallengeWindowOpened", contract="JobRegistry",
                                            args={"taskId": 7, "deadline": 0}))
    item = v.snap.items[watch_key(7, 0)]
    for _ in range(2):  # re-execute, then compare
        v.role.advance(v.snap, item)
    assert item.phase == Phase.DONE and not v.ctx.chain.sent
    return item.data["verdict"]


def test_verifier_agreeing_with_our_own_bundle_cid_says_we_serve_it_too_succeeds(verifier):
    assert _verdict(verifier) == "agrees; bundle served by us too"
    assert verifier.ctx.storage.fetched == []  # nothing to fetch: our node holds the same bytes


def test_verifier_agreeing_fetches_and_checks_a_different_claimed_bundle_succeeds(verifier):
    doc = canonical_json({"version": 1, "k": 10, "trace": ["0x" + h.hex() for h in TRACE], "checkpoints": {},
                          "note": "same trace, other bytes"})
    verifier.ctx.storage.blobs[cid_of_bytes(doc)] = doc
    verifier.claim.resultCid = cid_to_digest(cid_of_bytes(doc))
    assert _verdict(verifier) == "agrees"
    assert verifier.ctx.storage.fetched == [cid_of_bytes(doc)]


@pytest.mark.parametrize("claimed", ["withheld", "wrong trace"])
def test_verifier_agreeing_with_an_unavailable_or_malformed_claimed_bundle_warns_fails(verifier, caplog, claimed):
    caplog.set_level(logging.WARNING, logger="verity.node.verifier")
    if claimed == "withheld":
        verifier.claim.resultCid = cid_to_digest(cid_of_bytes(b"never uploaded"))
    else:
        doc = canonical_json({"version": 1, "k": 10, "trace": ["0x" + h.hex() for h in reversed(TRACE)],
                              "checkpoints": {}})
        verifier.ctx.storage.blobs[cid_of_bytes(doc)] = doc
        verifier.claim.resultCid = cid_to_digest(cid_of_bytes(doc))
    assert _verdict(verifier) == "agrees, but the claimed bundle is unavailable or malformed"
    assert any("task 7" in s and "unavailable or malformed" in s for s in _messages(caplog))


def test_verifier_agreeing_with_our_ipfs_node_down_raises_to_be_retried_fails(verifier):
    verifier.claim.resultCid = cid_to_digest(cid_of_bytes(b"someone else's"))
    verifier.ctx.storage.down = True
    with pytest.raises(ConnectionError):
        _verdict(verifier)
