"""Network namespaces for the lab: one per host, each with a veth to one bridge, an address and a rate limit.

Every name the lab makes starts with its own prefix (`vl` + 6 hex digits), so parallel labs never collide and
`verity lab down` finds a crashed lab's leftovers by name. The bridge lives in the root namespace and holds the lab's
`.254` address, so the orchestrator (this process) reaches every host's anvil and IPFS API over the bridge. Each lab
takes its own /24 of 10.77.0.0/16 (the first one no interface here uses yet).

The pure part (`AddressPlan`, `setup_commands`, `teardown_commands`, `tbf_args`) builds `ip`/`tc` argument lists; the
rest runs them. Needs root (ip netns) and `tc` with tbf; the kernel here has no netem, so latency is a TCP proxy
(`verity.lab.proxy`).
"""
from __future__ import annotations

import fcntl
import ipaddress
import os
import re
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from verity.errors import VerityError

LAB_PREFIX = "vl"                   # every lab name: vl<6 hex>…
SUPERNET = ipaddress.ip_network("10.77.0.0/16")
BRIDGE_HOST = 254                   # the bridge's (the orchestrator's) address in each lab /24
LOCK_FILE = Path("/tmp/verity-lab.lock")  # serialises picking a /24 and creating the bridge
_ID_RE = re.compile(r"^[0-9a-f]{6}$")


class LabNetError(VerityError, RuntimeError):
    """An `ip`/`tc` command failed (or the lab's network could not be planned)."""

    def __init__(self, cmd: list[str], reason: str):
        self.cmd, self.reason = cmd, reason
        super().__init__(f"`{' '.join(cmd)}` failed: {reason.strip()[:500]}")


def new_lab_id() -> str:
    return secrets.token_hex(3)


@dataclass(frozen=True)
class Host:
    """One host of the plan: its name, its namespace, the veth ends, its address."""
    index: int
    name: str          # "chain", "h1", "h2", …
    netns: str         # <prefix>-<name>
    veth: str          # root side (on the bridge); ≤ 15 characters
    peer: str          # the other end before it moves into the namespace (then renamed `eth0`)
    address: str       # 10.77.<subnet>.<index + 1>


@dataclass(frozen=True)
class AddressPlan:
    """Names and addresses of one lab: host 0 is the chain host, hosts 1..n run nodes."""
    lab_id: str
    subnet: int                       # the third octet: 10.77.<subnet>.0/24
    node_hosts: int
    hosts: tuple[Host, ...] = field(default=())

    def __post_init__(self) -> None:
        if not _ID_RE.match(self.lab_id):
            raise ValueError(f"lab id {self.lab_id!r} is not 6 lowercase hex digits")
        if not 0 <= self.subnet <= 255:
            raise ValueError(f"subnet {self.subnet} is not an octet")
        if not 1 <= self.node_hosts <= 200:
            raise ValueError(f"{self.node_hosts} node hosts: 1-200 fit a /24")
        names = ["chain", *(f"h{i}" for i in range(1, self.node_hosts + 1))]
        object.__setattr__(self, "hosts", tuple(
            Host(i, name, f"{self.prefix}-{name}", f"{self.prefix}v{i}", f"{self.prefix}p{i}",
                 f"{self.network.network_address + i + 1}")
            for i, name in enumerate(names)))

    @property
    def prefix(self) -> str:
        return f"{LAB_PREFIX}{self.lab_id}"

    @property
    def bridge(self) -> str:
        return f"{self.prefix}br"

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.ip_network(f"{SUPERNET.network_address + (self.subnet << 8)}/24")

    @property
    def bridge_address(self) -> str:
        return str(self.network.network_address + BRIDGE_HOST)

    @property
    def chain(self) -> Host:
        return self.hosts[0]

    @property
    def nodes(self) -> tuple[Host, ...]:
        return self.hosts[1:]

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise LabNetError(["lab", "host", name], f"no host {name!r} in lab {self.lab_id} "
                                                 f"({', '.join(h.name for h in self.hosts)})")


def tbf_args(dev: str, mbit: float, netns: str | None = None) -> list[str]:
    """`tc … tbf` limiting `dev`'s egress to `mbit` Mbit/s (a burst of at least one 1/100 s of traffic, ≥ 32 KiB,
    and 50 ms of queue before drops)."""
    if mbit <= 0:
        raise ValueError(f"bandwidth {mbit} Mbit/s must be positive")
    burst = max(32 * 1024, int(mbit * 1e6 / 8 / 100))
    return [*_in(netns), "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{mbit:g}mbit",
            "burst", str(burst), "latency", "50ms"]


def _in(netns: str | None) -> list[str]:
    return ["ip", "netns", "exec", netns] if netns else []


