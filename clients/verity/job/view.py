"""Read a job's progress from the chain (and its models from IPFS) for people:
the tables of `verity job show/watch`, `ape run submit --wait` and the demo.

Replica history comes from events (a slot drawn again overwrites its on-chain record), so replaced,
late and slashed holders stay visible with what they were fined. `advice(report)` says what a
waiting job waits for and when its submitter may cancel it (`verity.job.advice`)."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from verity.chain import TxFailed
from verity.chain.protocol import ROLE_SOLVER, JobStatus, TaskKind, TaskStatus
from verity.chain.views import read
from verity.cid import digest_to_cid
from verity.errors import VerityError
from verity.job.history import JobHistory, ReplicaRow
from verity.job.advice import WAITING, CancelRule, NodeFacts, advice, cancel_rule, task_reason

__all__ = ["JobReader", "JobReport", "TaskRow", "ReplicaRow", "RoundMetric", "advice", "JobNotFound"]
MAX_NODES_SCANNED = 128  # eligibility is explained from at most this many registered nodes


class JobNotFound(VerityError, LookupError):
    def __init__(self, job_id: int, count: int):
        super().__init__(f"no job {job_id} on this deployment (jobs 1..{count})" if count else
                         f"no job {job_id}: no job was posted on this deployment yet")


@dataclass
class TaskRow:
    task_id: int
    round: int
    index: int
    kind: str
    status: str
    replicas: list[ReplicaRow]
    dispute: str = ""
    open_since: int = 0
    challenge_deadline: int = 0
    reason: str = ""     # why a waiting task has not moved on (jobadvice.task_reason)
    reveal_grace: int = 0     # challenges committed by challenge_deadline may be revealed this long after it
    open_disputes: int = 0    # live challenges against the candidate (finalize waits for 0)
    candidate: str = ""       # a challenger whose result won a dispute and waits out its own window ("" = replicas')


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
    now: int = 0                     # chain time the report was read at
    escrow: int = 0
    submitter: str = ""
    replication: int = 0
    ever_assigned: bool = False
    assignment_timeout: int = 0
    chain_id: int | None = None
    cancel: CancelRule | None = None
    pot: int = 0                     # wei left in an ended job's verification pot (verity.job.pot)
    pot_refundable_at: int = 0       # when `refund` can pay it (0: the pot is not closed yet)


class JobReader:
    """Reads one job; caches the manifest, eval shard, per-round metrics and followed events."""

    def __init__(self, chain, storage, job_id: int, index=None):
        self.chain, self.storage, self.job_id = chain, storage, job_id
        job = self.job()
        if JobStatus(job.status) == JobStatus.NONE:
            raise JobNotFound(job_id, chain.call(chain.jobs.functions.jobCount()))
        self._eval = None
        self._metrics: dict[int, RoundMetric] = {}
        self.history = JobHistory(job_id, chain.game.address)
        self._index = index  # verity.index: the job's events by lookup; None: the chain's, opened on first use

    def events(self) -> list:
        """This job's events (its dispute slashes too), synced into the index first, the unconfirmed tail live."""
        if self._index is None:
            from verity.index import open_index

            self._index = open_index(self.chain)
        self._index.sync()
        return self._index.live_events(job_id=self.job_id)

    def job(self):
        return read(self.chain, self.chain.jobs, "getJob", self.job_id)

    def escrow(self) -> int:
        """Tokens JobEscrow still holds for this job."""
        return int(self.chain.call(self.chain.escrow.functions.escrowOf(self.job_id)))

    @cached_property
    def manifest_raw(self) -> bytes:
        return self.storage.get_bytes(digest_to_cid(self.job().manifestCid), max_bytes=1 << 20)

    @cached_property
    def manifest(self):
        from verity.engine.manifest import load_manifest

        return load_manifest(self.manifest_raw)

    def _task_id(self, rnd: int, index: int) -> int:
        """The task id, or 0 while the task does not exist yet (taskOf reverts for those)."""
        try:
            return self.chain.call(self.chain.jobs.functions.taskOf(self.job_id, rnd, index))
        except TxFailed:
            return 0

    def tasks(self, job) -> list[TaskRow]:
        c = self.chain
        # rebuilt from the job's events each time: the unconfirmed tail is read again until it is indexed
        self.history = h = JobHistory(self.job_id, c.game.address)
        h.feed(self.events())
        rows = []
        for tid, (rnd, index) in sorted(h.tasks.items()):
            t = read(c, c.jobs, "getTask", tid)
            replicas = h.replicas(tid, read(c, c.jobs, "getReplicas", tid))
            candidate = t.candidate if int(t.candidate, 16) else ""
            rows.append(TaskRow(tid, rnd, index, TaskKind(t.kind).name.lower(), TaskStatus(t.status).name.lower(),
                                replicas, h.dispute_text(tid), int(t.openSince), int(t.challengeDeadline),
                                reveal_grace=int(t.revealHold) + int(job.revealWindow),  # held reveals (issue 25)
                                open_disputes=int(t.openDisputes), candidate=candidate))
        return rows

    def _node_facts(self, job, waiting: list[TaskRow], rep_now: int) -> NodeFacts:
        c, reg = self.chain, self.chain.registry
        facts = NodeFacts(registered=c.call(reg.functions.nodeCount()), liveness_window=c.call(reg.functions.livenessWindow()))
        for row in waiting:
            for r in row.replicas:
                if r.current and r.status in ("assigned", "committed") and r.node not in facts.last_seen:
                    facts.last_seen[r.node] = int(read(c, reg, "getNode", r.node).lastSeen)
        if any(row.status == "open" for row in waiting):
            for i in range(min(facts.registered, MAX_NODES_SCANNED)):
                node = c.call(reg.functions.nodeList(i))
                facts.offline += int(facts.last_seen.setdefault(node, int(read(c, reg, "getNode", node).lastSeen))
                                     + facts.liveness_window < rep_now)
                # the 8-argument overload: the job's region and bandwidth floor too (web3 picks it by arity)
                if c.call(reg.functions.isEligible(node, ROLE_SOLVER, job.deviceClass, job.minMemoryMb, job.profileBit,
                                                   job.region, job.minBandwidthMbps, job.stakePerReplica)):
                    facts.eligible.append(node)
            for row in waiting:
                if row.status == "open":
                    facts.banned[row.task_id] = [a for a in c.call(c.jobs.functions.bannedOf(row.task_id)) if int(a, 16)]
        return facts

    def round_model(self, rnd: int) -> bytes | None:
        """The accepted aggregate (global model) of round `rnd`, verified, or None if not there yet."""
        from verity.engine.checkpoint import checkpoint_cap, load_checkpoint

        tid = self._task_id(rnd, len(self.manifest.shards))
        if not tid:
            return None
        t = read(self.chain, self.chain.jobs, "getTask", tid)
        if TaskStatus(t.status) != TaskStatus.ACCEPTED:
            return None
        bundle = self.storage.get_json(digest_to_cid(t.resultCid))
        data = self.storage.get_bytes(bundle["final"], max_bytes=checkpoint_cap(self.manifest))
        load_checkpoint(data, self.manifest, expected_hash=bytes(t.finalHash), source=f"round {rnd} model")
        return data

    def eval_shard(self):
        """The manifest's held-out eval shard (verified against the manifest's data spec), or None."""
        from verity.engine.data import load_shard, shard_cap

        ref = self.manifest.eval_shard
        if ref is not None and self._eval is None:
            self._eval = load_shard(self.storage.get_bytes(ref.cid, max_bytes=shard_cap(self.manifest.data, ref.samples)), self.manifest.data, samples=ref.samples,
                                    source="eval shard")
        return self._eval

    def metric(self, rnd: int) -> RoundMetric | None:
        if rnd in self._metrics:
            return self._metrics[rnd]
        if self.manifest.eval_shard is None:
            return None
        data = self.round_model(rnd)
        if data is None:
            return None
        from verity.engine.checkpoint import load_checkpoint
        from verity.engine.evaluate import evaluate

        res = evaluate(self.manifest, load_checkpoint(data, self.manifest, source=f"round {rnd} model"), self.eval_shard())
        self._metrics[rnd] = RoundMetric(rnd, float(res.loss), float(res.accuracy))
        return self._metrics[rnd]

    def report(self, metrics: bool = True) -> JobReport:
        """Tasks, replicas, reasons and the cancel rule (chain only); with `metrics`, also the
        held-out loss and accuracy of every finished round (IPFS + evaluation)."""
        c, job = self.chain, self.job()
        rep = JobReport(self.job_id, JobStatus(job.status).name.lower(), int(job.currentRound), int(job.rounds),
                        int(job.shards), now=c.now(), escrow=self.escrow(), submitter=job.submitter,
                        replication=int(job.replication), ever_assigned=bool(job.everAssigned),
                        assignment_timeout=c.call(c.jobs.functions.assignmentTimeout()),
                        chain_id=c.deployments.chain_id)
        if rep.status != "active":
            from verity.job.pot import pot_of

            pot = pot_of(c, self.job_id)
            if pot is not None:
                rep.pot, rep.pot_refundable_at = pot.balance, pot.refundable_at
        rep.tasks = self.tasks(job)
        waiting = [t for t in rep.tasks if t.status in WAITING and t.round == rep.current_round]
        if waiting and rep.status == "active":
            facts = self._node_facts(job, waiting, rep.now)
            for row in waiting:
                row.reason = task_reason(row, rep.now, facts, rep.replication, job.stakePerReplica / 1e18)
        rep.cancel = cancel_rule(rep)
        for rnd in range(int(job.rounds) if metrics else 0):
            m = self.metric(rnd)
            if m is not None:
                rep.metrics.append(m)
        if JobStatus(job.status) == JobStatus.COMPLETED:
            rep.model_cid = digest_to_cid(job.modelCid)
        return rep
