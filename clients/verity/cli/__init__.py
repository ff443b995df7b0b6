"""The `verity` command: one typer sub-app per noun, joined here (entered through verity.entry)."""
import os
import signal
import sys
from typing import Annotated

import typer

from verity.cli.data import app as data_app
from verity.cli.devnet import app as devnet_app
from verity.cli.explorer import explorer
from verity.cli.index import app as index_app
from verity.cli.job import app as job_app
from verity.cli.job_submit import submit
from verity.cli.lab import app as lab_app
from verity.cli.node import app as node_app

app = typer.Typer(no_args_is_help=True, help="Verity: verifiable ML training.",
                  epilog="Settings come from the environment: VERITY_RPC_URL (default http://127.0.0.1:8545, the "
                         "devnet's VERITY_ANVIL_PORT), VERITY_IPFS_API (default port VERITY_IPFS_API_PORT 5001), "
                         "VERITY_STATE_DIR, VERITY_MAX_FEE_GWEI, ...; README's Settings table lists them all.")


def _version(value: bool) -> None:
    if value:
        from verity import __version__

        typer.echo(f"verity {__version__}")
        raise typer.Exit()


@app.callback()
def main(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="print the version and exit")] = False) -> None:
    """Verity: verifiable ML training."""
app.add_typer(data_app, name="data")
app.add_typer(devnet_app, name="devnet")
app.add_typer(index_app, name="index")
app.add_typer(node_app, name="node")
app.add_typer(job_app, name="job")
app.add_typer(lab_app, name="lab")
job_app.command("submit")(submit)
app.command()(explorer)


@app.command()
def verify(model: Annotated[str, typer.Argument(help="a model `verity job download` wrote (.safetensors), or a "
                                                   "--format hf directory")],
           job: Annotated[int | None, typer.Option("--job", help="check this job only (default: every completed job, "
                                                                 "newest first)")] = None) -> None:
    """Is MODEL the accepted final model of a completed job on this chain? Names the job, its trace root, the
    replicas that agreed and the disputes that settled it; exit 1 with the reason when it is not."""
    from pathlib import Path

    from verity.chain.client import connect_chain
    from verity.cli.common import settings
    from verity.errors import VerityError
    from verity.job.verify import verify_model
    from verity.storage import Storage

    s = settings()
    try:
        if not Path(model).exists():
            raise VerityError(f"{model}: no such file or directory")
        verdict = verify_model(Path(model), connect_chain(s.rpc_url), Storage.from_settings(s), job)
    except VerityError as exc:
        typer.echo(f"not verified: {exc}", err=True)
        raise typer.Exit(1) from None
    for line in verdict.lines(model):
        typer.echo(line)


@app.command()
def demo(keep: bool = typer.Option(False, help="leave the devnet and nodes running afterwards"),
         scenario: str = typer.Option("main", help="main: the digits job of `make demo`; modules: the model split "
                                                   "into two modules trained by different nodes"),
         explore: bool = typer.Option(False, help="keep the explorer (and the devnet) serving after the job, until "
                                                  "Ctrl-C")) -> None:
    """Run the whole demo job on a fresh local devnet (what `make demo` runs)."""
    from verity.demo import SCENARIOS, run_demo

    if scenario not in SCENARIOS:
        typer.echo(f"error: --scenario: {scenario!r} is not one of {', '.join(SCENARIOS)}", err=True)
        raise typer.Exit(2)
    raise typer.Exit(run_demo(keep=keep, scenario=scenario, explore=explore))


def run() -> None:
    """The `verity` entry point: an unexpected exception is one line, not a traceback
    (VERITY_DEBUG=1 shows it); deliberate errors already exit with their own line."""
    from verity.cli.common import err_console
    from verity.entry import exit_interrupted

    try:
        app()
    except SystemExit as exc:  # typer turns a Ctrl-C inside a command into a silent exit 130: say it
        if exc.code == 130:
            err_console.print("interrupted")
        raise
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 — the last line of defence of a command-line tool
        if os.environ.get("VERITY_DEBUG") == "1":
            raise
        from rich.markup import escape

        first = (str(exc).strip().splitlines() or [""])[0][:300]
        err_console.print(f"[red]error:[/red] {escape(type(exc).__name__)}: {escape(first)}", highlight=False)
        err_console.print("(unexpected; run again with VERITY_DEBUG=1 to see the traceback)")
        sys.exit(1)
    finally:  # the command is over: a Ctrl-C while the interpreter shuts down ends it at once, no atexit traceback
        signal.signal(signal.SIGINT, exit_interrupted)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a reader that went away, or a stream already closed
                pass
