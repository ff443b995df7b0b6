"""Private key files: a 32-byte hex secret in a file only its owner can read.

Account keys (`--key-file`) are read with `read_key_file`; a node's sampling key
(verity.node.sampling) is created with `create_key_file` and read the same way.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path

from verity.errors import VerityError


def read_key_file(path: Path) -> str:
    """A hex private key from a file only its owner can read; the key itself is never printed."""
    try:
        mode = path.stat().st_mode
        text = path.read_text().strip()
    except OSError as exc:
        raise VerityError(f"cannot read key file {path}: {exc.strerror}") from None
    if mode & 0o077:
        raise VerityError(f"key file {path} is readable by others (mode {oct(mode & 0o777)}); chmod 600 it")
    key = text.removeprefix("0x")
    if len(key) != 64 or any(ch not in "0123456789abcdefABCDEF" for ch in key):
        raise VerityError(f"key file {path} does not hold a 32-byte hex private key")
    return "0x" + key


def create_key_file(path: Path) -> None:
    """A fresh random 32-byte hex key at `path`, mode 0600 from its creation, written atomically (a crash never
    leaves half a key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
