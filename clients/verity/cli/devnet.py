"""`verity devnet up | down | status | faucet`: anvil + IPFS + contracts on this machine."""
from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from verity.cli.common import console, fail, settings
from verity.errors import VerityError

app = typer.Typer(no_args_is_help=True, help="The local devnet: anvil (+ block ticker), IPFS node(s), contracts.")
Dir = Annotated[Optional[Path], typer.Option("--dir", help="devnet state directory (default $VERITY_DEVNET_DIR or .verity/devnet)")]


class DevnetUpFailed(VerityError, RuntimeError):
    def __init__(self, directory: Path, cause: BaseException):
        self.directory, self.cause = directory, cause
        what = str(cause) or type(cause).__name__
        super().__init__(f"devnet up in {directory} failed, so its services were stopped "
                         f"(chain state and IPFS data are kept; run `verity devnet up` again): {what}")


def deployments_dir(directory: Path) -> Path:
    """Where the devnet's deployments file goes: $VERITY_DEPLOYMENTS_DIR, else <dir>/deployments."""
    return Path(os.environ.get("VERITY_DEPLOYMENTS_DIR") or Path(directory) / "deployments")


def bring_up(directory: Path, ipfs_nodes: int = 1, *, new_chain: bool = False) -> dict:
    """Start services (idempotent; the chain persists in <dir>/anvil) and deploy the contracts
    unless they are live on this very chain. Says plainly when a new chain starts."""
    from verity.devnet import services
    from verity.devnet.deploy import deploy_for_chain

    before = services.load(directory)   # the ports this devnet had: kept on a restart, whatever the settings say
    with console.status("starting anvil and IPFS…"):
        record = services.up(directory, ipfs_nodes=ipfs_nodes, persist_chain=True, new_chain=new_chain)
    for line in replaced_ports(record, settings(), before):
        console.print(f"[yellow]{escape(line)}[/yellow]")
    chain = record["chain"]
    if chain["status"] == "new":
        console.print(f"[yellow]starting a NEW chain[/yellow]: {escape(chain['reason'])}; the contracts are deployed afresh")
    elif chain["status"] == "kept":
        console.print(f"kept the chain saved in {escape(chain['state_file'])} (block {chain['block']}, "
                      f"genesis {chain['genesis_hash'][:18]}…)")
    with console.status("deploying contracts (ape run deploy)…"):
        line, replaced = deploy_for_chain(record["rpc_url"], deployments_dir(directory), chain,
                                          new_chain=chain["status"] == "new")
    if replaced:
        old = deployments_dir(directory) / f"{chain['chain_id']}.json.old"
        console.print(f"the previous deployments file belonged to another chain: moved to {escape(str(old))}")
    console.print(escape(line))
    return record


def replaced_ports(record: dict, s, before: dict | None = None) -> list[str]:
    """One line for each preferred port (VERITY_ANVIL_PORT, VERITY_IPFS_API_PORT) the devnet does not listen on, said
    out loud: busy, so it listens elsewhere (with how other shells find it), or kept from the devnet's own record
    (`before`: services.json as `up` found it; a restart keeps a recorded port that is free, even if the setting
    changed since)."""
    out = []
    kept = ((before or {}).get("anvil") or {}).get("port"), ((before or {}).get("ipfs") or [{}])[0].get("api_port")
    anvil, ipfs = record.get("anvil") or {}, (record.get("ipfs") or [{}])[0]
    for what, var, wanted, got, had in (("anvil", "VERITY_ANVIL_PORT", s.anvil_port, anvil.get("port"), kept[0]),
                                        ("IPFS API", "VERITY_IPFS_API_PORT", s.ipfs_api_port, ipfs.get("api_port"),
                                         kept[1])):
        if not wanted or not got or int(got) == int(wanted):
            continue
        if had and int(had) == int(got):
            out.append(f"{what} keeps port {got} recorded in {record.get('dir', 'the devnet dir')}/services.json "
                       f"({var} is {wanted}: `verity devnet down` then `up` moves it there)")
        else:
            out.append(f"port {wanted} ({var}) is busy: {what} listens on {got} instead; commands run here find it "
                       f"through the devnet's record, other shells with `eval $(python -m verity.devnet.services env)`")
    return out


def nodes_table(nodes: list[tuple], names: dict[str, str]) -> Table:
    """`devnet status`'s nodes: (address, getNode, reputationOf) each, named as `job show` names them (`verity node run
    --name` on this machine, `node_names`) with the address after the name; the address alone for a node run
    elsewhere."""
    from verity.node.status import role_names

    names = {a.lower(): n for a, n in names.items()}
    t = Table(title="nodes")
    for col in ("node", "roles", "stake", "locked", "completed", "late", "disputes won/lost"):
        t.add_column(col)
    for addr, n, r in nodes:
        name = names.get(str(addr).lower())
        t.add_row(escape(f"{name} ({addr})" if name else str(addr)), role_names(int(n.roles)), f"{n.stake / 1e18:g}",
                  f"{n.locked / 1e18:g}", str(r.tasksCompleted), str(r.tasksLate), f"{r.disputesWon}/{r.disputesLost}")
    return t


def _interrupt(signum, frame):  # SIGTERM unwinds like Ctrl-C, so a killed `up` cleans up
    raise KeyboardInterrupt


