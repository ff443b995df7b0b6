"""The lab's pure parts: the address plan, the ip/tc commands, roles and accounts, and the delaying proxy on
loopback (no namespace, no root)."""
from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest

from verity.lab import netns
from verity.lab.hosts import in_netns, node_account, node_env, proxy_command, roles_for, rpc_url_for_nodes
from verity.lab.proxy import Mapping, start


def test_address_plan_names_and_addresses():
    plan = netns.AddressPlan("0a1b2c", 7, 3)
    assert [h.name for h in plan.hosts] == ["chain", "h1", "h2", "h3"]
    assert [h.address for h in plan.hosts] == ["10.77.7.1", "10.77.7.2", "10.77.7.3", "10.77.7.4"]
    assert plan.bridge_address == "10.77.7.254" and str(plan.network) == "10.77.7.0/24"
    assert plan.prefix == "vl0a1b2c" and plan.bridge == "vl0a1b2cbr"
    assert plan.host("h2").netns == "vl0a1b2c-h2"
    # Linux interface names hold at most 15 characters
    assert all(len(n) <= 15 for h in plan.hosts for n in (h.veth, h.peer)) and len(plan.bridge) <= 15
    assert len({h.veth for h in plan.hosts}) == len(plan.hosts)


def test_address_plan_fits_the_largest_lab():
    plan = netns.AddressPlan("ffffff", 255, 200)
    assert plan.hosts[-1].address == "10.77.255.201" and len(plan.hosts[-1].veth) <= 15


@pytest.mark.parametrize("args", [("xyz", 1, 2), ("0a1b2c", 256, 2), ("0a1b2c", 1, 0), ("0a1b2c", 1, 201)])
def test_address_plan_rejects_bad_input(args):
    with pytest.raises(ValueError):
        netns.AddressPlan(*args)


def test_unknown_host_is_named_in_the_error():
    with pytest.raises(netns.LabNetError, match="no host 'h9'"):
        netns.AddressPlan("0a1b2c", 1, 2).host("h9")


def test_pick_subnet_skips_used_ones():
    assert netns.pick_subnet(set()) == 1
    assert netns.pick_subnet({1, 2, 4}) == 3
    with pytest.raises(netns.LabNetError):
        netns.pick_subnet(set(range(256)))


def test_setup_commands_build_bridge_then_each_host():
    plan = netns.AddressPlan("0a1b2c", 9, 1)
    cmds = netns.setup_commands(plan)
    assert cmds[0] == ["ip", "link", "add", "vl0a1b2cbr", "type", "bridge"]
    assert ["ip", "addr", "add", "10.77.9.254/24", "dev", "vl0a1b2cbr"] in cmds
    assert ["ip", "netns", "add", "vl0a1b2c-h1"] in cmds
    assert ["ip", "netns", "exec", "vl0a1b2c-h1", "ip", "addr", "add", "10.77.9.2/24", "dev", "eth0"] in cmds
    assert ["ip", "link", "set", "vl0a1b2cv1", "master", "vl0a1b2cbr", "up"] in cmds
    assert not any("tc" in c for c in cmds)
    # every namespace gets loopback up (its node reaches its IPFS API on 127.0.0.1)
    assert sum(c[-2:] == ["lo", "up"] for c in cmds) == 2


def test_bandwidth_limits_both_directions_of_every_host():
    plan = netns.AddressPlan("0a1b2c", 9, 2)
    tcs = [c for c in netns.setup_commands(plan, bandwidth_mbit=20) if "tc" in c]
    assert len(tcs) == 2 * 3
    assert netns.tbf_args("eth0", 20, "ns") == ["ip", "netns", "exec", "ns", "tc", "qdisc", "replace", "dev", "eth0",
                                                "root", "tbf", "rate", "20mbit", "burst", "32768", "latency", "50ms"]
    assert netns.tbf_args("v", 1000)[netns.tbf_args("v", 1000).index("burst") + 1] == str(1_250_000)
    with pytest.raises(ValueError):
        netns.tbf_args("v", 0)


def test_teardown_removes_links_before_namespaces():
    cmds = netns.teardown_commands(["vlx-a"], ["vlxbr", "vlxv0"])
    assert cmds == [["ip", "link", "del", "vlxbr"], ["ip", "link", "del", "vlxv0"], ["ip", "netns", "del", "vlx-a"]]


def test_destroy_refuses_the_bare_prefix():
    with pytest.raises(netns.LabNetError, match="refusing"):
        netns.destroy("vl")
    with pytest.raises(netns.LabNetError):
        netns.destroy("other")


