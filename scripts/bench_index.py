"""Benchmark of the event index (verity.index, docs/indexer.md): fill an index with >= 100,000 synthetic events (many
jobs, tasks and nodes; heartbeats, draws, commits, reveals, payments, fees, disputes with their slashes and referee
panels), then time

- the event part of `verity job show` (JobHistory of one job) and of `verity node status` (earnings of one address by
  source and job) from the index, next to the same from a full in-memory rescan of every event (no RPC: the rescan on
  a chain pays eth_getLogs on top);
- the in-process work of `verity job show` (a completed job, and an active one whose tasks wait), `verity node status`
  and `verity job list`: the commands' own code (open the index file, sync, JobReader.report(metrics=False) /
  read_status / jobs_table, the table rendered) with every chain read answered by a fake chain in this process that
  counts them. Each counted call is one RPC round trip on a real chain (about 1 ms on a local anvil), not in the time.

The 200 ms verdict is about the in-process command work. Python's start-up and imports are not in it: the time of
`python -c "import verity.cli"` is measured once and printed as information. Prints tables; writes
bench/out/index.json.

    python scripts/bench_index.py [--jobs 450] [--out bench/out/index.json]
"""
from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console
from rich.table import Table
from web3 import Web3

from verity.chain.events import MAX_RANGE, DecodedEvent
from verity.chain.protocol import JobStatus, ReplicaStatus, TaskKind, TaskStatus
from verity.cli.job import jobs_table
from verity.index import open_source
from verity.job.advice import derive_devnet_accounts, devnet_accounts
from verity.job.history import JobHistory
from verity.job.table import render
from verity.job.view import JobReader
from verity.node.status import _SOURCES, read_status, tally_earnings

BUDGET_MS = 200.0
GAME = Web3.to_checksum_address("0x" + "6a" * 20)
EVENTS_PER_BLOCK = 12


class SyntheticChain:
    """A Source (verity.index.sync) over pre-built blocks of events; `calls` counts the RPC requests a ChainSource
    would send for the same answers (identity: eth_chainId + the genesis block)."""

    start_block = 1

    def __init__(self, events: list[tuple]):
        self.calls = 0
        self.blocks: dict[int, list[DecodedEvent]] = {}
        for i in range(0, len(events), EVENTS_PER_BLOCK):
            n = 1 + i // EVENTS_PER_BLOCK
            self.blocks[n] = [DecodedEvent(c, name, args, n, j, tx or f"0x{n:032x}{j:032x}")
                              for j, (c, name, args, tx) in enumerate(events[i:i + EVENTS_PER_BLOCK])]
        self.top = max(self.blocks)

    def identity(self) -> dict:
        self.calls += 2
        return {"chain_id": 31337, "genesis_hash": "0x" + "be" * 32, "contracts": {"DisputeGame": GAME}}

    def head(self) -> int:
        self.calls += 1
        return self.top

    def block_hash(self, number: int) -> str:
        self.calls += 1
        return f"0x{number:064x}"

    def events(self, start: int, end: int) -> list[DecodedEvent]:
        self.calls += len(range(start, end + 1, MAX_RANGE))   # one eth_getLogs per range (none for an empty one)
        return [ev for b in range(start, end + 1) for ev in self.blocks.get(b, ())]

    def all(self) -> list[DecodedEvent]:
        return [ev for b in sorted(self.blocks) for ev in self.blocks[b]]


class _View:
    """A contract function bound to its arguments, as web3 builds it; one output, given back as the fake answers it."""

    abi = {"outputs": [{"name": "", "type": "tuple"}]}

    def __init__(self, fn_name: str, args: tuple):
        self.fn_name, self.args = fn_name, args


class _Functions:
    def __getattr__(self, name: str):
        return lambda *args: _View(name, args)


