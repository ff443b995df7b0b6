"""The live task table of `verity job show/watch`, `ape run submit --wait` and the demo.

Rounds are numbered from 1 everywhere people read them (tables, advice, plots); the chain and
the JobReport count from 0."""
from __future__ import annotations

from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from verity.job.advice import WAITING, advice, countdown, short

MAX_REASONS = 8


def _replica(r, names: dict) -> str:
    if not int(r.node, 16):
        return "(empty)"
    who = escape(short(r.node, names))
    text = f"{who}:{r.status}" if r.current else f"[strike]{who}[/strike]:{r.status}"
    return text + (f" −{r.fined / 1e18:g} VRT" if r.fined else "")


def clock(row, now: int, replication: int = 2) -> str:
    """The countdown that matters for a waiting task: its challenge window or its earliest replica deadline."""
    if row.status == "revealed" and row.challenge_deadline:
        left = row.challenge_deadline - now
        if left >= 0:
            return f"challenge {countdown(left)}"
        grace = row.challenge_deadline + row.reveal_grace - now
        if grace >= 0:
            return f"challenge reveals {countdown(grace)}"
        return f"{row.open_disputes} dispute(s) open" if row.open_disputes else "challenge over"
    if row.status == "open" and row.open_since:
        return f"open {countdown(now - row.open_since)}"
    first = "commit" if replication > 1 else "result"
    due = [(r.deadline, first if r.status == "assigned" else "reveal")
           for r in row.replicas if r.current and r.deadline and r.status in ("assigned", "committed")]
    if row.status != "assigned" or not due:
        return ""
    deadline, what = min(due)
    return f"{what} {countdown(deadline - now)}" if deadline >= now else f"{what} overdue {countdown(now - deadline)}"


def tasks_table(rep, names: dict | None = None) -> Table:
    names = names or {}
    head = f"job {rep.job_id}: {rep.status}, round {min(rep.current_round + 1, rep.rounds)}/{rep.rounds}, {rep.shards} shards"
    t = Table(title=head)
    for col in ("task", "round", "shard", "kind", "status", "replicas", "clock", "dispute"):
        t.add_column(col)
    for row in rep.tasks:
        shard = "all" if row.kind == "aggregate" else str(row.index + 1)
        reps = ", ".join(_replica(r, names) for r in row.replicas)
        t.add_row(str(row.task_id), str(row.round + 1), shard, row.kind, row.status, reps,
                  clock(row, rep.now, rep.replication) if row.status in WAITING else "", row.dispute)
    return t


def metrics_table(rep) -> Table | Text:
    if not rep.metrics:
        return Text("global model per round (held-out eval shard): no data yet", style="dim")
    m = Table(title="global model per round (held-out eval shard)")
    for col in ("round", "loss", "accuracy", "curve"):
        m.add_column(col)
    top = max(x.loss for x in rep.metrics) or 1.0
    for x in rep.metrics:
        m.add_row(str(x.round + 1), f"{x.loss:.4f}", f"{x.accuracy:.3f}" if x.accuracy is not None else "-",
                  "█" * max(1, round(30 * x.loss / top)))
    return m


def waiting_lines(rep, names: dict | None = None) -> list[str]:
    """Why tasks wait, plus the cancel advice when cancelling is possible now or soon."""
    lines = advice(rep)
    for addr, name in (names or {}).items():
        lines = [x.replace(short(addr), name) for x in lines]
    reasons = [x for x in lines if x.startswith("task ")]
    rest = [x for x in lines if not x.startswith("task ") and not x.startswith("cannot cancel")]
    if len(reasons) > MAX_REASONS:
        reasons = reasons[:MAX_REASONS] + [f"… and {len(reasons) - MAX_REASONS} more waiting tasks"]
    return reasons + rest


def render(rep, names: dict | None = None) -> Group:
    """The task table, why tasks wait, and the per-round metrics; `names` maps addresses to node names."""
    parts = [tasks_table(rep, names)]
    parts += [Text(line, style="yellow") for line in waiting_lines(rep, names)]
    parts.append(metrics_table(rep))
    return Group(*parts)


def follow_live(reader, timeout: float, interval: float = 1.0, names: dict | None = None):
    """Redraw the job's table until it is no longer active or `timeout` s passed; the last report."""
    import time

    from rich.live import Live

    from verity.cli.common import console

    deadline = time.monotonic() + timeout
    with Live(render(rep := reader.report(), names), console=console, refresh_per_second=2) as live:
        while rep.status == "active" and time.monotonic() < deadline:
            time.sleep(interval)
            rep = reader.report()
            live.update(render(rep, names))
    console.print()
    return rep
