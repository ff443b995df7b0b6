"""The demo's piped output (issue 26 item 5): one progress line per change, and tables that never cut a node name
short, at the width the demo gives a piped console."""
from __future__ import annotations

import io

from explorer_fixtures import CHALLENGER, DEFENDER, job_report
from rich.console import Console

from verity import demo
from verity.demo_report import Ledger


def test_progressLine_countsTasksAndNamesDisputes_succeeds():
    line = demo.progress_line(job_report())
    assert line == "job 1 active, round 1/2: 1 accepted, 1 contested, 1 open; disputes: task 2 #1 step 14"


def test_disputesTable_narrowConsole_keepsFullNames_succeeds():
    names = {CHALLENGER: "solver-4-longer", DEFENDER: "verifier-2-also"}   # the demo's names, and longer
    led = Ledger(chain=None, names=names)
    led.disputes[1] = {"task": 2, "challenger": CHALLENGER, "defender": DEFENDER, "where": "checkpoint 1→2, step 14",
                       "votes": 3, "outcome": "verifier-2-also wins"}
    out = io.StringIO()
    Console(file=out, width=demo.WIDE, force_terminal=False).print(led.disputes_table())
    text = out.getvalue()
    assert "solver-4-longer" in text and "verifier-2-also" in text and "…" not in text


def test_startBackground_busyPort_saysWhereTheExplorerListens_succeeds():
    """The demo's explorer moves off a busy port (8600) and says so (issue 26) instead of moving silently."""
    import socket

    from verity.cli.explorer import start_background

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        lines: list[str] = []
        url, stop = start_background(None, None, port=taken, say=lines.append)
        try:
            got = int(url.rstrip("/").rsplit(":", 1)[1])
            assert got != taken and lines == [f"port {taken} busy: explorer on {got}"]
            socket.create_connection(("127.0.0.1", got), timeout=5).close()   # and it listens there
        finally:
            stop()
    quiet: list[str] = []
    _, stop = start_background(None, None, port=0, say=quiet.append)   # no preference: nothing to say
    stop()
    assert quiet == []
