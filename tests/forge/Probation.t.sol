// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {ROLE_SOLVER} from "../../contracts/types/VerityTypes.sol";

/// @notice Issue 9 (fresh identities): a penalised node that re-registers under a new address used to start again
///         with full reputation. With probation a fresh identity starts at the floor and earns weight only by
///         completing work, so abandoning an identity never raises the weight its stake earns.
contract ProbationTest is Fixture {
    address internal proto = address(0x9807);

    function setUp() public override {
        super.setUp();
        registry.setProtocol(proto, true);
    }

    function _record(address node, uint256 completed, uint256 late, uint256 lost) internal {
        vm.startPrank(proto);
        for (uint256 i = 0; i < completed; ++i) {
            registry.unlockCompleted(node, 0, true, type(uint256).max);
        }
        for (uint256 i = 0; i < late; ++i) {
            registry.recordLate(node);
        }
        for (uint256 i = 0; i < lost; ++i) {
            registry.recordDispute(node, false);
        }
        vm.stopPrank();
    }

    function test_freshIdentity_startsAtTheFloor_succeeds() public {
        address fresh = _newNode(0, ROLE_SOLVER, NODE_STAKE);
        assertEq(lens.reputationFactorBps(fresh), registry.MIN_REPUTATION_BPS(), "fresh = floor");
        (uint256 w,) = lens.weightsOf(fresh);
        assertEq(w, (NODE_STAKE * registry.MIN_REPUTATION_BPS()) / 10_000, "weight on probation");
    }

    /// @dev The documented ramp: (c+1)/(c+10) after c completed tasks and nothing else.
    function test_completedWork_rampsWeight_succeeds() public {
        address node = _newNode(0, ROLE_SOLVER, NODE_STAKE);
        _record(node, 9, 0, 0);
        assertEq(lens.reputationFactorBps(node), 5263, "c = 9: 10/19");
        _record(node, 21, 0, 0);
        assertEq(lens.reputationFactorBps(node), 7750, "c = 30: 31/40");
        _record(node, 60, 0, 0);
        assertEq(lens.reputationFactorBps(node), 9100, "c = 90: 91/100");
        // the weight follows at the node's next heartbeat (the task path does not pay for tree updates)
        (uint256 before,) = lens.weightsOf(node);
        vm.prank(node);
        registry.heartbeat();
        (uint256 afterBeat,) = lens.weightsOf(node);
        assertEq(before, (NODE_STAKE * 1000) / 10_000, "still the probation weight");
        assertEq(afterBeat, (NODE_STAKE * 9100) / 10_000, "grown after the heartbeat");
    }

    /// @dev The attack: a node with any history (however penalised) abandons it for a fresh address with the same
    ///      stake. It never gains weight: every identity is at or above the floor, and a fresh one is at the floor.
    function testFuzz_abandoningAPenalisedIdentity_neverPays_succeeds(uint8 completed, uint8 late, uint8 lost) public {
        address old = _newNode(0, ROLE_SOLVER, NODE_STAKE);
        _record(old, bound(completed, 0, 40), bound(late, 0, 40), bound(lost, 0, 40));
        vm.prank(old);
        registry.heartbeat();
        address fresh = _newNode(1, ROLE_SOLVER, NODE_STAKE);
        (uint256 wOld,) = lens.weightsOf(old);
        (uint256 wFresh,) = lens.weightsOf(fresh);
        assertLe(wFresh, wOld, "the old identity weighs at least as much as a fresh one");
        assertLe(lens.reputationFactorBps(fresh), lens.reputationFactorBps(old), "factor");
    }
}
