"""`verity lab up | down | status | fault …`: a network lab on this machine (needs root: network namespaces)."""
from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from verity.cli.common import console, fail
from verity.errors import VerityError

app = typer.Typer(no_args_is_help=True, help="A network lab: hosts in network namespaces on one bridge, each with its "
                                             "own IPFS node and node process; bandwidth, latency and faults.")
Dir = Annotated[Path, typer.Option("--dir", help="the lab's directory (lab.json, logs, IPFS repos, node state)")]
Host = Annotated[str, typer.Argument(help="a node host: h1, h2, … (`verity lab status` lists them)")]
DEFAULT_DIR = Path(".verity/lab")


def _interrupt(signum, frame):  # SIGTERM and SIGHUP unwind like Ctrl-C, so the lab is taken down
    raise KeyboardInterrupt


@app.command()
def up(
    hosts: Annotated[int, typer.Option("--hosts", min=1, max=64, help="node hosts (a chain host comes on top)")] = 4,
    bandwidth_mbit: Annotated[Optional[float], typer.Option(
        "--bandwidth-mbit", min=0.1, help="rate limit of each host's link, both directions (tc tbf)")] = None,
    latency_ms: Annotated[float, typer.Option(
        "--latency-ms", min=0, help="one-way delay added to IPFS swarm and chain RPC connections (a TCP proxy)")] = 0,
    solvers: Annotated[Optional[int], typer.Option(
        "--solvers", min=1, help="node hosts that solve (the rest verify; default: 1 verifier per 4 hosts)")] = None,
    verifiers: Annotated[Optional[int], typer.Option("--verifiers", min=0, help="node hosts that verify")] = None,
    detach: Annotated[bool, typer.Option(help="leave the lab running and return (`verity lab down` removes it)")] = False,
    dir: Dir = DEFAULT_DIR,
) -> None:
    """Build the lab: namespaces, anvil + contracts on the chain host, a js-ipfs node and a `verity node run` process
    on each node host, IPFS peered all-to-all. Runs until Ctrl-C (then removes everything) unless --detach."""
    from verity.lab.lab import Lab

    if solvers is not None and verifiers is not None and solvers + verifiers != hosts:
        fail(VerityError(f"--solvers {solvers} + --verifiers {verifiers} is not --hosts {hosts}"))
    if verifiers is not None and solvers is None:
        solvers = hosts - verifiers
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    try:
        lab = Lab(dir, hosts, bandwidth_mbit=bandwidth_mbit, latency_ms=latency_ms, solvers=solvers,
                  die_with_parent=not detach)
    except ValueError as exc:
        fail(VerityError(str(exc)))
    try:
        with console.status(f"building a lab of {hosts} node hosts (namespaces, anvil, IPFS, contracts, nodes)…"):
            record = lab.up()
    except (VerityError, OSError) as exc:
        fail(VerityError(f"lab up failed, and what it made was removed: {exc}"))
    _print_hosts(record)
    console.print(f"[green]lab {record['prefix']} up[/green] in {record['timings'].get('up_s')} s: chain "
                  f"{record['rpc_url']}, deployments {record['deployments']}", soft_wrap=True)
    console.print(f"a client here: VERITY_RPC_URL={record['rpc_url']} VERITY_IPFS_API={lab.ipfs['chain'].api_multiaddr} "
                  f"VERITY_DEPLOYMENTS_DIR={record['deployments']}", soft_wrap=True, highlight=False)
    if detach:
        console.print(f"detached: `verity lab down --dir {dir}` removes it", soft_wrap=True)
        return
    console.print("running; Ctrl-C removes every namespace, link and process of the lab")
    try:
        while True:
            signal.pause()   # until Ctrl-C (KeyboardInterrupt) or SIGTERM/SIGHUP (_interrupt raises it too)
    except KeyboardInterrupt:
        pass
    finally:
        removed = lab.down()
        console.print(f"lab down: {len(removed['namespaces'])} namespaces, {len(removed['links'])} links, "
                      f"{len(removed['pids'])} processes removed")


@app.command()
def down(
    dir: Dir = DEFAULT_DIR,
    all_stale: Annotated[bool, typer.Option(
        "--all", help="also remove every lab on this machine whose owner process is gone (or that was detached)")] = False,
) -> None:
    """Remove the lab of --dir (its processes, veths, bridge, namespaces), and with --all every stale lab's leftovers
    found by name prefix."""
    from verity.lab.lab import Lab, LabFailed, stale_labs, sweep

    removed = {}
    try:
        lab = Lab.load(dir)
        removed[lab.plan.prefix] = lab.down()
    except LabFailed as exc:
        if not all_stale:
            fail(exc)
    if all_stale:
        removed.update(sweep(stale_labs()))
    for prefix, what in removed.items():
        console.print(f"{prefix}: removed {len(what['namespaces'])} namespaces, {len(what['links'])} links, "
                      f"{len(what['pids'])} processes")
    if not removed:
        console.print("nothing to remove")


