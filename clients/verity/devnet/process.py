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
from typing import Any, Self

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


class PortTaken(ServiceError):
    """A service could not bind a port: something else took it after it was picked."""


# What a daemon prints when its port is taken (js-ipfs keeps running after it, anvil exits).
BIND_FAILURES = (b"EADDRINUSE", b"Address already in use", b"address already in use")


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


class ManagedProcess:
    """A service process in `directory` with a pid file, so a later command can find and stop it.

    Subclasses set the class attributes below and provide `command()`,
    `_answers()` (the readiness probe), and where needed `_env()`, `_port_attrs`
    (set them with `_pick_ports`), `_prepare()` (just before spawning) and
    `_cleanup()` (after stopping). A port picked here that something else binds
    while the service starts (the log says EADDRINUSE) is picked again, up to
    `bind_attempts` starts; a port the caller gave is its to free.
    """

    _kind: str  # error messages read "<kind> <directory>: <reason>"
    _endpoint: str  # what `_answers()` probes, for the timeout message
    _log_file: str
    _pid_file: str
    _ready_marker: bytes | None = None  # a line the log must hold too before a start counts as done

    def __init__(self, directory: str | Path, *, start_timeout: float, stop_timeout: float,
                 die_with_parent: bool) -> None:
        self.directory = Path(directory).resolve()
        self.start_timeout, self.stop_timeout, self.die_with_parent = start_timeout, stop_timeout, die_with_parent
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid: ProcessId | None = None
        self.extra_env: dict[str, str] = {}  # added to the child's environment (a devnet's owner mark)
        self._log_read = 0  # how far the (appended) log was scanned for a bind failure
        self._log_start = 0  # where this start's part of the log begins

    @property
    def log_path(self) -> Path:
        return self.directory / self._log_file

    @property
    def _pid_path(self) -> Path:
        return self.directory / self._pid_file

    @property
    def pid(self) -> int | None:
        return self._pid.pid if self._pid else None

    @property
    def _label(self) -> str:
        return f"{self._kind} {self.directory}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def _env(self) -> dict[str, str] | None:
        return None

    _port_attrs: tuple[str, ...] = ()  # attributes holding this service's ports
    _auto_ports: frozenset[str] = frozenset()  # those picked here, not given: re-picked if taken
    bind_attempts = 3

    def _ports(self) -> list[int]:
        return [getattr(self, name) for name in self._port_attrs]

    def _pick_ports(self, given: dict[str, int | None]) -> None:
        """Set each port attribute to its given value, or to a free port (remembered as re-pickable)."""
        for name, port in given.items():
            setattr(self, name, port or free_port())
        self._auto_ports = frozenset(name for name, port in given.items() if not port)

    def _prepare(self) -> None:
        pass

    def _answers(self) -> bool:
        raise NotImplementedError

    def _cleanup(self) -> None:
        self._pid_path.unlink(missing_ok=True)

    def running(self) -> bool:
        return self._pid is not None and self._pid.alive()

    def _recorded(self) -> ProcessId | None:
        try:
            pid, started = map(int, self._pid_path.read_text().split())
        except (OSError, ValueError):
            return None
        return ProcessId(pid, started)

    def start(self) -> Self:
        if self.running():
            return self
        previous = self._recorded()
        if previous is not None and previous.alive():
            raise ServiceError(self._label, f"already running as pid {previous.pid}")
        attempt = 1
        while True:
            try:
                return self._start_once()
            except PortTaken:
                # A picked port is only free until someone binds it: another test worker's
                # daemon or an outgoing connection can take it while this one starts.
                if attempt >= self.bind_attempts or not self._auto_ports:
                    raise
            attempt += 1
            self._pick_ports({name: None if name in self._auto_ports else getattr(self, name)
                              for name in self._port_attrs})

    def _start_once(self) -> Self:
        busy = [port for port in self._ports() if not port_is_free(port)]
        if busy:
            raise PortTaken(self._label, f"port(s) {busy} already in use")
        self.directory.mkdir(parents=True, exist_ok=True)
        self._prepare()
        self._log_read = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._log_start = self._log_read
        env = self._env()
        if self.extra_env:
            env = {**(os.environ if env is None else env), **self.extra_env}
        self._proc = spawn(self.command(), self.log_path, env=env, die_with_parent=self.die_with_parent)
        self._pid = ProcessId.of(self._proc.pid) if self._proc.poll() is None else None
        if self._pid is not None:
            self._pid_path.write_text(f"{self._pid.pid} {self._pid.started}\n")
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _bind_failed(self) -> bool:
        """Whether the log written since the last look (this start's part of it) says a port was taken."""
        overlap = max(map(len, BIND_FAILURES))  # a marker may straddle two looks
        start = max(0, self._log_read - overlap)
        try:
            with open(self.log_path, "rb") as log:
                log.seek(start)
                text = log.read(1 << 20)
        except OSError:
            return False
        self._log_read = max(self._log_read, start + len(text))
        return any(marker in text for marker in BIND_FAILURES)

    def _log_says_ready(self) -> bool:
        """Whether this start's part of the log holds `_ready_marker` (always, when there is none).

        A daemon may answer on its port a moment before it has finished starting (js-ipfs serves its
        API before it prints "Daemon is ready"), so a start waits for both."""
        if self._ready_marker is None:
            return True
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_start)
                return self._ready_marker in log.read(1 << 20)
        except OSError:
            return False

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            exited = self._proc is not None and self._proc.poll() is not None
            if self._bind_failed():
                raise PortTaken(self._label, f"a port of {self._ports()} was taken while it started",
                                self.log_path)
            if exited:
                raise ServiceError(self._label, f"exited with code {self._proc.returncode}", self.log_path)
            if self._answers() and self._log_says_ready():
                return
            if time.monotonic() > deadline:
                raise ServiceError(self._label, f"{self._endpoint} did not answer within {self.start_timeout:g} s",
                                   self.log_path)
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM, SIGKILL after `stop_timeout`; finds the process by pid file if this object did not start it."""
        target = self._pid or self._recorded()
        if target is not None:
            target.stop(self.stop_timeout, self._proc)
        self._proc, self._pid = None, None
        self._cleanup()

    def detach(self) -> None:
        """Forget the child handle (the process keeps running; `stop()` still finds it by pid file)."""
        if self._proc is not None:
            self._proc.returncode = 0  # suppress "still running" warnings; we no longer reap it
        self._proc = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _process_info(self) -> dict[str, Any]:
        return {"pid": self.pid, "started": self._pid.started if self._pid else None, "log": str(self.log_path)}

    def _adopt(self, info: dict[str, Any]) -> Self:
        """Take over the process `info` (from `info()`) names, if it is still that process."""
        if info.get("pid") and info.get("started"):
            pid = ProcessId(int(info["pid"]), int(info["started"]))
            self._pid = pid if pid.alive() else None
        return self
