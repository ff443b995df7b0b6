"""A network lab: a chain host and N node hosts, each its own network namespace on one bridge, with its own js-ipfs
node peered with the others, so model and data shards cross veths (rate-limited with tbf, delayed by a proxy).

    lab = Lab(Path(".verity/lab"), node_hosts=4, bandwidth_mbit=100, latency_ms=20)
    lab.up()            # namespaces, anvil + ticker, IPFS mesh, contracts, windows, node processes
    job = lab.post_job(shards=2, rounds=1, steps=20)
    lab.wait_job(job)
    lab.down()          # every process, veth, namespace and the bridge; also from another process (`Lab.load`)

`<dir>/lab.json` records what the lab made (names, addresses, pids); `/tmp/verity-lab/<prefix>.json` names the
process that owns it, so `verity lab down --all` removes labs whose owner died and leaves running ones alone.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

from verity.devnet.process import ProcessId, spawn, start_time
from verity.errors import VerityError
from verity.lab import netns
from verity.lab.hosts import (LAB_IPFS_TIMEOUT, SUBMITTER_ACCOUNT, LabAnvil, LabIpfs, NodeProc, in_netns,
                              node_account, node_env, proxy_command, roles_for, rpc_url_for_nodes, start_all)

RECORD = "lab.json"
REGISTRY = Path("/tmp/verity-lab")
CHAIN_ID = 31337
# Short devnet windows (the demo's, with a reveal window a few-second partition fits in) applied through the Timelock.
LAB_WINDOWS = {"execution": 120, "reveal": 10, "challenge": 3}
BLOCK_INTERVAL = 0.25  # draws wait 2 blocks after their request (P4)
NODE_VRT = 10_000


class LabFailed(VerityError, RuntimeError):
    def __init__(self, what: str):
        super().__init__(f"lab: {what}")


class Lab:
    def __init__(self, directory: Path, node_hosts: int = 4, *, bandwidth_mbit: float | None = None,
                 latency_ms: float = 0.0, solvers: int | None = None, die_with_parent: bool = True,
                 windows: dict | None = None, node_args: dict[str, list[str]] | None = None,
                 ipfs_timeout: float = LAB_IPFS_TIMEOUT) -> None:
        self.directory = Path(directory).resolve()
        self.ipfs_timeout = ipfs_timeout  # the nodes' VERITY_IPFS_TIMEOUT
        self.node_hosts, self.bandwidth_mbit, self.latency_ms = node_hosts, bandwidth_mbit, latency_ms
        self.roles = roles_for(node_hosts, solvers)
        self.die_with_parent = die_with_parent
        self.windows = windows or LAB_WINDOWS
        self.node_args = node_args or {}  # host name -> extra `verity node run` options (e.g. a TEST-ONLY --fault)
        self.plan: netns.AddressPlan | None = None
        self.anvil: LabAnvil | None = None
        self.ipfs: dict[str, LabIpfs] = {}
        self.nodes: dict[str, NodeProc] = {}
        self.helpers: list[ProcessId] = []  # ticker, proxies
        self.rpc_url = ""
        self.baseline: dict[str, dict[str, int]] = {}
        self.timings: dict[str, float] = {}
        self._lock = threading.Lock()
        self.down_on_purpose: set[str] = set()  # hosts whose node a fault stopped (not a crash to report)
        self.owner = os.getpid()  # the process that built it (kept when another process acts on the lab)

    # ---------------------------------------------------------------- paths
    @property
    def deployments_dir(self) -> Path:
        return self.directory / "deployments"

    @property
    def state_dir(self) -> Path:
        return self.directory / "state"

    @property
    def accounts(self) -> int:
        return max(20, node_account(self.node_hosts) + 1)

    # ----------------------------------------------------------------- up
    def up(self) -> dict[str, Any]:
        """Build everything; on any failure (or Ctrl-C) tears down what it made and re-raises."""
        t0 = time.monotonic()
        if os.geteuid() != 0:
            raise LabFailed("network namespaces need root (run it with sudo -E)")
        self._clear_directory()
        try:
            self.plan = netns.create(self.node_hosts, self.bandwidth_mbit)
            self._claim()
            self.save()
            self.timings["network_s"] = time.monotonic() - t0
            self._start_services()  # the contracts deploy (ape) while the IPFS nodes start
            self.timings["services_s"] = time.monotonic() - t0
            self._configure()
            self.timings["deploy_s"] = time.monotonic() - t0
            self._start_nodes()
            self.wait_registered(len(self.nodes))
            self.timings["up_s"] = time.monotonic() - t0
            self.baseline = self.link_bytes()
            self.save()
        except BaseException:
            self.down()
            raise
        return self.record()

    def _clear_directory(self) -> None:
        """Reuse the directory of a lab that is gone; refuse one that runs, or a directory that is not a lab's."""
        d = self.directory
        if (d / RECORD).is_file():
            prefix = json.loads((d / RECORD).read_text()).get("prefix")
            if prefix and netns.namespaces(prefix):
                raise LabFailed(f"lab {prefix} still runs in {d}; `verity lab down --dir {d}` first")
            shutil.rmtree(d)
        elif d.exists() and any(d.iterdir()):
            raise LabFailed(f"{d} is not empty and holds no lab; give the lab a directory of its own")
        d.mkdir(parents=True, exist_ok=True)

    def _claim(self) -> None:
        REGISTRY.mkdir(parents=True, exist_ok=True)
        me = ProcessId.of(os.getpid())
        (REGISTRY / f"{self.plan.prefix}.json").write_text(json.dumps(
            {"owner": me.pid, "started": me.started, "dir": str(self.directory),
             "detached": not self.die_with_parent}))

    def _start_services(self) -> None:
        plan = self.plan
        proxied = bool(self.latency_ms)
        self.anvil = LabAnvil(self.directory / "chain" / "anvil", plan.chain, accounts=self.accounts,
                              die_with_parent=self.die_with_parent)
        for h in plan.hosts:
            self.ipfs[h.name] = LabIpfs(self.directory / h.name / "ipfs", h, proxied=proxied,
                                        die_with_parent=self.die_with_parent)
        start_all([self.anvil])
        self.rpc_url = self.anvil.rpc_url
        self._deploying = _Background(self._deploy_contracts)
        start_all(list(self.ipfs.values()))
        ticker = [sys.executable, "-m", "verity.devnet.ticker", f"http://127.0.0.1:{self.anvil.port}",
                  str(BLOCK_INTERVAL), "--anvil", f"{self.anvil.pid}:{self.anvil._pid.started}"]
        self._helper(in_netns(plan.chain.netns, ticker), self.directory / "chain" / "ticker.log")
        if proxied:
            self._helper(proxy_command(plan.chain, self.latency_ms, chain=True), self.directory / "chain" / "proxy.log")
            for h in plan.nodes:
                self._helper(proxy_command(h, self.latency_ms, chain=False), self.directory / h.name / "proxy.log")
            time.sleep(0.5)  # the proxies bind before anyone dials them
        self.connect_mesh()

    def _helper(self, cmd: list[str], log: Path) -> None:
        proc = spawn(cmd, log, die_with_parent=self.die_with_parent)
        self.helpers.append(ProcessId.of(proc.pid))
        proc.returncode = 0  # reaped by netns.destroy's kill; no ResourceWarning

    def connect_mesh(self, only: str | None = None) -> int:
        """Every IPFS node dials every other (`/swarm/connect`): js-ipfs here runs offline, with no bootstrap or
        discovery. only: just that host's connections (after a partition heals). Returns the connections made."""
        names = list(self.ipfs)
        made = 0
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                if only and only not in (a, b):
                    continue
                with self.ipfs[a].storage(timeout=10, retries=1) as client:
                    client.connect_peer(self.ipfs[b].swarm_multiaddr)
                made += 1
        return made

    def _deploy_contracts(self) -> None:
        from verity.devnet.deploy import deploy

        deploy(self.rpc_url, self.deployments_dir, chain_id=CHAIN_ID, force=True)

    def _configure(self) -> None:
        """After the deploy: the lab's short windows (through the Timelock) and VRT for node accounts past 9."""
        from verity.chain.client import ChainClient, devnet_key
        from verity.chain.governance import apply_parameters
        from verity.devnet.faucet import devnet_address, fund

        self._deploying.join()
        owner = ChainClient(self.rpc_url, devnet_key(0), self.deployments_file_loaded())
        w = self.windows
        apply_parameters(owner, [(owner.jobs, owner.jobs.functions.setDefaultWindows(
            w["execution"], w["reveal"], w["challenge"]))])
        for i in range(1, self.node_hosts + 1):
            account = node_account(i)
            if account >= 10:  # the deploy script funds accounts 0-9 only
                fund(self.rpc_url, self.deployments_dir / f"{CHAIN_ID}.json", devnet_address(account),
                     vrt_wei=NODE_VRT * 10**18, eth_wei=0)

    def deployments_file_loaded(self):
        from verity.chain.deployments import load_deployments

        return load_deployments(CHAIN_ID, self.deployments_dir / f"{CHAIN_ID}.json")

    def _start_nodes(self) -> None:
        env = node_env(dict(os.environ), rpc_url=rpc_url_for_nodes(self.plan, self.latency_ms),
                       deployments_dir=self.deployments_dir, state_dir=self.state_dir, accounts=self.accounts,
                       ipfs_timeout=self.ipfs_timeout)
        if any("--fault" in args for args in self.node_args.values()):
            env["VERITY_ENABLE_FAULTS"] = "1"
        for h, roles in zip(self.plan.nodes, self.roles):
            node = NodeProc(h, f"node-{h.name}", node_account(h.index), roles, self.directory / h.name / "node.log",
                            env, list(self.node_args.get(h.name, [])))
            self.nodes[h.name] = node.start(self.die_with_parent)

    # ------------------------------------------------------------ chain views
    def client(self, account: int | None = None):
        from verity.chain.client import ChainClient, devnet_key

        return ChainClient(self.rpc_url, devnet_key(account) if account is not None else None,
                           self.deployments_file_loaded())

    def wait_registered(self, count: int, timeout: float = 240) -> None:
        """Until `count` nodes registered and checked in (drawable: registering alone is not a check-in)."""
        from verity.chain.views import checked_in_nodes

        c = self.client()
        deadline = time.monotonic() + timeout
        while c.call(c.registry.functions.nodeCount()) < count or checked_in_nodes(c) < count:
            self.check_nodes()
            if time.monotonic() > deadline:
                raise LabFailed(f"{count} nodes did not register and check in within {timeout:g} s\n{self.logs()}")
            time.sleep(0.5)

    def check_nodes(self) -> None:
        dead = [n for n in self.nodes.values() if n.exited() is not None]
        if dead:
            raise LabFailed(f"node process(es) {[n.name for n in dead]} exited\n{self.logs(dead)}")

    def logs(self, nodes=None, tail: int = 3000) -> str:
        return "\n".join(f"--- {n.name}\n{n.log.read_text(errors='replace')[-tail:] if n.log.exists() else ''}"
                         for n in (nodes if nodes is not None else self.nodes.values()))

    def storage(self, host: str = "chain"):
        return self.ipfs[host].storage(timeout=30, retries=2)

    def post_job(self, **spec) -> int:
        """Prepare (data shards into the chain host's IPFS node) and post a job as the submitter account."""
        from verity.submit.prepare import JobSpec, post_job_web3, prepare_job

        with self.storage() as storage:
            prepared = prepare_job(JobSpec(**spec), storage)
        return post_job_web3(self.client(SUBMITTER_ACCOUNT), prepared)

    def wait_job(self, job_id: int, timeout: float = 300, expected_dead: set[str] = frozenset()):
        from verity.chain.protocol import JobStatus
        from verity.chain.views import read

        c = self.client()
        deadline = time.monotonic() + timeout
        while True:
            job = read(c, c.jobs, "getJob", job_id)
            status = JobStatus(job.status)
            if status == JobStatus.COMPLETED:
                return job
            if status != JobStatus.ACTIVE:
                raise LabFailed(f"job {job_id} ended {status.name}")
            with self._lock:
                dead = [n for h, n in self.nodes.items()
                        if h not in expected_dead and h not in self.down_on_purpose and n.exited() is not None]
            if dead:
                raise LabFailed(f"node process(es) {[n.name for n in dead]} died\n{self.logs(dead)}")
            gone = self.dead_daemons()
            if gone:
                raise LabFailed(f"the IPFS daemon(s) of {gone} exited (see <host>/ipfs/ipfs.log)")
            if time.monotonic() > deadline:
                raise LabFailed(f"job {job_id} still {status.name} after {timeout:g} s\n{self.logs()}")
            time.sleep(0.5)

    def dead_daemons(self) -> list[str]:
        """Hosts whose IPFS daemon is no longer running (no fault stops one: js-ipfs exiting on its own is a bug)."""
        return [h for h, d in self.ipfs.items() if not d.running()]

    # -------------------------------------------------------------- network
    def link_bytes(self) -> dict[str, dict[str, int]]:
        """Per host, bytes it sent (`sent`: rx of its veth's bridge end) and received (`received`)."""
        out = {}
        for h in self.plan.hosts:
            try:
                counters = netns.link_counters(h.veth)
            except OSError:
                continue
            out[h.name] = {"sent": counters["rx_bytes"], "received": counters["tx_bytes"]}
        return out

    def bytes_since_up(self) -> dict[str, dict[str, int]]:
        now = self.link_bytes()
        return {h: {k: v - self.baseline.get(h, {}).get(k, 0) for k, v in c.items()} for h, c in now.items()}

    # ------------------------------------------------------------- records
    def record(self) -> dict[str, Any]:
        plan = self.plan
        return {
            "version": 1, "dir": str(self.directory), "lab_id": plan.lab_id if plan else None,
            "prefix": plan.prefix if plan else None, "subnet": str(plan.network) if plan else None,
            "bridge": plan.bridge if plan else None, "bridge_address": plan.bridge_address if plan else None,
            "node_hosts": self.node_hosts, "bandwidth_mbit": self.bandwidth_mbit, "latency_ms": self.latency_ms,
            "ipfs_timeout": self.ipfs_timeout,
            "rpc_url": self.rpc_url, "rpc_url_for_nodes": rpc_url_for_nodes(plan, self.latency_ms) if plan else None,
            "deployments": str(self.deployments_dir), "owner": self.owner, "detached": not self.die_with_parent,
            "anvil": self.anvil.info() if self.anvil else None,
            "helpers": [{"pid": p.pid, "started": p.started} for p in self.helpers],
            "hosts": [{"name": h.name, "netns": h.netns, "veth": h.veth, "address": h.address,
                       "ipfs": self.ipfs[h.name].info() if h.name in self.ipfs else None,
                       "node": self.nodes[h.name].info() if h.name in self.nodes else None}
                      for h in (plan.hosts if plan else ())],
            "timings": {k: round(v, 1) for k, v in self.timings.items()},
        }

    def save(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f".{RECORD}.tmp"
        tmp.write_text(json.dumps(self.record(), indent=2) + "\n")
        os.replace(tmp, self.directory / RECORD)

    @classmethod
    def load(cls, directory: Path) -> Lab:
        """The lab recorded in `directory`, to act on from another process (faults, down, status)."""
        directory = Path(directory).resolve()
        try:
            rec = json.loads((directory / RECORD).read_text())
        except FileNotFoundError:
            raise LabFailed(f"no lab recorded in {directory} (run `verity lab up` first)") from None
        lab = cls(directory, rec["node_hosts"], bandwidth_mbit=rec["bandwidth_mbit"], latency_ms=rec["latency_ms"],
                  die_with_parent=False, ipfs_timeout=rec.get("ipfs_timeout", LAB_IPFS_TIMEOUT))
        if rec["lab_id"]:
            lab.plan = netns.AddressPlan(rec["lab_id"], int(rec["subnet"].split(".")[2]), rec["node_hosts"])
        lab.rpc_url, lab.owner, lab.timings = rec["rpc_url"], rec["owner"], rec.get("timings", {})
        lab.die_with_parent = False  # a node restarted from here outlives this command
        for h in rec["hosts"]:
            host = lab.plan.host(h["name"])
            if h["ipfs"]:
                lab.ipfs[h["name"]] = LabIpfs(Path(h["ipfs"]["dir"]), host, proxied=bool(lab.latency_ms),
                                              die_with_parent=False)._adopt(h["ipfs"])
            if h["node"]:
                n = h["node"]
                node = NodeProc(host, n["name"], n["account"], n["roles"], Path(n["log"]),
                                node_env(dict(os.environ), rpc_url=rec["rpc_url_for_nodes"],
                                         deployments_dir=lab.deployments_dir, state_dir=lab.state_dir,
                                         accounts=lab.accounts, ipfs_timeout=lab.ipfs_timeout))
                if n["pid"] and start_time(n["pid"]) == n["started"]:
                    node.pid = ProcessId(n["pid"], n["started"])
                lab.nodes[h["name"]] = node
        lab.helpers = [ProcessId(p["pid"], p["started"]) for p in rec["helpers"]]
        return lab

    # ----------------------------------------------------------------- down
    def down(self) -> dict[str, Any]:
        """Stop every process in the lab's namespaces, remove its veths, bridge and namespaces. Idempotent."""
        removed: dict[str, Any] = {"namespaces": [], "links": [], "pids": []}
        if self.plan is not None:
            removed = netns.destroy(self.plan.prefix)
            (REGISTRY / f"{self.plan.prefix}.json").unlink(missing_ok=True)
        for service in (self.anvil, *self.ipfs.values()):
            if service is not None and service._proc is not None:
                service._proc.poll()  # reap
                service._proc = None
        for node in self.nodes.values():
            if node._proc is not None:
                node._proc.poll()
        return removed


class _Background:
    """A function run in a thread; join() re-raises what it raised."""

    def __init__(self, fn) -> None:
        self.error: BaseException | None = None

        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 — re-raised by join()
                self.error = exc
        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def join(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error


def stale_labs() -> list[str]:
    """Prefixes of labs whose names exist here but whose owner process is gone (or was never recorded)."""
    present = {n.split("-")[0] for n in netns.namespaces()} | {l[:len(netns.LAB_PREFIX) + 6] for l in netns.links()}
    stale = []
    for prefix in sorted(present):
        try:
            owner = json.loads((REGISTRY / f"{prefix}.json").read_text())
            alive = start_time(owner["owner"]) == owner["started"] and not owner.get("detached")
        except (OSError, ValueError, KeyError):
            alive = False
        if not alive:
            stale.append(prefix)
    return stale


def sweep(prefixes: list[str]) -> dict[str, dict]:
    """`netns.destroy` each prefix and forget its owner record."""
    out = {}
    for prefix in prefixes:
        out[prefix] = netns.destroy(prefix)
        (REGISTRY / f"{prefix}.json").unlink(missing_ok=True)
    return out
