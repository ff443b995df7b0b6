"""`make demo` / `verity demo`: a whole job on a fresh local devnet, told as it happens.

anvil + IPFS + contracts, then 4 solver and 2 verifier/referee node processes
(solver-4 runs the TEST-ONLY bit-flip fault; solver-2 runs ATen's default
kernels, as a CPU without AVX2 would), then `ape run submit` posts a
digits-MLP job under the portable-f32 profile (4 shards x 2 rounds,
replication 2) and we watch it to the end: per-round loss and held-out
accuracy, the disputes and how they ended, what each node was paid or
slashed, and a token-conservation check. The demo fails if any dispute is
between two honest nodes or an honest node is slashed: different hardware
must never make honest nodes disagree.

`--scenario modules` (demo_modules.py) runs a module-parallel job instead: the
model split into two modules trained by different nodes each round.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rich.live import Live

from verity.cli.common import console
from verity.errors import VerityError

DEMO_DIR = Path(".verity/demo")
NODES = [  # name, test account, roles, faults
    ("solver-1", 1, "solver,referee", []),
    ("solver-2", 2, "solver,referee", []),
    ("solver-3", 3, "solver,referee", []),
    ("solver-4", 4, "solver,referee", ["bitflip@step=15"]),
    ("verifier-1", 5, "verifier,referee", []),
    ("verifier-2", 6, "verifier,referee", []),
]
CHEATERS = {name for name, _, _, faults in NODES if faults}  # nodes running a TEST-ONLY fault
# solver-2 stands for a different CPU: ATen dispatches its default (non-AVX2) kernels, which change every native
# float32 result; under portable-f32 its bits are the others' (docs/engine.md, "Portable profile"). The nodes run
# MKL's fastest branch for this CPU (MKL_CBWR=AUTO: they serve portable-f32 only, docs/nodes.md), except verifier-2,
# on the vendor-neutral COMPATIBLE branch a node that also serves cpu-f32-strict runs. portable-f32 leaves intra-op
# threads to the operator, and six nodes share this machine's cores: one thread each (torch's default, a thread per
# core in every process, ran twelve threads on two cores and made the job 102-110 s instead of 81 s).
BASE_NODE_ENV = {"MKL_CBWR": "AUTO", "OMP_NUM_THREADS": "1"}
NODE_ENV = {"solver-2": {"ATEN_CPU_CAPABILITY": "default"}, "verifier-2": {"MKL_CBWR": "COMPATIBLE"}}
PROFILE = "portable-f32"
JOB_ARGS = ["--shards", "4", "--rounds", "2", "--steps", "40", "-k", "10", "--replication", "2",
            "--payment", "1", "--stake", "10", "--lr", "0.01", "--challenge-window", "3", "--profile", PROFILE]
ACCURACY_GOAL, WALL_GOAL = 0.90, 90.0
# Every accepted result waits out a challenge window, then the reveal grace (protocol v2: agreement is not finality).
# Production windows are hours; the demo's devnet uses seconds so the whole job fits in WALL_GOAL.
DEMO_WINDOWS = {"execution": 120, "reveal": 5, "challenge": 3}  # reveal: the contract minimum (MIN_REVEAL_WINDOW)
# Every replica draw and referee panel waits for a block mined `delay` (2) blocks after its request (P4); an empty
# block every quarter second keeps that wait near half a second on an idle devnet.
DEMO_BLOCK_INTERVAL = 0.25
WIDE = 160  # console width when the output is piped: every table's node names in full


@dataclass
class Timer:
    start: float = 0.0

    def __post_init__(self):
        self.start = time.monotonic()

    def __call__(self) -> float:
        return time.monotonic() - self.start


def _env(directory: Path) -> dict:
    env = dict(os.environ)
    env.update(VERITY_DEVNET_DIR=str(directory), VERITY_STATE_DIR=str(directory / "state"),
               VERITY_ENABLE_FAULTS="1",  # solver-4's TEST-ONLY --fault is refused without it
               VERITY_BLOCK_INTERVAL=str(DEMO_BLOCK_INTERVAL))
    return env


def start_nodes(directory: Path, env: dict) -> list[subprocess.Popen]:
    procs = []
    for name, account, roles, faults in NODES:
        cmd = [sys.executable, "-m", "verity", "node", "run", "--name", name, "--account", str(account), "--roles", roles]
        for f in faults:
            cmd += ["--fault", f]
        log = open(directory / f"{name}.log", "wb")
        procs.append(subprocess.Popen(cmd, env={**env, **BASE_NODE_ENV, **NODE_ENV.get(name, {})}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    return procs


def stop_nodes(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


SCENARIOS = ("main", "modules")


def scenario_args(scenario: str) -> tuple[list[str], float]:
    """The submit options and the accuracy goal of a scenario."""
    if scenario == "modules":
        from verity import demo_modules
        return [*demo_modules.JOB_ARGS, "--profile", PROFILE], demo_modules.ACCURACY_GOAL
    if scenario != "main":
        raise VerityError(f"unknown demo scenario {scenario!r} (known: {', '.join(SCENARIOS)})")
    return JOB_ARGS, ACCURACY_GOAL


def run_demo(keep: bool = False, directory: Path = DEMO_DIR, scenario: str = "main", explore: bool = False) -> int:
    """The whole demo; the explorer serves it live from the start (its address printed), and with `explore` keeps
    serving after the job, with the devnet and nodes, until Ctrl-C."""
    from verity.cli.devnet import bring_up
    from verity.devnet import services

    args, goal = scenario_args(scenario)
    total = Timer()
    directory = directory.resolve()
    if directory.exists():
        services.down(directory)
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    env = _env(directory)
    os.environ.update(VERITY_DEVNET_DIR=env["VERITY_DEVNET_DIR"], VERITY_STATE_DIR=env["VERITY_STATE_DIR"],
                      VERITY_BLOCK_INTERVAL=env["VERITY_BLOCK_INTERVAL"])
    procs: list[subprocess.Popen] = []
    stop_explorer = None
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console.width = max(console.width, WIDE)   # piped: tables wide enough that no node name is cut short
    try:
        console.rule("[bold]Verity demo: a verifiable training job on a local devnet")
        record = bring_up(directory)
        _set_demo_windows(record["rpc_url"])
        url, stop_explorer = _start_explorer(record["rpc_url"], directory)
        console.print(f"explorer: [bold]{url}[/bold] (network, jobs, nodes and disputes, live)", highlight=False)
        procs = start_nodes(directory, env)
        chain = _wait_for_nodes(record["rpc_url"], procs, directory)
        setup_s = total()
        console.print(f"6 nodes registered and staked ({', '.join(n for n, *_ in NODES)}); "
                      "[yellow]solver-4 runs the TEST-ONLY fault bitflip@step=15[/yellow]; "
                      f"solver-2 runs ATen's default kernels (ATEN_CPU_CAPABILITY=default), as another CPU would, "
                      f"and verifier-2 MKL's COMPATIBLE branch, the others MKL's AUTO one; "
                      f"the job's profile is {PROFILE}")
        job = Timer()
        job_id = _submit(directory, record["rpc_url"], args)
        console.print(f"explorer: this job live at {url}job/{job_id}", highlight=False)
        report = _watch(chain, job_id)
        _reclaim(record["rpc_url"], job_id)
        job_s = job()
        if scenario == "modules":
            _modules_summary(chain, job_id)
        rc = _summary(chain, job_id, report, setup_s, job_s, total(), goal,
                      wall_goal=WALL_GOAL if scenario == "main" else None)
        if explore:
            _explore(url, job_id)
        return rc
    except VerityError as exc:
        console.print(f"[red]demo failed:[/red] {exc}")
        for name, *_ in NODES:
            log = directory / f"{name}.log"
            if log.exists():
                console.print(f"--- last lines of {log}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-5:]))
        return 1
    finally:
        if stop_explorer is not None:
            stop_explorer()
        if not keep:
            stop_nodes(procs)
            services.down(directory)
        else:
            console.print(f"left running: devnet in {directory} (VERITY_DEVNET_DIR={directory}), node processes")


def _start_explorer(rpc_url: str, directory: Path):
    """The explorer on its default port (any free one if taken), names from the demo's node list; (url, stop)."""
    from verity.chain.client import connect_chain
    from verity.cli.common import settings
    from verity.cli.explorer import start_background
    from verity.storage import Storage

    return start_background(connect_chain(rpc_url), Storage.from_settings(settings()),
                            state_dir=directory / "state", names={addr_of(a): n for n, a, *_ in NODES},
                            say=lambda line: console.print(line, style="yellow", markup=False, highlight=False))


