"""verity.chain.governance on a real anvil (ape's): owner setters through the Timelock, as the deployment leaves
them (scripts/deploy.py hands every Ownable contract to it; System keeps them with the owner, so this module hands
them over itself). The contract rules themselves: tests/forge/Timelock.t.sol."""
from __future__ import annotations

import pytest

from verity.chain.client import ChainClient, TxFailed, devnet_key
from verity.chain.deployments import DeployedContract, Deployments
from verity.chain.governance import (ClockJumpRefused, ParameterChangeQueued, apply_parameter, apply_parameters,
                                     queue_change)

pytestmark = pytest.mark.integration


def _abi(instance) -> list[dict]:
    return [i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in instance.contract_type.abi]


@pytest.fixture(scope="module")
def governed(project, system, chain):
    """A Timelock owning every Ownable contract of `system`, and a web3 client of its admin (ape's account 0 is
    devnet account 0)."""
    timelock = system.owner.deploy(project.Timelock, system.registry)
    for c in (system.registry, system.escrow, system.jobs, system.panel, system.game):
        c.transferOwnership(timelock, sender=system.owner)
    named = {"VerityToken": system.token, "NodeRegistry": system.registry, "JobEscrow": system.escrow,
             "JobRegistry": system.jobs, "RefereePanel": system.panel, "DisputeGame": system.game,
             "Timelock": timelock}
    dep = Deployments(chain_id=chain.chain_id, deployer=system.owner.address,
                      contracts={n: DeployedContract(address=c.address, abi=_abi(c)) for n, c in named.items()})
    owner = ChainClient(chain.provider.uri, devnet_key(0), dep)
    assert owner.address == system.owner.address
    return owner


def test_apply_parameter_on_the_devnet_jumps_past_the_delay_and_executes_succeeds(governed, system):
    owner, timelock = governed, governed.contracts["Timelock"]
    before = owner.now()
    delay = owner.call(timelock.functions.delay())
    assert delay == 2 * 86400  # MIN_DELAY: the devnet's unbonding period (300 s) + MIN_MARGIN (1 day) is shorter
    with pytest.raises(TxFailed, match="OwnableUnauthorizedAccount"):
        owner.transact(owner.jobs.functions.setAssignmentTimeout(42))
    apply_parameter(owner, owner.jobs, owner.jobs.functions.setAssignmentTimeout(42))
    assert system.jobs.assignmentTimeout() == 42
    assert owner.now() >= before + delay


def test_apply_parameters_follow_a_raised_unbonding_period_succeeds(governed, system):
    """Raising the unbonding period first lengthens the delay of the changes queued with it; one call still
    applies them all."""
    owner = governed
    before = owner.now()
    apply_parameters(owner, [(owner.registry, owner.registry.functions.setUnbondingPeriod(5 * 86400)),
                             ("JobRegistry", owner.jobs.functions.setLateSlashBps(1234))])
    assert system.registry.unbondingPeriod() == 5 * 86400 and system.jobs.lateSlashBps() == 1234
    assert owner.now() >= before + 6 * 86400  # the second waited for the raised period + margin


def test_apply_parameter_refuses_a_clock_jump_under_registered_nodes_reverts(governed, system, nodes, accounts):
    owner = governed
    nodes.add(accounts[5:6])
    before = owner.now()
    with pytest.raises(ClockJumpRefused, match="1 node"):
        apply_parameter(owner, owner.game, owner.game.functions.setClockAllowance(99))
    assert owner.now() < before + 3600 and system.game.clockAllowance() != 99  # no jump, nothing applied


def test_apply_parameter_off_the_devnet_queues_and_reports_the_eta_succeeds(governed, system):
    """Elsewhere the clock cannot move: the change is queued and the error says from when running it again
    executes it (simulated by anvil_setChainId; chain 31337 is restored before ape acts again)."""
    owner = governed
    call = owner.jobs.functions.setAssignmentTimeout(77)
    owner.w3.provider.make_request("anvil_setChainId", [1])
    try:
        with pytest.raises(ParameterChangeQueued, match="executable from .* UTC") as exc:
            apply_parameter(owner, owner.jobs, call)
        (pending,) = exc.value.pending
        assert pending.ready_at >= owner.now() + 2 * 86400 - 5
        assert queue_change(owner, owner.jobs, call).id == pending.id  # run again: found queued, not queued twice
        owner.w3.provider.make_request("evm_increaseTime", [pending.ready_at - owner.now()])
        owner.w3.provider.make_request("evm_mine", [])
        apply_parameter(owner, owner.jobs, call)  # after the eta the same call executes
    finally:
        owner.w3.provider.make_request("anvil_setChainId", [31337])
    assert system.jobs.assignmentTimeout() == 77


def test_apply_parameter_bubbles_the_setters_error_reverts(governed, system):
    owner = governed
    with pytest.raises(TxFailed, match="ParameterOutOfRange"):
        apply_parameter(owner, owner.registry, owner.registry.functions.setLivenessWindow(0))
    assert system.registry.livenessWindow() > 0
