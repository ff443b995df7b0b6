"""Gas report: every protocol action on a fresh local anvil (ape's foundry provider), as a table and JSON.

    .venv/bin/python scripts/gas_report.py [--out bench/out/gas.json] [--nodes 10,100,1000] [--depths 10,14,20]
    .venv/bin/python scripts/gas_report.py --nodes 10,10000 --depths ""   # issue 9: draw gas flat to 10,000 nodes
    make gas

ape starts its own anvil on a free port (APE_FOUNDRY_HOST=auto, set below before ape is imported) and
stops it at exit. Gas is `receipt.gas_used` (intrinsic 21k + calldata included). Synthetic traces:
random 32-byte hashes, h_0 = the task's input hash; builders shared with tests/chain (chain_builders.py).
Targets and their discussion: docs/gas.md. Protocol v2 (docs/protocol-v2.md): replicated agreement waits out a
challenge window (finalize), challenges are committed then revealed, referee panels are seated from a later block.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("APE_FOUNDRY_HOST", "auto")
os.environ.setdefault("SOLCX_BINARY_PATH", str(ROOT / "anvil" / "solc-bin"))
os.environ["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{ROOT / 'anvil' / 'node_modules' / '.bin'}{os.pathsep}" \
    + os.environ.get("PATH", "")
sys.path.insert(0, str(ROOT / "tests" / "chain"))

import logging  # noqa: E402

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from chain_builders import (  # noqa: E402
    E18, ROLE_REFEREE, ROLE_SOLVER, ROLE_VERIFIER, DisputePhase, Nodes, Poster, System, TaskStatus, Trace,
    accept_aggregate, commit_challenge, contest, finalize_after_window, h32, opened, rand32, reveal_challenge,
    seat_panel, seats, vote,
)

STAKE = 100 * E18
JOBS_PER_COUNT = 3  # node_scaling: jobs posted and assigned per node count, gas averaged
ALL_ROLES = ROLE_SOLVER | ROLE_VERIFIER | ROLE_REFEREE
console = Console()


class Book(dict):
    def __init__(self, nodes: Nodes):
        super().__init__()
        self.nodes = nodes

    def __missing__(self, address):
        for a in self.nodes.all:
            if a.address.lower() == str(address).lower():
                return a
        raise KeyError(address)


class Report:
    def __init__(self):
        self.rows: dict[str, dict] = {}

    def add(self, key: str, gas: int, note: str = "") -> int:
        self.rows[key] = {"gas": int(gas), "note": note}
        return int(gas)


def fresh(project, accounts, n_nodes=8, roles=ALL_ROLES):
    owner = accounts[0]
    s = System.deploy(project, owner)
    nodes = Nodes(s)
    nodes.add(accounts[2:2 + n_nodes], roles=roles, extra=100 * E18)
    return s, nodes, Poster(s, accounts[1], Book(nodes))


# ---------------------------------------------------------------- sections


def basics(rep: Report, project, accounts, chain):
    s = System.deploy(project, accounts[0])
    a = accounts[2]
    s.fund(a, 1_000 * E18)
    s.token.approve(s.registry, 2**256 - 1, sender=a)
    rep.add("register", s.registry.register(ALL_ROLES, 0, 4096, 100, 1, "/ip4/127.0.0.1/tcp/4001", sender=a).gas_used,
            "first registration: new slot, pulls the minimum stake; no weight until the first heartbeat")
    rep.add("stake", s.registry.stake(990 * E18, sender=a).gas_used, "top-up to 1,000 (not yet checked in: no tree write)")
    rep.add("first heartbeat", s.registry.heartbeat(sender=a).gas_used,
            "the first check-in: first weight in both sum trees")
    rep.add("heartbeat", s.registry.heartbeat(sender=a).gas_used, "a later check-in (weight unchanged)")
    b = accounts[3]
    s.fund(b, 1_000 * E18)
    s.token.approve(s.registry, 2**256 - 1, sender=b)
    s.registry.register(ALL_ROLES, 0, 4096, 100, 1, "/ip4/127.0.0.1/tcp/4002", sender=b)
    rep.add("leave", s.registry.leave(sender=a).gas_used, "unbonds the whole stake (weights to 0)")
    chain.mine(deltatime=s.registry.unbondingPeriod() + 1)
    rep.add("withdraw after leave (deregisters)", s.registry.withdraw(sender=a).gas_used,
            "returns the stake, frees the slot: the last node moves into it (both trees)")


def governance(rep: Report, project, accounts, chain):
    """A faucet drip, and an owner setter through the Timelock as the deployment leaves it (queue, wait, execute)."""
    s = System.deploy(project, accounts[0])
    rep.add("DevnetFaucet.drip (devnet only)", s.faucet.drip(accounts[2], 1_000 * E18, sender=s.owner).gas_used,
            "the devnet token's only minter; anyone may drip")
    timelock = s.owner.deploy(project.Timelock, s.registry)
    s.jobs.transferOwnership(timelock, sender=s.owner)
    data = s.jobs.setAssignmentTimeout.encode_input(600)
    rep.add("Timelock.queue (owner setter)", timelock.queue(s.jobs, data, sender=s.owner).gas_used,
            "delay: max(MIN_DELAY, unbondingPeriod + MIN_MARGIN)")
    chain.mine(deltatime=timelock.delay() + 1)
    rep.add("Timelock.execute (setAssignmentTimeout)", timelock.execute(s.jobs, data, sender=s.owner).gas_used,
            "re-reads the unbonding period, then calls the setter")
    assert s.jobs.assignmentTimeout() == 600


# As v1 defined it (docs/gas.md): a replica's own transactions and shares, not the task's creation (postJob's
# marginal cost per shard, reported above, which v1 did not count either).
PER_REPLICA = ("task lifecycle per replica (draw share + (commit + last reveal) / 2 + finalize share"
               " + payment share)")

def lifecycle(rep: Report, project, accounts, chain):
    s, nodes, poster = fresh(project, accounts)
    jobs = s.jobs
    g = {}
    poster.post(shards=1, replication=1, stake=STAKE)  # warm-up: the first job pays the registries' cold writes
    for rep_, shards in ((1, 1), (2, 1), (2, 2), (2, 4), (2, 8)):
        g[(rep_, shards)] = poster.post(shards=shards, replication=rep_, stake=STAKE, draw=False).receipt.gas_used
        rep.add(f"postJob (replication {rep_}, {shards} shard{'s' if shards > 1 else ''})", g[(rep_, shards)],
                f"creates {shards} task(s), requests their draws (P4)")
    rep.add("postJob: marginal cost per shard", (g[(2, 8)] - g[(2, 1)]) / 7, "task creation + randomness request")
    d = {}
    for rep_ in (1, 2):
        job = poster.post(shards=1, replication=rep_, stake=STAKE, draw=False)
        d[rep_] = poster.draw(jobs.taskOf(job.id, 0, 0)).gas_used
        rep.add(f"assign (replication {rep_}: draws {rep_} slot{'s' if rep_ > 1 else ''})", d[rep_],
                "a keeper, once the randomness is readable")
    per_slot = d[2] / 2
    rep.add("draw per replica slot (assign share)", per_slot, "assign(r=2)/2: a draw, a lock, half a tx")

    # Replicated task: shard 0 of a 2-shard job (its acceptance does not create the AGGREGATE task).
    job = poster.post(shards=2, replication=2, stake=STAKE)
    tid = jobs.taskOf(job.id, 0, 0)
    H = Trace.random(h32(jobs.getTask(tid).inputHash), job.n)
    # As nodes run it: slot 0 commits; slot 1, the last to commit, reveals in place of its commit, which reveals
    # slot 0's equal commitment with it and opens the challenge window: two transactions for the agreement.
    c0 = poster.commit(tid, 0, H).gas_used
    r1 = poster.reveal(tid, 1, H).gas_used
    assert jobs.getTask(tid).status == TaskStatus.REVEALED
    rep.add("commit (first)", c0)
    rep.add("reveal (last to commit, reveals the equal commitment too: opens the challenge window)", r1,
            f"2 Merkle proofs of depth {len(H.proof(0))}")
    f = rep.add("finalize (replicated, after the window: 2 unlocks; payment deferred, P10)",
                finalize_after_window(s, chain, tid, poster.account).gas_used)

    # Second shard accepted -> AGGREGATE created (its draw requested) in the same tx.
    tid1 = jobs.taskOf(job.id, 0, 1)
    H1 = Trace.random(h32(jobs.getTask(tid1).inputHash), job.n)
    poster.run_replicated(tid1, [H1, H1])
    rep.add("finalize (last shard: accepts + creates AGGREGATE + requests its draw)",
            finalize_after_window(s, chain, tid1, poster.account).gas_used)
    # P10: the shards are paid when the AGGREGATE that consumed them is accepted. A replica's payment share is what
    # settling 2 more replicas adds to the AGGREGATE's finalize (2 shards against 1, both 1-round jobs).
    poster.draw(jobs.taskOf(job.id, 0, 2))
    f2 = accept_aggregate(s, chain, poster, job.id)[0].gas_used
    one = poster.post(shards=1, replication=2, stake=STAKE)
    only = jobs.taskOf(one.id, 0, 0)
    H2 = Trace.random(h32(jobs.getTask(only).inputHash), one.n)
    poster.run_replicated(only, [H2, H2])
    finalize_after_window(s, chain, only, poster.account)
    agg1 = jobs.taskOf(one.id, 0, 1)
    poster.draw(agg1)
    f1 = accept_aggregate(s, chain, poster, one.id)[0].gas_used
    # A report (P10), on a third job's AGGREGATE so the two finalizes above stay comparable.
    three = poster.post(shards=1, replication=2, stake=STAKE)
    only = jobs.taskOf(three.id, 0, 0)
    poster.run_replicated(only, [Trace.random(h32(jobs.getTask(only).inputHash), three.n)] * 2)
    finalize_after_window(s, chain, only, poster.account)
    agg3 = jobs.taskOf(three.id, 0, 1)
    rep.add("reportUnavailable (P10: a consumer's holder flags an input)",
            jobs.reportUnavailable(agg3, 0, sender=poster.node_of(agg3, 0)).gas_used, "only when a bundle is missing")
    rep.add("finalize (last AGGREGATE, 2 shards: pays 4 shard replicas + its own 2)", f2)
    pay = rep.add("payment per replica (AGGREGATE finalize share)", (f2 - f1) / 2,
                  "2 shards against 1: 2 transfers, pushed to the payees (no withdraw)")
    per_replica = per_slot + (c0 + r1) / 2 + f / 2 + pay
    rep.add(PER_REPLICA, per_replica,
            "target <= 300k")

    # Optimistic.
    job = poster.post(shards=2, replication=1, stake=STAKE)
    tid = jobs.taskOf(job.id, 0, 0)
    H = Trace.random(h32(jobs.getTask(tid).inputHash), job.n)
    rep.add("submitResult (optimistic)", poster.submit(tid, H).gas_used)
    rep.add("finalize (optimistic)", finalize_after_window(s, chain, tid, poster.account).gas_used)

    # assign() retry: a slot left empty, then a node becomes eligible. (System keeps the setters with the owner, no
    # Timelock: a two-day clock jump here would move every window of this section; governance() prices that path.)
    s.registry.setLivenessWindow(1, sender=s.owner)
    chain.mine(deltatime=5)
    job = poster.post(shards=1, replication=2, stake=STAKE)  # its assign() reverts NoEligibleNode
    s.registry.setLivenessWindow(30 * 24 * 3600, sender=s.owner)
    tid = jobs.taskOf(job.id, 0, 0)
    rep.add("assign() retry (fills 2 slots)", poster.draw(tid).gas_used, "after a draw found nobody eligible")

    # Late replica.
    job = poster.post(shards=2, replication=2, stake=STAKE)
    tid = jobs.taskOf(job.id, 0, 0)
    chain.mine(deltatime=jobs.getJob(job.id).executionWindow + 1)
    rep.add("reportLate (slash, burn, request a redraw)", jobs.reportLate(tid, 1, sender=poster.account).gas_used)
    # cancel (starved) for completeness
    job = poster.post(shards=1, replication=2, stake=STAKE, memory_mb=1 << 30)
    rep.add("cancelJob (never assigned)", jobs.cancelJob(job.id, sender=poster.account).gas_used)


def verification_fees(rep: Report, project, accounts, chain):
    """P5's verification fee: a pot funded per job, a verifier's key chain, a blind check, its claim and the collect that pays it."""
    from eth_utils import keccak

    from verity.chain.protocol import check_commitment

    s, nodes, poster = fresh(project, accounts)
    fees, jobs = s.fees, s.jobs
    chain_len = 10_000  # as clients/verity/node/keychain.py
    seed = rand32()
    head = seed
    for _ in range(chain_len):
        head = keccak(head)
    v = nodes.all[-1]
    rep.add("VerificationFees.anchor (key chain head)", fees.anchor(head, sender=v).gas_used)
    anchor_epoch = fees.chainOf(v.address)[2]
    epoch = fees.epochSeconds()
    chain.mine(deltatime=epoch)  # tasks of the next epoch are claimable with this chain
    floor = 60  # a check lands before the slot's result floor (issue 23: no result can be pending)
    job = poster.post(shards=2, replication=1, stake=STAKE, result_floor=floor)
    tid = jobs.taskOf(job.id, 0, 0)
    solver_to_be = poster.node_of(tid, 0)
    if solver_to_be.address == v.address:  # a replica cannot check itself: use another verifier
        v = nodes.all[-2]
        rep.add("VerificationFees.anchor (key chain head)", fees.anchor(head, sender=v).gas_used)
        anchor_epoch = fees.chainOf(v.address)[2]
        chain.mine(deltatime=epoch)
        job = poster.post(shards=2, replication=1, stake=STAKE, result_floor=floor)
        tid = jobs.taskOf(job.id, 0, 0)
    pot = 10 * E18
    s.fund(poster.account, pot)
    s.token.approve(fees.address, pot, sender=poster.account)
    rep.add("VerificationFees.fund (first: terms + pot)",
            fees.fund(job.id, pot, E18, 2, 10_000, sender=poster.account).gas_used)
    H = Trace.random(h32(jobs.getTask(tid).inputHash), job.n)
    salt = rand32()
    rep.add("VerificationFees.commitCheck (blind)",
            fees.commitCheck(tid, check_commitment(tid, H.hashes[-1], salt, v.address), sender=v).gas_used,
            "reads the task, its replicas and its job (the result floor)")
    chain.mine(deltatime=floor)
    poster.submit(tid, H)
    finalize_after_window(s, chain, tid, poster.account)
    e = jobs.getTask(tid).createdAt // epoch
    while fees.currentEpoch() < e + 2:
        chain.mine(deltatime=epoch)
    key = seed
    for _ in range(chain_len - (e - anchor_epoch)):
        key = keccak(key)
    rep.add("VerificationFees.claim (first: key chain, opens the window, holds a slot)",
            fees.claim(tid, key, H.hashes[-1], salt, sender=v).gas_used, f"{e - anchor_epoch} chain step(s) hashed")
    chain.mine(deltatime=max(1, fees.claimClosesAt(tid) - chain.blocks.head.timestamp))
    rep.add("VerificationFees.collect (after the claim window: pays 1 slot)", fees.collect(tid, sender=v).gas_used,
            "anyone; one transfer per held slot")


def optimistic_challenge(rep: Report, project, accounts, chain):
    s, nodes, poster = fresh(project, accounts)
    jobs, game = s.jobs, s.game
    job = poster.post(shards=2, replication=1, stake=STAKE, steps=8, k=2)
    tid = jobs.taskOf(job.id, 0, 0)
    solver = poster.node_of(tid, 0)
    H = Trace.random(h32(jobs.getTask(tid).inputHash), job.n)
    C = H.diverging(3)
    poster.submit(tid, C)
    v = next(a for a in nodes.all if a.address != solver.address)
    ch = commit_challenge(s, v, tid, H)
    rep.add("commitChallenge", ch.commit_receipt.gas_used)
    chain.mine()
    r = reveal_challenge(s, ch)
    rep.add("challengeOptimistic (reveal: lock + bond + open)", r.gas_used)
    # A second, concurrent challenge of the same result (P1).
    v2 = next(a for a in nodes.all if a.address not in (solver.address, v.address))
    ch2 = commit_challenge(s, v2, tid, H.diverging(2))
    chain.mine()
    rep.add("challengeOptimistic (second concurrent challenge)", reveal_challenge(s, ch2).gas_used)


def bisection_and_timeout(rep: Report, project, accounts, chain):
    """Plain bisection (openDispute + revealLeaf) and a clock timeout, n = 16, k = 4."""
    s, nodes, poster = fresh(project, accounts, n_nodes=4, roles=ROLE_SOLVER | ROLE_VERIFIER)
    nodes.add(accounts[6:9], roles=ROLE_REFEREE)
    game = s.game
    c = contest(poster, n=16, k=4, diverge=11, step=1, shards=2, stake=STAKE)  # shard 0: no AGGREGATE on settle
    r = game.openDispute(c.task_id, sender=c.honest)
    did = opened(s, r)
    rep.add("openDispute (bisection path, requests mid)", r.gas_used)
    gas, moves = [], 0
    while s.dispute_lens.getDispute(did).phase == DisputePhase.BISECT0:
        mid = s.dispute_lens.getDispute(did).mid
        gas.append(game.revealLeaf(did, 0, mid, c.H.hashes[mid], c.H.proof(mid), sender=c.honest).gas_used)
        gas.append(game.revealLeaf(did, 0, mid, c.C.hashes[mid], c.C.proof(mid), sender=c.cheater).gas_used)
        moves += 1
    rep.add("revealLeaf (first of a pair)", min(gas[0::2]), f"depth {len(c.H.proof(0))}")
    rep.add("revealLeaf (second: narrows)", max(gas[1::2]))
    rep.add("bisection level 0, n=16: both parties", sum(gas), f"{moves} rounds x 2 tx")
    game.submitStepRoot(did, c.sH.root, c.sH.proof(0), c.sH.proof(c.sH.n), sender=c.honest)
    chain.mine(deltatime=game.clockAllowance() + 1)
    rep.add("timeout (silent party, no panel)", game.timeout(did, sender=c.honest).gas_used)


def public_dispute(rep: Report, project, accounts, chain, n: int, k: int, label: str) -> dict:
    """Public-trace path: A opens with pinpoint, both submit step roots, A pinpoints the step, panel of 3."""
    s, nodes, poster = fresh(project, accounts, n_nodes=4, roles=ROLE_SOLVER | ROLE_VERIFIER)
    nodes.add(accounts[6:9], roles=ROLE_REFEREE)
    out = _public_dispute_on(s, poster, chain, n, k)
    _report_dispute(rep, out, label)
    return out


def running_dispute(rep: Report, project, accounts, chain) -> dict:
    """The same 10^6-step dispute as the second one on one deployment (its nodes disputed once before): what a
    running network pays, without the first writes its nodes make (the referees' first token balances, their
    reputation words, the ban of a task)."""
    s, nodes, poster = fresh(project, accounts, n_nodes=4, roles=ROLE_SOLVER | ROLE_VERIFIER)
    nodes.add(accounts[6:9], roles=ROLE_REFEREE)
    _public_dispute_on(s, poster, chain, 1000, 1000)
    out = _public_dispute_on(s, poster, chain, 1000, 1000)
    rep.add("dispute n=1000 k=1000, the second on one deployment (same nodes): whole dispute", out["dispute_total"],
            f"parties {out['parties_total']:,}; information, not the target's yardstick")
    return out


def _public_dispute_on(s, poster, chain, n: int, k: int) -> dict:
    game, jobs = s.game, s.jobs
    t0 = time.perf_counter()
    job = poster.post(shards=2, rounds=1, replication=2, steps=n * k, k=k, stake=STAKE)  # shard 0: no AGGREGATE
    tid = jobs.taskOf(job.id, 0, 0)
    H = Trace.random(h32(jobs.getTask(tid).inputHash), n)
    H.levels  # noqa: B018 — build the tree now, to time it
    # Diverge at the last checkpoint: the second tree shares all but one path with the first.
    C = Trace(H.hashes[:-1] + [rand32()])
    C._levels = [lvl.copy() for lvl in H.levels]
    _repath(C, n)
    seg = n - 1
    sH = Trace([H.hashes[seg]] + [rand32() for _ in range(k - 1)] + [H.hashes[n]])
    step = k // 2
    sC = Trace(sH.hashes[: step + 1] + [rand32() for _ in range(k - 1 - step)] + [C.hashes[n]])
    tree_s = time.perf_counter() - t0
    honest, cheater = poster.node_of(tid, 0), poster.node_of(tid, 1)
    poster.run_replicated(tid, [H, C])
    a, b, panel_g = [], [], []
    r = game.openDisputeWithPinpoint(tid, H.pinpoint(C, seg), sender=honest)
    did = opened(s, r)
    a.append(r.gas_used)
    a.append(game.submitStepRoot(did, sH.root, sH.proof(0), sH.proof(k), sender=honest).gas_used)
    b.append(game.submitStepRoot(did, sC.root, sC.proof(0), sC.proof(k), sender=cheater).gas_used)
    a.append(game.pinpoint(did, sH.pinpoint(sC, step), sender=honest).gas_used)
    seat = seat_panel(s, chain, did, sender=honest).gas_used
    refs = [poster.by_address[x] for x in seats(s, did)]
    rs = vote(s, did, {x: sH.hashes[step + 1] for x in refs})
    panel_g = [seat] + [x.gas_used for x in rs]
    commits, reveals = panel_g[1:4], panel_g[4:]
    fin = finalize_after_window(s, chain, tid, poster.account).gas_used  # the winner is the candidate (P3)
    depth0, depth1 = len(H.proof(0)), len(sH.proof(0))
    out = {
        "n": n, "k": k, "depth_checkpoints": depth0, "depth_steps": depth1,
        "openDisputeWithPinpoint": a[0], "submitStepRoot": max(a[1], b[0]), "pinpoint_level1": a[2],
        "seat": seat, "commitVote": max(commits), "revealVote": max(reveals[:-1]), "revealVote_last": reveals[-1],
        "finalize_candidate": fin,
        "party_A_gas": sum(a), "party_A_tx": len(a), "party_B_gas": sum(b), "party_B_tx": len(b),
        "parties_total": sum(a) + sum(b), "panel_total": sum(panel_g), "dispute_total": sum(a) + sum(b) + sum(panel_g),
        "tree_build_s": round(tree_s, 2),
    }
    return out


def _report_dispute(rep: Report, out: dict, label: str) -> None:
    depth0, depth1 = out["depth_checkpoints"], out["depth_steps"]
    rep.add(f"dispute {label}: openDisputeWithPinpoint", out["openDisputeWithPinpoint"], f"4 proofs, depth {depth0}")
    rep.add(f"dispute {label}: submitStepRoot", out["submitStepRoot"], f"2 proofs, depth {depth1}")
    rep.add(f"dispute {label}: pinpoint (level 1)", out["pinpoint_level1"], "4 proofs + panel open (randomness request)")
    rep.add(f"dispute {label}: panel seat", out["seat"], "3 referee draws + 3 locks")
    rep.add(f"dispute {label}: panel commitVote / revealVote", out["commitVote"], f"reveal {out['revealVote']}")
    rep.add(f"dispute {label}: revealVote (last: decides, settles)", out["revealVote_last"],
            "tally + onVerdict + candidate")
    rep.add(f"dispute {label}: finalize the winner after its window", out["finalize_candidate"])
    rep.add(f"dispute {label}: parties total (A {out['party_A_tx']} tx, B {out['party_B_tx']} tx)", out["parties_total"])
    rep.add(f"dispute {label}: whole dispute incl. seating and 3 referees", out["dispute_total"])


def _repath(t: Trace, j: int) -> None:
    """Recompute the path of leaf j in t._levels after t.hashes[j] changed."""
    from eth_hash.auto import keccak

    lv = t._levels
    lv[0][j] = keccak(j.to_bytes(32, "big") + t.hashes[j])
    for d in range(1, len(lv)):
        j //= 2
        lv[d][j] = keccak(lv[d - 1][2 * j] + lv[d - 1][2 * j + 1])


def _rpc_batch(uri: str, calls: list[tuple[str, list]], chunk: int = 500) -> list:
    """JSON-RPC batches straight to anvil: one HTTP round trip per `chunk` calls (web3's per-call middleware and
    fee look-ups cost ~50 ms a transaction, ~30 min for 10,000 nodes). Raises on the first error answer."""
    import requests

    out = []
    with requests.Session() as http:
        for i in range(0, len(calls), chunk):
            body = [{"jsonrpc": "2.0", "id": i + j, "method": m, "params": p}
                    for j, (m, p) in enumerate(calls[i:i + chunk])]
            answers = sorted(http.post(uri, json=body, timeout=600).json(), key=lambda a: a["id"])
            for a in answers:
                if "error" in a:
                    raise RuntimeError(f"anvil: {a['error']}")
                out.append(a["result"])
    return out


def _bulk_register(w3, uri: str, s, first: int, count: int, amount: int, chunk: int = 250) -> None:
    """Registers nodes first..count-1 in rounds of `chunk` (anvil's pool slows down with thousands pending)."""
    for lo in range(first, count, chunk):
        _register_round(w3, uri, s, lo, min(count, lo + chunk), amount)


def _register_round(w3, uri: str, s, first: int, count: int, amount: int) -> None:
    """Registers nodes first..count-1 (addresses 0xBEEF0000 + i, impersonated), each staked `amount`, as the same
    transactions a node sends (a DevnetFaucet drip sent by the owner, approve, register, stake), without waiting on
    each: automine is off while they are sent in JSON-RPC batches with explicit nonces and gas, and each phase is
    mined into one block (block gas limit raised for it). Drips are mined before the nodes' own transactions, which
    need the tokens. A test-setup shortcut of this script; the contracts have no bulk path."""
    from eth_abi import encode
    from eth_utils import function_signature_to_4byte_selector as sel

    def data(sig: str, types: list[str], args: list) -> str:
        return "0x" + (sel(sig) + encode(types, args)).hex()

    owner = s.owner.address
    token, registry, faucet = s.token.address, s.registry.address, s.faucet.address
    gas_price = hex(w3.eth.gas_price * 2)
    top_up = amount - s.registry.MIN_REGISTRATION_STAKE()
    addrs = [w3.to_checksum_address(f"0x{0xBEEF0000 + i:040x}") for i in range(first, count)]

    def tx(frm: str, to: str, payload: str, nonce: int, gas: int) -> tuple[str, list]:
        return ("eth_sendTransaction", [{"from": frm, "to": to, "data": payload, "gas": hex(gas),
                                         "gasPrice": gas_price, "nonce": hex(nonce), "value": "0x0"}])

    def mine(hashes: list[str]) -> None:
        _rpc_batch(uri, [("anvil_mine", ["0x1"])])
        for h in hashes[-8:]:  # the block holds them all; a reverted one fails the nodeCount check below
            assert w3.eth.get_transaction_receipt(h).status == 1, h

    block_gas_limit = w3.eth.get_block("latest")["gasLimit"]
    _rpc_batch(uri, [("evm_setAutomine", [False]), ("evm_setBlockGasLimit", [hex(2**62)])]
               + [("anvil_setBalance", [a, hex(10**20)]) for a in addrs])
    try:
        nonce = w3.eth.get_transaction_count(owner, "pending")
        mine(_rpc_batch(uri, [tx(owner, faucet, data("drip(address,uint256)", ["address", "uint256"], [a, amount]),
                                 nonce + k, 150_000) for k, a in enumerate(addrs)]))
        calls = []
        for k, a in enumerate(addrs):
            i = first + k
            calls.append(tx(a, token, data("approve(address,uint256)", ["address", "uint256"], [registry, amount]),
                            0, 80_000))
            calls.append(tx(a, registry, data("register(uint8,uint8,uint32,uint32,uint32,string)",
                                              ["uint8", "uint8", "uint32", "uint32", "uint32", "string"],
                                              [ALL_ROLES, 0, 4096, 100, 1, f"/ip4/10.0.0.1/tcp/{i}"]), 1, 1_500_000))
            if top_up > 0:
                calls.append(tx(a, registry, data("stake(uint256)", ["uint256"], [top_up]), 2, 1_500_000))
        mine(_rpc_batch(uri, calls))
    finally:
        # one empty block at the usual limit: ape sizes its transactions from the latest block's
        _rpc_batch(uri, [("evm_setBlockGasLimit", [hex(block_gas_limit)]), ("anvil_mine", ["0x1"]),
                         ("evm_setAutomine", [True])])


def node_scaling(rep: Report, project, accounts, chain, counts: list[int]) -> dict:
    """postJob (1 shard, requests its draw) and assign() (2 draws) with 10 / 100 / 1000 / 10,000 registered nodes
    (set up by _bulk_register: raw batched txs from impersonated addresses)."""
    s = System.deploy(project, accounts[0])
    nodes = Nodes(s)
    poster = Poster(s, accounts[1], Book(nodes))
    w3 = chain.provider.web3
    uri = chain.provider.uri
    w3.provider.make_request("anvil_autoImpersonateAccount", [True])
    registered = 0
    out = {}
    for count in counts:
        t0 = time.perf_counter()
        if count > registered:
            _bulk_register(w3, uri, s, registered, count, 1_000 * E18)
            registered = count
        reg_s = time.perf_counter() - t0
        assert s.registry.nodeCount() == count, (s.registry.nodeCount(), count)
        if not out:  # warm-up: the deployment's first job pays the job and escrow counters' first writes
            poster.post(shards=1, replication=2, stake=STAKE)
        posts, assigns = [], []
        for _ in range(JOBS_PER_COUNT):  # which nodes a draw meets (and whether it retries) varies by ±10k
            job = poster.post(shards=1, replication=2, stake=STAKE, draw=False)
            posts.append(job.receipt.gas_used)
            assigns.append(poster.draw(s.jobs.taskOf(job.id, 0, 0)).gas_used)
        post, assign = round(sum(posts) / len(posts)), round(sum(assigns) / len(assigns))
        capacity = s.lens.treeCapacities(1, False, s.lens.memoryTier(4096))[0]  # the nodes' class (cpu-f32-strict, 4 GiB)
        out[count] = {"postJob_1shard_r2": post, "assign_2slots": assign, "assign_each": assigns,
                      "register_s": round(reg_s, 1), "tree_capacity": capacity}
        rep.add(f"{count} nodes: postJob (1 shard, requests its draw)", post, f"mean of {JOBS_PER_COUNT} jobs")
        rep.add(f"{count} nodes: assign() (2 draws)", assign,
                f"mean of {', '.join(f'{a:,}' for a in assigns)}; tree capacity {capacity}")
    w3.provider.make_request("anvil_autoImpersonateAccount", [False])
    return out


# ---------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "out" / "gas.json")
    ap.add_argument("--nodes", default="10,100,1000")
    ap.add_argument("--depths", default="10,14,20", help="checkpoint trace depths d: n = 2^d - 1 checkpoints")
    args = ap.parse_args()
    logging.getLogger("ape").setLevel(logging.WARNING)
    from ape import accounts, chain, networks, project
    from ape.logging import logger

    logger.set_level("WARNING")
    # ape's foundry provider always starts anvil with --steps-tracing, which keeps every opcode of every transaction
    # in memory: the 40,000 set-up transactions of 10,000 nodes took anvil past 23 GB (OOM-killed). Gas comes from
    # receipts, so the report does not need the traces.
    from ape_foundry.provider import FoundryProvider

    from verity.devnet.anvil import bound_ape_anvil_states

    bound_ape_anvil_states()  # old block states in a private, bounded directory (not ~/.foundry/anvil/tmp)
    build = FoundryProvider.build_command
    FoundryProvider.build_command = lambda self: [a for a in build(self) if a != "--steps-tracing"]
    rep = Report()
    disputes, scaling = {}, {}
    t0 = time.perf_counter()
    with networks.parse_network_choice("ethereum:local:foundry"):
        accs = accounts.test_accounts
        basics(rep, project, accs, chain)
        governance(rep, project, accs, chain)
        lifecycle(rep, project, accs, chain)
        verification_fees(rep, project, accs, chain)
        optimistic_challenge(rep, project, accs, chain)
        bisection_and_timeout(rep, project, accs, chain)
        disputes["1e6 steps (n=1000, k=1000)"] = public_dispute(rep, project, accs, chain, 1000, 1000, "n=1000 k=1000")
        disputes["1e6 steps, second on one deployment"] = running_dispute(rep, project, accs, chain)
        for d in (int(x) for x in args.depths.split(",") if x):
            disputes[f"n=2^{d}-1, k=1000"] = public_dispute(rep, project, accs, chain, (1 << d) - 1, 1000,
                                                            f"n=2^{d}-1 k=1000")
        scaling = node_scaling(rep, project, accs, chain, [int(x) for x in args.nodes.split(",") if x])
    elapsed = time.perf_counter() - t0

    rows = rep.rows
    per_replica = rows[PER_REPLICA]["gas"]
    head = disputes["1e6 steps (n=1000, k=1000)"]
    counts = sorted(scaling)
    targets = []
    if counts:
        lo, hi = scaling[counts[0]], scaling[counts[-1]]
        for key in ("postJob_1shard_r2", "assign_2slots"):
            growth = hi[key] / lo[key] - 1
            targets.append({"target": f"{key}: within +10% from {counts[0]} to {counts[-1]} nodes",
                            "value": f"{growth:+.1%}", "met": growth <= 0.10})
    targets.append({"target": "task lifecycle per replica <= 300k gas", "value": per_replica,
                    "met": per_replica <= 300_000})
    # issue 23, item 11: parties <= 1.3M, the whole dispute (seating and three referees included) <= 2.0M
    targets.append({"target": "dispute over 1e6 steps (k=1000) <= 1.3M gas (parties)", "value": head["parties_total"],
                    "met": head["parties_total"] <= 1_300_000})
    targets.append({"target": "dispute over 1e6 steps (k=1000) <= 2.0M gas (incl. 3 referees)",
                    "value": head["dispute_total"], "met": head["dispute_total"] <= 2_000_000})
    targets.append({"target": "<= 4 tx per party (public-trace path)",
                    "value": f"A {head['party_A_tx']}, B {head['party_B_tx']}",
                    "met": max(head["party_A_tx"], head["party_B_tx"]) <= 4})

    table = Table(title="Verity gas (receipt.gas_used)")
    table.add_column("action")
    table.add_column("gas", justify="right")
    table.add_column("note")
    for k_, v in rows.items():
        table.add_row(k_, f"{v['gas']:,}", v["note"])
    console.print(table)
    tt = Table(title="targets")
    for c in ("target", "value", "met"):
        tt.add_column(c)
    for t in targets:
        tt.add_row(t["target"], f"{t['value']:,}" if isinstance(t["value"], int) else str(t["value"]),
                   "[green]met[/]" if t["met"] else "[red]missed[/]")
    console.print(tt)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rows": rows, "disputes": disputes, "node_scaling": scaling, "targets": targets,
                                    "elapsed_s": round(elapsed, 1)}, indent=2))
    console.print(f"wrote {args.out} ({elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