def _explore(url: str, job_id: int) -> None:
    console.print(f"explorer: still serving at [bold]{url}[/bold] (job {job_id}: {url}job/{job_id}) with the devnet "
                  "and nodes; Ctrl-C to stop", highlight=False)
    try:
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        console.print("stopping the explorer, nodes and devnet")


def _wait_for_nodes(rpc_url: str, procs, directory: Path):
    from verity.chain.client import connect_chain

    chain = connect_chain(rpc_url)
    deadline = time.monotonic() + 180
    with console.status("starting 6 node processes (register + stake)…"):
        while chain.call(chain.registry.functions.nodeCount()) < len(NODES):
            dead = [NODES[i][0] for i, p in enumerate(procs) if p.poll() is not None]
            if dead:
                raise VerityError(f"node process(es) {', '.join(dead)} exited; see their logs in {directory}")
            if time.monotonic() > deadline:
                raise VerityError("nodes did not register within 180 s")
            time.sleep(0.5)
    return chain


def _set_demo_windows(rpc_url: str) -> None:
    """The Timelock's admin (test account 0, the deployer) shortens the registry's default windows for this devnet,
    through the Timelock (the devnet clock jumps past its delay; no node runs yet)."""
    from verity.chain.client import connect_chain, devnet_key
    from verity.chain.governance import apply_parameter

    owner = connect_chain(rpc_url, devnet_key(0))
    w = DEMO_WINDOWS
    windows = owner.jobs.functions.setDefaultWindows(w["execution"], w["reveal"], w["challenge"])
    apply_parameter(owner, owner.jobs, windows)
    console.print(f"devnet windows for the demo: challenge {w['challenge']} s, reveal (and challenge-reveal grace) "
                  f"{w['reveal']} s, execution {w['execution']} s")