class FakeViews:
    """The chain client of `job show`, `node status` and `job list` with every contract view answered in this process
    from the synthetic events (no RPC); `calls` counts them, `now()` included (one eth_getBlockByNumber). Job
    `active` is answered as still active in its last round, whose tasks are open with one slot drawn, so its report
    also explains why they wait (the registry's nodes read one by one, as on a chain)."""

    def __init__(self, events: list[DecodedEvent], nodes: int, active: int):
        self.calls, self.active, self.time = 0, active, 1_700_000_000 + len(events)
        self.deployments = SimpleNamespace(chain_id=31337)
        for name in ("jobs", "escrow", "registry", "lens", "game", "panel", "token", "fees"):
            setattr(self, name, SimpleNamespace(functions=_Functions()))
        self.game.address = GAME
        self.contracts = {"VerificationFees": self.fees}
        self.nodes = [Web3.to_checksum_address(f"0x{i + 1:040x}") for i in range(nodes)]
        self.job_of, self.rounds, self.shards, self.holders = {}, {}, {}, {}
        for ev in events:
            a = ev.args
            if ev.name == "TaskCreated":
                self.job_of[a["taskId"]] = (a["jobId"], a["round"])
                self.rounds[a["jobId"]] = max(self.rounds.get(a["jobId"], 0), a["round"] + 1)
                self.shards[a["jobId"]] = max(self.shards.get(a["jobId"], 0), a["index"] + 1)
            elif ev.name == "TaskAssigned":
                self.holders.setdefault(a["taskId"], []).append(a["node"])

    def now(self) -> int:
        self.calls += 1
        return self.time

    def call(self, view: _View):
        self.calls += 1
        return getattr(self, view.fn_name)(*view.args)

    def _waiting(self, task: int) -> bool:
        job, rnd = self.job_of[task]
        return job == self.active and rnd == self.rounds[job] - 1

    # JobRegistry (JobViews), JobEscrow, VerificationFees
    def getJob(self, job: int):
        active = job == self.active
        return SimpleNamespace(status=JobStatus.ACTIVE if active else JobStatus.COMPLETED, submitter=self.nodes[0],
                               currentRound=self.rounds.get(job, 1) - 1, rounds=self.rounds.get(job, 1),
                               shards=self.shards.get(job, 1), replication=3, everAssigned=True, revealWindow=600,
                               stakePerReplica=10**19, paymentPerTask=10**18, postedAt=self.time - 3600,
                               deviceClass=0, minMemoryMb=1024, profileBit=1, region=0, minBandwidthMbps=0,
                               modelCid=b"" if active else bytes(range(32)))

    def jobCount(self) -> int:
        return max(self.rounds)

    def assignmentTimeout(self) -> int:
        return 600

    def escrowOf(self, job: int) -> int:
        return 10**18

    def potOf(self, job: int) -> tuple:
        return 10**17, 10**16, 100, 4, self.time - 60

    def refundableAt(self, job: int) -> int:
        return self.time + 3600

    def getTask(self, task: int):
        waiting = self._waiting(task)
        return SimpleNamespace(kind=TaskKind.TRAIN, status=TaskStatus.OPEN if waiting else TaskStatus.ACCEPTED,
                               candidate="0x" + "00" * 20, openSince=self.time - 300 if waiting else 0,
                               challengeDeadline=0, revealHold=0, openDisputes=0)

    def getReplicas(self, task: int) -> list:
        if self._waiting(task):   # slot 0 drawn, the others empty
            return [SimpleNamespace(node=self.holders[task][0], status=ReplicaStatus.ASSIGNED, deadline=self.time + 900),
                    *[SimpleNamespace(node="0x" + "00" * 20, status=ReplicaStatus.NONE, deadline=0)] * 2]
        return [SimpleNamespace(node=n, status=ReplicaStatus.ACCEPTED, deadline=0) for n in self.holders[task]]

    def bannedOf(self, task: int) -> list:
        return []

    # NodeRegistry, NodeLens, DisputeGame / RefereePanel, VerityToken
    def nodeCount(self) -> int:
        return len(self.nodes)

    def nodeList(self, i: int) -> str:
        return self.nodes[i]

    def livenessWindow(self) -> int:
        return 600

    def getNode(self, node: str):
        return SimpleNamespace(slot=1 + self.nodes.index(node), roles=3, lastSeen=self.time - 30, stake=10**21,
                               locked=3 * 10**19, pendingUnstake=0, unbondingEnds=0, deviceClass=0, memoryMb=8192,
                               region=1, bandwidthMbps=100)

    def isEligible(self, *args) -> bool:
        return True

    def reputationOf(self, node: str):
        return SimpleNamespace(tasksCompleted=120, tasksLate=1, disputesWon=2, disputesLost=0, totalSlashed=0)

    def weightsOf(self, node: str) -> tuple:
        return 10**21, 10**21

    def reputationFactorBps(self, node: str) -> int:
        return 9_800

    def promptnessFactorBps(self, node: str) -> int:
        return 10_000

    def balanceOf(self, node: str) -> int:
        return 10**22


