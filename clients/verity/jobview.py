"""Read a job's progress from the chain (and its models from IPFS) for people:
the tables of `verity job show/watch`, `ape run submit --wait` and the demo."""
from __future__ import annotations

from dataclasses import dataclass, field

from verity.chain import EventCursor, TxFailed
from verity.chain.views import DisputeOutcome, JobStatus, ReplicaStatus, TaskKind, TaskStatus, read
from verity.cid import digest_to_cid
from verity.engine.checkpoint import load_checkpoint
from verity.engine.data import load_shard
from verity.engine.evaluate import evaluate
from verity.engine.manifest import load_manifest


@dataclass
class TaskRow:
    task_id: int
    round: int
    index: int
    kind: str
    status: str
    replicas: list[tuple[str, str]]   # (node, status)
    dispute: str = ""


@dataclass
class RoundMetric:
    round: int
    loss: float
    accuracy: float | None


@dataclass
class JobReport:
    job_id: int
    status: str
    current_round: int
    rounds: int
    shards: int
    tasks: list[TaskRow] = field(default_factory=list)
    metrics: list[RoundMetric] = field(default_factory=list)
    model_cid: str | None = None


class JobReader:
    """Reads one job; caches the manifest, eval shard and per-round metrics."""

    def __init__(self, chain, storage, job_id: int):
        self.chain, self.storage, self.job_id = chain, storage, job_id
        job = self.job()
        if JobStatus(job.status) == JobStatus.NONE:
            from verity.errors import VerityError

            raise VerityError(f"no job {job_id} on this deployment (jobs 1..{chain.call(chain.jobs.functions.jobCount())})")
        self.manifest_raw = storage.get_bytes(digest_to_cid(job.manifestCid), max_bytes=1 << 20)
        self.manifest = load_manifest(self.manifest_raw)
        self._eval = None
        self._metrics: dict[int, RoundMetric] = {}
        self._disputes: dict[int, str] = {}
        self._dispute_events = EventCursor(chain.w3, {"DisputeGame": chain.game}, next_block=chain.deployments.start_block)

    def job(self):
        return read(self.chain, self.chain.jobs, "getJob", self.job_id)

    def _task_id(self, rnd: int, index: int) -> int:
        """The task id, or 0 while the task does not exist yet (taskOf reverts for those)."""
        try:
            return self.chain.call(self.chain.jobs.functions.taskOf(self.job_id, rnd, index))
        except TxFailed:
            return 0

    def _follow_disputes(self) -> None:
        """Dispute id and outcome per task, from DisputeGame events (the on-chain pointer is cleared on settlement)."""
        for ev in self._dispute_events.poll():
            a = ev.args
            if ev.name == "DisputeOpened":
                self._disputes[a["taskId"]] = f"#{a['disputeId']} open"
            elif ev.name == "StepPinpointed":
                self._disputes[self._task_of_dispute(a["disputeId"])] = f"#{a['disputeId']} step {a['step']}"
            elif ev.name == "DisputeResolved":
                outcome = DisputeOutcome(a["outcome"]).name.lower().replace("_", " ")
                self._disputes[a["taskId"]] = f"#{a['disputeId']} {outcome}"

    def _task_of_dispute(self, dispute_id: int) -> int:
        return int(read(self.chain, self.chain.game, "getDispute", dispute_id).taskId)

    def tasks(self, job) -> list[TaskRow]:
        rows = []
        c = self.chain
        self._follow_disputes()
        for rnd in range(int(job.currentRound) + 1 if JobStatus(job.status) == JobStatus.ACTIVE else int(job.rounds)):
            for index in range(int(job.shards) + 1):
                tid = self._task_id(rnd, index)
                if not tid:
                    continue
                t = read(c, c.jobs, "getTask", tid)
                reps = [(r.node, ReplicaStatus(r.status).name.lower()) for r in read(c, c.jobs, "getReplicas", tid)]
                dispute = self._disputes.get(tid, "")
                rows.append(TaskRow(tid, rnd, index, TaskKind(t.kind).name.lower(), TaskStatus(t.status).name.lower(), reps, dispute))
        return rows

    def round_model(self, rnd: int) -> bytes | None:
        """The accepted aggregate (global model) of round `rnd`, verified, or None if not there yet."""
        tid = self._task_id(rnd, len(self.manifest.shards))
        if not tid:
            return None
        t = read(self.chain, self.chain.jobs, "getTask", tid)
        if TaskStatus(t.status) != TaskStatus.ACCEPTED:
            return None
        bundle = self.storage.get_json(digest_to_cid(t.resultCid))
        data = self.storage.get_bytes(bundle["final"])
        load_checkpoint(data, self.manifest, expected_hash=bytes(t.finalHash), source=f"round {rnd} model")
        return data

    def metric(self, rnd: int) -> RoundMetric | None:
        if rnd in self._metrics:
            return self._metrics[rnd]
        if self.manifest.eval_shard is None:
            return None
        data = self.round_model(rnd)
        if data is None:
            return None
        if self._eval is None:
            ref = self.manifest.eval_shard
            self._eval = load_shard(self.storage.get_bytes(ref.cid), self.manifest.data, samples=ref.samples, source="eval shard")
        state = load_checkpoint(data, self.manifest, source=f"round {rnd} model")
        res = evaluate(self.manifest, state, self._eval)
        self._metrics[rnd] = RoundMetric(rnd, float(res.loss), float(res.accuracy))
        return self._metrics[rnd]

    def report(self) -> JobReport:
        job = self.job()
        rep = JobReport(self.job_id, JobStatus(job.status).name.lower(), int(job.currentRound), int(job.rounds), int(job.shards))
        rep.tasks = self.tasks(job)
        for rnd in range(int(job.rounds)):
            m = self.metric(rnd)
            if m is not None:
                rep.metrics.append(m)
        if JobStatus(job.status) == JobStatus.COMPLETED:
            rep.model_cid = digest_to_cid(job.modelCid)
        return rep
