"""What runs on a lab host, each inside its namespace (`ip netns exec`): anvil and the block ticker on the chain
host; a js-ipfs node, a latency proxy (when asked for) and a `verity node run` process on every node host.

Every namespace has its own ports, so each host uses the same fixed ones (`PORTS`): nothing collides with a devnet
or another lab on this machine. The orchestrator reaches each host at its bridge address.
"""
from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verity.devnet.anvil import Anvil
from verity.devnet.ipfs import IpfsNode
from verity.devnet.process import ProcessId, spawn
from verity.lab.netns import AddressPlan, Host

PORTS = {"anvil": 8545, "ipfs_api": 5001, "swarm": 4001, "gateway": 8080, "ipfs_rpc": 5003,
         "proxy_swarm": 14001, "proxy_anvil": 18545}
SUBMITTER_ACCOUNT = 9  # the job poster's devnet account (funded by the deploy script), on the chain host


def in_netns(netns: str, cmd: list[str]) -> list[str]:
    """`cmd` run inside `netns` (ip execs it: the pid is the command's own)."""
    return ["ip", "netns", "exec", netns, *cmd]


def node_account(i: int) -> int:
    """Devnet account of node host i (1-based): 1..8, then 10.. (9 is the submitter's)."""
    if i < 1:
        raise ValueError(f"node host index {i} starts at 1")
    return i if i < SUBMITTER_ACCOUNT else i + 1


