"""A fork server for node processes: import `verity` (torch, web3, ape's ABI tooling) once, fork every node from it.

Starting `python -m verity node run` costs about 5 s of CPU before the node does anything (imports), and a node
scenario starts 5-7 of them on a 2-core machine. The zygote pays that once per pytest worker; each node is then a
fork of it that sets its own environment and argv and runs the same `verity.cli.run()` entry point `python -m
verity` runs, with its output in its own log. What a node reads at import time (the BLAS / ATen / thread settings
below) is the zygote's: a node whose environment differs there is started as a fresh process instead
(`NodeLauncher`).

Process tree: each node is a child of the zygote, which reaps it when it exits and writes its exit status next to
its log (`<log>.exit`); the test signals it by pid and reads that file (`ForkedNode` is a `subprocess.Popen`
look-alike). Nothing else changes parent: the devnet's daemons stay orphans of init, as they are without a zygote.

Protocol (zygote stdin/stdout): one JSON line {"argv": [...], "env": {...}, "log": path} in, one {"pid": N} out;
EOF on stdin ends the zygote (its running nodes are the test's to stop).
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

# Read when torch / verity are imported (or the first kernel runs), not per node: a node with other values here
# must be a process of its own.
IMPORT_TIME_ENV = ("MKL_CBWR", "ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "VERITY_PORTABLE_KERNELS",
                   "PYTHONHASHSEED", "PYTHONPATH", "CC")


# ------------------------------------------------------------------------------------------------ in the pytest worker
class ForkedNode:
    """The part of `subprocess.Popen` node tests use, for a node forked by the zygote: its parent is the zygote, which
    writes the exit status to `<log>.exit` once it reaped it."""

    def __init__(self, pid: int, log: Path):
        self.pid, self.returncode, self._exit = pid, None, Path(f"{log}.exit")

    def poll(self) -> int | None:
        if self.returncode is None and self._exit.exists():
            text = self._exit.read_text().strip()
            if text:  # written whole (os.replace), but be safe against an empty read
                self.returncode = int(text)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"node pid {self.pid}", timeout)
            time.sleep(0.05)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass  # exited and reaped a moment ago: its status file follows

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class NodeLauncher:
    """Starts node processes for tests: forked from one zygote when their import-time environment matches it, else
    as fresh processes. `forked` / `fresh` count how each node started."""

    def __init__(self, env: dict, enabled: bool = True):
        self.enabled = enabled  # False (VERITY_TEST_ZYGOTE=0): every node a fresh process, as a user starts it
        self.env = {k: env[k] for k in IMPORT_TIME_ENV if k in env}
        self.base_env = dict(env)
        self.zygote: subprocess.Popen | None = None
        self.forked = self.fresh = 0

    def start(self, args: list[str], env: dict, log: Path):
        same = {k: env[k] for k in IMPORT_TIME_ENV if k in env} == self.env
        if not self.enabled or not same or args[:3] != [sys.executable, "-m", "verity"]:
            self.fresh += 1
            return subprocess.Popen(args, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
                                    start_new_session=True)
        zygote = self._zygote()
        Path(f"{log}.exit").unlink(missing_ok=True)  # a restart reuses the log
        zygote.stdin.write(json.dumps({"argv": ["verity", *args[3:]], "env": env, "log": str(log)}) + "\n")
        zygote.stdin.flush()
        line = zygote.stdout.readline()
        if not line:
            raise RuntimeError(f"the node zygote exited ({zygote.poll()}); see its log")
        self.forked += 1
        return ForkedNode(json.loads(line)["pid"], log)

    def _zygote(self) -> subprocess.Popen:
        if self.zygote is None or self.zygote.poll() is not None:
            self.zygote = subprocess.Popen([sys.executable, __file__], env=self.base_env, stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, text=True)
        return self.zygote

    def close(self) -> None:
        if self.zygote is not None and self.zygote.poll() is None:
            self.zygote.stdin.close()  # EOF: the zygote exits
            try:
                self.zygote.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.zygote.kill()


# ---------------------------------------------------------------------------------------------------- in the zygote
def _run_node(request: dict) -> None:
    """In the forked node: become what `python -m verity ARGS` with ENV writing to LOG would be, run, exit."""
    os.setsid()
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(devnull)
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = list(request["argv"])
    code = 0
    try:
        from verity.cli import run
        run()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 — what a crashing interpreter would print, then its status
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        import atexit
        import logging
        atexit._run_exitfuncs()
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _reap(logs: dict[int, str]) -> None:
    """Reap every node that exited and write its status to `<log>.exit` (tmp + rename: never half a file)."""
    while logs:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        log = logs.pop(pid, None)
        if log is not None:
            tmp = f"{log}.exit.tmp"
            with open(tmp, "w") as fh:
                fh.write(str(os.waitstatus_to_exitcode(status)))
            os.replace(tmp, f"{log}.exit")


def _serve() -> None:
    import verity.cli  # noqa: F401 — what every node imports: the CLI, the node, torch, web3
    import verity.cli.node  # noqa: F401
    import verity.node.app  # noqa: F401
    import verity.node.doctor  # noqa: F401
    replies = os.dup(1)
    os.dup2(2, 1)  # stray prints in the zygote go to its stderr, never into the reply pipe
    requests = os.fdopen(os.dup(0), "r")
    logs: dict[int, str] = {}  # running node pid -> its log
    while True:
        ready, _, _ = select.select([requests], [], [], 0.1)
        _reap(logs)
        if not ready:
            continue
        line = requests.readline()
        if not line:
            return  # EOF: the test session is over
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(replies)
            requests.close()
            _run_node(request)
        logs[pid] = request["log"]
        os.write(replies, (json.dumps({"pid": pid}) + "\n").encode())


if __name__ == "__main__":
    _serve()
