"""Helpers shared by the CLI sub-apps: settings that follow the devnet, errors, logging."""
from __future__ import annotations

import logging
import os
from pathlib import Path

import typer
from rich.console import Console
from rich.logging import RichHandler

from verity.errors import VerityError
from verity.settings import Settings

console = Console()
err_console = Console(stderr=True)


def settings() -> Settings:
    """Settings from VERITY_* variables; where a variable is unset and a devnet
    is recorded in the devnet dir, its service addresses are used."""
    s = Settings()
    from verity.devnet import services

    record = services.load(s.devnet_dir) or {}
    updates = {}
    if "VERITY_RPC_URL" not in os.environ and record.get("rpc_url"):
        updates["rpc_url"] = record["rpc_url"]
    if "VERITY_IPFS_API" not in os.environ and record.get("ipfs_api"):
        updates["ipfs_api"] = record["ipfs_api"]
    return s.model_copy(update=updates)


def fail(exc: BaseException) -> None:
    err_console.print(f"[red]error:[/red] {exc}")
    raise typer.Exit(1)


def setup_logging(level: str, logfile: Path | None = None, name: str = "") -> None:
    handlers: list[logging.Handler] = [RichHandler(console=err_console, show_path=False, markup=False)]
    if logfile is not None:
        logfile.parent.mkdir(parents=True, exist_ok=True)
        fh = logging.FileHandler(logfile)
        fh.setFormatter(logging.Formatter(f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s"))
        handlers.append(fh)
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=handlers,
                        format=f"{name} %(message)s" if name else "%(message)s", force=True)
    for noisy in ("web3", "urllib3", "httpx", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


__all__ = ["console", "err_console", "settings", "fail", "setup_logging", "VerityError"]
