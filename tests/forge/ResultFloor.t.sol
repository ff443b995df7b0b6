// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {VerificationFees} from "../../contracts/VerificationFees.sol";
import {INodeRegistry} from "../../contracts/interfaces/INodeRegistry.sol";
import {IJobViews} from "../../contracts/interfaces/IJobRegistry.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {PostJobParams, TaskStatus} from "../../contracts/types/VerityTypes.sol";
import {ResultTooEarly, InvalidJobParameter} from "../../contracts/errors/JobRegistryErrors.sol";
import {ResultPublic} from "../../contracts/errors/VerificationFeesErrors.sol";

/// @notice Issue 23, item 8: a fee check can be committed even against a solver that fabricates and submits at once.
///         A check is paid only if committed while no result of the task is public; in v2 a solver that never trained
///         submitted in the block after its draw, and every fee check (re-executing meanwhile) was refused with
///         ResultPublic: through real nodes, fee-paid verifiers lost the commit race by 1-2 s and, unsampled, never
///         challenged the fabricated result. The job's resultFloor (its declared work) keeps every result inside its
///         replica for that long after the assignment; an honest replica keeps at least half its window.
contract ResultFloorTest is Fixture {
    uint32 internal constant FLOOR = 40;
    uint256 internal constant FEE = 1e18;

    VerificationFees internal fees;

    function setUp() public override {
        super.setUp();
        _addNodes(6);
        fees = new VerificationFees(
            IERC20(address(token)), INodeRegistry(address(registry)), IJobViews(address(jobs)), 100
        );
        vm.prank(submitter);
        token.approve(address(fees), type(uint256).max);
        for (uint256 i = 0; i < nodes.length; ++i) {
            vm.prank(nodes[i]);
            fees.anchor(keccak256(abi.encode("chain head", nodes[i]))); // checks need an anchored key chain
        }
        vm.warp(block.timestamp + 100); // tasks are created after the anchor's epoch
    }

    function _floored(uint8 replication, uint32 floor) internal returns (uint256 taskId, uint256 assignedAt) {
        PostJobParams memory p = _params(1, 1, replication);
        p.resultFloor = floor;
        uint256 jobId = _post(p);
        vm.prank(submitter);
        fees.fund(jobId, 10 * FEE, FEE, 2, 10_000);
        taskId = views.taskOf(jobId, 0, 0);
        assignedAt = _replica(taskId, 0).deadline - views.getJob(jobId).executionWindow;
        assertEq(assignedAt, block.timestamp, "drawn in this block");
    }

    function _checker(uint256 taskId) internal view returns (address v) {
        for (uint256 i = 0; i < nodes.length; ++i) {
            v = nodes[i];
            if (v != _replica(taskId, 0).node && v != _replica(taskId, 1).node) return v;
        }
    }

    /// @notice The attack: submit the moment the slot is drawn. Refused until the floor; a check committed meanwhile
    ///         is blind and lands; once the (fabricated) result is public a copier's check is refused as before.
    function test_submitResult_fabricatorAtOnce_meetsABlindCheck_succeeds() public {
        (uint256 taskId, uint256 assignedAt) = _floored(1, FLOOR);
        address solver = _replica(taskId, 0).node;
        bytes32[] memory fake = _trace(INPUT, 4, "fabricated", 1);
        vm.expectRevert(abi.encodeWithSelector(ResultTooEarly.selector, taskId, uint8(0), assignedAt + FLOOR));
        _submit(taskId, solver, fake);
        vm.warp(assignedAt + FLOOR - 1);
        vm.expectRevert(abi.encodeWithSelector(ResultTooEarly.selector, taskId, uint8(0), assignedAt + FLOOR));
        _submit(taskId, solver, fake);
        address v = _checker(taskId);
        vm.prank(v);
        fees.commitCheck(taskId, keccak256(abi.encode(taskId, _honest(INPUT, 4)[4], bytes32("salt"), v)));
        vm.warp(assignedAt + FLOOR);
        _submit(taskId, solver, fake);
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Revealed), "submitted at the floor");
        vm.prank(nodes[0] == v ? nodes[1] : nodes[0]);
        vm.expectRevert(abi.encodeWithSelector(ResultPublic.selector, taskId, TaskStatus.Revealed));
        fees.commitCheck(taskId, keccak256("copied"));
    }

    /// @notice Replicated: a pair of fabricators can neither commit nor reveal in place of a commit before the floor,
    ///         each counted from its own assignment (a slot drawn again later waits from its own draw).
    function test_commitAndReveal_pairBeforeTheirFloors_reverts() public {
        (uint256 taskId, uint256 assignedAt) = _floored(2, FLOOR);
        address a = _replica(taskId, 0).node;
        bytes32[] memory fake = _trace(INPUT, 4, "fabricated", 1);
        vm.expectRevert(abi.encodeWithSelector(ResultTooEarly.selector, taskId, uint8(0), assignedAt + FLOOR));
        _commit(taskId, a, fake);
        vm.warp(assignedAt + 10);
        vm.prank(_replica(taskId, 1).node);
        jobs.decline(taskId, false, bytes32(0));
        _draw(taskId);
        uint256 again = _replica(taskId, 1).deadline - views.getJob(views.getTask(taskId).jobId).executionWindow;
        assertEq(again, assignedAt + 10, "slot 1 drawn again 10 s later");
        vm.warp(assignedAt + FLOOR);
        _commit(taskId, a, fake);
        address b = _replica(taskId, 1).node;
        vm.expectRevert(abi.encodeWithSelector(ResultTooEarly.selector, taskId, uint8(1), again + FLOOR));
        _reveal(taskId, b, fake);
        vm.warp(again + FLOOR);
        _reveal(taskId, b, fake);
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Revealed), "both revealed, each after its floor");
    }

    /// @notice An honest replica keeps at least half its window: the largest floor still lets it commit at its deadline.
    function test_commit_atTheDeadlineUnderTheLargestFloor_succeeds() public {
        uint32 half = uint32(jobs.defaultExecutionWindow() / 2);
        (uint256 taskId, uint256 assignedAt) = _floored(2, half);
        vm.warp(_replica(taskId, 0).deadline);
        _commit(taskId, _replica(taskId, 0).node, _honest(INPUT, 4));
        assertTrue(block.timestamp >= assignedAt + half, "committed after the floor");
    }

    function test_postJob_floorAboveHalfTheWindow_reverts() public {
        PostJobParams memory p = _params(1, 1, 1);
        p.resultFloor = uint32(jobs.defaultExecutionWindow() / 2 + 1);
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("resultFloor"), p.resultFloor));
        jobs.postJob(p);
        p.executionWindow = 600;
        p.resultFloor = 301;
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(InvalidJobParameter.selector, bytes32("resultFloor"), 301));
        jobs.postJob(p);
        p.resultFloor = 300;
        vm.prank(submitter);
        uint256 jobId = jobs.postJob(p);
        assertEq(views.getJob(jobId).resultFloor, 300, "stored");
        assertEq(views.getJob(jobId).executionWindow, 600, "window kept");
    }
}
