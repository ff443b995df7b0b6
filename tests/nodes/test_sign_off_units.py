"""node/app.py's sign_off: a node stopping on purpose takes itself out of draws; a failure never fails the stop."""
from __future__ import annotations

import logging
from types import SimpleNamespace

from verity.node.app import sign_off

ME = "0x" + "ab" * 20


class _Registry:
    class functions:  # noqa: N801 — web3's shape
        @staticmethod
        def evictOffline(node):  # noqa: N802
            return ("evictOffline", node)


def _ctx(fail: Exception | None = None):
    sent = []

    def transact(fn):
        if fail is not None:
            raise fail
        sent.append(fn)
        return {"status": 1}
    return SimpleNamespace(me=ME, chain=SimpleNamespace(registry=_Registry, transact=transact)), sent


def test_sign_off_evicts_the_node_itself(caplog):
    ctx, sent = _ctx()
    with caplog.at_level(logging.INFO, logger="verity.node"):
        assert sign_off(ctx) is True
    assert sent == [("evictOffline", ME)]
    assert "signed off: not drawn until the node runs again" in caplog.text


def test_sign_off_that_fails_is_a_warning_not_a_failed_stop(caplog):
    ctx, sent = _ctx(ConnectionError("chain RPC gone"))
    with caplog.at_level(logging.INFO, logger="verity.node"):
        assert sign_off(ctx) is False
    assert sent == []
    assert "could not sign off (ConnectionError: chain RPC gone)" in caplog.text
