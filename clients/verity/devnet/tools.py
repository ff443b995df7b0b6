"""Where the devnet's executables are: the repo's pinned npm toolchain first, then PATH."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from verity.devnet.process import ServiceError

REPO_ROOT = Path(__file__).resolve().parents[3]
NODE_BIN = REPO_ROOT / "anvil" / "node_modules" / ".bin"
_NATIVE_ANVIL = REPO_ROOT / "anvil" / "node_modules" / "@foundry-rs" / "anvil-linux-amd64" / "bin" / "anvil"


def _find(env_var: str, candidates: list[Path], name: str) -> str:
    if os.environ.get(env_var):
        return os.environ[env_var]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    found = shutil.which(name)
    if found:
        return found
    raise ServiceError(name, f"executable not found (set {env_var}, or run `make setup` to install anvil/node_modules)")


def anvil_bin() -> str:
    """The native anvil binary (not the npm node wrapper, so signals reach anvil itself)."""
    return _find("VERITY_ANVIL_BIN", [_NATIVE_ANVIL, NODE_BIN / "anvil"], "anvil")


def jsipfs_bin() -> str:
    return _find("VERITY_JSIPFS_BIN", [NODE_BIN / "jsipfs"], "jsipfs")


def tool_env() -> dict[str, str]:
    """The environment for child processes: the repo's node_modules/.bin first on PATH."""
    env = dict(os.environ)
    env["PATH"] = f"{NODE_BIN}{os.pathsep}{env.get('PATH', '')}"
    return env
