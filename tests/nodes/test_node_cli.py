"""`verity node …` against a real devnet: one process per name, names bound to accounts, a stake top-up
from the same key while the node runs, `node status`, and Ctrl-C."""
from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

import pytest

from node_builders import wait_for
from verity.chain.views import read
from verity.units import duration

pytestmark = pytest.mark.integration


def _verity(net, *args, timeout=120):
    return subprocess.run([sys.executable, "-m", "verity", *args], env=dict(net.env, COLUMNS="200"),
                          capture_output=True, text=True, timeout=timeout)


def _one_line(proc) -> str:
    return " ".join((proc.stdout + proc.stderr).split())


def test_second_node_run_and_a_name_bound_to_another_account_are_refused_fails(net):
    node = net.start_node("solver-1", 1)
    net.wait_registered(1)
    second = _verity(net, "node", "run", "--name", "solver-1", "--account", "1", "--max-seconds", "5")
    assert second.returncode == 1
    assert f"already in use by a running node (pid {node.proc.pid} node solver-1" in _one_line(second)
    assert node.proc.poll() is None  # the first one keeps running

    c = net.client()
    sent_before = c.w3.eth.get_transaction_count(net.client(3).address)
    other = _verity(net, "node", "register", "--name", "solver-1", "--account", "3")
    assert other.returncode == 1 and "node name 'solver-1' belongs to account" in _one_line(other)
    assert c.w3.eth.get_transaction_count(net.client(3).address) == sent_before  # refused before any transaction
    assert read(c, c.registry, "getNode", net.client(3).address).slot == 0

    early = _verity(net, "node", "unstake", "--name", "solver-1", "--account", "1", "--withdraw")
    assert early.returncode == 1 and "has no stake unbonding" in _one_line(early)
    start = _verity(net, "node", "unstake", "--name", "solver-1", "--account", "1", "--amount", "10")
    period = c.call(c.registry.functions.unbondingPeriod())
    assert start.returncode == 0, _one_line(start)
    assert f"unbonding 10.00 VRT; withdrawable in {duration(period)}" in _one_line(start)
    early = _verity(net, "node", "unstake", "--name", "solver-1", "--account", "1", "--withdraw")
    assert early.returncode == 1, _one_line(early)
    assert "too early: 10.00 VRT is unbonding and becomes withdrawable at" in _one_line(early)
    assert re.search(r"\(chain time; in \d+ min \d+ s\)", _one_line(early)), _one_line(early)
    first_block = c.w3.eth.block_number + 1
    below = _verity(net, "node", "unstake", "--name", "solver-1", "--account", "1", "--amount", "985")
    assert below.returncode == 1, _one_line(below)  # 1000 - 10 - 985 = 5 VRT bonded: below the 10 VRT minimum
    assert "would leave 5.00 VRT bonded, below the 10.00 VRT a registered node keeps" in _one_line(below)
    # refused before any transaction: the running node on the same key may heartbeat meanwhile, nothing else
    heartbeat = c.registry.encode_abi("heartbeat", args=[]).lower()
    sent = _calls_from(c, net.client(1).address, first_block)
    assert all(data == heartbeat for data in sent), sent


def _calls_from(c, address: str, first_block: int) -> list[str]:
    """The calldata of every transaction `address` sent from `first_block` on (hex, 0x-prefixed)."""
    out = []
    for number in range(first_block, c.w3.eth.block_number + 1):
        for tx in c.w3.eth.get_block(number, full_transactions=True).transactions:
            if tx["from"].lower() == address.lower():
                data = tx["input"]
                out.append((data if isinstance(data, str) else "0x" + bytes(data).hex()).lower())
    return out


def test_stake_top_up_while_running_then_status_and_ctrl_c_succeeds(net):
    a = net.start_node("solver-1", 1)
    net.start_node("solver-2", 2)
    net.wait_registered(2)
    wait_for(lambda: "running as" in a.text(), 60, "solver-1 to start its loop")
    time.sleep(6)  # three keeper ticks (2 s), well inside its 30-s heartbeat period
    beats = [e.block for e in net.events() if e.name == "Heartbeat" and e.args["node"] == a.address]
    assert len(beats) == 1, beats  # `node run` checked in, and its keeper's first tick did not check in again
    top_up = _verity(net, "node", "register", "--name", "solver-1", "--account", "1", "--roles", "solver,referee",
                     "--stake", "1500")  # the same key sends while the node runs
    assert top_up.returncode == 0, _one_line(top_up)
    job_id = net.post(shards=1, rounds=1, steps=20, k=10, replication=2, execution_window=60)
    net.wait_job(job_id, timeout=240)  # solver-1 sent commit / reveal after the top-up moved its nonce
    c = net.client()
    assert read(c, c.registry, "getNode", a.address).stake == 1500 * 10**18
    assert read(c, c.lens, "reputationOf", a.address).tasksCompleted == 2
    assert "nonce" not in a.text().lower()

    status = _verity(net, "node", "status", "--name", "solver-1", "--account", "1")
    out = _one_line(status)
    assert status.returncode == 0, out
    for field in ("roles │ solver,referee", "last seen │", "s ago", "balance │", "stake │ 1,500.00 VRT",
                  "locked stake │ 0.00 VRT", "earnings │ 2.00 VRT", "reputation │ 2 tasks done, 0 late",
                  "task:1:", "done", "selection weight │", "as solver", "promptness",
                  "paid │ 2.00 VRT task payments", f"by job │ job {job_id}: 2.00 VRT"):
        assert field in out, f"{field!r} missing from:\n{status.stdout}"

    a.proc.send_signal(signal.SIGINT)
    t0 = time.monotonic()
    a.proc.wait(timeout=15)
    assert time.monotonic() - t0 < 10 and a.proc.returncode == 0
    a.killed = True
    assert "SIGINT: stopping; finishing" in a.text() and "stopped; snapshot saved" in a.text()


def test_register_declares_region_and_bandwidth_and_a_region_job_is_eligible_only_for_it_succeeds(net):
    """Issue 9 item 4 through the user's path: `verity node register --region --bandwidth-mbps` on the real devnet
    sends declareNetwork; the registry then counts the node for a Europe job with 100 Mbit/s and not for Asia, and
    `node status` shows what the chain holds."""
    from verity.chain.protocol import PROFILE_PORTABLE_F32, REGIONS, ROLE_SOLVER

    done = _verity(net, "node", "register", "--name", "eu-1", "--account", "4", "--roles", "solver",
                   "--region", "europe", "--bandwidth-mbps", "250")
    assert done.returncode == 0, _one_line(done)
    c = net.client()
    address = net.client(4).address
    node = read(c, c.registry, "getNode", address)
    assert (node.region, node.bandwidthMbps) == (REGIONS["europe"], 250)
    eligible = lambda region, mbps: c.call(c.registry.functions.isEligible(  # noqa: E731
        address, ROLE_SOLVER, 0, 0, PROFILE_PORTABLE_F32, region, mbps, 1))  # the one profile every node serves
    # registered but never run: not drawn at all until its first heartbeat (`node run` sends it)
    assert not eligible(REGIONS["europe"], 100) and not eligible(0, 0)
    node_client = net.client(4)
    node_client.transact(node_client.registry.functions.heartbeat())
    assert eligible(REGIONS["europe"], 100) and eligible(0, 0)
    assert not eligible(REGIONS["asia"], 0) and not eligible(REGIONS["europe"], 1000)
    status = _verity(net, "node", "status", "--name", "eu-1", "--account", "4")
    assert status.returncode == 0 and re.search(r"europe.*250 Mbit/s", _one_line(status), re.I), _one_line(status)
