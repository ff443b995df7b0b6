"""`verity index …`: the local event index `job show/watch` and `node status` read (docs/indexer.md)."""
from __future__ import annotations

import time
from typing import Annotated, Optional

import typer
from rich.table import Table

from verity.cli.common import console, fail, settings
from verity.errors import VerityError

app = typer.Typer(no_args_is_help=True, help="Build and inspect the local index of the deployment's events.")
Confirmations = Annotated[Optional[int], typer.Option(
    "--confirmations", min=0, help="store blocks this deep only (default: VERITY_INDEX_CONFIRMATIONS, 2)")]


def _open():
    from verity.chain.client import connect_chain
    from verity.index import open_index

    return open_index(connect_chain(settings().rpc_url))


@app.command()
def sync(confirmations: Confirmations = None) -> None:
    """Catch the index up with the chain (a progress bar on a long catch-up); prints what it added and where."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    try:
        with _open() as ix:
            before, started = ix.head, time.monotonic()
            with Progress(TextColumn("indexing blocks"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("{task.fields[events]} events"), TimeRemainingColumn(),
                          console=console, transient=True) as bar:
                task = bar.add_task("sync", total=None, events=0)

                def progress(done: int, total: int, events: int) -> None:
                    bar.update(task, completed=done, total=total, events=events)

                added = ix.sync(confirmations, progress=progress)
            blocks = ix.head - before
            console.print(f"indexed {added} events in {blocks} blocks (up to block {ix.head}) in "
                          f"{time.monotonic() - started:.1f} s; index: {ix.path}", highlight=False, soft_wrap=True)
    except VerityError as exc:
        fail(exc)


@app.command()
def status() -> None:
    """Where the index is, which chain it holds, how far it reaches, and what it holds."""
    try:
        with _open() as ix:
            db, chain_head = ix.db, ix.source.head()
            count = lambda sql: db.execute(sql).fetchone()[0]  # noqa: E731
            ident = ix.source.identity()
            t = Table(title="event index")
            t.add_column("field")
            t.add_column("value")
            rows = [("file", str(ix.path)), ("size", f"{ix.path.stat().st_size / 1e6:.1f} MB"),
                    ("schema version", str(count("PRAGMA user_version"))),
                    ("chain", f"{ident['chain_id']} (genesis {ident['genesis_hash'][:18]}…)"),
                    ("indexed up to", f"block {ix.head} (chain head {chain_head}, {max(0, chain_head - ix.head)} "
                                      "behind: read live)"),
                    ("events", str(count("SELECT COUNT(*) FROM events"))),
                    ("jobs / tasks / disputes", f"{count('SELECT COUNT(DISTINCT job_id) FROM events')} / "
                                                f"{count('SELECT COUNT(*) FROM tasks')} / "
                                                f"{count('SELECT COUNT(*) FROM disputes')}")]
            for k, v in rows:
                t.add_row(k, v)
            console.print(t)
    except VerityError as exc:
        fail(exc)