def test_roles_and_accounts():
    assert roles_for(4) == ["solver,referee"] * 3 + ["verifier,referee"]
    assert roles_for(8) == ["solver,referee"] * 6 + ["verifier,referee"] * 2
    assert roles_for(2) == ["solver,referee"] * 2
    assert roles_for(3, solvers=1) == ["solver,referee"] + ["verifier,referee"] * 2
    with pytest.raises(ValueError):
        roles_for(3, solvers=4)
    # the submitter's account 9 is never a node's
    assert [node_account(i) for i in (1, 8, 9, 10)] == [1, 8, 10, 11]


def test_commands_run_inside_the_hosts_namespace():
    plan = netns.AddressPlan("0a1b2c", 3, 2)
    assert in_netns("ns", ["x"]) == ["ip", "netns", "exec", "ns", "x"]
    swarm = proxy_command(plan.host("h1"), 25, chain=False)
    assert swarm[:4] == ["ip", "netns", "exec", "vl0a1b2c-h1"] and swarm[-1] == "10.77.3.2:14001=10.77.3.2:4001"
    assert proxy_command(plan.chain, 25, chain=True)[-1] == "10.77.3.1:18545=127.0.0.1:8545"
    assert rpc_url_for_nodes(plan, 0) == "http://10.77.3.1:8545"
    assert rpc_url_for_nodes(plan, 10) == "http://10.77.3.1:18545"
    env = node_env({"A": "1"}, rpc_url="http://x", deployments_dir=Path("/d"), state_dir=Path("/s"), accounts=30)
    assert env["VERITY_IPFS_API"] == "/ip4/127.0.0.1/tcp/5001/http" and env["VERITY_DEVNET_ACCOUNTS"] == "30"
    assert env["A"] == "1" and env["VERITY_RPC_URL"] == "http://x" and env["VERITY_IPFS_TIMEOUT"] == "10"
    assert node_env({}, rpc_url="x", deployments_dir=Path("/d"), state_dir=Path("/s"), accounts=30,
                    ipfs_timeout=30)["VERITY_IPFS_TIMEOUT"] == "30"


def test_mapping_parses_and_rejects():
    m = Mapping.parse("10.0.0.1:1=127.0.0.1:2")
    assert (m.listen_host, m.listen_port, m.target_host, m.target_port) == ("10.0.0.1", 1, "127.0.0.1", 2)
    assert str(m) == "10.0.0.1:1=127.0.0.1:2"
    with pytest.raises(Exception, match="LISTEN_HOST"):
        Mapping.parse("nope")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_proxy_forwards_both_ways_with_the_delay():
    """An echo server behind a 100 ms proxy: the bytes come back intact, a round trip takes ≥ 2 × 100 ms, and a
    stream keeps its throughput (many chunks in flight, not one delay per chunk)."""
    async def scenario():
        async def echo(r, w):
            while data := await r.read(65536):
                w.write(data)
                await w.drain()
            w.close()
        backend = await asyncio.start_server(echo, "127.0.0.1", 0)
        target = backend.sockets[0].getsockname()[1]
        port = _free_port()
        servers = await start([Mapping("127.0.0.1", port, "127.0.0.1", target)], delay=0.1)
        r, w = await asyncio.open_connection("127.0.0.1", port)
        t0 = time.monotonic()
        w.write(b"ping")
        await w.drain()
        assert await r.readexactly(4) == b"ping"
        rtt = time.monotonic() - t0
        payload = bytes(range(256)) * 4096  # 1 MiB in many chunks
        t0 = time.monotonic()
        w.write(payload)
        await w.drain()
        got = await r.readexactly(len(payload))
        stream = time.monotonic() - t0
        w.close()
        for s in (*servers, backend):
            s.close()
        return rtt, got == payload, stream
    rtt, intact, stream = asyncio.run(scenario())
    assert intact
    assert 0.2 <= rtt < 1.0, rtt
    assert stream < 2.0, stream  # 1 MiB is ~16 chunks each way: one-at-a-time delays would take > 3 s


def test_proxy_closes_a_client_when_the_target_is_down():
    async def scenario():
        port = _free_port()
        servers = await start([Mapping("127.0.0.1", port, "127.0.0.1", _free_port())], delay=0.01)
        r, w = await asyncio.open_connection("127.0.0.1", port)
        data = await asyncio.wait_for(r.read(10), 5)
        w.close()
        for s in servers:
            s.close()
        return data
    assert asyncio.run(scenario()) == b""