def synthetic(jobs: int, nodes: int, seed: int = 7) -> list[tuple]:
    """(contract, name, args, tx or None) in chain order: jobs of 2-4 rounds x 2-4 shards, replication 3."""
    rng = random.Random(seed)
    addr = [Web3.to_checksum_address(f"0x{i + 1:040x}") for i in range(nodes)]
    out: list[tuple] = []
    task = dispute = 0
    for job in range(1, jobs + 1):
        submitter = rng.choice(addr)
        out.append(("JobRegistry", "JobPosted", {"jobId": job, "submitter": submitter, "manifestCid": rng.randbytes(32),
                                                 "manifestHash": rng.randbytes(32), "escrow": 10**21}, None))
        out.append(("JobEscrow", "EscrowDeposited", {"jobId": job, "from": submitter, "amount": 10**21}, None))
        for rnd in range(rng.randint(2, 4)):
            for index in range(rng.randint(2, 4)):
                task += 1
                out.append(("JobRegistry", "TaskCreated", {"taskId": task, "jobId": job, "round": rnd, "index": index,
                                                           "kind": 0, "inputHash": rng.randbytes(32)}, None))
                holders = rng.sample(addr, 3)
                for slot, node in enumerate(holders):
                    out.append(("JobRegistry", "TaskAssigned", {"taskId": task, "node": node, "slot": slot,
                                                                "deadline": 1_700_000_000 + task}, None))
                    out.append(("NodeRegistry", "StakeLocked", {"node": node, "by": GAME, "amount": 10**19}, None))
                for slot, node in enumerate(holders):
                    out.append(("JobRegistry", "ResultCommitted", {"taskId": task, "node": node, "slot": slot}, None))
                    out.append(("JobRegistry", "ResultRevealed", {"taskId": task, "node": node, "slot": slot,
                                                                  "root": rng.randbytes(32), "finalHash": rng.randbytes(32),
                                                                  "resultCid": rng.randbytes(32), "n": 100}, None))
                for verifier in rng.sample(addr, 2):
                    out.append(("VerificationFees", "FeePaid", {"taskId": task, "jobId": job, "verifier": verifier,
                                                                "amount": 10**16, "epoch": rnd}, None))
                if rng.random() < 0.05:
                    dispute += 1
                    challenger = rng.choice([a for a in addr if a not in holders])
                    out.append(("DisputeGame", "DisputeOpened", {"disputeId": dispute, "taskId": task,
                                                                 "challenger": challenger, "defender": holders[0]}, None))
                    out.append(("RefereePanel", "RefereesSeated", {"disputeId": dispute, "referees": rng.sample(addr, 3),
                                                                   "commitDeadline": 1}, None))
                    out.append(("DisputeGame", "StepPinpointed", {"disputeId": dispute, "step": rng.randint(1, 99),
                                                                  "agreed": rng.randbytes(32), "claimA": rng.randbytes(32),
                                                                  "claimB": rng.randbytes(32)}, None))
                    tx = f"0x{'d' * 56}{dispute:08x}"
                    out.append(("NodeRegistry", "StakeSlashed", {"node": holders[0], "to": GAME, "amount": 10**19}, tx))
                    out.append(("DisputeGame", "Credited", {"to": challenger, "amount": 5 * 10**18}, tx))
                    out.append(("DisputeGame", "DisputeResolved", {"disputeId": dispute, "taskId": task,
                                                                   "winner": challenger, "loser": holders[0],
                                                                   "outcome": 1}, tx))
                out.append(("JobRegistry", "TaskAccepted", {"taskId": task, "finalHash": rng.randbytes(32),
                                                            "resultCid": rng.randbytes(32)}, None))
                for node in holders:
                    out.append(("JobEscrow", "PaymentSent", {"jobId": job, "to": node, "amount": 10**18}, None))
                    out.append(("NodeRegistry", "StakeUnlocked", {"node": node, "by": GAME, "amount": 10**19}, None))
            for node in rng.sample(addr, 12):
                out.append(("NodeRegistry", "Heartbeat", {"node": node, "at": 1_700_000_000 + len(out)}, None))
        out.append(("JobRegistry", "JobCompleted", {"jobId": job, "modelHash": rng.randbytes(32),
                                                    "modelCid": rng.randbytes(32)}, None))
    return out


