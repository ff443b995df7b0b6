"""Benchmark of a fetch between two js-ipfs nodes (verity.storage): the client brings every block into the local node
first (`block/stat` of each, 32 at a time, counted against the cap) and only then `cat`s it, because
js-ipfs 0.66 exits when a `cat` is cut short while it still wants a block from a peer. This times that fetch next to
a bare `cat` of the same size (the old way), each on fresh content the fetching node never held, in alternation.
Prints a table; writes bench/out/storage.json.

    python scripts/bench_storage.py [--mib 1 8 32] [--repeats 3] [--out bench/out/storage.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from verity.devnet.ipfs import IpfsNode
from verity.storage import Storage


class CatOnly(Storage):
    """The fetch before the fix: a bare `cat` (its blocks come in while it streams)."""

    def _make_local(self, cid: str, limit: int, deadline: float, t: float) -> None:
        return None


def timed_get(client: Storage, cid: str) -> float:
    t0 = time.perf_counter()
    client.get_bytes(cid)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("bench/out/storage.json"))
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="verity-bench-storage-"))
    holder, fetcher = IpfsNode(root / "holder"), IpfsNode(root / "fetcher")
    rows = []
    try:
        holder.start()
        fetcher.start()
        with holder.storage(timeout=60) as a, fetcher.storage(timeout=60) as b, \
                CatOnly(fetcher.api_multiaddr, timeout=60) as old:
            b.connect_peer(holder.swarm_multiaddr)
            for mib in args.mib:
                times = {"blocks_then_cat": [], "cat_only": []}
                for _ in range(args.repeats):
                    for name, client in (("blocks_then_cat", b), ("cat_only", old)):
                        cid = a.put_bytes(os.urandom(mib << 20))  # fresh content: every block crosses the swarm
                        times[name].append(timed_get(client, cid))
                new, base = statistics.median(times["blocks_then_cat"]), statistics.median(times["cat_only"])
                rows.append({"mib": mib, "blocks_then_cat_s": round(new, 3), "cat_only_s": round(base, 3),
                             "ratio": round(new / base, 2), "blocks_then_cat_mib_s": round(mib / new, 1)})
    finally:
        fetcher.stop()
        holder.stop()
    print(f"{'MiB':>5} {'blocks then cat s':>18} {'cat only s':>11} {'ratio':>6}")
    for r in rows:
        print(f"{r['mib']:>5} {r['blocks_then_cat_s']:>18.3f} {r['cat_only_s']:>11.3f} {r['ratio']:>6.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"repeats": args.repeats, "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
