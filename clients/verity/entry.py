"""The `verity` command's entry point (pyproject's console script and `python -m verity`).

Ctrl-C while the command still imports torch, web3 and typer prints `interrupted` and exits 130, no traceback. The
handler is installed here, before those imports, and not when a library or a test imports `verity.cli`: there a
Ctrl-C must stay Python's KeyboardInterrupt (pytest tears its services down on it).
"""
import os
import signal


def _interrupted_early(signum, frame) -> None:
    os.write(2, b"interrupted\n")  # unbuffered: os._exit flushes nothing
    os._exit(130)


def main() -> None:
    signal.signal(signal.SIGINT, _interrupted_early)
    from verity.cli import run  # run() hands Ctrl-C back to Python before the command starts

    run()
