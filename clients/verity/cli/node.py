"""`verity node …`: register, run, inspect and unstake one node (one process, one key)."""
from __future__ import annotations

import math
import os
import re
import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from verity.cli.common import console, err_console, fail, settings, setup_logging
from verity.errors import VerityError

app = typer.Typer(no_args_is_help=True, help="Run a solver / verifier / referee node.")

Name = Annotated[str, typer.Option("--name", "-n", help="node name: its state lives in <state dir>/nodes/<name>")]
Account = Annotated[Optional[int], typer.Option("--account", "-a", help="devnet test-account index (ape test accounts)")]
KeyFile = Annotated[Optional[Path], typer.Option("--key-file", help="file holding the node's hex private key (mode 600); for non-devnet chains")]
Roles = Annotated[str, typer.Option("--roles", help="comma list of solver, verifier, referee")]
Stake = Annotated[float, typer.Option("--stake", help="VRT to keep staked")]
Vectors = Annotated[Optional[Path], typer.Option(
    "--vectors", envvar="VERITY_VECTORS_DIR", file_okay=False,
    help="folder of reference vectors <profile>.json (default: the repository's tests/vectors)")]
MemoryMb = Annotated[int, typer.Option(
    "--memory-mb", min=64, max=1 << 22,
    help="memory this node declares (MB): a job asking for more is never drawn here, and a task estimated above it "
         "is declined (docs/nodes.md, feasible windows)")]
Region = Annotated[Optional[str], typer.Option(
    "--region", help="region this node declares (europe, north-america, south-america, asia, africa, oceania; none "
                     "= undeclared): a job asking for a region draws only its nodes (default: keep the declared one)")]
BandwidthMbps = Annotated[Optional[int], typer.Option(
    "--bandwidth-mbps", min=0, max=2**32 - 1,
    help="bandwidth this node declares (Mbit/s): a job asking for more (rounded up to 10, 100, 1000 or 10000) is "
         "never drawn here (default: keep the declared one)")]
def faults_enabled() -> bool:
    """TEST ONLY: the --fault switches exist for tests and the demo; they are hidden and refused unless this is set.
    Read again when a node starts (a node forked from an already imported process gets its environment later)."""
    return os.environ.get("VERITY_ENABLE_FAULTS") == "1"


FAULTS_ENABLED = faults_enabled()  # --help hides the switch (decided when the command is defined)


class FaultsDisabled(VerityError, ValueError):
    def __init__(self):
        super().__init__("--fault is a TEST-ONLY switch that makes the node misbehave; "
                         "set VERITY_ENABLE_FAULTS=1 to use it")


