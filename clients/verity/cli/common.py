"""Helpers shared by the CLI sub-apps: settings that follow the devnet, errors, logging."""
from __future__ import annotations

import json
import logging
import os
import sys
from datetime import datetime, timezone
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


# what every LogRecord has; anything else on a record came from the call's `extra=` (task_id, job_id, …)
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: {"ts", "level", "logger", "msg"}, "node" when named, the fields a call passed with
    `extra=` (task_id=…, job_id=…), and "exc" with the traceback when there is one (`verity node run --log-json`)."""

    def __init__(self, node: str = ""):
        super().__init__()
        self.node = node

    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.fromtimestamp(record.created, timezone.utc)
        out = {"ts": ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"), "level": record.levelname,
               "logger": record.name, "msg": record.getMessage()}
        if self.node:
            out["node"] = self.node
        out.update({k: v for k, v in vars(record).items() if k not in _RECORD_FIELDS and not k.startswith("_")})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.stack_info:
            out["exc"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def setup_logging(level: str, logfile: Path | None = None, name: str = "", json_lines: bool = False) -> None:
    """Log to stderr (rich) and, with `logfile`, to that file; `json_lines`: both as JSON objects, one per line."""
    if json_lines:
        err = logging.StreamHandler(sys.stderr)
        err.setFormatter(JsonFormatter(name))
        handlers: list[logging.Handler] = [err]
    else:
        handlers = [RichHandler(console=err_console, show_path=False, markup=False)]
    if logfile is not None:
        logfile.parent.mkdir(parents=True, exist_ok=True)
        fh = logging.FileHandler(logfile)
        fh.setFormatter(JsonFormatter(name) if json_lines else
                        logging.Formatter(f"%(asctime)s {name} %(levelname)s %(name)s: %(message)s"))
        handlers.append(fh)
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=handlers,
                        format=f"{name} %(message)s" if name else "%(message)s", force=True)
    for noisy in ("web3", "urllib3", "httpx", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


__all__ = ["console", "err_console", "settings", "fail", "setup_logging", "VerityError"]
