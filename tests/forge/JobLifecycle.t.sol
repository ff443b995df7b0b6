// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {IJobRegistry} from "../../contracts/interfaces/IJobRegistry.sol";
import {Job, JobStatus, TaskKind, TaskStatus} from "../../contracts/types/VerityTypes.sol";

/// @notice Whole jobs end to end: replicated, optimistic, with late replicas; tokens conserved across the escrow.
contract JobLifecycleTest is Fixture {
    function setUp() public override {
        super.setUp();
        _addNodes(5);
    }

    function _assertConserved() internal view {
        assertEq(_tokensHeld(), token.totalMinted(), "tokens conserved");
        assertEq(token.balanceOf(address(escrow)), escrow.totalEscrow(), "escrow solvent");
        assertEq(token.balanceOf(address(jobs)), 0, "the registry holds no tokens");
    }

    function test_lifecycle_replicated2x2_completes_succeeds() public {
        uint256 jobId = _post(_params(2, 2, 2));
        uint256 nodesHeld = _nodesHeld();
        _runRoundHonest(jobId, 0);
        Job memory job = views.getJob(jobId);
        assertEq(job.currentRound, 1, "round advanced");
        uint256 agg0 = views.taskOf(jobId, 0, 2);
        assertEq(uint8(views.getTask(agg0).kind), uint8(TaskKind.Aggregate), "aggregate");
        assertEq(job.roundInput, views.getTask(agg0).finalHash, "round input = aggregate final");
        assertEq(views.getTask(views.taskOf(jobId, 1, 0)).inputHash, job.roundInput, "round-1 task input");

        _runRoundHonest(jobId, 1);
        job = views.getJob(jobId);
        uint256 agg1 = views.taskOf(jobId, 1, 2);
        assertEq(uint8(job.status), uint8(JobStatus.Completed), "completed");
        assertEq(job.modelHash, views.getTask(agg1).finalHash, "model hash");
        assertEq(job.modelCid, views.getTask(agg1).resultCid, "model cid");
        assertEq(escrow.escrowOf(jobId), jobs.POSTER_BOND(), "all escrow paid out but the poster bond");

        for (uint256 i = 0; i < nodes.length; ++i) {
            assertEq(registry.getNode(nodes[i]).locked, 0, "all stake unlocked");
        }
        // Payments are pushed: the nodes' balances grew by exactly what the job paid (no node pays a bond here).
        assertEq(_nodesHeld() - nodesHeld, PAYMENT * 2 * 3 * 2, "6 tasks x 2 replicas paid");
        assertEq(jobs.taskCount(), 6, "tasks");
        _assertConserved();
    }

    function test_lifecycle_optimistic_completes_succeeds() public {
        uint256 jobId = _post(_params(2, 2, 1));
        uint256 nodesHeld = _nodesHeld();
        _runRoundHonest(jobId, 0);
        _runRoundHonest(jobId, 1);
        assertEq(uint8(views.getJob(jobId).status), uint8(JobStatus.Completed), "completed");
        assertEq(_nodesHeld() - nodesHeld, PAYMENT * 6, "6 payments");
        _assertConserved();
    }

    function test_lifecycle_lateCommitReplaced_completes_succeeds() public {
        uint256 jobId = _post(_params(1, 1, 2));
        uint256 taskId = views.taskOf(jobId, 0, 0);
        address late = _replica(taskId, 1).node;
        vm.warp(_replica(taskId, 1).deadline + 1);
        _heartbeatAll();
        jobs.reportLate(taskId, 0);
        jobs.reportLate(taskId, 1);
        _draw(taskId);
        assertTrue(_replica(taskId, 0).node != late && _replica(taskId, 1).node != late, "late node gone");
        bytes32[] memory h = _honest(INPUT, 4);
        _runReplicated(taskId, h, h);
        _finalizeAfterWindow(taskId);
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Accepted), "accepted after replacement");
        bytes32[] memory ha = _honest(keccak256(abi.encode(_one(h[4]))), 1);
        uint256 agg = views.taskOf(jobId, 0, 1);
        _draw(agg);
        _runReplicated(agg, ha, ha);
        _finalizeAfterWindow(agg);
        assertEq(uint8(views.getJob(jobId).status), uint8(JobStatus.Completed), "completed");
        assertEq(escrow.escrowOf(jobId), jobs.POSTER_BOND(), "replacements were paid");
        _assertConserved();
    }

    function test_lifecycle_lateRevealDegradesToOptimistic_succeeds() public {
        uint256 jobId = _post(_params(1, 1, 2));
        uint256 taskId = views.taskOf(jobId, 0, 0);
        address a = _replica(taskId, 0).node;
        address b = _replica(taskId, 1).node;
        bytes32[] memory h = _honest(INPUT, 4);
        _commit(taskId, a, h);
        _commit(taskId, b, _trace(INPUT, 4, "other", 2)); // a's reveal does not reveal b's result
        _reveal(taskId, a, h);
        vm.warp(_replica(taskId, 1).deadline + 1);
        vm.expectEmit(true, false, false, true, address(jobs));
        emit IJobRegistry.ChallengeWindowOpened(taskId, uint64(block.timestamp) + 30);
        jobs.reportLate(taskId, 1);
        assertEq(uint8(_status(taskId)), uint8(TaskStatus.Revealed), "waits out a challenge window");
        assertEq(jobs.claimOf(taskId).defender, a, "the revealed replica is the claim");
        assertEq(jobs.claimOf(taskId).coDefender, address(0), "alone");
        _recordBalances();
        _finalizeAfterWindow(taskId);
        assertEq(_paidSince(a), 0, "P10: paid only once the AGGREGATE is accepted");
        _heartbeatAll();
        uint256 agg = views.taskOf(jobId, 0, 1);
        bytes32[] memory ha = _honest(keccak256(abi.encode(_one(h[4]))), 1);
        _draw(agg);
        _runReplicated(agg, ha, ha);
        _recordBalances();
        _finalizeAfterWindow(agg);
        assertEq(uint8(views.getJob(jobId).status), uint8(JobStatus.Completed), "completed");
        assertEq(_paidBesides(a, agg), PAYMENT, "revealer paid");
        assertEq(_paidBesides(b, agg), 0, "late not paid");
        uint256 before = token.balanceOf(submitter);
        vm.prank(submitter);
        jobs.reclaimEscrow(jobId);
        assertEq(token.balanceOf(submitter) - before, PAYMENT + jobs.POSTER_BOND(), "unspent payment back with the bond");
        assertEq(escrow.escrowOf(jobId), 0, "nothing left");
        _assertConserved();
    }

    function test_lifecycle_optimisticSubmitLate_redrawn_succeeds() public {
        uint256 jobId = _post(_params(1, 1, 1));
        uint256 taskId = views.taskOf(jobId, 0, 0);
        address late = _replica(taskId, 0).node;
        vm.warp(_replica(taskId, 0).deadline + 1);
        _heartbeatAll();
        jobs.reportLate(taskId, 0);
        _draw(taskId);
        address fresh = _replica(taskId, 0).node;
        assertNotEq(fresh, late, "redrawn");
        _submit(taskId, fresh, _honest(INPUT, 4));
        _recordBalances();
        _finalizeAfterWindow(taskId);
        assertEq(_paidSince(fresh), 0, "P10: paid only once the AGGREGATE is accepted");
        uint256 agg = _acceptAggregate(jobId, 0);
        assertEq(_paidBesides(fresh, agg), PAYMENT, "paid");
        assertEq(_paidBesides(late, agg), 0, "late not paid");
        _assertConserved();
    }

    /// @dev Every node's balance together: what the nodes were paid over a span that nobody posts a bond in.
    function _nodesHeld() internal view returns (uint256 sum) {
        for (uint256 i = 0; i < nodes.length; ++i) {
            sum += token.balanceOf(nodes[i]);
        }
    }

    function _one(bytes32 x) internal pure returns (bytes32[] memory a) {
        a = new bytes32[](1);
        a[0] = x;
    }
}
