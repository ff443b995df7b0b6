"""What each explorer page shows, read from the chain (and IPFS) through the clients' own readers: `JobReader`
(tasks, replicas, metrics), `read_status` (earnings, reputation, selection factors), the model card and
`verify_model`. Events come only through `verity.explorer.source`; disputes are told by `verity.explorer.trail`."""
from __future__ import annotations

import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from verity.chain.protocol import (DEVICE_CUDA, PROFILE_BITS, ROLE_REFEREE, ROLE_SOLVER, ROLE_VERIFIER, JobStatus,
                                   ReplicaStatus, TaskKind, TaskStatus, region_name)
from verity.chain.views import read
from verity.explorer import source
from verity.explorer.trail import Trail, build_trails
from verity.node.status import role_names
from verity.units import duration

MAX_JOBS = 200          # the overview lists the newest jobs
MAX_NODE_TASKS = 200    # a node page lists its newest tasks
HOUR = 3600


def ago(now: int, then: int) -> str:
    return "never" if not then else "just now" if now - then < 1 else f"{duration(now - then)} ago"


# ----------------------------------------------------------------------------------------------------- overview

@dataclass
class NodeRow:
    address: str
    roles: str
    stake: int
    locked: int
    device: str
    memory_mb: int
    profiles: list[str]
    region: str
    bandwidth_mbps: int
    last_seen: int


@dataclass
class Overview:
    now: int
    block: int
    nodes: list[NodeRow]
    total_stake: int
    total_locked: int
    classes: list[tuple[str, str, str, int, int]]   # (profile, device, role, nodes, stake)
    jobs: list[tuple[int, str, int, int, int]]      # (job, status, round shown, rounds, escrow wei)
    jobs_by_state: dict[str, int]
    accepted_last_hour: int
    accepted_total: int
    recent: list                                    # newest DecodedEvents, newest first


def _block_time(chain, block: int, cache: dict[int, int]) -> int:
    if block not in cache:
        cache[block] = int(chain.w3.eth.get_block(block)["timestamp"])
    return cache[block]


_BLOCK_TIMES: dict[int, int] = {}


def overview(chain) -> Overview:
    c, reg = chain, chain.registry
    now, block = c.now(), source.head_block(c)
    nodes = []
    for i in range(int(c.call(reg.functions.nodeCount()))):
        addr = c.call(reg.functions.nodeList(i))
        n = read(c, reg, "getNode", addr)
        nodes.append(NodeRow(addr, role_names(int(n.roles)), int(n.stake), int(n.locked),
                             "gpu (cuda)" if int(n.deviceClass) == DEVICE_CUDA else "cpu", int(n.memoryMb),
                             [p for p, bit in PROFILE_BITS.items() if int(n.profiles) & bit],
                             region_name(int(n.region)) or "undeclared", int(n.bandwidthMbps), int(n.lastSeen)))
    classes: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for n in nodes:
        for role in n.roles.split(","):
            for p in n.profiles or ["(none)"]:
                k = classes[(p, n.device, role)]
                k[0] += 1
                k[1] += n.stake
    count = int(c.call(c.jobs.functions.jobCount()))
    jobs, states = [], Counter()
    for jid in range(count, 0, -1):
        j = read(c, c.jobs, "getJob", jid)
        status = JobStatus(j.status).name.lower()
        states[status] += 1
        if len(jobs) < MAX_JOBS:
            jobs.append((jid, status, min(int(j.currentRound) + 1, int(j.rounds)), int(j.rounds),
                         int(c.call(c.escrow.functions.escrowOf(jid)))))
    accepted = source.named_events(c, ["TaskAccepted"])
    last_hour = sum(1 for e in accepted if _block_time(c, e.block, _BLOCK_TIMES) >= now - HOUR)
    return Overview(now, block, nodes, sum(n.stake for n in nodes), sum(n.locked for n in nodes),
                    sorted((*k, v[0], v[1]) for k, v in classes.items()), jobs, dict(states), last_hour,
                    len(accepted), source.latest_events(c, 12)[::-1])


