"""Issue 9 (governance) on the real deployment path (`ape run deploy` on anvil): the deployer cannot make itself
a protocol contract afterwards, so it has no path to lock or slash a node's stake."""
from __future__ import annotations

import pytest

from verity.chain import TxFailed

pytestmark = pytest.mark.integration


def test_deployed_registry_is_sealed_and_the_owner_cannot_become_a_protocol(net):
    owner = net.client(0)  # the deployer and owner
    r = owner.registry
    assert owner.call(r.functions.protocolsSealed())
    assert [owner.call(r.functions.isProtocol(c.address)) for c in (owner.jobs, owner.game, owner.panel)] == [True] * 3
    with pytest.raises(TxFailed, match="ProtocolsSealed"):
        owner.transact(r.functions.setProtocol(owner.address, True))
    assert not owner.call(r.functions.isProtocol(owner.address))