@app.command()
def status(dir: Dir = DEFAULT_DIR, json_out: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The lab's hosts: address, namespace, whether its IPFS node and node process run, bytes over its link."""
    from verity.lab import netns
    from verity.lab.lab import Lab, LabFailed, stale_labs

    try:
        lab = Lab.load(dir)
    except LabFailed as exc:
        fail(exc)
    record = lab.record()
    present = set(netns.namespaces(lab.plan.prefix))
    if not present:
        console.print(f"lab {lab.plan.prefix} in {dir} is down (none of its namespaces exists)")
        raise typer.Exit(1)
    counters = lab.link_bytes()
    for h in record["hosts"]:
        h["netns_present"] = h["netns"] in present
        h["ipfs_alive"] = lab.ipfs[h["name"]].running() if h["name"] in lab.ipfs else None
        h["node_alive"] = lab.nodes[h["name"]].alive() if h["name"] in lab.nodes else None
        h["link_up"] = _link_up(h["veth"])
        h["bytes"] = counters.get(h["name"])
    record["stale_labs"] = stale_labs()
    if json_out:
        typer.echo(json.dumps(record, indent=2))
    else:
        _print_hosts(record)
        if record["stale_labs"]:
            console.print(f"stale or detached labs here (no live owner): {', '.join(record['stale_labs'])}; "
                          "`verity lab down --all` removes them")
    if not all(h["netns_present"] for h in record["hosts"]):
        raise typer.Exit(1)


def _link_up(dev: str) -> bool | None:
    try:
        return (Path("/sys/class/net") / dev / "operstate").read_text().strip() != "down"
    except OSError:
        return None


def _print_hosts(record: dict) -> None:
    t = Table(title=f"lab {record['prefix']} ({record['subnet']}, bandwidth {record['bandwidth_mbit'] or '-'} Mbit/s, "
                    f"latency {record['latency_ms']:g} ms)")
    for col in ("host", "address", "namespace", "runs", "state", "sent / received"):
        t.add_column(col)
    for h in record["hosts"]:
        runs = "anvil, ticker, IPFS (submitter)" if h["name"] == "chain" else f"IPFS, {h['node']['name']} " \
            f"({h['node']['roles']}, account {h['node']['account']})" if h.get("node") else "IPFS"
        flags = [k for k in ("link_up", "ipfs_alive", "node_alive") if h.get(k) is False]
        state = ("[red]" + ", ".join(f"not {k.replace('_', ' ')}" for k in flags) + "[/red]") if flags else "ok"
        b = h.get("bytes")
        t.add_row(h["name"], h["address"], h["netns"], runs, state,
                  f"{b['sent'] / 1e6:.1f} / {b['received'] / 1e6:.1f} MB" if b else "")
    console.print(t)


fault_app = typer.Typer(no_args_is_help=True, help="Inject a fault into a running lab.")
app.add_typer(fault_app, name="fault")


def _lab(dir: Path):
    from verity.lab.lab import Lab, LabFailed

    try:
        return Lab.load(dir)
    except LabFailed as exc:
        fail(exc)


@fault_app.command("partition")
def fault_partition(host: Host, seconds: Annotated[float, typer.Option(min=0.1, help="how long it is cut off")] = 10,
                    dir: Dir = DEFAULT_DIR) -> None:
    """Cut HOST off (its link down) for --seconds, then heal it and re-dial its IPFS peers."""
    from verity.lab.faults import partition

    lab = _lab(dir)
    try:
        with console.status(f"{host} partitioned for {seconds:g} s…"):
            made = partition(lab, host, seconds)
    except VerityError as exc:
        fail(exc)
    console.print(f"{host} healed; {made} IPFS connections re-made")


@fault_app.command("kill")
def fault_kill(host: Host, restart_after: Annotated[Optional[float], typer.Option(
        help="start the node again after this many seconds (default: leave it dead)")] = None,
        dir: Dir = DEFAULT_DIR) -> None:
    """kill -9 HOST's node process (a crash); with --restart-after, start it again with its state."""
    from verity.lab.faults import kill9, restart

    lab = _lab(dir)
    try:
        kill9(lab, host)
        lab.save()
        console.print(f"node on {host} killed (SIGKILL)")
        if restart_after is not None:
            time.sleep(restart_after)
            restart(lab, host)
            console.print(f"node on {host} restarted as pid {lab.nodes[host].pid.pid}")
    except VerityError as exc:
        fail(exc)


@fault_app.command("leave")
def fault_leave(host: Host, dir: Dir = DEFAULT_DIR) -> None:
    """Stop HOST's node process (SIGTERM), as an operator switching it off mid-job."""
    from verity.lab.faults import leave

    lab = _lab(dir)
    try:
        leave(lab, host)
        lab.save()
    except VerityError as exc:
        fail(exc)
    console.print(f"node on {host} left")


@fault_app.command("join")
def fault_join(host: Host, dir: Dir = DEFAULT_DIR) -> None:
    """Start HOST's node process again (after `leave` or `kill`)."""
    from verity.lab.faults import join

    lab = _lab(dir)
    try:
        join(lab, host)
    except VerityError as exc:
        fail(exc)
    console.print(f"node on {host} joined as pid {lab.nodes[host].pid.pid}")
