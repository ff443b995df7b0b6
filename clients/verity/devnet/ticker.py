"""Mine an empty block every `interval` seconds so on-chain deadlines pass in real time.

anvil stays on auto-mine (interval mining breaks eth-ape deploys, see
docs/storage.md); an idle auto-mining chain never advances its clock, so this
ticker calls `evm_mine` on a timer. In-process it is a daemon thread; as a
separate process: `python -m verity.devnet.ticker RPC_URL INTERVAL`.
"""

from __future__ import annotations

import json
import sys
import threading
import urllib.request
from typing import Any


def rpc_call(url: str, method: str, params: list[Any] | None = None, timeout: float = 5.0) -> Any:
    """One JSON-RPC call with the standard library (no web3 import in the hot path)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []}).encode()
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as res:
        answer = json.loads(res.read())
    if "error" in answer:
        raise RuntimeError(f"{method}: {answer['error']}")
    return answer["result"]


class BlockTicker:
    """Calls `evm_mine` every `interval` seconds until `stop()`; counts blocks mined and errors."""

    def __init__(self, rpc_url: str, interval: float = 1.0) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.rpc_url, self.interval = rpc_url, float(interval)
        self.mined = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                rpc_call(self.rpc_url, "evm_mine", timeout=max(2.0, self.interval))
                self.mined += 1
            except Exception:  # noqa: BLE001 — a busy or restarting anvil must not kill the ticker
                self.errors += 1

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
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        sys.exit("usage: python -m verity.devnet.ticker RPC_URL INTERVAL_SECONDS")
    ticker = BlockTicker(args[0], float(args[1]))
    ticker._run()  # foreground until SIGTERM


if __name__ == "__main__":
    main()
