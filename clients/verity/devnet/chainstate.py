"""The devnet's chain across restarts: anvil's saved state, and whether `up` kept it.

With `persist=True` anvil runs with `--state <dir>/anvil/anvil-state.json`: it
loads the file at start and writes it on SIGTERM; while it runs, the block
ticker saves it every second with tmp + rename (`ticker.save_state`). After a
SIGKILL the last save (about a second old) is loaded, so the blocks mined
after it are lost, and so are historical states: reads pinned at a block
before the restart fail. A file that cannot be loaded is moved aside and a
NEW chain starts. `<dir>/anvil/chain.json` keeps the identity (chain id,
genesis hash; `verity.chain.identity`) of the chain last run there, so `up`
can tell, and say, whether it kept the chain.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from verity.chain.identity import identity_at, same_chain
from verity.devnet.anvil import Anvil
from verity.devnet.process import ServiceError, log_tail

IDENTITY_FILE = "chain.json"
_STATE_REJECTED = "for '--state"  # anvil's start-up error for a state file it cannot parse


def last_identity(anvil_dir: Path) -> dict[str, Any] | None:
    """The identity of the chain last started in `anvil_dir`, if any."""
    try:
        return json.loads((anvil_dir / IDENTITY_FILE).read_text())
    except (OSError, ValueError):
        return None


def _save_identity(anvil_dir: Path, identity: dict[str, Any]) -> None:
    tmp = anvil_dir / f".{IDENTITY_FILE}.tmp"
    tmp.write_text(json.dumps(identity) + "\n")
    os.replace(tmp, anvil_dir / IDENTITY_FILE)


def _set_aside(path: Path, why: str) -> Path:
    aside = path.with_name(f"{path.name}.{why}-{time.strftime('%Y%m%dT%H%M%S')}")
    os.replace(path, aside)
    return aside


def _state_error(log: Path) -> str | None:
    """anvil's own line when it refused the state file, else None (another failure)."""
    lines = [line for line in log_tail(log, 10).splitlines() if _STATE_REJECTED in line]
    return lines[-1].strip() if lines else None


def start_chain(chain: Anvil, *, new_chain: bool = False) -> dict[str, Any]:
    """Start `chain` (an `Anvil` not yet started) and say which chain it runs.

    Returns the devnet record's `chain` entry: `chain_id`, `genesis_hash`,
    `status` ("kept": the saved chain was restored; "new": a new chain, with
    `reason`), `state_file` and `block` (the head right after start).
    new_chain: move a saved state aside and start a new chain on purpose.
    """
    anvil_dir, state = chain.state_dir, chain.state_path
    previous = last_identity(anvil_dir)
    reason = None
    if not chain.persist:
        reason = "chain state is not persisted for this devnet"
    elif new_chain and state.exists():
        reason = f"asked for a new chain; the saved state was moved to {_set_aside(state, 'discarded')}"
    elif not state.exists():
        reason = (f"no saved chain state in {anvil_dir} (first start)" if previous is None else
                  f"anvil stopped before it saved its state ({state.name} is missing)")
    try:
        chain.start()
    except ServiceError:
        refused = _state_error(chain.log_path) if chain.persist and state.exists() else None
        if refused is None:
            raise
        reason = f"the saved state could not be loaded ({refused}); it was moved to {_set_aside(state, 'unreadable')}"
        chain.start()
    identity = identity_at(chain.rpc_url)
    if reason is None and previous is not None and not same_chain(previous, identity):
        reason = f"the saved state holds another chain than the last one run here ({previous['genesis_hash']})"
    anvil_dir.mkdir(parents=True, exist_ok=True)
    _save_identity(anvil_dir, identity)
    return {
        **identity,
        "status": "new" if reason else "kept",
        "reason": reason,
        "state_file": str(state) if chain.persist else None,
        "block": chain.block_number(),
    }