# ---------------------------------------------------------------------------------------------------------- job

@dataclass
class Conservation:
    deposited: int = 0
    paid: int = 0
    refunded: int = 0
    burned: int = 0
    held: int = 0

    @property
    def ok(self) -> bool:
        return self.deposited == self.paid + self.refunded + self.burned + self.held


@dataclass
class NodeMoney:
    paid: int = 0          # task payments from the escrow
    fees: int = 0          # verification fees
    rewards: int = 0       # dispute and referee credits in the job's resolving transactions
    forfeited: int = 0     # pay burned: the result's bundle was unavailable (P10)
    slashed: int = 0       # dispute slashes, late fines and referee slashes


@dataclass
class JobPage:
    report: object                       # verity.job.view.JobReport
    name: str
    trails: list[Trail]
    money: dict[str, NodeMoney]          # node -> what it got and lost in this job
    payments: list[tuple[int, str, int]]  # (block, payee, wei), PaymentSent of this job
    slashes: list[tuple[int, str, int, str]]  # (block, node, wei, why)
    conservation: Conservation
    events: int                          # how many events the page was built from


def job_page(reader) -> JobPage:
    c = reader.chain
    rep = reader.report()
    events = source.job_events(c, reader.job_id)
    trails = build_trails(events)
    money: dict[str, NodeMoney] = defaultdict(NodeMoney)
    cons = Conservation(held=rep.escrow)
    payments, slashes = [], []
    for e in events:
        a = e.args
        if e.contract == "JobEscrow" and e.name == "EscrowDeposited":
            cons.deposited += int(a["amount"])
        elif e.contract == "JobEscrow" and e.name == "PaymentSent":
            cons.paid += int(a["amount"])
            money[a["to"]].paid += int(a["amount"])
            payments.append((e.block, a["to"], int(a["amount"])))
        elif e.contract == "JobEscrow" and e.name == "EscrowRefunded":
            cons.refunded += int(a["amount"])
        elif e.contract == "JobEscrow" and e.name == "EscrowBurned":
            cons.burned += int(a["amount"])
        elif e.name == "FeePaid":
            money[a["verifier"]].fees += int(a["amount"])
        elif e.name == "PaymentForfeited":
            money[a["node"]].forfeited += int(a["amount"])
        elif e.name == "ReplicaLate":
            money[a["node"]].slashed += int(a["slashed"])
            slashes.append((e.block, a["node"], int(a["slashed"]), f"late on task {a['taskId']}"))
        elif e.name == "RefereeSlashed":
            money[a["referee"]].slashed += int(a["amount"])
            slashes.append((e.block, a["referee"], int(a["amount"]), f"referee in dispute {a['disputeId']}"))
    for t in trails.values():
        for node, amount in t.slashes:
            money[node].slashed += amount
            slashes.append((t.entries[-1].block, node, amount, f"lost dispute {t.dispute_id} (task {t.task_id})"))
        for node, amount in t.credits:
            money[node].rewards += amount
    name = ""
    try:
        name = reader.manifest.name or ""
    except Exception:  # noqa: BLE001 — a job whose manifest is unreachable still has a page
        name = "(manifest unavailable)"
    return JobPage(rep, name, [trails[k] for k in sorted(trails)], dict(money), payments, sorted(slashes), cons,
                   len(events))


# --------------------------------------------------------------------------------------------------------- node

@dataclass
class TaskLine:
    task_id: int
    job_id: int
    round: int             # shown to people: from 1
    index: int
    kind: str
    slot: int
    task_status: str
    replica_status: str    # this node's replica: its current record, or what its events say it became
    block: int


@dataclass
class NodePage:
    address: str
    status: object                       # verity.node.status.NodeStatus
    trails: list[Trail]                  # disputes it was a party to
    refereed: list[Trail]                # disputes it sat on as a referee
    tasks: list[TaskLine]
    won: int
    lost: int