class LogLevel(str, Enum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


class BadNodeOption(VerityError, ValueError):
    def __init__(self, option: str, why: str):
        super().__init__(f"{option}: {why}")


NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def _check_options(name: str, account, key_file, stake: float, roles: str, s, region: str | None = None) -> None:
    """Refuse bad options before anything touches the disk or the chain."""
    from verity.chain.protocol import REGIONS
    from verity.node.app import role_mask

    if region is not None and region != "none" and region not in REGIONS:
        raise BadNodeOption("--region", f"{region!r} is not a region ({', '.join(REGIONS)}, or none)")
    if not NAME_RE.fullmatch(name) or ".." in name:
        raise BadNodeOption("--name", f"{name!r} must be 1-64 letters, digits, '.', '_' or '-', starting with a "
                                      "letter or digit (it names a folder under <state dir>/nodes/)")
    if account is not None and key_file is not None:
        raise BadNodeOption("--account", "give --account N or --key-file, not both")
    if account is not None and not 0 <= account < s.devnet_accounts:
        raise BadNodeOption("--account", f"{account} is not a devnet account (0-{s.devnet_accounts - 1})")
    if not math.isfinite(stake) or stake <= 0 or stake > 1e12:
        raise BadNodeOption("--stake", f"{stake:g} must be a positive amount of VRT")
    role_mask(roles)  # BadRoles names the bad role


def _served_profiles(vectors: Path | None) -> tuple[int, dict]:
    """The profile mask this machine may register (`verity node doctor`, cached; refuses when none passes) and its
    measured speed per served profile (FLOPs per ms, node/feasibility.py)."""
    from verity.node.doctor import DEFAULT_VECTORS, profile_names, served_profiles
    from verity.node.feasibility import doctor_speeds

    with err_console.status("checking which determinism profiles this machine serves (verity node doctor)"):
        mask, checks = served_profiles(vectors or DEFAULT_VECTORS)
    console.print(f"serving profiles: {', '.join(profile_names(mask))}")
    return mask, doctor_speeds(checks)


def _config(name, account, roles="solver,verifier,referee", stake=1000.0, faults=None, sample_rate=1.0, key_file=None,
            memory_mb=4096, region=None, bandwidth_mbps=None):
    from verity.node.app import NodeConfig
    from verity.node.keyfile import read_key_file

    s = settings()
    _check_options(name, account, key_file, stake, roles, s, region)
    return NodeConfig(name=name, roles=roles, account=account, stake=int(stake * 10**18),
                      private_key=read_key_file(key_file) if key_file else None,
                      faults=list(faults or []), sample_rate=sample_rate, settings=s, memory_mb=memory_mb,
                      region=region, bandwidth_mbps=bandwidth_mbps)


@app.command()
def register(name: Name, account: Account = None, roles: Roles = "solver,verifier,referee", stake: Stake = 1000.0,
             key_file: KeyFile = None, vectors: Vectors = None, memory_mb: MemoryMb = 4096, region: Region = None,
             bandwidth_mbps: BandwidthMbps = None) -> None:
    """Register the node (or update its roles and profiles), declare its network if asked, top up its stake."""
    from verity.chain.views import read
    from verity.node.app import check_name, connect, ensure_registered, serve_profiles
    from verity.node.status import vrt

    try:
        cfg = _config(name, account, roles, stake, key_file=key_file, memory_mb=memory_mb, region=region,
                      bandwidth_mbps=bandwidth_mbps)
        ctx = connect(cfg)
        check_name(ctx, cfg)
        serve_profiles(ctx, cfg, *_served_profiles(vectors))
        ensure_registered(ctx, cfg)
        check_name(ctx, cfg, record=True)
        staked = read(ctx.chain, ctx.chain.registry, "getNode", ctx.me).stake
        console.print(f"[green]registered[/green] {ctx.me} as {roles} with {vrt(staked)} staked")
    except VerityError as exc:
        fail(exc)


@app.command()
def run(
    name: Name,
    account: Account = None,
    roles: Roles = "solver,verifier,referee",
    stake: Stake = 1000.0,
    fault: Annotated[Optional[list[str]], typer.Option(
        "--fault", hidden=not FAULTS_ENABLED,
        help="TEST ONLY (needs VERITY_ENABLE_FAULTS=1): bitflip@step=N, lazy, silent-in-dispute, withhold-checkpoint, "
             "corrupt-checkpoint, sybil-challenge, copy-result")] = None,
    sample_rate: Annotated[float, typer.Option(min=0.0, max=1.0, help="verifier: share of candidate results re-executed, "
                                                                    "drawn by a private per-node lottery")] = 1.0,
    workers: Annotated[int, typer.Option(min=1, max=16, help="training / re-execution jobs run at once (referee and "
                                                          "dispute replays have their own lane)")] = 2,
    train_processes: Annotated[int, typer.Option(min=1, max=64, help="processes (GPUs on CUDA) one training task may "
                                                 "spread its micro-batches over; a job uses the most of them that "
                                                 "divide its micro_batches (same trace with any number)")] = 1,
    max_seconds: Annotated[Optional[float], typer.Option(help="stop after this long (default: run until Ctrl-C)")] = None,
    log_level: Annotated[LogLevel, typer.Option(help="how much the node logs")] = LogLevel.info,
    key_file: KeyFile = None,
    vectors: Vectors = None,
    memory_mb: MemoryMb = 4096,
    region: Region = None,
    bandwidth_mbps: BandwidthMbps = None,
    metrics_port: Annotated[Optional[int], typer.Option(
        min=0, max=65535, help="serve Prometheus metrics (verity_node_*: work items, earnings, stake, lateness, "
                               "queues, RPC and IPFS errors, step time) on this port at /metrics (default: off; "
                               "docs/nodes.md, metrics and logs)")] = None,
    metrics_addr: Annotated[str, typer.Option(
        help="address the metrics server listens on (0.0.0.0: every interface)")] = "127.0.0.1",
    log_json: Annotated[bool, typer.Option(
        "--log-json", help="log JSON objects, one per line ({ts, level, logger, msg, node, …}), to stderr and "
                           "node.log instead of text")] = False,
) -> None:
    """Run the node: check its profiles (doctor, cached), register/stake if needed, then work until stopped."""
    from verity.node.app import (build_loop, claim_state_dir, connect, ensure_registered, serve_profiles, sign_off,
                                 start_metrics)
    from verity.node.startup import startup_patience, until_reachable
    from verity.node.work import WorkPool

    try:
        if fault and not faults_enabled():
            raise FaultsDisabled()
        cfg = _config(name, account, roles, stake, fault, sample_rate, key_file, memory_mb, region, bandwidth_mbps)
        cfg.workers, cfg.train_processes = workers, train_processes
        cfg.metrics_port, cfg.metrics_addr, cfg.log_json = metrics_port, metrics_addr, log_json
    except VerityError as exc:
        fail(exc)
    setup_logging(log_level.value, cfg.state_dir / "node.log", name, json_lines=log_json)
    metrics = None
    try:
        # a node (re)started while its endpoints do not answer waits for them (node/startup.py) instead of exiting
        s = cfg.settings
        patience, endpoints = startup_patience(cfg.state_dir, s.max_outage), {"chain": s.rpc_url, "ipfs": s.ipfs_api}
        pool = WorkPool(long_threads=workers)
        ctx = until_reachable(lambda: connect(cfg, pool), "connecting", patience=patience, endpoints=endpoints)
        with claim_state_dir(ctx, cfg):  # before any transaction: one process per name and per account
            if ctx.faults:
                console.print(f"[yellow]TEST-ONLY FAULTS ACTIVE[/yellow]: {', '.join(ctx.faults.specs)}")
            serve_profiles(ctx, cfg, *_served_profiles(vectors))  # once, before anything is registered or taken
            metrics = start_metrics(ctx, cfg)  # --metrics-port: served from now on
            until_reachable(lambda: ensure_registered(ctx, cfg), "registering", patience=patience,
                            endpoints=endpoints)
            loop = build_loop(ctx, cfg)
            # checked in before it says it runs: draws take a node only after a heartbeat, not at registration;
            # stamped on the snapshot, so the keeper's first tick does not send a second one
            until_reachable(lambda: ctx.chain.transact(ctx.chain.registry.functions.heartbeat()), "checking in",
                            patience=patience, endpoints=endpoints)
            loop.snap.last_heartbeat, loop.snap.last_heartbeat_chain = time.time(), ctx.chain.now()
            if metrics is not None:
                loop = metrics.measure(loop, ctx.chain)
            console.print(f"node {name} ({ctx.me}) running as {roles}; state in {cfg.state_dir}")
            loop.run(max_seconds=max_seconds)
            sign_off(ctx)  # stopped on purpose: out of draws until it runs again
    except KeyboardInterrupt:
        console.print("stopped at once (second Ctrl-C); a restart resumes from the saved snapshot")
        raise typer.Exit(130)
    except VerityError as exc:
        fail(exc)
    finally:
        if metrics is not None:
            metrics.stop()


@app.command()
def doctor(
    profile: Annotated[Optional[list[str]], typer.Option(
        "--profile", "-p", help="a profile to check (repeatable); default: every known profile")] = None,
    threads: Annotated[Optional[int], typer.Option(
        min=1, max=1024, help="intra-op threads for portable-f32 (the native classes pin their own); "
                              "default: torch's current count")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print {\"profiles\": {P: {ok, reason, tasks}}} "
                                                          "instead of a table")] = False,
    vectors: Vectors = None,
    fresh: Annotated[bool, typer.Option(help="rerun the reference tasks even when a cached result "
                                             "(~/.cache/verity/doctor, or $XDG_CACHE_HOME) matches")] = False,
) -> None:
    """Run short reference tasks and say which determinism profiles this machine can honestly serve.

    Exit 0 when every profile given with --profile passes; without --profile, when at least one passes."""
    import json

    from verity.node.doctor import DEFAULT_VECTORS, ResultCache, exit_code, report, run_doctor

    try:
        with err_console.status("running reference tasks") as st:
            checks = run_doctor(profile, vectors or DEFAULT_VECTORS, threads=threads, cache=ResultCache(),
                                fresh=fresh, on_task=lambda p, a: st.update(f"{p}: reference task {a}"))
    except (VerityError, ValueError) as exc:
        fail(exc)
    if json_out:
        print(json.dumps(report(checks), indent=1))
    else:
        _doctor_table(checks)
    raise typer.Exit(exit_code(checks, asked=bool(profile)))


def _doctor_table(checks) -> None:
    t = Table(title="determinism profiles on this machine")
    for col in ("profile", "serves", "task", "root", "matches", "ms/step"):
        t.add_column(col, no_wrap=True)
    t.add_column("note")
    for name, c in checks.items():
        serves = "[green]yes[/green]" if c.ok else "[red]no[/red]"
        note = ("cached" if c.cached else "") if c.ok else (c.reason or "")
        if not c.tasks:
            t.add_row(name, serves, "", "", "", "", note)
        for i, (arch, task) in enumerate(c.tasks.items()):
            t.add_row(name if i == 0 else "", serves if i == 0 else "", arch, task.root[:12] + "…",
                      "yes" if task.matches else "[red]no[/red]", f"{task.ms_per_step:.1f}", note if i == 0 else "")
    console.print(t)


@app.command()
def status(name: Name, account: Account = None, key_file: KeyFile = None) -> None:
    """Roles, last seen, balance, stake, locked stake, earnings, reputation and the node's in-flight work."""
    from verity.node.app import connect
    from verity.node.snapshot import SnapshotStore
    from verity.node.status import age, read_status

    from verity.node.app import check_name

    try:
        cfg = _config(name, account, key_file=key_file)
        ctx = connect(cfg)
        check_name(ctx, cfg)
        st = read_status(ctx.chain, ctx.me)
    except VerityError as exc:
        fail(exc)
    t = Table(title=f"node {name} {ctx.me}")
    t.add_column("field")
    t.add_column("value")
    for k, v in st.rows():
        t.add_row(k, v)
    console.print(t)
    snap = SnapshotStore(cfg.state_dir).load()
    w = Table(title=f"work items (cursor at block {snap.next_block})")
    for col in ("key", "phase", "updated", "note"):
        w.add_column(col)
    for item in snap.items.values():
        note = item.data.get("computing") or item.data.get("verdict") or item.data.get("abandoned") or ""
        w.add_row(item.key, item.phase.value, f"{age(time.time() - item.updated_at)} ago", str(note)[:80])
    console.print(w)


@app.command()
def unstake(name: Name, account: Account = None, key_file: KeyFile = None,
            amount: Annotated[Optional[float], typer.Option(help="VRT to unbond (default: all free stake)")] = None,
            withdraw: Annotated[bool, typer.Option(help="withdraw stake whose unbonding period has passed")] = False) -> None:
    """Start unbonding stake, or withdraw stake that finished unbonding."""
    from verity.chain.views import read
    from verity.node.app import check_name, connect
    from verity.node.status import age, check_withdrawable, vrt

    try:
        if amount is not None and (not math.isfinite(amount) or amount <= 0):
            raise BadNodeOption("--amount", f"{amount:g} must be a positive amount of VRT")
        cfg = _config(name, account, key_file=key_file)
        ctx = connect(cfg)
        check_name(ctx, cfg)
        c = ctx.chain
        if withdraw:
            wei = check_withdrawable(c, ctx.me)  # says when, instead of sending a transaction that reverts
            c.transact(c.registry.functions.withdraw())
            console.print(f"[green]withdrawn[/green] {vrt(wei)}")
            return
        node = read(c, c.registry, "getNode", ctx.me)
        if node.slot == 0:
            raise BadNodeOption("--name", f"{ctx.me} is not a registered node; nothing to unstake")
        free = c.call(c.registry.functions.freeStake(ctx.me))
        wei = round(amount * 10**18) if amount is not None else free
        if wei > free or free == 0:
            raise BadNodeOption("--amount", f"{vrt(wei)} asked, {vrt(free)} free to unbond "
                                            f"({vrt(node.locked)} locked by work, {vrt(node.pendingUnstake)} already unbonding)")
        left = int(node.stake) - int(node.pendingUnstake) - wei  # bonded after this request
        minimum = c.call(c.registry.functions.MIN_REGISTRATION_STAKE())
        if 0 < left < minimum:  # NodeRegistry: a registered node keeps at least the minimum bonded, or leaves
            raise BadNodeOption("--amount", f"would leave {vrt(left)} bonded, below the {vrt(minimum)} a registered "
                                            f"node keeps: unbond at most {vrt(wei - (minimum - left))}, or all of it "
                                            "(nothing locked) to leave the registry")
        receipt = c.transact(c.registry.functions.requestUnstake(wei))
        ends = int(read(c, c.registry, "getNode", ctx.me).unbondingEnds)
        now = int(c.w3.eth.get_block(receipt["blockNumber"])["timestamp"])
        leaving = " (all of it: the node leaves the registry when it is withdrawn)" if left == 0 else ""
        console.print(f"unbonding {vrt(wei)}{leaving}; withdrawable in {age(ends - now)} with "
                      "`verity node unstake --withdraw`")
    except VerityError as exc:
        fail(exc)
