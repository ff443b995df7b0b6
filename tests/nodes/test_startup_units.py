"""node/startup.py: `verity node run` waits for unreachable endpoints while it connects and registers, without
hiding any other failure (issue 25 item 5: a node restarted during a partition exited and missed its deadlines)."""
from __future__ import annotations

import pytest

from verity.chain.client import ChainUnreachable
from verity.errors import VerityError
from verity.node.startup import FIRST_START_PATIENCE_S, startup_patience, until_reachable
from verity.storage.errors import NodeUnreachable


class FakeClock:
    def __init__(self) -> None:
        self.now, self.slept = 0.0, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def failing(times: int, exc: BaseException, result="connected"):
    calls = []

    def step():
        calls.append(1)
        if len(calls) <= times:
            raise exc
        return result
    return step, calls


def test_until_reachable_partitioned_chain_retries_with_backoff_then_connects_succeeds(caplog):
    clock = FakeClock()
    step, calls = failing(4, ChainUnreachable("http://10.77.1.1:18545"))
    with caplog.at_level("INFO", logger="verity.node"):
        assert until_reachable(step, "connecting", patience=None, sleep=clock.sleep, clock=clock) == "connected"
    assert len(calls) == 5 and clock.slept == [1.0, 2.0, 4.0, 8.0]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "chain RPC unreachable" in warnings[0] and "as long as it takes" in warnings[0]
    assert any("done after 15 s of waiting (4 retries)" in r.getMessage() for r in caplog.records)


def test_until_reachable_backoff_capped_at_30_s_succeeds():
    clock = FakeClock()
    step, _ = failing(8, NodeUnreachable("/ip4/127.0.0.1/tcp/5001", "refused"))
    until_reachable(step, "registering", patience=None, sleep=clock.sleep, clock=clock)
    assert clock.slept == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_until_reachable_patience_spent_raises_the_last_failure_fails():
    clock = FakeClock()
    step, calls = failing(100, ChainUnreachable("http://127.0.0.1:8545"))
    with pytest.raises(ChainUnreachable, match="no EVM node answers"):
        until_reachable(step, "connecting", patience=10.0, sleep=clock.sleep, clock=clock)
    assert clock.now == 10.0 and clock.slept == [1.0, 2.0, 4.0, 3.0] and len(calls) == 5


def test_until_reachable_other_failure_raises_at_once_fails():
    clock = FakeClock()
    step, calls = failing(1, VerityError("no deployment recorded for chain 31337"))
    with pytest.raises(VerityError, match="no deployment"):
        until_reachable(step, "connecting", patience=None, sleep=clock.sleep, clock=clock)
    assert len(calls) == 1 and clock.slept == []


def test_startup_patience_restart_rides_out_first_start_gives_up_succeeds(tmp_path):
    assert startup_patience(tmp_path, 0.0) == FIRST_START_PATIENCE_S  # never ran: likelier a wrong URL
    (tmp_path / "snapshot.json").write_text("{}")
    assert startup_patience(tmp_path, 0.0) is None  # ran before: as long as its loop would (VERITY_MAX_OUTAGE 0)
    assert startup_patience(tmp_path, 300.0) == 300.0
