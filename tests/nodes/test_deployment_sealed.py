"""Issue 9 (governance) on the real deployment path (`ape run deploy` on anvil): the deployer cannot make itself
a protocol contract afterwards, so it has no path to lock or slash a node's stake; the Timelock owns every Ownable
contract; only the devnet faucet mints."""
from __future__ import annotations

import pytest

from verity.chain import TxFailed
from verity.chain.governance import TIMELOCKED, apply_parameter

from node_builders import CLOCK_ALLOWANCE

pytestmark = pytest.mark.integration


def test_deployed_registry_is_sealed_and_the_owner_cannot_become_a_protocol(net):
    owner = net.client(0)  # the deployer (the Timelock owns the registry since the end of the deployment)
    r = owner.registry
    assert owner.call(r.functions.protocolsSealed())
    assert [owner.call(r.functions.isProtocol(c.address)) for c in (owner.jobs, owner.game, owner.panel)] == [True] * 3
    with pytest.raises(TxFailed, match="OwnableUnauthorizedAccount"):  # no longer the owner at all
        owner.transact(r.functions.setProtocol(owner.address, True))
    with pytest.raises(TxFailed, match="ProtocolsSealed"):  # and the seal holds through the Timelock too
        apply_parameter(owner, r, r.functions.setProtocol(owner.address, True))
    assert not owner.call(r.functions.isProtocol(owner.address))


def _abi_functions(contract) -> set[str]:
    return {item["name"] for item in contract.abi if item.get("type") == "function"}


def test_deployed_owners_are_the_timelock_and_the_deployer_cannot_set_parameters(net):
    """Issue 9 (a timelock on every owner setter): `ape run deploy` ends by handing every Ownable contract to the
    Timelock, after the wiring; the deployer's own setter calls revert, and a setter applies only through the
    Timelock's delay (the `net` fixture applied its devnet windows that way)."""
    owner = net.client(0)  # the deployer: the Timelock's admin, no contract's owner
    timelock = owner.contracts["Timelock"]
    ownable = {name: c for name, c in owner.contracts.items() if "owner" in _abi_functions(c)}
    assert sorted(ownable) == sorted(TIMELOCKED)
    for name, c in ownable.items():
        assert owner.call(c.functions.owner()) == timelock.address, name
    assert owner.call(timelock.functions.admin()) == owner.address
    assert owner.call(timelock.functions.registry()) == owner.registry.address
    unbonding = owner.call(owner.registry.functions.unbondingPeriod())
    assert owner.call(timelock.functions.delay()) == max(2 * 86400, unbonding + 86400) > unbonding

    direct = [owner.jobs.functions.setDefaultWindows(60, 10, 10), owner.jobs.functions.setAssignmentTimeout(7),
              owner.game.functions.setClockAllowance(30), owner.panel.functions.setWindows(20, 20),
              owner.registry.functions.setLivenessWindow(60), owner.registry.functions.setUnbondingPeriod(0),
              owner.escrow.functions.transferOwnership(owner.address)]
    for call in direct:
        with pytest.raises(TxFailed, match="OwnableUnauthorizedAccount"):
            owner.transact(call)
    # the fixture's devnet parameters, applied through the Timelock (queued, clock moved past the delay, executed)
    assert owner.call(owner.jobs.functions.assignmentTimeout()) == 5
    assert owner.call(owner.game.functions.clockAllowance()) == CLOCK_ALLOWANCE
    executed = timelock.events.CallExecuted.get_logs(from_block=owner.deployments.start_block)
    assert {e.args.target for e in executed} == {owner.jobs.address, owner.game.address, owner.panel.address}
    assert len(executed) == 4


def test_deployed_token_mints_only_through_the_devnet_faucet(net):
    """Issue 9 (minting only through a devnet-only faucet): the faucet is the token's fixed minter; the deployer
    cannot mint, anyone can drip (bounded per call)."""
    owner, stranger = net.client(0), net.client(7)
    faucet = owner.contracts["DevnetFaucet"]
    assert owner.call(owner.token.functions.minter()) == faucet.address
    with pytest.raises(TxFailed, match="NotMinter"):
        owner.transact(owner.token.functions.mint(owner.address, 1))
    before = stranger.call(stranger.token.functions.balanceOf(stranger.address))
    stranger.transact(stranger.contracts["DevnetFaucet"].functions.drip(stranger.address, 5 * 10**18))
    assert stranger.call(stranger.token.functions.balanceOf(stranger.address)) == before + 5 * 10**18
    max_drip = owner.call(faucet.functions.MAX_DRIP())
    with pytest.raises(TxFailed, match="DripTooLarge"):
        stranger.transact(stranger.contracts["DevnetFaucet"].functions.drip(stranger.address, max_drip + 1))
