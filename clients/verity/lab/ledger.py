"""What a lab run is judged by on the chain: tokens conserved, who was slashed, gas spent, IPFS bytes moved."""
from __future__ import annotations

import json
import urllib.request

ZERO = "0x" + "00" * 20


def token_conservation(c) -> dict[str, int]:
    """Sum of every holder's balance, minted and burned, read at one block; raises if the sum is not
    totalSupply = minted − burned (nodes keep moving tokens meanwhile, hence the one block)."""
    from verity.chain import EventCursor

    block = c.block_number()
    events = EventCursor(c.w3, {"VerityToken": c.token}, next_block=c.deployments.start_block).poll(head=block)
    holders, minted, burned = set(), 0, 0
    for ev in events:
        if ev.name != "Transfer":
            continue
        a = ev.args
        minted += a["value"] if a["from"] == ZERO else 0
        burned += a["value"] if a["to"] == ZERO else 0
        holders.update(x for x in (a["from"], a["to"]) if x != ZERO)
    total = sum(c.call(c.token.functions.balanceOf(h), block) for h in holders)
    supply = c.call(c.token.functions.totalSupply(), block)
    if not total == supply == minted - burned:
        raise AssertionError(f"tokens not conserved at block {block}: balances {total}, supply {supply}, "
                             f"minted − burned {minted - burned}")
    return {"block": block, "total": total, "minted": minted, "burned": burned, "holders": len(holders)}


def slashed(c, addresses: list[str]) -> dict[str, int]:
    """wei slashed from each address so far (NodeLens reputation)."""
    from verity.chain.views import read

    return {a: int(read(c, c.lens, "reputationOf", a).totalSlashed) for a in addresses}


def job_gas(c, from_block: int, to_block: int | None = None) -> int:
    """Gas used by every transaction mined in [from_block, to_block] (a lab runs nothing else on its chain, except
    the ticker's empty blocks)."""
    head = c.block_number() if to_block is None else to_block
    total = 0
    for n in range(from_block, head + 1):
        total += int(c.w3.eth.get_block(n)["gasUsed"])
    return total


def bitswap_stats(api_url: str, timeout: float = 5.0) -> dict[str, int]:
    """Bytes and blocks this IPFS node received and sent over bitswap (`/api/v0/stats/bitswap`)."""
    req = urllib.request.Request(f"{api_url}/api/v0/stats/bitswap", method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as res:
        s = json.loads(res.read())
    return {"data_received": int(s.get("DataReceived", 0)), "data_sent": int(s.get("DataSent", 0)),
            "blocks_received": int(s.get("BlocksReceived", 0)), "blocks_sent": int(s.get("BlocksSent", 0))}


def slash_reasons(events, hosts: dict[str, str]) -> dict[str, list[dict]]:
    """host -> one entry per StakeSlashed of its address among `events` (DecodedEvents in chain order): the VRT and the
    other events of the same transaction (ReplicaLate, RefereeSlashed, DisputeResolved, ...) that say why. `hosts`:
    host name -> address."""
    by_address = {a.lower(): h for h, a in hosts.items()}
    by_tx: dict[str, list] = {}
    for e in events:
        by_tx.setdefault(e.tx_hash, []).append(e)
    out: dict[str, list[dict]] = {}
    for e in events:
        host = by_address.get(str(e.args.get("node", "")).lower()) if e.name == "StakeSlashed" else None
        if host is None:
            continue
        why = sorted({x.name for x in by_tx[e.tx_hash] if x.name not in ("StakeSlashed", "Transfer")})
        out.setdefault(host, []).append({"block": e.block, "vrt": e.args["amount"] / 1e18, "events": why})
    return out


def cheats_accepted(c, events, cheaters: dict[str, str], flip_step: int) -> list[int]:
    """Tasks accepted with a cheater's result: a TRAIN task longer than `flip_step` steps (so the cheater's bit flip
    changed its result) whose accepted result is held by cheaters only (its Accepted replicas, or the dispute winner
    that became its candidate). Read from the chain after the run: "every cheater loses" means this is empty."""
    from verity.chain.protocol import ReplicaStatus, TaskKind
    from verity.chain.views import read

    bad = {a.lower() for a in cheaters.values()}
    out = []
    for ev in events:
        if ev.name != "TaskAccepted":
            continue
        tid = int(ev.args["taskId"])
        ctx = read(c, c.jobs, "taskContext", tid)
        if TaskKind(int(ctx.kind)) != TaskKind.TRAIN or int(ctx.n) * int(ctx.k) <= flip_step:
            continue
        candidate = str(read(c, c.jobs, "getTask", tid).candidate).lower()
        holders = {candidate} if candidate != ZERO else {str(r.node).lower() for r in read(c, c.jobs, "getReplicas", tid)
                                                         if ReplicaStatus(r.status) == ReplicaStatus.ACCEPTED}
        if holders and holders <= bad:
            out.append(tid)
    return out
