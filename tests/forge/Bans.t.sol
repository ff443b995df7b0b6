// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {TaskStatus} from "../../contracts/types/VerityTypes.sol";
import {NoEligibleNode} from "../../contracts/errors/JobRegistryErrors.sol";

/// @notice Issue 9 (the exclusion list rotates): a task remembered only its last 4 banned nodes, so with 5 or more
///         the oldest came back and was drawn (and fined) again, job after job. Now a ban is for good: a draw that
///         lands on a node banned from the task draws again.
contract BansTest is Fixture {
    uint256 internal constant NODES = 7;

    function setUp() public override {
        super.setUp();
        _addNodes(NODES);
        _postOnly(_params(1, 1, 1)); // one slot: every draw is one node
    }

    /// @dev Each drawn node declines (and is banned). Before the fix the 5th decliner rotated the 1st out of the ring
    ///      and it could be drawn again; now all seven are drawn exactly once, then nobody is left.
    function test_bannedNodes_neverComeBackAfterTheRingRotates_succeeds() public {
        address[] memory seen = new address[](NODES);
        for (uint256 i = 0; i < NODES; ++i) {
            _draw(1);
            address node = _replica(1, 0).node;
            for (uint256 j = 0; j < i; ++j) {
                assertTrue(seen[j] != node, "a banned node was drawn again");
            }
            seen[i] = node;
            vm.prank(node);
            jobs.decline(1, false, bytes32(0));
            assertTrue(views.isBanned(1, node), "banned");
        }
        assertEq(uint8(_status(1)), uint8(TaskStatus.Open), "still waiting for an eligible node");
        uint256 target = randomness.targetOf(views.getTask(1).drawRequest);
        vm.roll(target + 1);
        vm.expectRevert(abi.encodeWithSelector(NoEligibleNode.selector, 1));
        jobs.assign(1);
    }
}
