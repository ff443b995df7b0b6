"""`verity devnet up | down | status`: anvil + IPFS + contracts on this machine."""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from verity.cli.common import console, fail, settings
from verity.errors import VerityError

app = typer.Typer(no_args_is_help=True, help="The local devnet: anvil (+ block ticker), IPFS node(s), contracts.")
Dir = Annotated[Optional[Path], typer.Option("--dir", help="devnet state directory (default $VERITY_DEVNET_DIR or .verity/devnet)")]


def bring_up(directory: Path, ipfs_nodes: int = 1) -> dict:
    """Start services (idempotent) and deploy the contracts if they are not live yet."""
    from verity.devnet import services
    from verity.devnet.deploy import deploy

    with console.status("starting anvil and IPFS…"):
        record = services.up(directory, ipfs_nodes=ipfs_nodes)
    with console.status("deploying contracts (ape run deploy)…"):
        line = deploy(record["rpc_url"], directory / "deployments")
    console.print(line)
    return record


@app.command()
def up(dir: Dir = None, ipfs_nodes: Annotated[int, typer.Option(min=1, max=8)] = 1) -> None:
    """Start anvil, the block ticker and IPFS; deploy and fund test accounts. Safe to run twice."""
    directory = dir or settings().devnet_dir
    try:
        record = bring_up(directory, ipfs_nodes)
    except VerityError as exc:
        fail(exc)
    console.print(f"[green]devnet up[/green] in {directory}: rpc {record['rpc_url']}, ipfs {record['ipfs_api']}")


@app.command()
def down(dir: Dir = None) -> None:
    """Stop everything the devnet dir records (also after a crash)."""
    from verity.devnet import services

    directory = dir or settings().devnet_dir
    services.down(directory)
    console.print(f"devnet in {directory} stopped")


@app.command()
def status(dir: Dir = None) -> None:
    """Services, contracts, registered nodes and jobs."""
    from verity.devnet import services

    directory = dir or settings().devnet_dir
    rec = services.status(directory)
    if not rec.get("running"):
        console.print(f"devnet in {directory}: [red]not running[/red] (start it with `verity devnet up`)")
        raise typer.Exit(1)
    t = Table(title=f"devnet {directory}")
    t.add_column("service")
    t.add_column("address")
    t.add_column("state")
    t.add_row("anvil", rec["anvil"]["rpc_url"], f"block {rec['anvil'].get('block')}")
    for i, n in enumerate(rec.get("ipfs", [])):
        t.add_row(f"ipfs-{i}", n["api"], "answers" if n.get("answers") else "[red]down[/red]")
    console.print(t)
    try:
        from verity.chain.client import connect_chain
        from verity.chain.views import JobStatus, read

        c = connect_chain(rec["rpc_url"])
    except VerityError as exc:
        console.print(f"contracts: {exc}")
        return
    ct = Table(title="contracts")
    ct.add_column("name")
    ct.add_column("address")
    for name, contract in c.contracts.items():
        ct.add_row(name, contract.address)
    console.print(ct)
    nt = Table(title="nodes")
    for col in ("node", "roles", "stake", "locked", "completed", "late", "disputes won/lost"):
        nt.add_column(col)
    for i in range(min(c.call(c.registry.functions.nodeCount()), 50)):
        addr = c.call(c.registry.functions.nodeList(i))
        n, r = read(c, c.registry, "getNode", addr), read(c, c.registry, "reputationOf", addr)
        nt.add_row(addr, str(n.roles), f"{n.stake / 1e18:g}", f"{n.locked / 1e18:g}", str(r.tasksCompleted), str(r.tasksLate),
                   f"{r.disputesWon}/{r.disputesLost}")
    console.print(nt)
    jt = Table(title="jobs")
    for col in ("job", "status", "round", "escrow"):
        jt.add_column(col)
    for jid in range(1, min(c.call(c.jobs.functions.jobCount()), 50) + 1):
        j = read(c, c.jobs, "getJob", jid)
        jt.add_row(str(jid), JobStatus(j.status).name.lower(), f"{j.currentRound + 1}/{j.rounds}", f"{j.escrow / 1e18:g}")
    console.print(jt)