def _submit(directory: Path, rpc_url: str, args: list[str]) -> int:
    from verity.devnet.deploy import ape_run

    out = directory / "job.json"
    with console.status("ape run submit: sharding digits, uploading shards + manifest, posting the job…"):
        proc = ape_run("submit", [*args, "--out", str(out)], rpc_url=rpc_url, env=_env(directory))
    if proc.returncode != 0:
        raise VerityError("ape run submit failed:\n" + "\n".join(proc.stdout.splitlines()[-15:]))
    for line in proc.stdout.splitlines():
        if line.startswith(("manifest", "posted")):
            console.print(line)
    return int(json.loads(out.read_text())["job_id"])


def _watch(chain, job_id: int, timeout: float = 600.0):
    from verity.cli.common import settings
    from verity.cli.job import render
    from verity.job.view import JobReader
    from verity.storage import Storage

    reader = JobReader(chain, Storage.from_settings(settings()), job_id)
    names = {addr_of(a): n for n, a, *_ in NODES}
    deadline = time.monotonic() + timeout
    if not console.is_terminal:   # piped (CI, a log file): a progress line per change, then the final table
        return _watch_lines(reader, names, deadline)
    with Live(render(rep := reader.report(), names), console=console, refresh_per_second=2, transient=False) as live:
        while rep.status == "active":
            if time.monotonic() > deadline:
                raise VerityError(f"job {job_id} not finished after {timeout:.0f} s")
            time.sleep(1.0)
            rep = reader.report()
            live.update(render(rep, names))
    console.print()  # Live leaves the cursor on the table's last line
    return rep


def progress_line(rep) -> str:
    """One line of a job's progress: round, tasks by status, disputes (a piped demo's output)."""
    from collections import Counter

    counts = Counter(t.status for t in rep.tasks)
    tasks = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no task yet"
    disputes = "; ".join(f"task {t.task_id} {t.dispute}" for t in rep.tasks if t.dispute)
    return (f"job {rep.job_id} {rep.status}, round {min(rep.current_round + 1, rep.rounds)}/{rep.rounds}: {tasks}"
            + (f"; disputes: {disputes}" if disputes else ""))


