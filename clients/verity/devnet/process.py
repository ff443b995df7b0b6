"""Child processes of the devnet: spawn, identify (pid + start time), stop, ports."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from verity.errors import VerityError

_PR_SET_PDEATHSIG = 1
_handed_out: set[int] = set()
_ports_lock = threading.Lock()


class ServiceError(VerityError, RuntimeError):
    """A local service (anvil, an IPFS node) failed to start or stop."""

    def __init__(self, service: str, reason: str, log: Path | None = None):
        self.service, self.reason, self.log = service, reason, log
        tail = f"\n--- last lines of {log} ---\n{log_tail(log)}" if log else ""
        super().__init__(f"{service}: {reason}{tail}")


def log_tail(path: Path | None, lines: int = 20) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])  # type: ignore[arg-type]
    except OSError:
        return "(no log)"


def free_port(preferred: int | None = None) -> int:
    """A TCP port free on 127.0.0.1: `preferred` if it is free, else one the OS picks.

    Ports handed out once are not handed out again by this process, so nodes
    set up one after another before any of them binds do not collide.
    """
    with _ports_lock:
        if preferred and preferred not in _handed_out and port_is_free(preferred):
            _handed_out.add(preferred)
            return preferred
        for _ in range(100):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                return port
    raise ServiceError("ports", "could not find a free TCP port")


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _die_with_parent() -> None:  # runs in the child between fork and exec
    os.setsid()
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


def spawn(cmd: list[str], log: Path, *, env: dict[str, str] | None = None, cwd: Path | None = None,
          die_with_parent: bool = True) -> subprocess.Popen[bytes]:
    """Start `cmd` in its own session, output appended to `log`.

    die_with_parent: the kernel sends SIGTERM when this process dies (test
    sessions); False for services that must outlive the command that started them.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
            preexec_fn=_die_with_parent if die_with_parent else None,
            start_new_session=not die_with_parent,
        )


def start_time(pid: int) -> int | None:
    """Kernel start time of `pid` (clock ticks since boot), None if it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


@dataclass(frozen=True)
class ProcessId:
    """A process named by pid and start time, so a recycled pid is never mistaken for it."""

    pid: int
    started: int

    @classmethod
    def of(cls, pid: int) -> ProcessId:
        started = start_time(pid)
        if started is None:
            raise ServiceError(f"pid {pid}", "process exited right after it started")
        return cls(pid, started)

    def alive(self) -> bool:
        return start_time(self.pid) == self.started

    def stop(self, grace: float = 10.0, proc: subprocess.Popen[bytes] | None = None) -> None:
        """SIGTERM its process group, then SIGKILL after `grace` seconds; reaps `proc` if given."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            if not self.alive():
                break
            try:
                os.killpg(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                try:
                    os.kill(self.pid, sig)
                except ProcessLookupError:
                    break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and self.alive():
                if proc is not None and proc.poll() is not None:
                    break
                time.sleep(0.05)
        if proc is not None:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.alive():
            raise ServiceError(f"pid {self.pid}", "still running after SIGKILL")
