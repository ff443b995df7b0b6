// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {INodeRegistry} from "../../contracts/interfaces/INodeRegistry.sol";
import {ROLE_SOLVER} from "../../contracts/types/VerityTypes.sol";
import {NotProtocol} from "../../contracts/errors/CommonErrors.sol";
import {ProtocolsSealed} from "../../contracts/errors/NodeRegistryErrors.sol";
import {JobsAlreadySet} from "../../contracts/errors/JobEscrowErrors.sol";
import {DisputeGameAlreadySet} from "../../contracts/errors/JobRegistryErrors.sol";
import {GameAlreadySet} from "../../contracts/errors/RefereePanelErrors.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";

/// @notice Issue 9 (an owner who can take everything): the owner used to be able to register itself as a
///         "protocol" contract, then lock and slash any node's stake to itself, or wire in a fake dispute game.
///         The deployment seals the protocol set and every wiring setter is once-only, so after deployment the
///         owner has no path to stake or escrow. (The Fixture leaves the set unsealed so unit tests can act as a
///         protocol; scripts/deploy.py and tests/chain/chain_builders.py seal it, checked in tests/chain.)
contract GovernanceTest is Fixture {
    address internal victim;

    function setUp() public override {
        super.setUp();
        victim = _newNode(0, ROLE_SOLVER, NODE_STAKE);
        vm.expectEmit(false, false, false, true, address(registry));
        emit INodeRegistry.ProtocolsFixed();
        registry.sealProtocols(); // as scripts/deploy.py does after wiring
    }

    /// @dev The attack, after deployment: the owner tries to make itself a protocol and slash a node to itself.
    function test_owner_cannotBecomeProtocolAndSlashStake_reverts() public {
        assertTrue(registry.protocolsSealed(), "sealed");
        vm.expectRevert(ProtocolsSealed.selector);
        registry.setProtocol(address(this), true);
        vm.expectRevert(abi.encodeWithSelector(NotProtocol.selector, address(this)));
        registry.lock(victim, NODE_STAKE);
        vm.expectRevert(abi.encodeWithSelector(NotProtocol.selector, address(this)));
        registry.slash(victim, 1, address(this));
        assertEq(registry.getNode(victim).stake, NODE_STAKE, "stake untouched");
    }

    /// @dev Nor can it remove a real protocol contract (which would strand every live task's locked stake).
    function test_owner_cannotUnwireAProtocol_reverts() public {
        vm.expectRevert(ProtocolsSealed.selector);
        registry.setProtocol(address(jobs), false);
        assertTrue(registry.isProtocol(address(jobs)), "jobs still a protocol");
    }

    function test_seal_twiceOrByStranger_reverts() public {
        vm.expectRevert(ProtocolsSealed.selector);
        registry.sealProtocols();
        vm.prank(address(0xBAD));
        vm.expectRevert(abi.encodeWithSelector(Ownable.OwnableUnauthorizedAccount.selector, address(0xBAD)));
        registry.sealProtocols();
    }

    /// @dev A fake dispute game (which could credit the owner escrow and accept forged results) cannot be wired in.
    function test_owner_cannotRewireGameRegistryOrEscrow_reverts() public {
        address fake = address(0xFA4E);
        vm.expectRevert(abi.encodeWithSelector(DisputeGameAlreadySet.selector, address(game)));
        jobs.setDisputeGame(fake);
        vm.expectRevert(abi.encodeWithSelector(GameAlreadySet.selector, address(game)));
        panel.setGame(fake);
        vm.expectRevert(abi.encodeWithSelector(JobsAlreadySet.selector, address(jobs)));
        escrow.setJobs(fake);
    }
}
