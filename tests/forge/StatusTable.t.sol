// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Test} from "./base/Test.sol";
import {StatusTable} from "../../contracts/lib/StatusTable.sol";
import {JobRegistryBase} from "../../contracts/JobRegistryBase.sol";
import {IJobEscrow} from "../../contracts/interfaces/IJobEscrow.sol";
import {INodeRegistry} from "../../contracts/interfaces/INodeRegistry.sol";
import {IVerityToken} from "../../contracts/interfaces/IVerityToken.sol";
import {IRandomness} from "../../contracts/interfaces/IRandomness.sol";
import {TaskStatus, ReplicaStatus} from "../../contracts/types/VerityTypes.sol";
import {IllegalStatusTransition} from "../../contracts/errors/JobRegistryErrors.sol";

/// @dev The registry's status setters on a bare storage of one task and one replica slot.
contract StatusHarness is JobRegistryBase {
    constructor() JobRegistryBase(IVerityToken(address(1)), INodeRegistry(address(1)), IJobEscrow(address(1)), IRandomness(address(1))) {}

    function setTask(uint8 from, uint8 to) external {
        _tasks[1].status = TaskStatus(from);
        _setTaskStatus(1, _tasks[1], TaskStatus(to));
    }

    function setReplica(uint8 from, uint8 to) external {
        _replicas[1][0].status = ReplicaStatus(from);
        _setReplicaStatus(1, _replicas[1][0], ReplicaStatus(to));
    }
}

/// @notice Issue 23, room to grow: task and replica statuses move only along one transition table each. The tables
///         are checked pair by pair against the lifecycle as docs/protocol-v2.md tells it, and the setters refuse
///         anything else.
contract StatusTableTest is Test {
    StatusHarness internal h;

    function setUp() public {
        h = new StatusHarness();
    }

    /// @dev The legal task moves, as (from, to) pairs of TaskStatus.
    function _taskMoves() internal pure returns (uint8[2][15] memory m) {
        (uint8 none, uint8 open, uint8 assigned, uint8 revealed, uint8 contested, uint8 accepted, uint8 cancelled) =
            (0, 1, 2, 3, 4, 5, 6);
        m = [
            [none, open], [open, open], [assigned, open], [revealed, open], [contested, open],
            [open, assigned],
            [assigned, revealed], [revealed, revealed], [contested, revealed],
            [assigned, contested],
            [revealed, accepted],
            [open, cancelled], [assigned, cancelled], [revealed, cancelled], [contested, cancelled]
        ];
    }

    /// @dev The legal replica moves, as (from, to) pairs of ReplicaStatus.
    function _replicaMoves() internal pure returns (uint8[2][11] memory m) {
        (uint8 none, uint8 assigned, uint8 committed, uint8 revealed, uint8 accepted, uint8 slashed, uint8 late,
            uint8 voided) = (0, 1, 2, 3, 4, 5, 6, 7);
        m = [
            [none, assigned],
            [assigned, committed], [assigned, revealed], [committed, revealed],
            [assigned, late], [committed, late], [assigned, voided], [committed, voided],
            [revealed, accepted], [revealed, slashed], [revealed, voided]
        ];
    }

    function test_taskTable_allowsExactlyTheLifecycle_succeeds() public pure {
        uint8[2][15] memory m = _taskMoves();
        for (uint8 from = 0; from < 7; ++from) {
            for (uint8 to = 0; to < 7; ++to) {
                bool listed = false;
                for (uint256 i = 0; i < m.length; ++i) listed = listed || (m[i][0] == from && m[i][1] == to);
                assertEq(StatusTable.allows(StatusTable.TASK, from, to), listed, "task move");
            }
        }
    }

    function test_replicaTable_allowsExactlyTheLifecycle_succeeds() public pure {
        uint8[2][11] memory m = _replicaMoves();
        for (uint8 from = 0; from < 8; ++from) {
            for (uint8 to = 0; to < 8; ++to) {
                bool listed = false;
                for (uint256 i = 0; i < m.length; ++i) listed = listed || (m[i][0] == from && m[i][1] == to);
                assertEq(StatusTable.allows(StatusTable.REPLICA, from, to), listed, "replica move");
            }
        }
    }

    function test_setTaskStatus_legalMove_succeeds() public {
        h.setTask(uint8(TaskStatus.Revealed), uint8(TaskStatus.Accepted));
    }

    function test_setTaskStatus_acceptedReopened_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(IllegalStatusTransition.selector, 1, false, 5, 1));
        h.setTask(uint8(TaskStatus.Accepted), uint8(TaskStatus.Open));
    }

    function test_setReplicaStatus_slashedThenAccepted_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(IllegalStatusTransition.selector, 1, true, 5, 4));
        h.setReplica(uint8(ReplicaStatus.Slashed), uint8(ReplicaStatus.Accepted));
    }

    function test_setReplicaStatus_lateThenCommitted_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(IllegalStatusTransition.selector, 1, true, 6, 2));
        h.setReplica(uint8(ReplicaStatus.Late), uint8(ReplicaStatus.Committed));
    }
}