def timed(fn, repeat: int = 5) -> tuple[float, object]:
    """Median wall time (ms) of `repeat` runs, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), result


def history_of(job: int, events) -> tuple:
    h = JobHistory(job, GAME)
    h.feed(events)
    return dict(h.tasks), h.disputes, dict(h._fines)


def text(renderable) -> str:
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(renderable)
    return out.getvalue()


def job_show(source, path: Path, views: FakeViews, job: int) -> tuple:
    """`verity job show JOB` past connecting: open the index, JobReader.report(metrics=False), the task table."""
    with open_source(source, path) as ix:
        rep = JobReader(views, None, job, index=ix).report(metrics=False)
    return rep, text(render(rep, {}))


def node_status(source, path: Path, views: FakeViews, node: str) -> tuple:
    """`verity node status` past connecting: read_status (its own index file opened, synced, read) and its table."""
    with open_source(source, path) as ix:
        st = read_status(views, node, index=ix)
    t = Table(title=f"node {node}")
    t.add_column("field")
    t.add_column("value")
    for k, v in st.rows():
        t.add_row(k, v)
    return st, text(t)


def job_list(source, path: Path, views: FakeViews) -> str:
    """`verity job list` past connecting: open and sync the index, the table of the newest 20 jobs."""
    with open_source(source, path) as ix:
        ix.sync()
        return text(jobs_table(views, ix))


def command(fn, source: SyntheticChain, views: FakeViews) -> dict:
    """One command's in-process work: its first call (as in a fresh CLI process: `devnet_accounts` not cached yet;
    the modules imported already), the median of 5 more, and the chain calls of one run (views + the index's reads of
    the chain)."""
    devnet_accounts.cache_clear()
    source.calls = views.calls = 0
    t0 = time.perf_counter()
    result = fn()
    first = (time.perf_counter() - t0) * 1e3
    calls = source.calls + views.calls
    median, _ = timed(fn)
    return {"first_ms": round(first, 2), "median_ms": round(median, 2), "chain_calls": calls,
            "under_budget": max(first, median) < BUDGET_MS, "result": result}


def hint_ms() -> tuple[float, float]:
    """Wall times of the 20 devnet accounts behind the `--account N` hints of `job show` and `job list` on chain 31337:
    `devnet_accounts()` uncached (its table), and deriving them from the mnemonic (what it cost before the table)."""
    devnet_accounts.cache_clear()
    t0 = time.perf_counter()
    devnet_accounts()
    table = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    derive_devnet_accounts(20)
    return table, (time.perf_counter() - t0) * 1e3


def import_ms() -> float:
    """Wall time of `python -c "import verity.cli"` (interpreter start-up and the CLI's imports), once."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import verity.cli"], check=True)
    return (time.perf_counter() - t0) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=450)
    ap.add_argument("--nodes", type=int, default=60)
    ap.add_argument("--out", type=Path, default=Path("bench/out/index.json"))
    args = ap.parse_args()

    chain = SyntheticChain(synthetic(args.jobs, args.nodes))
    every = chain.all()
    with tempfile.TemporaryDirectory() as tmp:
        ix = open_source(chain, Path(tmp))
        t0 = time.perf_counter()
        added = ix.sync(confirmations=0)
        fill_s = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in Path(tmp).iterdir())
        tasks = ix.db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]
        disputes = ix.db.execute("SELECT COUNT(*) FROM disputes").fetchone()[0]
        job = ix.db.execute("SELECT job_id FROM events WHERE name = 'DisputeResolved' ORDER BY id DESC LIMIT 1").fetchone()[0]
        node = every[-1].args.get("node") or ix.events(names=["PaymentSent"])[-1].args["to"]
        names = sorted({n for _, n in _SOURCES})

        show_ix_ms, show_ix = timed(lambda: history_of(job, ix.events(job_id=job)))
        show_scan_ms, show_scan = timed(lambda: history_of(job, every))
        status_ix_ms, status_ix = timed(lambda: tally_earnings(ix.events(address=node, names=names), node))
        status_scan_ms, status_scan = timed(lambda: tally_earnings(every, node))
        ix.close()
        if show_ix != show_scan or status_ix != status_scan:
            raise SystemExit("the index's answers differ from the rescan's: a bug, not a benchmark")

        # the commands: two new blocks the index has not stored (under VERITY_INDEX_CONFIRMATIONS' 2) are read live
        chain.top += 2
        views = FakeViews(every, args.nodes, active=args.jobs)
        path = Path(tmp)
        cmds = {
            "job_show": command(lambda: job_show(chain, path, views, job), chain, views),
            "job_show_active": command(lambda: job_show(chain, path, views, args.jobs), chain, views),
            "node_status": command(lambda: node_status(chain, path, views, node), chain, views),
            "job_list": command(lambda: job_list(chain, path, views), chain, views),
        }
    rep, _ = cmds["job_show"].pop("result")
    active, _ = cmds["job_show_active"].pop("result")
    st, _ = cmds["node_status"].pop("result")
    listed = cmds["job_list"].pop("result")
    if len(rep.tasks) != len(show_ix[0]) or st.earned != status_ix[0] or f"jobs {max(1, args.jobs - 19)}..{args.jobs}" not in listed:
        raise SystemExit("a command's answer differs from the index's: a bug, not a benchmark")
    waiting = sum(1 for t in active.tasks if t.reason)
    (accounts_ms, derive_ms), start_ms = hint_ms(), import_ms()

    print(f"index: {added:,} events, {len(chain.blocks):,} blocks, {args.jobs} jobs, {tasks:,} tasks, {disputes} disputes,"
          f" {args.nodes} nodes; filled in {fill_s:.1f} s ({added / fill_s:,.0f} events/s); file {size / 1e6:.1f} MB")
    print(f"\nevents only (median of 5) {'':<24} {'index ms':>9} {'rescan ms':>10}")
    for what, a, b in (("job show: JobHistory of one job", show_ix_ms, show_scan_ms),
                       ("node status: earnings of one address", status_ix_ms, status_scan_ms)):
        print(f"{what:<50} {a:>9.1f} {b:>10.1f}")
    print(f"\ncommand work in this process {'':<50} {'first ms':>8} {'median ms':>9} {'chain calls':>11} {'< 200 ms':>8}")
    for key, what in (("job_show", f"job show {job} (completed): report(metrics=False) + table"),
                      ("job_show_active", f"job show {args.jobs} (active, {waiting} tasks waiting): report + table"),
                      ("node_status", f"node status {node[:10]}…: read_status + table"),
                      ("job_list", "job list (newest 20): index sync + jobs_table")):
        c = cmds[key]
        print(f"{what:<79} {c['first_ms']:>8.1f} {c['median_ms']:>9.1f} {c['chain_calls']:>11} "
              f"{'yes' if c['under_budget'] else 'NO':>8}")
    print(f"(job {job}: {len(show_ix[0])} tasks, disputes {show_ix[1]}; address {node}: {status_ix[0] / 1e18:g} VRT "
          f"earned over {len(status_ix[2])} jobs; the rescan here is in memory: on a chain it also pays eth_getLogs)")
    print("included: opening the index file, its sync check and live tail, the command's reads and logic, the table "
          "rendered; the chain's answers come from a fake in this process.\nnot included: each chain call is one RPC "
          "round trip on a real chain (about 1 ms on a local anvil: add the chain calls column), connecting "
          "(ChainClient, the deployments file), `job show`'s manifest and per-round metrics from IPFS (metrics=True), "
          "`node status`'s node config, name check and work-item table, and Python's start-up:")
    print(f"python -c 'import verity.cli': {start_ms:.0f} ms (once; start-up and the CLI's imports, before any command)")
    print(f"of the first calls: the 20 devnet accounts for the `--account N` hints (job show, job list on chain 31337), "
          f"once per process: {accounts_ms:.2f} ms from the table (deriving them from the mnemonic: {derive_ms:.0f} ms)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "events": added, "blocks": len(chain.blocks), "jobs": args.jobs, "tasks": tasks, "disputes": disputes,
        "nodes": args.nodes, "fill_s": round(fill_s, 2), "insert_rate_events_per_s": round(added / fill_s),
        "file_bytes": size, "budget_ms": BUDGET_MS,
        "job_show": {"job": job, "index_ms": round(show_ix_ms, 2), "rescan_ms": round(show_scan_ms, 2),
                     "command": cmds["job_show"], "under_budget": cmds["job_show"]["under_budget"]},
        "job_show_active": {"job": args.jobs, "tasks_waiting": waiting, "command": cmds["job_show_active"],
                            "under_budget": cmds["job_show_active"]["under_budget"]},
        "node_status": {"address": node, "index_ms": round(status_ix_ms, 2), "rescan_ms": round(status_scan_ms, 2),
                        "command": cmds["node_status"], "under_budget": cmds["node_status"]["under_budget"]},
        "job_list": {"command": cmds["job_list"], "under_budget": cmds["job_list"]["under_budget"]},
        "python_import_verity_cli_ms": round(start_ms), "devnet_accounts_ms": round(accounts_ms, 2),
        "derive_devnet_accounts_ms": round(derive_ms),
        "not_included": ["RPC round trips (chain_calls: about 1 ms each on a local anvil)", "connecting to the chain",
                         "IPFS (job show's manifest and metrics)", "node status's config, name check and work items",
                         "Python start-up and imports (python_import_verity_cli_ms)"],
    }, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
