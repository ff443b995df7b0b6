"""Faults a lab can inject while a job runs.

- partition: `ip link set <veth> down` on the host's bridge end for N seconds: the host keeps running but reaches
  nobody (chain, other IPFS nodes) and nobody reaches it; then up again and its IPFS node re-dials its peers (js-ipfs
  here has no bootstrap or discovery to do it by itself).
- kill9 / restart: SIGKILL a host's node process (no cleanup, as a crash or a pulled plug), then start it again with
  the same name and state directory: it resumes from its persisted snapshot.
- leave / join: stop a node process with SIGTERM (an operator switching off), start one on a host that has none.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from verity.lab import netns
from verity.lab.lab import Lab, LabFailed


@dataclass
class FaultLog:
    """What was injected and when (seconds since the log began), for a test or a benchmark report."""
    t0: float = field(default_factory=time.monotonic)
    events: list = field(default_factory=list)

    def add(self, kind: str, host: str, **extra) -> None:
        self.events.append({"t": round(time.monotonic() - self.t0, 2), "kind": kind, "host": host, **extra})


def partition(lab: Lab, host: str, seconds: float, log: FaultLog | None = None) -> int:
    """Cut `host` off for `seconds`, then heal it and re-dial its IPFS peers; returns the connections re-made."""
    veth = lab.plan.host(host).veth
    netns.set_link(veth, up=False)
    if log:
        log.add("partition", host, seconds=seconds)
    try:
        time.sleep(seconds)
    finally:
        netns.set_link(veth, up=True)
        if log:
            log.add("heal", host)
    time.sleep(0.5)  # the link comes up (carrier) before the first dial
    try:
        return lab.connect_mesh(only=host)
    except Exception:  # noqa: BLE001 — a peer that is itself cut off is re-dialled when its own partition heals
        return 0


def kill9(lab: Lab, host: str, log: FaultLog | None = None) -> None:
    node = _node(lab, host)
    with lab._lock:
        lab.down_on_purpose.add(host)  # wait_job does not count it as a crash of its own
        node.kill9()
    if log:
        log.add("kill9", host, node=node.name)


def restart(lab: Lab, host: str, log: FaultLog | None = None) -> None:
    node = _node(lab, host)
    if node.alive():
        raise LabFailed(f"the node on {host} is still running (pid {node.pid.pid}); kill it first")
    with lab._lock:
        node.start(lab.die_with_parent)
        lab.down_on_purpose.discard(host)
    lab.save()
    if log:
        log.add("restart", host, node=node.name, pid=node.pid.pid)


def leave(lab: Lab, host: str, log: FaultLog | None = None) -> None:
    node = _node(lab, host)
    with lab._lock:
        lab.down_on_purpose.add(host)
        node.stop()
    if log:
        log.add("leave", host, node=node.name)


def join(lab: Lab, host: str, log: FaultLog | None = None) -> None:
    """Start the host's node again (after `leave`); a node that never ran registers itself when it starts."""
    restart(lab, host)  # logs nothing without a log: the line below is the join's only entry
    if log:
        log.add("join", host, node=_node(lab, host).name)


def crash_holder(lab: Lab, job_id: int, spare: set[str] = frozenset(), timeout: float = 60.0,
                 log: FaultLog | None = None) -> str:
    """kill -9 the node of a host that holds a slot of `job_id` right now (not one of `spare`) and start it again at
    once: a crash in the middle of a task, which the node must resume from its snapshot. Returns the host."""
    from verity.chain import EventCursor
    from verity.devnet.faucet import devnet_address

    c = lab.client()
    hosts = {devnet_address(n.account): h for h, n in lab.nodes.items() if h not in spare}
    cursor = EventCursor(c.w3, {"JobRegistry": c.jobs}, next_block=c.deployments.start_block)
    tasks: set[int] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for ev in cursor.poll():
            if ev.name == "TaskCreated" and ev.args["jobId"] == job_id:
                tasks.add(ev.args["taskId"])
            elif ev.name == "TaskAssigned" and ev.args["taskId"] in tasks and ev.args["node"] in hosts:
                host = hosts[ev.args["node"]]
                kill9(lab, host, log)
                restart(lab, host, log)
                return host
        time.sleep(0.3)
    raise LabFailed(f"no node outside {sorted(spare)} was assigned a task of job {job_id} within {timeout:g} s")


def _node(lab: Lab, host: str):
    lab.plan.host(host)  # a clear error for an unknown host
    node = lab.nodes.get(host)
    if node is None:
        raise LabFailed(f"host {host} runs no node (the chain host runs anvil and the submitter's IPFS node)")
    return node


def in_background(fn, *args, after: float = 0.0, **kwargs) -> threading.Thread:
    """Run a fault `after` seconds from now in a thread (the job goes on meanwhile); join() the thread to wait."""
    errors: list[BaseException] = []

    def run() -> None:
        time.sleep(after)
        try:
            fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 — the caller checks .errors after join()
            errors.append(exc)
    thread = threading.Thread(target=run, name=f"fault:{fn.__name__}", daemon=True)
    thread.errors = errors  # type: ignore[attr-defined]
    thread.start()
    return thread
