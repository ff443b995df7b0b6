"""Who owns a node's state directory: one running process, one account.

`<state dir>/nodes/<name>/node.lock` is held (fcntl.flock, released by the
kernel when the process dies, even on SIGKILL) for the life of `node run`, so a
second process on the same name refuses instead of double-sending. A second
lock, `<state dir>/accounts/<address>.lock`, stops two names from running the
same key. `<name>/account` records the account a name was first used with; a
different account under that name refuses before any transaction is sent.
"""
from __future__ import annotations

import fcntl
import os
from pathlib import Path

from verity.errors import VerityError


class NodeLocked(VerityError, RuntimeError):
    def __init__(self, what: str, path: Path, holder: str):
        super().__init__(f"{what} is already in use by a running node ({holder}; lock {path}); "
                         "stop that process first or use another --name / account")


class NameBound(VerityError, ValueError):
    def __init__(self, name: str, bound: str, address: str, path: Path):
        super().__init__(f"node name {name!r} belongs to account {bound} (recorded in {path}), not {address}; "
                         "use another --name for this account")


class ExclusiveLock:
    """A non-blocking exclusive flock on `path`, holding a line that names the holder."""

    def __init__(self, path: Path, what: str):
        self.path, self.what = Path(path), what
        self._fd: int | None = None

    def acquire(self, note: str) -> "ExclusiveLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown process"
            os.close(fd)
            raise NodeLocked(self.what, self.path, holder) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} {note}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def bind_account(state_dir: Path, name: str, address: str, legacy_address: str = "", *, record: bool = True) -> None:
    """Refuse if `name` was used with another account; record the account on first use.

    `legacy_address` is the address an older snapshot recorded (before the `account` file existed)."""
    path = Path(state_dir) / "account"
    bound = path.read_text().strip() if path.exists() else legacy_address
    if bound and bound.lower() != address.lower():
        raise NameBound(name, bound, address, path if path.exists() else Path(state_dir) / "snapshot.json")
    if record and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name("account.tmp")
        tmp.write_text(address + "\n")
        os.replace(tmp, path)


class StateDirClaim:
    """The two locks `node run` holds for its lifetime (see the module doc)."""

    def __init__(self, state_root: Path, state_dir: Path, name: str, address: str, on_acquired=None):
        self.node = ExclusiveLock(Path(state_dir) / "node.lock", f"node state dir {state_dir}")
        self.account = ExclusiveLock(Path(state_root) / "accounts" / f"{address.lower()}.lock", f"account {address}")
        self.name, self.on_acquired = name, on_acquired

    def __enter__(self) -> "StateDirClaim":
        self.node.acquire(f"node {self.name}")
        try:
            self.account.acquire(f"node {self.name}")
        except BaseException:
            self.node.release()
            raise
        if self.on_acquired is not None:
            self.on_acquired()
        return self

    def __exit__(self, *exc) -> None:
        self.account.release()
        self.node.release()


def node_names(state_dir: Path | None) -> dict[str, str]:
    """address -> node name, from the node state directories on this machine (`<state dir>/nodes/<name>/account`,
    written by `verity node run`); nodes run elsewhere have no known name."""
    out: dict[str, str] = {}
    root = Path(state_dir) / "nodes" if state_dir else None
    if root is None or not root.is_dir():
        return out
    for account in sorted(root.glob("*/account")):
        try:
            address = account.read_text().strip()
        except OSError:
            continue
        if address:
            out[address] = account.parent.name
    return out
