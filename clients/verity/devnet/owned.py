"""Processes a devnet dir owns, found without its record.

Every child `services.up` starts (anvil, the block ticker, js-ipfs and what
they spawn) inherits `VERITY_DEVNET_OWNER=<dir>`, so `down` finds and stops
any of them that `services.json` lost track of: a ticker left by an older
`up`, a service started by an `up` that was killed before it saved the record.
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from verity.devnet.process import ProcessId, ServiceError

OWNER_VAR = "VERITY_DEVNET_OWNER"


def owner_env(directory: Path) -> dict[str, str]:
    return {OWNER_VAR: str(Path(directory).resolve())}


def owned_pids(directory: Path) -> Iterator[int]:
    """Live processes of this user whose environment marks them as `directory`'s."""
    needle = f"{OWNER_VAR}={Path(directory).resolve()}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or another user's
            continue
        if needle in environ.split(b"\0"):
            yield int(entry.name)


def stop_owned(directory: Path, grace: float = 5.0) -> list[int]:
    """SIGTERM (then SIGKILL) every process `directory` owns; the pids stopped."""
    stopped = []
    for pid in list(owned_pids(directory)):
        try:
            process = ProcessId.of(pid)
        except ServiceError:  # exited meanwhile
            continue
        process.stop(grace)
        stopped.append(pid)
    return stopped