def test_lab_refuses_a_directory_that_is_not_a_labs(tmp_path, monkeypatch):
    from verity.lab.lab import Lab, LabFailed

    monkeypatch.setattr("os.geteuid", lambda: 0)
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(LabFailed, match="holds no lab"):
        Lab(tmp_path, 1).up()
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_slash_reasons_names_the_events_of_each_slashing_transaction():
    from verity.chain.events import DecodedEvent
    from verity.lab.ledger import slash_reasons

    a, b = "0x" + "aa" * 20, "0x" + "bb" * 20

    def ev(name, tx, **args):
        return DecodedEvent("X", name, args, 5, 0, tx)

    events = [ev("ReplicaLate", "t1", node=a.upper(), taskId=3, slot=0, slashed=10**18),
              ev("StakeSlashed", "t1", node=a.upper(), to="0x0", amount=10**18),
              ev("Transfer", "t1", value=1),
              ev("StakeSlashed", "t2", node=a, to="0x0", amount=2 * 10**18),
              ev("RefereeSlashed", "t2", referee=a, amount=2 * 10**18),
              ev("DisputeResolved", "t2"),
              ev("StakeSlashed", "t3", node="0x" + "cc" * 20, to="0x0", amount=5)]  # not a lab host
    assert slash_reasons(events, {"h1": a, "h2": b}) == {
        "h1": [{"block": 5, "vrt": 1.0, "events": ["ReplicaLate"]},
               {"block": 5, "vrt": 2.0, "events": ["DisputeResolved", "RefereeSlashed"]}]}


def test_cheats_accepted_counts_only_long_train_tasks_held_by_cheaters_only(monkeypatch):
    """The scale run's "every cheater loses": a task whose accepted result is held by cheaters only, and long enough
    for their bit flip to have changed it. Unit test: the chain is a table of view results."""
    from types import SimpleNamespace

    from verity.chain.events import DecodedEvent
    from verity.chain.protocol import ReplicaStatus, TaskKind
    from verity.lab import ledger

    cheat, cheat2, honest, zero = "0x" + "aa" * 20, "0x" + "ab" * 20, "0x" + "bb" * 20, "0x" + "00" * 20
    acc, sl = ReplicaStatus.ACCEPTED, ReplicaStatus.SLASHED

    def rep(node, status):
        return SimpleNamespace(node=node, status=status)

    tasks = {  # tid: (kind, n, k, candidate, replicas)
        1: (TaskKind.TRAIN, 4, 8, zero, [rep(cheat, acc), rep(cheat2, acc)]),        # a cheater pair won
        2: (TaskKind.TRAIN, 4, 8, zero, [rep(cheat, acc), rep(honest, acc)]),        # an honest replica agreed
        3: (TaskKind.TRAIN, 4, 8, honest, [rep(cheat, sl)]),                         # the challenger won
        4: (TaskKind.TRAIN, 2, 4, zero, [rep(cheat, acc)]),                          # 8 steps: no flip yet
        5: (TaskKind.AGGREGATE, 1, 1, zero, [rep(cheat, acc)]),                      # not trained
        6: (TaskKind.TRAIN, 4, 8, cheat, [rep(honest, sl)]),                         # a cheater won a dispute
    }

    def read(c, contract, fn, tid):
        kind, n, k, cand, reps = tasks[tid]
        return {"taskContext": SimpleNamespace(kind=kind, n=n, k=k), "getTask": SimpleNamespace(candidate=cand),
                "getReplicas": reps}[fn]

    monkeypatch.setattr("verity.chain.views.read", read)
    events = [DecodedEvent("JobRegistry", "TaskAccepted", {"taskId": t}, 5, 0, "0x") for t in tasks]
    events.append(DecodedEvent("JobRegistry", "TaskReopened", {"taskId": 9}, 5, 0, "0x"))
    c = SimpleNamespace(jobs=None)
    assert ledger.cheats_accepted(c, events, {"h1": cheat.upper(), "h2": cheat2}, flip_step=15) == [1, 6]


def test_job_timelines_follow_each_task_from_creation_to_acceptance():
    import importlib.util

    from verity.chain.events import DecodedEvent

    spec = importlib.util.spec_from_file_location("netlab_scale", Path(__file__).parents[2] / "scripts/netlab_scale.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def ev(name, block, **args):
        return DecodedEvent("X", name, args, block, 0, "0x")

    events = [ev("TaskCreated", 1, taskId=5, jobId=2, round=0, index=1, kind=1, inputHash=b""),
              ev("ChallengeWindowOpened", 3, taskId=5, deadline=0),
              ev("DisputeOpened", 4, taskId=5, disputeId=1, challenger="0x", defender="0x"),
              ev("ChallengeWindowOpened", 6, taskId=5, deadline=0),
              ev("TaskAccepted", 9, taskId=5, finalHash=b"", resultCid=b""),
              ev("TaskAccepted", 9, taskId=77, finalHash=b"", resultCid=b"")]  # created before the run: not ours
    assert mod.job_timelines(events, lambda block: 1000 + 10 * block, 1000) == {"2": [
        {"task": 5, "round": 0, "index": 1, "created_s": 10, "windows_s": [30, 60], "disputes": 1, "reopened": 0,
         "accepted_s": 90}]}