def setup_commands(plan: AddressPlan, bandwidth_mbit: float | None = None) -> list[list[str]]:
    """Every command that builds the lab's network, in order (the bridge first, each host's namespace after it)."""
    cidr = plan.network.prefixlen
    cmds = [["ip", "link", "add", plan.bridge, "type", "bridge"],
            ["ip", "addr", "add", f"{plan.bridge_address}/{cidr}", "dev", plan.bridge],
            ["ip", "link", "set", plan.bridge, "up"]]
    for h in plan.hosts:
        cmds += [
            ["ip", "netns", "add", h.netns],
            ["ip", "netns", "exec", h.netns, "ip", "link", "set", "lo", "up"],
            ["ip", "link", "add", h.veth, "type", "veth", "peer", "name", h.peer],
            ["ip", "link", "set", h.peer, "netns", h.netns],
            ["ip", "netns", "exec", h.netns, "ip", "link", "set", h.peer, "name", "eth0"],
            ["ip", "netns", "exec", h.netns, "ip", "addr", "add", f"{h.address}/{cidr}", "dev", "eth0"],
            ["ip", "netns", "exec", h.netns, "ip", "link", "set", "eth0", "up"],
            ["ip", "link", "set", h.veth, "master", plan.bridge, "up"],
        ]
        if bandwidth_mbit:  # both directions: the host's egress (eth0) and its ingress (the bridge side's egress)
            cmds += [tbf_args("eth0", bandwidth_mbit, h.netns), tbf_args(h.veth, bandwidth_mbit)]
    return cmds


def teardown_commands(namespaces: list[str], links: list[str]) -> list[list[str]]:
    """Remove links first (deleting one veth end removes its peer), then the namespaces."""
    return [["ip", "link", "del", dev] for dev in links] + [["ip", "netns", "del", ns] for ns in namespaces]


def run(cmd: list[str], *, check: bool = True, timeout: float = 30) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise LabNetError(cmd, proc.stderr or proc.stdout or f"exit {proc.returncode}")
    return proc.stdout


# ------------------------------------------------------------------ what exists now
def namespaces(prefix: str = LAB_PREFIX) -> list[str]:
    """Namespaces whose name starts with `prefix`."""
    out = run(["ip", "netns", "list"], check=False)
    return sorted(n for n in (line.split()[0] for line in out.splitlines() if line.strip()) if n.startswith(prefix))


def links(prefix: str = LAB_PREFIX) -> list[str]:
    """Root-namespace links whose name starts with `prefix` (bridges and veth ends)."""
    names = []
    for line in run(["ip", "-o", "link", "show"], check=False).splitlines():
        parts = line.split(":", 2)
        if len(parts) >= 2:
            name = parts[1].strip().split("@")[0]
            if name.startswith(prefix):
                names.append(name)
    return sorted(names)


def used_subnets() -> set[int]:
    """Third octets of 10.77.x.0/24 networks that root-namespace interfaces already use."""
    used = set()
    for line in run(["ip", "-o", "-4", "addr", "show"], check=False).splitlines():
        m = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/", line)
        if m and ipaddress.ip_address(m.group(1)) in SUPERNET:
            used.add(int(m.group(1).split(".")[2]))
    return used


def pick_subnet(used: set[int]) -> int:
    for octet in range(1, 255):
        if octet not in used:
            return octet
    raise LabNetError(["lab", "subnet"], "every 10.77.x.0/24 is taken by another lab")


@contextmanager
def planning_lock() -> Iterator[None]:
    """One lab at a time picks its /24 and makes its bridge (two parallel tests would pick the same one)."""
    with open(LOCK_FILE, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def create(node_hosts: int, bandwidth_mbit: float | None = None, lab_id: str | None = None) -> AddressPlan:
    """Plan a lab and build its network; on any failure removes what it made and re-raises."""
    with planning_lock():
        plan = AddressPlan(lab_id or new_lab_id(), pick_subnet(used_subnets()), node_hosts)
        try:
            for cmd in setup_commands(plan, bandwidth_mbit):
                run(cmd)
        except BaseException:
            destroy(plan.prefix)
            raise
    return plan


def netns_pids(netns: str) -> list[int]:
    """Every process inside the namespace (whoever started it)."""
    out = run(["ip", "netns", "pids", netns], check=False)
    return [int(p) for p in out.split() if p.isdigit() and int(p) != os.getpid()]


def destroy(prefix: str) -> dict[str, list]:
    """Kill every process inside the prefix's namespaces, then remove its links and namespaces; returns what went."""
    import signal
    import time

    if not prefix.startswith(LAB_PREFIX) or len(prefix) < len(LAB_PREFIX) + 1:
        raise LabNetError(["lab", "down", prefix], f"refusing to remove names by the bare prefix {prefix!r}")
    spaces, devs = namespaces(prefix), links(prefix)
    killed = []
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        pids = [p for ns in spaces for p in netns_pids(ns)]
        for pid in pids:
            try:
                os.kill(pid, sig)
                killed.append(pid)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline and any(netns_pids(ns) for ns in spaces):
            time.sleep(0.1)
    for cmd in teardown_commands(spaces, devs):
        run(cmd, check=False)  # a veth end already went with its peer
    return {"namespaces": spaces, "links": devs, "pids": sorted(set(killed))}


def link_counters(dev: str) -> dict[str, int]:
    """rx/tx bytes of a root-namespace link (the bridge side of a host's veth: rx = what the host sent)."""
    base = Path("/sys/class/net") / dev / "statistics"
    return {name: int((base / name).read_text()) for name in ("rx_bytes", "tx_bytes")}


def set_link(dev: str, up: bool) -> None:
    run(["ip", "link", "set", dev, "up" if up else "down"])