def roles_for(node_hosts: int, solvers: int | None = None) -> list[str]:
    """Roles of node hosts 1..n: the first `solvers` solve (and referee), the rest verify (and referee). Default:
    one verifier per four hosts (at least one once there are three hosts), the rest solvers."""
    if solvers is None:
        solvers = node_hosts - (max(1, node_hosts // 4) if node_hosts >= 3 else 0)
    if not 1 <= solvers <= node_hosts:
        raise ValueError(f"{solvers} solvers among {node_hosts} node hosts: need 1..{node_hosts}")
    return ["solver,referee"] * solvers + ["verifier,referee"] * (node_hosts - solvers)


class LabAnvil(Anvil):
    """anvil on all of the chain host's addresses, inside its namespace."""
    _port_attrs = ()  # the root namespace's ports say nothing about this namespace's

    def __init__(self, directory: Path, host: Host, *, accounts: int, die_with_parent: bool) -> None:
        super().__init__(directory, PORTS["anvil"], accounts=accounts, die_with_parent=die_with_parent,
                         start_timeout=60)
        self.host = host

    @property
    def rpc_url(self) -> str:
        return f"http://{self.host.address}:{self.port}"

    def command(self) -> list[str]:
        cmd = super().command()
        cmd[cmd.index("--host") + 1] = "0.0.0.0"
        return in_netns(self.host.netns, cmd)


class LabIpfs(IpfsNode):
    """js-ipfs inside a host's namespace: swarm on the host's address (announced through the latency proxy when
    there is one), API on every address of the host (its node process uses loopback, the orchestrator the bridge)."""
    _port_attrs = ()

    def __init__(self, directory: Path, host: Host, *, proxied: bool, die_with_parent: bool) -> None:
        super().__init__(directory, PORTS["ipfs_api"], PORTS["swarm"], PORTS["gateway"], PORTS["ipfs_rpc"],
                         die_with_parent=die_with_parent, start_timeout=120)
        self.host, self.proxied = host, proxied

    @property
    def api_multiaddr(self) -> str:
        return f"/ip4/{self.host.address}/tcp/{self.api_port}/http"

    @property
    def api_url(self) -> str:
        return f"http://{self.host.address}:{self.api_port}"

    @property
    def dial_port(self) -> int:
        return PORTS["proxy_swarm"] if self.proxied else self.swarm_port

    @property
    def swarm_multiaddr(self) -> str:
        return f"/ip4/{self.host.address}/tcp/{self.dial_port}/p2p/{self.peer_id}"

    def _addresses(self) -> dict[str, Any]:
        return {**super()._addresses(),
                "API": f"/ip4/0.0.0.0/tcp/{self.api_port}",
                "Swarm": [f"/ip4/{self.host.address}/tcp/{self.swarm_port}"],
                "Announce": [f"/ip4/{self.host.address}/tcp/{self.dial_port}"] if self.proxied else []}

    def _init_config(self) -> dict[str, Any]:
        """No DHT and no pubsub: the lab dials every daemon to every other (Lab.connect_mesh), so bitswap finds each
        block among connected peers, and nobody publishes. With them (js-ipfs's defaults), each daemon announced every
        block it added or fetched to the DHT and ran gossipsub heartbeats with 32 peers: the 33 daemons took more CPU
        than the 32 nodes that trained (docs/network-lab.md)."""
        return {**super()._init_config(), "Routing": {"Type": "none"}, "Pubsub": {"Enabled": False}}

    def command(self) -> list[str]:
        return in_netns(self.host.netns, super().command())


def start_all(services: list) -> None:
    """Start several ManagedProcess services at once: spawn each (from this thread: a child's parent-death signal
    fires when the *thread* that forked it ends), then wait until every one answers. A failure stops them all."""
    for service in services:
        service.directory.mkdir(parents=True, exist_ok=True)
        service._prepare()
        env = service._env()
        if service.extra_env:
            env = {**(os.environ if env is None else env), **service.extra_env}
        service._proc = spawn(service.command(), service.log_path, env=env, die_with_parent=service.die_with_parent)
        service._pid = ProcessId.of(service._proc.pid)
        service._pid_path.write_text(f"{service._pid.pid} {service._pid.started}\n")
    try:
        for service in services:
            service._wait_ready()
    except BaseException:
        for service in services:
            service.stop()
        raise


def proxy_command(host: Host, latency_ms: float, *, chain: bool) -> list[str]:
    """The latency proxy of a host: its swarm (node hosts) or its anvil (the chain host)."""
    if chain:
        mapping = f"{host.address}:{PORTS['proxy_anvil']}=127.0.0.1:{PORTS['anvil']}"
    else:
        mapping = f"{host.address}:{PORTS['proxy_swarm']}={host.address}:{PORTS['swarm']}"
    return in_netns(host.netns, [sys.executable, "-m", "verity.lab.proxy", "--delay-ms", f"{latency_ms:g}", mapping])


def rpc_url_for_nodes(plan: AddressPlan, latency_ms: float) -> str:
    port = PORTS["proxy_anvil"] if latency_ms else PORTS["anvil"]
    return f"http://{plan.chain.address}:{port}"


@dataclass
class NodeProc:
    """One `verity node run` process on a node host."""
    host: Host
    name: str
    account: int
    roles: str
    log: Path
    env: dict
    extra_args: list = field(default_factory=list)
    pid: ProcessId | None = None
    _proc: Any = None

    def command(self) -> list[str]:
        return in_netns(self.host.netns, [sys.executable, "-m", "verity", "node", "run", "--name", self.name,
                                          "--account", str(self.account), "--roles", self.roles, *self.extra_args])

    def start(self, die_with_parent: bool = True) -> NodeProc:
        # A parent-death signal fires when the *thread* that forked the child ends: a node (re)started from a fault's
        # thread must not carry one (netns.destroy still finds it inside its namespace).
        die_with_parent = die_with_parent and threading.current_thread() is threading.main_thread()
        self._proc = spawn(self.command(), self.log, env=self.env, die_with_parent=die_with_parent)
        self.pid = ProcessId.of(self._proc.pid)
        return self

    def alive(self) -> bool:
        return self.pid is not None and self.pid.alive()

    def exited(self) -> int | None:
        """Its exit code if this object started it and it exited, else None."""
        return self._proc.poll() if self._proc is not None else (None if self.alive() else -1)

    def kill9(self) -> None:
        """SIGKILL, as a crash or a pulled plug would."""
        if self.alive():
            os.kill(self.pid.pid, 9)
        if self._proc is not None:
            self._proc.wait(timeout=10)

    def stop(self) -> None:
        if self.pid is not None:
            self.pid.stop(10.0, self._proc)

    def info(self) -> dict:
        return {"host": self.host.name, "name": self.name, "account": self.account, "roles": self.roles,
                "log": str(self.log), "pid": self.pid.pid if self.pid else None,
                "started": self.pid.started if self.pid else None}


LAB_IPFS_TIMEOUT = 10.0  # s: short IPFS bounds for quick runs (the client's default, 30 s, for loaded benchmarks)


def node_env(base: dict, *, rpc_url: str, deployments_dir: Path, state_dir: Path, accounts: int,
             ipfs_timeout: float = LAB_IPFS_TIMEOUT) -> dict:
    """Environment of a node process: the chain through the lab (proxied when latency is on), its own host's IPFS on
    loopback, `ipfs_timeout` IPFS bounds, one intra-op thread (many nodes share this machine's cores)."""
    return {**base, "VERITY_RPC_URL": rpc_url,
            "VERITY_IPFS_API": f"/ip4/127.0.0.1/tcp/{PORTS['ipfs_api']}/http",
            "VERITY_DEPLOYMENTS_DIR": str(deployments_dir), "VERITY_STATE_DIR": str(state_dir),
            "VERITY_DEVNET_ACCOUNTS": str(accounts), "VERITY_IPFS_TIMEOUT": f"{ipfs_timeout:g}",
            "VERITY_IPFS_RETRIES": "3",
            "VERITY_DEVNET_DIR": str(state_dir / "no-devnet"),
            "OMP_NUM_THREADS": "1", "MKL_CBWR": "AUTO"}