_MARKS = {"ResultCommitted": "committed", "ResultRevealed": "revealed", "ReplicaLate": "late",
          "ReplicaDeclined": "declined", "ReplicaWithdrawn": "withdrawn", "InputUnavailable": "input unavailable"}


def node_page(chain, address: str) -> NodePage:
    from verity.node.status import read_status

    c = chain
    status = read_status(c, address)
    events = source.node_events(c, address)
    disputes = {e.args["disputeId"] for e in events if "disputeId" in e.args}
    trails = build_trails(e for e in source.all_events(c) if e.args.get("disputeId") in disputes
                          or e.name in ("StakeSlashed", "Credited"))
    low = address.lower()
    party = [t for t in trails.values() if low in (t.challenger.lower(), t.defender.lower())]
    refereed = [t for t in trails.values() if t not in party and low in {r.lower() for r in t.votes}]
    marks: dict[int, tuple[int, str, int]] = {}       # task -> (slot, last mark, block assigned)
    for e in events:
        tid = e.args.get("taskId")
        if e.name == "TaskAssigned":
            marks[tid] = (int(e.args["slot"]), "assigned", e.block)
        elif tid in marks and e.name in _MARKS:
            slot, _, block = marks[tid]
            marks[tid] = (slot, _MARKS[e.name], block)
    lines = []
    for tid in sorted(marks, reverse=True)[:MAX_NODE_TASKS]:
        slot, mark, block = marks[tid]
        t = read(c, c.jobs, "getTask", tid)
        replicas = read(c, c.jobs, "getReplicas", tid)
        if slot < len(replicas) and replicas[slot].node.lower() == low:
            mark = ReplicaStatus(replicas[slot].status).name.lower()
        elif mark in ("assigned", "committed", "revealed"):
            mark = "replaced"
        lines.append(TaskLine(tid, int(t.jobId), int(t.round) + 1, int(t.index), TaskKind(t.kind).name.lower(), slot,
                              TaskStatus(t.status).name.lower(), mark, block))
    won = sum(1 for t in party if t.winner.lower() == low)
    lost = sum(1 for t in party if t.loser.lower() == low)
    return NodePage(address, status, party, refereed, lines, won, lost)


# -------------------------------------------------------------------------------------------------------- model

@dataclass
class ModelPage:
    job_id: int
    ready: bool
    status: str
    card: str = ""                  # the model card's markdown (verity.model_card)
    facts: dict = field(default_factory=dict)
    size: int = 0
    verified: bool = False
    verdict: list[str] = field(default_factory=list)   # `verity verify`'s lines, or why it is not verified
    checked_at: float = 0.0


def model_page(reader, workdir: Path) -> tuple[ModelPage, bytes | None]:
    """The model card and the `verity verify` check of the job's final model (written under `workdir` and verified
    from the file, as a user's download would be); the model bytes for the download link."""
    from verity.cid import digest_to_cid
    from verity.job.verify import verify_model
    from verity.errors import VerityError
    from verity.model_card import CardFacts, card_markdown, config_doc

    c, job = reader.chain, reader.job()
    status = JobStatus(job.status).name.lower()
    if not int.from_bytes(bytes(job.modelHash), "big"):
        return ModelPage(reader.job_id, False, status), None
    data = reader.round_model(int(job.rounds) - 1)
    facts = CardFacts(reader.job_id, reader.manifest, digest_to_cid(job.manifestCid), "0x" + bytes(job.modelHash).hex(),
                      digest_to_cid(job.modelCid), c.deployments.chain_id, None, reader.report().metrics)
    page = ModelPage(reader.job_id, True, status, card_markdown(facts, "model.safetensors"), config_doc(facts),
                     len(data or b""))
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"job-{reader.job_id}-model.safetensors"
    path.write_bytes(data)
    try:
        verdict = verify_model(path, c, reader.storage, reader.job_id)
        page.verified, page.verdict = True, verdict.lines("model.safetensors")
    except VerityError as exc:
        page.verdict = [f"not verified: {exc}"]
    page.checked_at = time.time()
    return page, data