@app.command()
def up(
    dir: Dir = None,
    ipfs_nodes: Annotated[int, typer.Option(min=1, max=8, help="js-ipfs nodes to run (1-8)")] = 1,
    new_chain: Annotated[bool, typer.Option(help="discard the saved chain (moved aside) and start a new one")] = False,
) -> None:
    """Start anvil, the block ticker and IPFS; deploy the contracts. Safe to run twice.

    The chain is saved in <dir>/anvil/anvil-state.json (every second and at `down`) and
    restored by the next `up`; when it cannot be, `up` says it starts a NEW chain and
    deploys the contracts again. Test accounts 0-9 get VRT at deployment; `faucet` serves
    all 20. If `up` fails, it stops the devnet's services.

    Ports: VERITY_ANVIL_PORT (8545) and VERITY_IPFS_API_PORT (5001). A busy one is replaced by a free port and
    `up` says so (`port 8545 (VERITY_ANVIL_PORT) is busy: anvil listens on …`); a restart keeps the ports the
    devnet recorded, and says so when a setting asks for another."""
    from verity.devnet import services

    directory = dir or settings().devnet_dir
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        record = bring_up(directory, ipfs_nodes, new_chain=new_chain)
    except (VerityError, OSError, KeyboardInterrupt) as exc:
        services.down(directory)
        fail(DevnetUpFailed(directory, exc))
    console.print(f"[green]devnet up[/green] in {directory}: rpc {record['rpc_url']}, ipfs {record['ipfs_api']}")


@app.command()
def down(dir: Dir = None) -> None:
    """Stop every process of the devnet dir (also after a crash); the chain state is kept."""
    from verity.devnet import services

    directory = dir or settings().devnet_dir
    stopped = services.down(directory)
    if stopped["strays"]:
        console.print(f"also stopped {len(stopped['strays'])} process(es) the record had lost: {stopped['strays']}")
    console.print(f"devnet in {directory} stopped")


@app.command()
def faucet(
    account: Annotated[Optional[int], typer.Option(help="index of the devnet test account to fund (0-19)")] = None,
    address: Annotated[Optional[str], typer.Option(help="fund this address instead of a test account")] = None,
    amount: Annotated[str, typer.Option(help="VRT to mint to it")] = "1000",
    eth: Annotated[str, typer.Option(help="ETH to add to its balance (anvil_setBalance)")] = "0",
    dir: Dir = None,
) -> None:
    """Mint VRT (and add ETH) to a devnet account: `--account N` or `--address 0x…`."""
    from verity.devnet import services
    from verity.devnet.faucet import FaucetRefused, devnet_address, fund, to_wei

    s = settings()
    directory = dir or s.devnet_dir
    try:
        if (account is None) == (address is None):
            raise FaucetRefused("--account/--address", "give exactly one of them")
        if account is not None and not 0 <= account < s.devnet_accounts:
            raise FaucetRefused("--account", f"{account} is not a devnet account (0-{s.devnet_accounts - 1})")
        vrt, wei = to_wei("--amount", amount), to_wei("--eth", eth)
        record = services.load(directory)
        if not record or not record.get("rpc_url"):
            raise FaucetRefused("--dir", f"no devnet recorded in {directory}; run `verity devnet up` first")
        to = devnet_address(account) if account is not None else address
        chain_id = int(record.get("chain", {}).get("chain_id", s.chain_id))
        result = fund(record["rpc_url"], deployments_dir(directory) / f"{chain_id}.json", to,
                      vrt_wei=vrt, eth_wei=wei)
    except VerityError as exc:
        fail(exc)
    who = f"account {account} ({result['address']})" if account is not None else result["address"]
    console.print(f"funded {who}: now {result['vrt'] / 10**18:,.6f} VRT, {result['eth'] / 10**18:,.6f} ETH")


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
    chain = rec.get("chain") or {}
    t.add_row("anvil", rec["anvil"]["rpc_url"],
              f"block {rec['anvil'].get('block')}, chain {chain.get('chain_id')}, genesis {str(chain.get('genesis_hash'))[:18]}…")
    if rec.get("ticker"):
        t.add_row("block ticker", f"every {rec['ticker']['interval']} s",
                  "alive" if rec["ticker"].get("alive") else "[red]not running[/red]")
    for i, n in enumerate(rec.get("ipfs", [])):
        t.add_row(f"ipfs-{i}", n["api"], "answers" if n.get("answers") else "[red]down[/red]")
    console.print(t)
    try:
        from verity.chain.client import ChainClient
        from verity.chain.deployments import load_deployments
        from verity.chain.views import JobStatus, read
        from verity.node.statedir import node_names

        chain_id = int(chain.get("chain_id", settings().chain_id))
        c = ChainClient(rec["rpc_url"], None, load_deployments(chain_id, deployments_dir(directory) / f"{chain_id}.json"))
    except VerityError as exc:
        console.print(f"contracts: {exc}")
        return
    ct = Table(title="contracts")
    ct.add_column("name")
    ct.add_column("address")
    for name, contract in c.contracts.items():
        ct.add_row(name, contract.address)
    console.print(ct)
    nodes = []
    for i in range(min(c.call(c.registry.functions.nodeCount()), 50)):
        addr = c.call(c.registry.functions.nodeList(i))
        nodes.append((addr, read(c, c.registry, "getNode", addr), read(c, c.lens, "reputationOf", addr)))
    console.print(nodes_table(nodes, node_names(settings().state_dir)))
    jt = Table(title="jobs")
    for col in ("job", "status", "round", "escrow"):
        jt.add_column(col)
    for jid in range(1, min(c.call(c.jobs.functions.jobCount()), 50) + 1):
        j = read(c, c.jobs, "getJob", jid)
        escrow = c.call(c.escrow.functions.escrowOf(jid))
        jt.add_row(str(jid), JobStatus(j.status).name.lower(), f"{j.currentRound + 1}/{j.rounds}", f"{escrow / 1e18:g}")
    console.print(jt)
