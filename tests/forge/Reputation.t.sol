// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {PostJobParams} from "../../contracts/types/VerityTypes.sol";

/// @notice Issue 23, reputation that cannot be bought. In v2 a sybil serving an eligibility class of its own completed
///         its own jobs and left probation: reputation factor 10 % -> 91 %, so weight x9.1 in honest draws, for
///         0 VRT net (it pays itself). Now an accepted task counts toward reputation only if its node was drawn from
///         classes holding OPEN_CLASS_BPS of all solver weight, the job pays CREDITED_PAYMENT a task, and another
///         party posted it.
contract ReputationTest is Fixture {
    address internal sybilA;
    address internal sybilB;

    function setUp() public override {
        super.setUp();
        _addNodes(12); // the honest network: 16 GB each
        sybilA = _bigNode(0xA1); // 128 GB: a class nobody else serves
        sybilB = _bigNode(0xA2);
    }

    /// @dev Runs `jobs_` one-shard, one-round jobs posted by `poster` to the end (every node checks in first).
    function _runJobs(address poster, PostJobParams memory p, uint256 count) internal {
        for (uint256 j = 0; j < count; ++j) {
            _heartbeatAll();
            vm.prank(sybilA);
            registry.heartbeat();
            vm.prank(sybilB);
            registry.heartbeat();
            vm.prank(poster);
            uint256 jobId = jobs.postJob(p);
            _runRoundHonest(jobId, 0);
        }
    }

    function _fund(address who) internal {
        token.mint(who, FAUCET);
        vm.prank(who);
        token.approve(address(escrow), type(uint256).max);
    }

    /// @dev The attack of the issue: 45 self-posted jobs (90 tasks each sybil) that only the sybils can serve.
    ///      v2 measured: the sybils' factor 1,000 -> 9,100 bps (probation left, weight x9.1). Now it stays 1,000.
    function test_privateClassSelfJobs_buyNoReputation_succeeds() public {
        PostJobParams memory p = _params(1, 1, 2);
        p.minMemoryMb = 64_000; // only the sybils' 128 GB nodes
        _runJobs(submitter, p, 45);
        assertEq(lens.reputationOf(sybilA).tasksCompleted, 0, "v2: 90 self-served tasks counted");
        assertEq(lens.reputationFactorBps(sybilA), 1_000, "v2: 10 % -> 91 % (weight x9.1 in honest draws)");
        assertEq(lens.reputationFactorBps(sybilB), 1_000, "the other sybil too");
    }

    /// @dev Honest work drawn from the whole network and paid by another party counts as before.
    function test_openClassPaidWork_countsTowardReputation_succeeds() public {
        _runJobs(submitter, _params(1, 1, 2), 1);
        uint256 counted;
        for (uint256 i = 0; i < nodes.length; ++i) counted += lens.reputationOf(nodes[i]).tasksCompleted;
        counted += lens.reputationOf(sybilA).tasksCompleted + lens.reputationOf(sybilB).tasksCompleted;
        assertEq(counted, 4, "two tasks, two replicas each, all credited");
    }

    /// @dev A job paying under CREDITED_PAYMENT a task counts for nobody, in any class.
    function test_tinyPaymentWork_countsForNobody_succeeds() public {
        PostJobParams memory p = _params(1, 1, 2);
        p.paymentPerTask = jobs.CREDITED_PAYMENT() - 1;
        _runJobs(submitter, p, 1);
        for (uint256 i = 0; i < nodes.length; ++i) assertEq(lens.reputationOf(nodes[i]).tasksCompleted, 0, "tiny");
    }

    /// @dev The draw's open share is what the registry reports: the sybils' class holds 2 of 14 equal weights.
    function test_drawSolver_reportsTheClassShare_succeeds() public view {
        (address big, uint256 bigBps) = registry.drawSolver("s", 0, 64_000, 1, 0, 0, 1, new address[](0));
        assertTrue(big == sybilA || big == sybilB, "a sybil drawn");
        assertEq(bigBps, uint256(20_000) / 14, "2 of 14 equal weights");
        (, uint256 allBps) = registry.drawSolver("s", 0, 1_000, 1, 0, 0, 1, new address[](0));
        assertEq(allBps, 10_000, "every node");
    }

    /// @dev Review: the share once divided the class's weight as the epoch began by the live total, so sybils that
    ///      unbonded every identity but the drawn ones after the epoch began shrank the total alone. Five 1,000-VRT
    ///      sybils beside twelve honest nodes, three of them unbonding: 5/14 = 35.7 % (credited) before, 2/14 now.
    function test_unbondingSybils_doNotOpenTheirClass_succeeds() public {
        address[3] memory more = [_bigNode(0xA3), _bigNode(0xA4), _bigNode(0xA5)];
        for (uint256 i = 0; i < more.length; ++i) {
            uint256 all = registry.getNode(more[i]).stake;
            vm.prank(more[i]);
            registry.requestUnstake(all); // inside the epoch: the snapshot still holds their weight
        }
        (, uint256 bps) = registry.drawSolver("s", 0, 64_000, 1, 0, 0, 1, new address[](0));
        assertEq(bps, uint256(20_000) / 14, "2 live sybils of 14 live weights");
        assertTrue(bps < jobs.OPEN_CLASS_BPS(), "not open");
    }
}

/// @notice "Paid by another poster": a node's work on a job it posted itself does not count.
contract SelfPostedWorkTest is Fixture {
    function setUp() public override {
        super.setUp();
        _addNodes(2); // both drawn for every replication-2 task
    }

    function test_selfPostedJob_countsOnlyForTheOtherNode_succeeds() public {
        address poster = nodes[0];
        token.mint(poster, FAUCET);
        vm.prank(poster);
        token.approve(address(escrow), type(uint256).max);
        vm.prank(poster);
        uint256 jobId = jobs.postJob(_params(1, 1, 2));
        _runRoundHonest(jobId, 0);
        assertEq(lens.reputationOf(poster).tasksCompleted, 0, "its own job");
        assertEq(lens.reputationOf(nodes[1]).tasksCompleted, 2, "the other node's two tasks");
    }
}
