"""A job across a network lab: 4 node hosts in their own namespaces with their own IPFS nodes, a partition and a
kill -9 while the job runs; the job completes, tokens are conserved, nobody is slashed, bytes crossed the veths,
and the lab leaves no namespace, link or process behind."""
from __future__ import annotations

import os
import shutil
import subprocess
import time

import pytest

from verity.chain import EventCursor
from verity.devnet.faucet import devnet_address
from verity.devnet.process import start_time
from verity.lab import netns
from verity.lab.faults import FaultLog, crash_holder, in_background, partition
from verity.lab.lab import Lab
from verity.lab.ledger import bitswap_stats, slashed, token_conservation

pytestmark = [pytest.mark.integration, pytest.mark.scenario, pytest.mark.slow]


def _can_make_namespaces() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    if not shutil.which("ip") or not shutil.which("tc"):
        return "iproute2 (ip, tc) is not installed"
    probe = f"{netns.LAB_PREFIX}probe{os.getpid() % 10000}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True)
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None if made.returncode == 0 else f"cannot add a network namespace: {made.stderr.decode().strip()}"


@pytest.fixture
def lab(tmp_path):
    if reason := _can_make_namespaces():
        pytest.skip(reason)
    made = Lab(tmp_path / "lab", node_hosts=4, solvers=3, bandwidth_mbit=100, latency_ms=5)
    yield made
    made.down()


def test_job_crosses_the_network_through_a_partition_and_a_kill9(lab):
    t0 = time.monotonic()
    lab.up()
    up_s = time.monotonic() - t0
    c = lab.client()
    first_block = c.block_number()
    job_id = lab.post_job(shards=2, rounds=1, steps=20, k=10, replication=2, challenge_window=3)
    log = FaultLog()
    # solver h2 is cut off 2 s in, for 5 s; the first other node drawn for a task crashes (kill -9) and starts again
    cut = in_background(partition, lab, "h2", 5.0, log, after=2.0)
    crash = in_background(crash_holder, lab, job_id, {"h2"}, 60.0, log)
    job = lab.wait_job(job_id, timeout=300)
    for t in (cut, crash):
        t.join(timeout=30)
        assert not t.errors, t.errors
    job_s = time.monotonic() - t0 - up_s
    assert int.from_bytes(bytes(job.modelHash), "big") != 0
    kinds = [e["kind"] for e in sorted(log.events, key=lambda e: e["t"])]
    assert sorted(kinds) == ["heal", "kill9", "partition", "restart"], log.events
    assert kinds.index("kill9") + 1 == kinds.index("restart")

    # payments conserved, nobody slashed (every node here is honest)
    tokens = token_conservation(c)
    assert tokens["burned"] == 0
    nodes = [devnet_address(n.account) for n in lab.nodes.values()]
    assert slashed(c, nodes) == dict.fromkeys(nodes, 0)
    evs = EventCursor(c.w3, c.contracts, next_block=first_block).poll()
    assert not any(e.name == "DisputeOpened" for e in evs)
    assert sum(e.args["amount"] for e in evs if e.name == "PaymentSent" and e.contract == "JobEscrow") > 0

    # bytes crossed the veths: the shards left the chain host's IPFS node, and node hosts fetched over bitswap
    moved = lab.bytes_since_up()
    assert moved["chain"]["sent"] > 50_000, moved
    assert all(moved[h]["received"] > 10_000 for h in ("h1", "h2", "h3")), moved
    fetched = {h: bitswap_stats(lab.ipfs[h].api_url)["data_received"] for h in ("h1", "h2", "h3")}
    assert sum(fetched.values()) > 10_000, fetched

    pids = [p for ns in netns.namespaces(lab.plan.prefix) for p in netns.netns_pids(ns)]
    assert pids, "the lab's processes run inside its namespaces"
    prefix = lab.plan.prefix
    removed = lab.down()
    assert set(removed["namespaces"]) == {h.netns for h in lab.plan.hosts}
    assert netns.namespaces(prefix) == [] and netns.links(prefix) == []
    assert not [p for p in pids if start_time(p) is not None], "a lab process outlived `down`"
    print(f"\nlab up {up_s:.1f} s ({lab.timings}), job {job_s:.1f} s; bytes {moved}; bitswap {fetched}; "
          f"faults {log.events}")
