"""Mine an empty block every `interval` seconds so on-chain deadlines pass in real time.

anvil stays on auto-mine (interval mining breaks eth-ape deploys, see
docs/storage.md); an idle auto-mining chain never advances its clock, so this
ticker calls `evm_mine` on a timer. In-process it is a daemon thread; as a
separate process (what `verity devnet up` runs):

    python -m verity.devnet.ticker RPC_URL INTERVAL [--anvil PID:STARTED] [--save-state PATH]

--anvil: exit as soon as that anvil process is gone, so a ticker never
outlives its chain. --save-state: also write the chain's state to PATH once a
second, atomically (anvil's own `--state-interval` rewrites the file in place,
so a kill during a write leaves half a file).
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from verity.devnet.process import ProcessId

SAVE_EVERY = 1.0  # seconds between state saves
log = logging.getLogger(__name__)


def rpc_call(url: str, method: str, params: list[Any] | None = None, timeout: float = 5.0) -> Any:
    """One JSON-RPC call with the standard library (no web3 import in the hot path)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []}).encode()
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as res:
        answer = json.loads(res.read())
    if "error" in answer:
        raise RuntimeError(f"{method}: {answer['error']}")
    return answer["result"]


def save_state(rpc_url: str, path: Path) -> None:
    """anvil's state (`anvil_dumpState`, the JSON `--state` loads) to `path`: tmp, fsync, rename,
    so a kill at any moment leaves the previous complete file."""
    dump = rpc_call(rpc_url, "anvil_dumpState", timeout=30)
    data = gzip.decompress(bytes.fromhex(dump.removeprefix("0x")))
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class BlockTicker:
    """Calls `evm_mine` every `interval` seconds until `stop()`; counts blocks mined and errors.

    chain_process: stop when that (anvil) process is gone. state_path: save the
    chain's state there every `SAVE_EVERY` s (`save_state`)."""

    def __init__(self, rpc_url: str, interval: float = 1.0, chain_process: ProcessId | None = None,
                 state_path: Path | None = None) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.rpc_url, self.interval, self.chain_process = rpc_url, float(interval), chain_process
        self.state_path = state_path
        self.mined = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        saved = time.monotonic()
        while not self._stop.wait(self.interval):
            if self.chain_process is not None and not self.chain_process.alive():
                return  # anvil is gone: a restarted one gets its own ticker
            try:
                rpc_call(self.rpc_url, "evm_mine", timeout=max(2.0, self.interval))
                self.mined += 1
                if self.state_path is not None and time.monotonic() - saved >= SAVE_EVERY:
                    save_state(self.rpc_url, self.state_path)
                    saved = time.monotonic()
            except Exception as exc:  # noqa: BLE001 — a busy or restarting anvil must not kill the ticker
                self.errors += 1
                if self.errors % 100 == 1:
                    log.warning("block ticker: %s (%d errors so far)", exc, self.errors)

    def start(self) -> BlockTicker:
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=f"BlockTicker({self.rpc_url})", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + 5)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> BlockTicker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m verity.devnet.ticker", description=__doc__.splitlines()[0])
    parser.add_argument("rpc_url", help="anvil's JSON-RPC URL")
    parser.add_argument("interval", type=float, help="seconds between empty blocks")
    parser.add_argument("--anvil", metavar="PID:STARTED", help="exit when this process (pid, kernel start time) is gone")
    parser.add_argument("--save-state", type=Path, metavar="PATH", help="save the chain's state here every second")
    args = parser.parse_args(argv)
    chain = ProcessId(*map(int, args.anvil.split(":"))) if args.anvil else None
    BlockTicker(args.rpc_url, args.interval, chain, args.save_state)._run()  # foreground until SIGTERM or anvil exits


if __name__ == "__main__":
    main()
