"""`verity job …`: follow a job's rounds, tasks, replicas and disputes; fetch its model."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.live import Live
from rich.table import Table
from rich.console import Group

from verity.cli.common import console, fail, settings
from verity.errors import VerityError

app = typer.Typer(no_args_is_help=True, help="Inspect, follow and download jobs.")
JobId = Annotated[int, typer.Argument(help="on-chain job id")]
Plot = Annotated[Optional[Path], typer.Option("--plot", help="also write the loss curve as a PNG here")]


def reader(job_id: int):
    from verity.chain.client import connect_chain
    from verity.jobview import JobReader
    from verity.storage import Storage

    s = settings()
    return JobReader(connect_chain(s.rpc_url), Storage.from_settings(s), job_id)


def render(rep, names: dict | None = None) -> Group:
    """The task table and the per-round metrics; `names` maps addresses to node names."""
    names = names or {}
    head = f"job {rep.job_id}: {rep.status}, round {min(rep.current_round + 1, rep.rounds)}/{rep.rounds}, {rep.shards} shards"
    t = Table(title=head)
    for col in ("task", "round", "index", "kind", "status", "replicas", "dispute"):
        t.add_column(col)
    for row in rep.tasks:
        reps = ", ".join(f"{names.get(n, n[:8] + '…')}:{s}" for n, s in row.replicas if int(n, 16))
        t.add_row(str(row.task_id), str(row.round), str(row.index), row.kind, row.status, reps, row.dispute)
    m = Table(title="global model per round (held-out eval shard)")
    for col in ("round", "loss", "accuracy", "curve"):
        m.add_column(col)
    for x in rep.metrics:
        m.add_row(str(x.round), f"{x.loss:.4f}", f"{x.accuracy:.3f}" if x.accuracy is not None else "-",
                  "█" * max(1, int(x.loss * 20)))
    return Group(t, m)


def plot(rep, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.plot([m.round + 1 for m in rep.metrics], [m.loss for m in rep.metrics], marker="o", label="eval loss")
    ax.set_xlabel("round")
    ax.set_xticks([m.round + 1 for m in rep.metrics])
    ax.set_ylabel("loss")
    ax.set_title(f"Verity job {rep.job_id}")
    if rep.metrics and rep.metrics[0].accuracy is not None:
        ax2 = ax.twinx()
        ax2.plot([m.round + 1 for m in rep.metrics], [m.accuracy for m in rep.metrics], color="tab:green", marker="s", label="accuracy")
        ax2.set_ylabel("accuracy")
        fig.legend(loc="upper center", bbox_to_anchor=(0.5, 0.88), ncol=2, frameon=False)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    console.print(f"wrote {out}")


@app.command()
def show(job_id: JobId, plot_to: Plot = None) -> None:
    """One snapshot of the job."""
    try:
        rep = reader(job_id).report()
    except VerityError as exc:
        fail(exc)
    console.print(render(rep))
    if plot_to:
        plot(rep, plot_to)


@app.command()
def watch(job_id: JobId, plot_to: Plot = None,
          timeout: Annotated[float, typer.Option(help="give up after this many seconds")] = 3600.0,
          interval: Annotated[float, typer.Option(help="seconds between refreshes")] = 1.0) -> None:
    """Live table until the job completes or is cancelled."""
    try:
        r = reader(job_id)
        deadline = time.monotonic() + timeout
        with Live(render(rep := r.report()), console=console, refresh_per_second=2) as live:
            while rep.status == "active" and time.monotonic() < deadline:
                time.sleep(interval)
                rep = r.report()
                live.update(render(rep))
        console.print()
    except VerityError as exc:
        fail(exc)
    if plot_to:
        plot(rep, plot_to)
    if rep.status == "active":
        fail(VerityError(f"job {job_id} still active after {timeout:.0f} s"))


@app.command()
def download(job_id: JobId, out: Annotated[Path, typer.Option("--out", "-o")] = Path("model.safetensors")) -> None:
    """Download the job's final model (verified against the on-chain hash)."""
    try:
        r = reader(job_id)
        job = r.job()
        if not int.from_bytes(bytes(job.modelHash), "big"):
            raise VerityError(f"job {job_id} has no final model yet (status {r.report().status})")
        data = r.round_model(int(job.rounds) - 1)
        from verity.engine.tensorfile import atomic_write

        atomic_write(out, lambda f: f.write(data))
    except VerityError as exc:
        fail(exc)
    console.print(f"wrote {out} ({len(data)} bytes, hash 0x{bytes(job.modelHash).hex()[:16]}…)")
