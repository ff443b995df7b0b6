"""anvil (+ block ticker) and N js-ipfs nodes in one state directory, shared by processes.

`up` records everything in `<dir>/services.json` (ports, pids, addresses);
other processes read it (`load`, `client_env`). `up` is idempotent: running
services are kept, dead ones restarted on their recorded ports. `down` stops
what is recorded and clears what a crash left behind.

    python -m verity.devnet.services up --dir .verity/devnet --ipfs-nodes 1
    python -m verity.devnet.services status --dir .verity/devnet
    python -m verity.devnet.services down --dir .verity/devnet
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from verity.devnet.anvil import Anvil
from verity.devnet.ipfs import IpfsNode
from verity.devnet.owned import owner_env, stop_owned
from verity.devnet.process import ProcessId, free_port, port_is_free, spawn
from verity.settings import Settings

SERVICES_FILE = "services.json"


def _path(directory: str | Path) -> Path:
    return Path(directory).resolve()


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def load(directory: str | Path) -> dict[str, Any] | None:
    """The recorded services of `directory`, or None if none were started there."""
    try:
        return json.loads((_path(directory) / SERVICES_FILE).read_text())
    except FileNotFoundError:
        return None


def _save(directory: Path, record: dict[str, Any]) -> None:
    tmp = directory / f".{SERVICES_FILE}.tmp"
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, directory / SERVICES_FILE)


def _alive(info: dict[str, Any] | None) -> bool:
    return bool(info and info.get("pid") and info.get("started") and ProcessId(info["pid"], info["started"]).alive())


def _port(recorded: int | None, preferred: int | None) -> int | None:
    """The recorded port if still free, else the preferred one if free, else None: the service
    picks one itself (and picks again if something takes it while the service starts)."""
    if recorded and port_is_free(recorded):
        return recorded
    if preferred and port_is_free(preferred):
        return free_port(preferred)
    return None


def up(
    directory: str | Path,
    *,
    ipfs_nodes: int = 1,
    anvil: bool = True,
    block_interval: float | None = None,
    persist_chain: bool = False,
    new_chain: bool = False,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """Start whatever is not running yet; returns the services.json record.

    Ports: the recorded ones on a restart, else the settings' (anvil 8545,
    IPFS API 5001, 5002, …; 0 = no preference) when free, else free ones;
    services.json is the truth. `record["chain"]` names the chain (chain id,
    genesis hash) and says whether this call kept the saved one, started a
    new one (`status` "new", with `reason`) or found it running
    (`verity.devnet.chainstate`). new_chain: stop a running anvil and move
    its saved state aside first.
    """
    s = settings or Settings()
    interval = s.block_interval if block_interval is None else block_interval
    directory = _path(directory)
    owner = owner_env(directory)
    with _locked(directory):
        record = load(directory) or {"version": 1, "dir": str(directory), "ipfs": []}
        try:
            if anvil:
                info = record.get("anvil")
                if new_chain or not _alive(info):
                    for key in ("ticker", "anvil"):  # a ticker must not outlive its anvil
                        if _alive(record.get(key)):
                            ProcessId(record[key]["pid"], record[key]["started"]).stop()
                        record.pop(key, None)
                    from verity.devnet.chainstate import start_chain  # imports the chain package

                    chain = Anvil(directory / "anvil", _port((info or {}).get("port"), s.anvil_port),
                                  accounts=s.devnet_accounts, mnemonic=s.devnet_mnemonic, chain_id=s.chain_id,
                                  persist=persist_chain, die_with_parent=False)
                    chain.extra_env = owner
                    record["chain"] = start_chain(chain, new_chain=new_chain)
                    chain.detach()
                    record["anvil"] = chain.info()
                else:
                    from verity.chain.identity import identity_at

                    known = record.get("chain") or identity_at(info["rpc_url"])  # a record of an older `up`
                    record["chain"] = {**known, "status": "running", "reason": None}
                record["rpc_url"] = record["anvil"]["rpc_url"]
                if interval and not _alive(record.get("ticker")):
                    anvil_pid = ProcessId(record["anvil"]["pid"], record["anvil"]["started"])
                    cmd = [sys.executable, "-m", "verity.devnet.ticker", record["rpc_url"], str(interval),
                           "--anvil", f"{anvil_pid.pid}:{anvil_pid.started}"]
                    if record["anvil"].get("persist"):
                        cmd += ["--save-state", str(directory / "anvil" / "anvil-state.json")]
                    proc = spawn(cmd, directory / "anvil" / "ticker.log", env={**os.environ, **owner},
                                 die_with_parent=False)
                    pid = ProcessId.of(proc.pid)
                    proc.returncode = 0  # runs on after this process; `down` stops it by pid
                    record["ticker"] = {"pid": pid.pid, "started": pid.started, "interval": interval}
            nodes = record["ipfs"]
            for i in range(ipfs_nodes):
                info = nodes[i] if i < len(nodes) else None
                if _alive(info):
                    continue
                old = info or {}
                api_pref = s.ipfs_api_port + i if s.ipfs_api_port else None
                node = IpfsNode(directory / f"ipfs-{i}", _port(old.get("api_port"), api_pref),
                                _port(old.get("swarm_port"), None), _port(old.get("gateway_port"), None),
                                _port(old.get("rpc_port"), None), die_with_parent=False)
                node.extra_env = owner
                node.start().detach()
                if i < len(nodes):
                    nodes[i] = node.info()
                else:
                    nodes.append(node.info())
                _save(directory, record)
            _connect_all(nodes[:ipfs_nodes])
            if nodes:
                record["ipfs_api"] = nodes[0]["api"]
        finally:
            _save(directory, record)
    return record


def _connect_all(nodes: list[dict[str, Any]]) -> None:
    """Every node dials the first (offline js-ipfs nodes have no bootstrap peers)."""
    from verity.storage import Storage

    for info in nodes[1:]:
        with Storage(info["api"], timeout=10, retries=1) as client:
            client.connect_peer(nodes[0]["swarm"])


def down(directory: str | Path) -> dict[str, Any]:
    """Stop everything recorded (SIGTERM, then SIGKILL), then any other process the
    directory owns (`verity.devnet.owned`: `strays`), and clear stale IPFS locks."""
    directory = _path(directory)
    stopped: dict[str, Any] = {"ticker": False, "anvil": False, "ipfs": [], "strays": []}
    with _locked(directory):
        record = load(directory) or {}
        for key in ("ticker", "anvil"):
            info = record.get(key)
            if _alive(info):
                ProcessId(info["pid"], info["started"]).stop()
                stopped[key] = True
        (directory / "anvil" / "anvil.pid").unlink(missing_ok=True)
        for node_dir in sorted(directory.glob("ipfs-*")):
            node = IpfsNode(node_dir, 1, 1, 1, 1)  # ports unused: stop() goes by the pid file
            recorded = node._recorded()
            was_running = recorded is not None and recorded.alive()
            node.stop()
            stopped["ipfs"].append({"dir": str(node_dir), "was_running": was_running})
        stopped["strays"] = stop_owned(directory)
        (directory / SERVICES_FILE).unlink(missing_ok=True)
    return stopped


def status(directory: str | Path) -> dict[str, Any]:
    """The record with `alive` (process) and `answers` (API) flags, or {"running": False}."""
    from verity.devnet.ticker import rpc_call
    from verity.storage import Storage

    record = load(directory)
    if record is None:
        return {"running": False, "dir": str(_path(directory))}
    for key in ("anvil", "ticker"):
        if record.get(key):
            record[key]["alive"] = _alive(record[key])
    if record.get("anvil"):
        try:
            record["anvil"]["block"] = int(rpc_call(record["anvil"]["rpc_url"], "eth_blockNumber", timeout=2), 16)
        except (OSError, ValueError, RuntimeError):
            record["anvil"]["block"] = None
    for info in record.get("ipfs", []):
        info["alive"] = _alive(info)
        info["answers"] = Storage(info["api"], timeout=2, retries=0).is_up()
    record["running"] = all(i.get("alive") for i in [record.get("anvil"), *record.get("ipfs", [])] if i)
    return record


def client_env(directory: str | Path) -> dict[str, str]:
    """VERITY_* variables that point a client at the recorded services."""
    record = load(directory) or {}
    env = {}
    if record.get("rpc_url"):
        env["VERITY_RPC_URL"] = record["rpc_url"]
    if record.get("ipfs_api"):
        env["VERITY_IPFS_API"] = record["ipfs_api"]
    return env


app = typer.Typer(help="Local services for the devnet and tests: anvil + js-ipfs nodes.", no_args_is_help=True)
DirOpt = Annotated[Path, typer.Option("--dir", help="state directory (services.json, logs, repos)")]


@app.command("up")
def up_cmd(
    dir: DirOpt = Path(".verity/devnet"),
    ipfs_nodes: Annotated[int, typer.Option(min=0, help="js-ipfs nodes to run")] = 1,
    no_anvil: Annotated[bool, typer.Option(help="start IPFS only")] = False,
    block_interval: Annotated[float | None, typer.Option(help="seconds between empty blocks; 0 = none")] = None,
    persist_chain: Annotated[bool, typer.Option(help="keep the chain in <dir>/anvil/anvil-state.json")] = False,
    new_chain: Annotated[bool, typer.Option(help="move a saved chain state aside and start a new chain")] = False,
) -> None:
    """Start what is not running; print the services.json record."""
    record = up(dir, ipfs_nodes=ipfs_nodes, anvil=not no_anvil, block_interval=block_interval,
                persist_chain=persist_chain, new_chain=new_chain)
    typer.echo(json.dumps(record, indent=2))


@app.command("down")
def down_cmd(dir: DirOpt = Path(".verity/devnet")) -> None:
    """Stop every process of the directory."""
    typer.echo(json.dumps(down(dir), indent=2))


@app.command("status")
def status_cmd(dir: DirOpt = Path(".verity/devnet")) -> None:
    """Print the record with liveness flags; exit 1 unless all services are alive."""
    record = status(dir)
    typer.echo(json.dumps(record, indent=2))
    raise typer.Exit(0 if record.get("running") else 1)


@app.command("env")
def env_cmd(dir: DirOpt = Path(".verity/devnet")) -> None:
    """Print `export VERITY_…=…` lines for a shell."""
    for key, value in client_env(dir).items():
        typer.echo(f"export {key}={value}")


if __name__ == "__main__":
    app()
