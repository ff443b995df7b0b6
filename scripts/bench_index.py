"""Benchmark of the event index (verity.index, docs/indexer.md): fill an index with >= 100,000 synthetic events (many
jobs, tasks and nodes; heartbeats, draws, commits, reveals, payments, fees, disputes with their slashes and referee
panels), then time the event part of `verity job show` (JobHistory of one job) and of `verity node status` (earnings of
one address by source and job) from the index, next to the same from a full in-memory rescan of every event (no RPC:
the rescan on a chain pays eth_getLogs on top). Prints a table; writes bench/out/index.json.

    python scripts/bench_index.py [--jobs 450] [--out bench/out/index.json]
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from web3 import Web3

from verity.chain.events import DecodedEvent
from verity.index import open_source
from verity.job.history import JobHistory
from verity.node.status import _SOURCES, tally_earnings

BUDGET_MS = 200.0
GAME = Web3.to_checksum_address("0x" + "6a" * 20)
EVENTS_PER_BLOCK = 12


class SyntheticChain:
    """A Source (verity.index.sync) over pre-built blocks of events."""

    start_block = 1

    def __init__(self, events: list[tuple]):
        self.blocks: dict[int, list[DecodedEvent]] = {}
        for i in range(0, len(events), EVENTS_PER_BLOCK):
            n = 1 + i // EVENTS_PER_BLOCK
            self.blocks[n] = [DecodedEvent(c, name, args, n, j, tx or f"0x{n:032x}{j:032x}")
                              for j, (c, name, args, tx) in enumerate(events[i:i + EVENTS_PER_BLOCK])]

    def identity(self) -> dict:
        return {"chain_id": 31337, "genesis_hash": "0x" + "be" * 32, "contracts": {"DisputeGame": GAME}}

    def head(self) -> int:
        return max(self.blocks)

    def block_hash(self, number: int) -> str:
        return f"0x{number:064x}"

    def events(self, start: int, end: int) -> list[DecodedEvent]:
        return [ev for b in range(start, end + 1) for ev in self.blocks.get(b, ())]

    def all(self) -> list[DecodedEvent]:
        return [ev for b in sorted(self.blocks) for ev in self.blocks[b]]


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

    rows = [("job show: JobHistory of one job", show_ix_ms, show_scan_ms),
            ("node status: earnings of one address", status_ix_ms, status_scan_ms)]
    print(f"index: {added:,} events, {len(chain.blocks):,} blocks, {args.jobs} jobs, {tasks:,} tasks, {disputes} disputes,"
          f" {args.nodes} nodes; filled in {fill_s:.1f} s ({added / fill_s:,.0f} events/s); file {size / 1e6:.1f} MB")
    print(f"{'query':<40} {'index ms':>9} {'rescan ms':>10} {'< 200 ms':>9}")
    for what, a, b in rows:
        print(f"{what:<40} {a:>9.1f} {b:>10.1f} {'yes' if a < BUDGET_MS else 'NO':>9}")
    print(f"(job {job}: {len(show_ix[0])} tasks, disputes {show_ix[1]}; address {node}: {status_ix[0] / 1e18:g} VRT "
          f"earned over {len(status_ix[2])} jobs; the rescan here is in memory: on a chain it also pays eth_getLogs)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "events": added, "blocks": len(chain.blocks), "jobs": args.jobs, "tasks": tasks, "disputes": disputes,
        "nodes": args.nodes, "fill_s": round(fill_s, 2), "insert_rate_events_per_s": round(added / fill_s),
        "file_bytes": size, "budget_ms": BUDGET_MS,
        "job_show": {"job": job, "index_ms": round(show_ix_ms, 2), "rescan_ms": round(show_scan_ms, 2),
                     "under_budget": show_ix_ms < BUDGET_MS},
        "node_status": {"address": node, "index_ms": round(status_ix_ms, 2), "rescan_ms": round(status_scan_ms, 2),
                        "under_budget": status_ix_ms < BUDGET_MS},
    }, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