def _watch_lines(reader, names: dict, deadline: float):
    from verity.cli.job import render

    start, last, rep = time.monotonic(), "", reader.report()
    while True:
        line = progress_line(rep)
        if line != last:
            console.print(f"[{time.monotonic() - start:6.1f} s] {line}", highlight=False, soft_wrap=True)
            last = line
        if rep.status != "active":
            break
        if time.monotonic() > deadline:
            raise VerityError(f"job {rep.job_id} not finished in time")
        time.sleep(1.0)
        rep = reader.report()
    console.print(render(rep, names))
    return rep


def _reclaim(rpc_url: str, job_id: int) -> None:
    """The submitter (test account 0, as `ape run submit` used) takes back the escrow nobody earned."""
    from verity.chain import TxFailed
    from verity.chain.client import connect_chain, devnet_key

    submitter = connect_chain(rpc_url, devnet_key(0))
    left = submitter.call(submitter.escrow.functions.escrowOf(job_id))
    if left:
        try:
            submitter.transact(submitter.jobs.functions.reclaimEscrow(job_id))
            console.print(f"submitter reclaimed {left / 1e18:g} VRT of unspent escrow (the poster bond and payments "
                          "of slashed replicas)")
        except TxFailed as exc:
            console.print(f"[yellow]could not reclaim escrow:[/yellow] {exc}")


def _modules_summary(chain, job_id: int) -> None:
    from verity import demo_modules
    from verity.cli.common import settings
    from verity.demo_report import ledger
    from verity.job.view import JobReader
    from verity.storage import Storage

    manifest = JobReader(chain, Storage.from_settings(settings()), job_id).manifest
    names = {addr_of(a): n for n, a, *_ in NODES}
    console.rule("[bold]Modules")
    console.print(demo_modules.trainers_table(chain, job_id, manifest, names))
    for line in demo_modules.dispute_modules(ledger(chain, names), chain, manifest):
        console.print(line)
    console.print(demo_modules.memory_table(manifest))


def _summary(chain, job_id: int, report, setup_s: float, job_s: float, total_s: float,
             goal: float = ACCURACY_GOAL, wall_goal: float | None = WALL_GOAL) -> int:
    from verity.demo_report import ledger

    led = ledger(chain, {addr_of(a): n for n, a, *_ in NODES})
    console.rule("[bold]Result")
    acc = report.metrics[-1].accuracy if report.metrics else 0.0
    console.print(f"job {job_id}: {report.status}; final held-out accuracy [bold]{acc:.3f}[/bold] "
                  f"(goal ≥ {goal}) — {'met' if acc >= goal else 'MISSED'}")
    console.print(led.disputes_table())
    console.print(led.nodes_table())
    ok = led.conservation_ok()
    console.print(led.conservation_table())
    honest = honest_conflicts(led)
    console.print("honest nodes never disputed each other and none was slashed" if not honest else
                  "[red]honest nodes lost to a hardware difference:[/red] " + "; ".join(honest))
    console.print(f"set-up (devnet, deploy, 6 nodes) {setup_s:.1f} s; job (submit → trained, checked, paid) "
                  f"[bold]{job_s:.1f} s[/bold]" + (f" (goal ≤ {wall_goal:.0f} s on 2 cores)" if wall_goal else "")
                  + f"; total {total_s:.1f} s")
    return 0 if (report.status == "completed" and ok and acc >= goal and not honest) else 1


def honest_conflicts(led) -> list[str]:
    """Disputes between two honest nodes and slashes of honest nodes (each one a defect: honest nodes agree)."""
    out = [f"dispute {did}: {led.name(d['challenger'])} vs {led.name(d['defender'])}"
           for did, d in sorted(led.disputes.items())
           if led.name(d["challenger"]) not in CHEATERS and led.name(d["defender"]) not in CHEATERS]
    return out + [f"{led.name(a)} slashed {v / 1e18:g} VRT" for a, v in led.slashed.items()
                  if v and led.name(a) not in CHEATERS]


def addr_of(account: int) -> str:
    from eth_account import Account

    from verity.chain.client import devnet_key

    return Account.from_key(devnet_key(account)).address
