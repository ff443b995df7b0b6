"""Starting a node while its chain RPC or IPFS API does not answer (issue 25, item 5).

Once running, a node rides out outages in its loop (node/loop.py). Before that, `verity node run` connects and
registers; a node restarted during a partition used to exit there ("no EVM node answers") and then missed the
deadlines of the tasks it held. Now those first steps are retried with the loop's backoff while the failure is an
unreachable endpoint (node/loop.transport_failure); anything else (a revert, a bad key, a wrong deployment) still
fails at once.

How long: a node that ran before (its state directory holds a snapshot) is restarting inside a network that
exists, and waits as its loop would (VERITY_MAX_OUTAGE; 0: as long as it takes). A first start gives up after
FIRST_START_PATIENCE_S: an endpoint that never answered is likelier a wrong URL or a devnet not started than an
outage, and the error says how to start one.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Callable, TypeVar

from verity.node.loop import SERVICE_NAMES, transport_failure

log = logging.getLogger("verity.node")

T = TypeVar("T")

FIRST_START_PATIENCE_S = 60.0
BACKOFF_START_S = 1.0
BACKOFF_CAP_S = 30.0


def startup_patience(state_dir: Path, max_outage: float) -> float | None:
    """Seconds to keep retrying the start (None: no limit): `max_outage` (0: none) for a node that ran before,
    FIRST_START_PATIENCE_S for a first start."""
    if (state_dir / "snapshot.json").exists():
        return max_outage or None
    return FIRST_START_PATIENCE_S


def until_reachable(step: Callable[[], T], what: str, *, patience: float | None, endpoints: dict | None = None,
                    sleep: Callable[[float], object] = time.sleep, clock: Callable[[], float] = time.monotonic) -> T:
    """`step()`, retried with backoff (1 s doubling to 30 s) while it fails for an unreachable endpoint, for at most
    `patience` seconds (None: no limit); the last failure is raised once that is spent. One WARNING line when the
    wait starts, one INFO line when it ends."""
    started, tries = clock(), 0
    while True:
        try:
            result = step()
        except Exception as exc:
            service = transport_failure(exc, endpoints)
            waited = clock() - started
            if service is None or (patience is not None and waited >= patience):
                raise
            if tries == 0:
                limit = "as long as it takes" if patience is None else f"up to {patience:g} s"
                log.warning("%s: %s unreachable (%s); retrying %s", what, SERVICE_NAMES[service], exc, limit)
            delay = min(BACKOFF_CAP_S, BACKOFF_START_S * 2 ** min(tries, 32))
            if patience is not None:
                delay = min(delay, patience - waited)
            tries += 1
            sleep(max(0.0, delay))
            continue
        if tries:
            log.info("%s: done after %.0f s of waiting (%d retries)", what, clock() - started, tries)
        return result
