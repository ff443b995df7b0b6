// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {JobRegistryBase} from "../../contracts/JobRegistryBase.sol";
import {IJobRegistry} from "../../contracts/interfaces/IJobRegistry.sol";
import {IJobEscrow} from "../../contracts/interfaces/IJobEscrow.sol";
import {Job, JobStatus, TaskStatus, ReplicaStatus} from "../../contracts/types/VerityTypes.sol";
import {NoSuchInput, NotReplica, JobNotActive, TaskNotFound} from "../../contracts/errors/JobRegistryErrors.sol";

/// @notice P10: a result is accepted only once its bundle is available. A TRAIN task's payees are paid when the task
///         that consumes its result (its round's AGGREGATE; for an AGGREGATE, the next round's TRAIN tasks) is
///         accepted, and their payment is burned when every accepted holder of that consumer reported the bundle
///         unavailable. The attacks: a replica that withholds its bundle must not be paid for it; a single lying
///         consumer must not burn an honest node's pay; a report must not outlive the slot holder that made it.
contract AvailabilityTest is Fixture {
    /// @dev Each node's token balance right after setUp. Payments are pushed (JobEscrow.pay transfers at once), and
    ///      no node here posts a bond or moves stake, so a node's balance grows only by what it is paid: its growth
    ///      since setUp is everything the job paid it so far (what its escrow credit read when payments were pulled).
    mapping(address => uint256) internal heldAtStart;

    function setUp() public override {
        super.setUp();
        _addNodes(6);
        for (uint256 i = 0; i < nodes.length; ++i) {
            heldAtStart[nodes[i]] = token.balanceOf(nodes[i]);
        }
    }

    // ---------------------------------------------------------------- helpers

    function _assertConserved() internal view {
        assertEq(_tokensHeld(), token.totalMinted(), "tokens conserved");
        assertEq(token.balanceOf(address(escrow)), escrow.totalEscrow(), "escrow books");
        assertEq(token.balanceOf(address(jobs)), 0, "the registry holds no tokens");
    }

    /// @dev Draws and runs one TRAIN task honestly from its input, then accepts it after its window.
    function _acceptTrain(uint256 taskId, uint8 replication) internal {
        _drawIfOpen(taskId);
        bytes32[] memory h = _honest(views.getTask(taskId).inputHash, 4);
        if (replication == 1) _submit(taskId, _replica(taskId, 0).node, h);
        else _runReplicated(taskId, h, h);
        _finalizeAfterWindow(taskId);
    }

    /// @dev Every shard task of `round`, drawn, run and accepted one after the other.
    function _acceptShards(uint256 jobId, uint32 round) internal {
        Job memory job = views.getJob(jobId);
        for (uint32 i = 0; i < job.shards; ++i) {
            _acceptTrain(views.taskOf(jobId, round, i), job.replication);
        }
    }

    /// @dev The holder of `slot` reports input `index` of `taskId` unavailable, checking the event.
    function _report(uint256 taskId, uint8 slot, uint32 index) internal {
        address node = _replica(taskId, slot).node;
        vm.expectEmit(true, true, false, true, address(jobs));
        emit JobRegistryBase.InputUnavailable(taskId, node, slot, index);
        vm.prank(node);
        jobs.reportUnavailable(taskId, index);
    }

    /// @dev Runs a drawn consumer task honestly (n = 1 for an AGGREGATE, 4 for a TRAIN task) up to Revealed and
    ///      warps past its window: the caller's next call may be `finalize` (vm.expectEmit binds to the next call).
    function _runToFinalizable(uint256 taskId, uint8 replication, uint256 n) internal {
        bytes32[] memory h = _honest(views.getTask(taskId).inputHash, n);
        if (replication == 1) _submit(taskId, _replica(taskId, 0).node, h);
        else _runReplicated(taskId, h, h);
        (, uint64 end) = views.finalizable(taskId);
        vm.warp(uint256(end) + 1);
    }

    /// @dev _runToFinalizable, then accepts the task.
    function _runConsumer(uint256 taskId, uint8 replication, uint256 n) internal {
        _runToFinalizable(taskId, replication, n);
        jobs.finalize(taskId);
    }

    /// @dev PAYMENT for every Accepted slot `node` holds in the tasks of `paid`: what it must have been paid when
    ///      exactly those tasks were paid (a node may hold slots of several tasks; the tally counts each).
    function _owed(address node, uint256[] memory paid, uint8 replication) internal view returns (uint256 sum) {
        for (uint256 i = 0; i < paid.length; ++i) {
            for (uint8 s = 0; s < replication; ++s) {
                ReplicaStatus st = _replica(paid[i], s).status;
                if (_replica(paid[i], s).node == node && st == ReplicaStatus.Accepted) sum += PAYMENT;
            }
        }
    }

    /// @dev What `node` was paid since setUp (see heldAtStart).
    function _paid(address node) internal view returns (uint256) {
        return token.balanceOf(node) - heldAtStart[node];
    }

    /// @dev What every node was paid since setUp, together.
    function _paidToNodes() internal view returns (uint256 sum) {
        for (uint256 i = 0; i < nodes.length; ++i) {
            sum += _paid(nodes[i]);
        }
    }

    /// @dev Every node was paid exactly what the tasks of `paid` owe it.
    function _assertPaid(uint256[] memory paid, uint8 replication, string memory why) internal view {
        for (uint256 i = 0; i < nodes.length; ++i) {
            assertEq(_paid(nodes[i]), _owed(nodes[i], paid, replication), why);
        }
    }

    function _ids(uint256 a) internal pure returns (uint256[] memory l) {
        l = new uint256[](1);
        l[0] = a;
    }

    function _ids(uint256 a, uint256 b) internal pure returns (uint256[] memory l) {
        l = new uint256[](2);
        (l[0], l[1]) = (a, b);
    }

    function _ids(uint256 a, uint256 b, uint256 c) internal pure returns (uint256[] memory l) {
        l = new uint256[](3);
        (l[0], l[1], l[2]) = (a, b, c);
    }

    function _ids(uint256 a, uint256 b, uint256 c, uint256 d) internal pure returns (uint256[] memory l) {
        l = new uint256[](4);
        (l[0], l[1], l[2], l[3]) = (a, b, c, d);
    }

    function _ids(uint256 a, uint256 b, uint256 c, uint256 d, uint256 e) internal pure returns (uint256[] memory l) {
        l = new uint256[](5);
        (l[0], l[1], l[2], l[3], l[4]) = (a, b, c, d, e);
    }

    function _outsider(uint256 taskId) internal view returns (address) {
        for (uint256 i = 0; i < nodes.length; ++i) {
            if (nodes[i] != _replica(taskId, 0).node && nodes[i] != _replica(taskId, 1).node) return nodes[i];
        }
        revert("no outsider");
    }

    // ---------------------------------------------------------------- attacks: withholding, lying

    /// @dev Shard 1's replicas agree on a result and get it accepted but never publish the bundle. Both AGGREGATE
    ///      replicas recompute it and say so before committing: shard 1's pay is burned (nobody gains it), its
    ///      replicas' stake is only unlocked (withholding is not provably fraud), shard 0 and the AGGREGATE are paid,
    ///      and the submitter reclaims what is left.
    function test_reportUnavailable_withholdingReplicas_paymentBurned_succeeds() public {
        uint256 jobId = _post(_params(2, 1, 2));
        uint256 s0 = views.taskOf(jobId, 0, 0);
        uint256 s1 = views.taskOf(jobId, 0, 1);
        address w0 = _replica(s1, 0).node;
        address w1 = _replica(s1, 1).node;
        _acceptShards(jobId, 0);
        uint256 agg = views.taskOf(jobId, 0, 2);
        _draw(agg);
        _report(agg, 0, 1);
        _report(agg, 1, 1);
        _runToFinalizable(agg, 2, 1);
        uint256 supply = token.totalSupply();
        vm.expectEmit(true, true, false, true, address(jobs));
        emit JobRegistryBase.PaymentForfeited(s1, w0, PAYMENT);
        vm.expectEmit(true, false, false, true, address(escrow));
        emit IJobEscrow.EscrowBurned(jobId, PAYMENT);
        vm.expectEmit(true, true, false, true, address(jobs));
        emit JobRegistryBase.PaymentForfeited(s1, w1, PAYMENT);
        vm.expectEmit(true, false, false, true, address(escrow));
        emit IJobEscrow.EscrowBurned(jobId, PAYMENT);
        jobs.finalize(agg);

        assertEq(uint8(views.getJob(jobId).status), uint8(JobStatus.Completed), "completed");
        _assertPaid(_ids(s0, agg), 2, "shard 0 and the AGGREGATE paid, shard 1 not");
        assertEq(supply - token.totalSupply(), 2 * PAYMENT, "shard 1's two payments burned");
        for (uint8 s = 0; s < 2; ++s) {
            address w = _replica(s1, s).node;
            assertEq(uint8(_replica(s1, s).status), uint8(ReplicaStatus.Accepted), "its result still stands");
            assertEq(registry.getNode(w).stake, NODE_STAKE, "withholder's stake not slashed");
            assertEq(registry.getNode(w).locked, 0, "withholder's stake unlocked");
        }
        _assertConserved();
        uint256 rest = escrow.escrowOf(jobId);
        assertEq(rest, jobs.POSTER_BOND(), "6 payments escrowed: 2 paid, 2 burned, 2 to the AGGREGATE");
        uint256 before = token.balanceOf(submitter);
        vm.prank(submitter);
        jobs.reclaimEscrow(jobId);
        assertEq(token.balanceOf(submitter) - before, rest, "the rest back to the submitter");
        assertEq(escrow.escrowOf(jobId), 0, "nothing left");
        _assertConserved();
    }

    /// @dev One AGGREGATE replica lies that shard 1 was unavailable; the other fetched and checked it and says
    ///      nothing. The verdict is the AND over the accepted holders: shard 1 is paid, nothing burned.
    function test_reportUnavailable_singleLiar_cannotBurnHonestPay_succeeds() public {
        uint256 jobId = _post(_params(2, 1, 2));
        uint256 s0 = views.taskOf(jobId, 0, 0);
        uint256 s1 = views.taskOf(jobId, 0, 1);
        _acceptShards(jobId, 0);
        uint256 agg = views.taskOf(jobId, 0, 2);
        _draw(agg);
        _report(agg, 0, 1);
        _report(agg, 0, 0); // the liar flags every input
        uint256 supply = token.totalSupply();
        uint256 burned = token.totalBurned();
        _runConsumer(agg, 2, 1);
        _assertPaid(_ids(s0, s1, agg), 2, "every shard paid");
        assertEq(token.totalSupply(), supply, "nothing burned");
        assertEq(token.totalBurned(), burned, "nothing burned (counter)");
        assertEq(escrow.escrowOf(jobId), jobs.POSTER_BOND(), "every payment went out");
        _assertConserved();
    }

    /// @dev Replication 1 (optimistic): the one drawn AGGREGATE solver's report decides alone, so it burns the
    ///      shard's pay. Accepted residual: for r = 1 one drawn consumer decides, as it decides the AGGREGATE's
    ///      result itself; the burn benefits nobody (not the reporter, not the submitter), so lying costs the liar
    ///      its chance to be paid for nothing and gains it nothing.
    function test_reportUnavailable_optimisticSingleConsumer_burnsShardPay_succeeds() public {
        uint256 jobId = _post(_params(2, 1, 1));
        uint256 s0 = views.taskOf(jobId, 0, 0);
        uint256 s1 = views.taskOf(jobId, 0, 1);
        address solver1 = _replica(s1, 0).node;
        _acceptShards(jobId, 0);
        uint256 agg = views.taskOf(jobId, 0, 2);
        _draw(agg);
        _report(agg, 0, 1);
        _runToFinalizable(agg, 1, 1);
        uint256 supply = token.totalSupply();
        vm.expectEmit(true, true, false, true, address(jobs));
        emit JobRegistryBase.PaymentForfeited(s1, solver1, PAYMENT);
        jobs.finalize(agg);
        _assertPaid(_ids(s0, agg), 1, "shard 0 and the AGGREGATE paid");
        assertEq(supply - token.totalSupply(), PAYMENT, "shard 1's payment burned");
        assertEq(registry.getNode(solver1).stake, NODE_STAKE, "not slashed");
        assertEq(escrow.escrowOf(jobId), jobs.POSTER_BOND(), "3 payments: 2 paid, 1 burned");
        _assertConserved();
    }

    // ---------------------------------------------------------------- deferred payment

    /// @dev A shard's replicas get nothing at their own acceptance; the round's AGGREGATE acceptance pays them.
    function test_finalize_shardPaymentDeferredToAggregate_succeeds() public {
        uint256 jobId = _post(_params(2, 1, 2));
        uint256 s0 = views.taskOf(jobId, 0, 0);
        uint256 s1 = views.taskOf(jobId, 0, 1);
        uint256 escrowed = escrow.escrowOf(jobId);
        _acceptTrain(s0, 2);
        assertEq(uint8(_status(s0)), uint8(TaskStatus.Accepted), "shard 0 accepted");
        assertEq(_paid(_replica(s0, 0).node) + _paid(_replica(s0, 1).node), 0, "not paid yet");
        assertEq(registry.getNode(_replica(s0, 0).node).locked, 0, "but its stake is unlocked at once");
        _acceptTrain(s1, 2);
        assertEq(escrow.escrowOf(jobId), escrowed, "no shard paid before its consumer is accepted");
        assertEq(_paidToNodes(), 0, "nobody paid at all");
        uint256 agg = _acceptAggregate(jobId, 0);
        _assertPaid(_ids(s0, s1, agg), 2, "paid on the AGGREGATE's acceptance");
        assertEq(escrowed - escrow.escrowOf(jobId), 6 * PAYMENT, "four shard and two AGGREGATE payments");
        _assertConserved();
    }

    /// @dev The job's last AGGREGATE has no consumer: it is paid at its own acceptance. A round-0 AGGREGATE is not:
    ///      the next round's tasks consume it.
    function test_finalize_lastAggregatePaidAtOwnAcceptance_succeeds() public {
        uint256 jobId = _post(_params(1, 2, 2));
        uint256 s0 = views.taskOf(jobId, 0, 0);
        uint256 escrowed = escrow.escrowOf(jobId);
        _acceptShards(jobId, 0);
        uint256 agg0 = _acceptAggregate(jobId, 0);
        assertEq(views.getJob(jobId).currentRound, 1, "round 1");
        assertEq(escrowed - escrow.escrowOf(jobId), 2 * PAYMENT, "round 0's AGGREGATE waits for its consumers");
        _assertPaid(_ids(s0), 2, "only the shard paid");
        _heartbeatAll();
        uint256 t1 = views.taskOf(jobId, 1, 0);
        _acceptTrain(t1, 2);
        _assertPaid(_ids(s0, agg0), 2, "round 0's AGGREGATE paid when round 1's last shard is accepted");
        uint256 agg1 = views.taskOf(jobId, 1, 1);
        _heartbeatAll();
        _draw(agg1);
        bytes32[] memory h = _honest(views.getTask(agg1).inputHash, 1);
        _runReplicated(agg1, h, h);
        assertEq(uint8(_status(agg1)), uint8(TaskStatus.Revealed), "waiting out its window");
        _assertPaid(_ids(s0, agg0), 2, "nothing of round 1 paid before its AGGREGATE is accepted");
        _finalizeAfterWindow(agg1);
        assertEq(uint8(views.getJob(jobId).status), uint8(JobStatus.Completed), "completed");
        _assertPaid(_ids(s0, agg0, t1, agg1), 2, "the last AGGREGATE paid at its own acceptance");
        assertEq(escrow.escrowOf(jobId), jobs.POSTER_BOND(), "every payment went out");
        _assertConserved();
    }

    // ---------------------------------------------------------------- multi-round: the AGGREGATE as an input

    /// @dev Runs round 0 of a 2-shard, 2-round, replication-2 job and draws round 1's tasks.
    function _roundOneDrawn() internal returns (uint256 jobId, uint256 agg0, uint256 t10, uint256 t11) {
        jobId = _post(_params(2, 2, 2));
        _runRoundHonest(jobId, 0);
        agg0 = views.taskOf(jobId, 0, 2);
        t10 = views.taskOf(jobId, 1, 0);
        t11 = views.taskOf(jobId, 1, 1);
        _heartbeatAll();
        _drawIfOpen(t10);
        _drawIfOpen(t11);
    }

    /// @dev Every round-1 task's holders found round 0's AGGREGATE unavailable: its payment is burned when round 1's
    ///      last shard is accepted (not at the first one), and round 1 goes on (its tasks recomputed the input).
    function test_reportUnavailable_everyRoundTaskFlagsAggregate_burnsIt_succeeds() public {
        (uint256 jobId, uint256 agg0, uint256 t10, uint256 t11) = _roundOneDrawn();
        uint256 s00 = views.taskOf(jobId, 0, 0);
        uint256 s01 = views.taskOf(jobId, 0, 1);
        for (uint8 s = 0; s < 2; ++s) {
            _report(t10, s, 0);
            _report(t11, s, 0);
        }
        uint256 escrowed = escrow.escrowOf(jobId);
        _runConsumer(t10, 2, 4);
        assertEq(escrow.escrowOf(jobId), escrowed, "one consumer accepted: the AGGREGATE not settled yet");
        _runToFinalizable(t11, 2, 4);
        uint256 supply = token.totalSupply();
        address g0 = _replica(agg0, 0).node;
        address g1 = _replica(agg0, 1).node;
        vm.expectEmit(true, true, false, true, address(jobs));
        emit JobRegistryBase.PaymentForfeited(agg0, g0, PAYMENT);
        vm.expectEmit(true, true, false, true, address(jobs));
        emit JobRegistryBase.PaymentForfeited(agg0, g1, PAYMENT);
        jobs.finalize(t11);
        assertEq(supply - token.totalSupply(), 2 * PAYMENT, "round 0's AGGREGATE burned");
        assertEq(escrowed - escrow.escrowOf(jobId), 2 * PAYMENT, "burned from the job's escrow");
        _assertPaid(_ids(s00, s01), 2, "round 0's shards paid, its AGGREGATE not");
        uint256 agg1 = _acceptAggregate(jobId, 1);
        assertEq(uint8(views.getJob(jobId).status), uint8(JobStatus.Completed), "completed");
        _assertPaid(_ids(s00, s01, t10, t11, agg1), 2, "round 1 paid");
        assertEq(escrow.escrowOf(jobId), jobs.POSTER_BOND(), "12 payments: 10 paid, 2 burned");
        _assertConserved();
    }

    /// @dev One round-1 task's holders all flag the AGGREGATE, the other task's holders say nothing: it was
    ///      available to someone, so it is paid.
    function test_reportUnavailable_oneRoundTaskSilent_aggregatePaid_succeeds() public {
        (uint256 jobId, uint256 agg0, uint256 t10, uint256 t11) = _roundOneDrawn();
        uint256 s00 = views.taskOf(jobId, 0, 0);
        uint256 s01 = views.taskOf(jobId, 0, 1);
        _report(t10, 0, 0);
        _report(t10, 1, 0);
        _report(t11, 0, 0); // one holder of t11 flags it too, the other fetched it: t11's verdict is "available"
        uint256 supply = token.totalSupply();
        _runConsumer(t10, 2, 4);
        _runConsumer(t11, 2, 4);
        assertEq(token.totalSupply(), supply, "nothing burned");
        _assertPaid(_ids(s00, s01, agg0), 2, "round 0's AGGREGATE paid");
        _acceptAggregate(jobId, 1);
        assertEq(escrow.escrowOf(jobId), jobs.POSTER_BOND(), "every payment went out");
        _assertConserved();
    }

    // ---------------------------------------------------------------- reportUnavailable: who, what, when

    function test_reportUnavailable_aggregateIndexPastShards_reverts() public {
        uint256 jobId = _post(_params(2, 1, 2));
        _acceptShards(jobId, 0);
        uint256 agg = views.taskOf(jobId, 0, 2);
        _draw(agg);
        vm.prank(_replica(agg, 0).node);
        vm.expectRevert(abi.encodeWithSelector(NoSuchInput.selector, agg, uint32(2), uint32(2)));
        jobs.reportUnavailable(agg, 2);
    }

    function test_reportUnavailable_roundZeroTrainHasNoInput_reverts() public {
        uint256 jobId = _post(_params(2, 1, 2));
        uint256 s0 = views.taskOf(jobId, 0, 0);
        vm.prank(_replica(s0, 0).node);
        vm.expectRevert(abi.encodeWithSelector(NoSuchInput.selector, s0, uint32(0), uint32(0)));
        jobs.reportUnavailable(s0, 0); // its input is the poster's initial state, not a node's result
    }

    function test_reportUnavailable_laterRoundIndexPastOne_reverts() public {
        (,, uint256 t10,) = _roundOneDrawn();
        vm.prank(_replica(t10, 0).node);
        vm.expectRevert(abi.encodeWithSelector(NoSuchInput.selector, t10, uint32(1), uint32(1)));
        jobs.reportUnavailable(t10, 1);
    }

    function test_reportUnavailable_nonHolder_reverts() public {
        uint256 jobId = _post(_params(2, 1, 2));
        _acceptShards(jobId, 0);
        uint256 agg = views.taskOf(jobId, 0, 2);
        _draw(agg);
        address outsider = _outsider(agg);
        vm.prank(outsider);
        vm.expectRevert(abi.encodeWithSelector(NotReplica.selector, agg, outsider, ReplicaStatus.Assigned));
        jobs.reportUnavailable(agg, 0);
        // A shard's own replica is no holder of the AGGREGATE either (unless drawn for it).
        address shardNode = _replica(views.taskOf(jobId, 0, 1), 0).node;
        if (shardNode != _replica(agg, 0).node && shardNode != _replica(agg, 1).node) {
            vm.prank(shardNode);
            vm.expectRevert(abi.encodeWithSelector(NotReplica.selector, agg, shardNode, ReplicaStatus.Assigned));
            jobs.reportUnavailable(agg, 1);
        }
    }

    /// @dev A holder speaks before its result counts: once committed it may still report (the commitment hides the
    ///      result), once revealed it may not (it would be choosing after seeing the other's result).
    function test_reportUnavailable_afterReveal_reverts() public {
        uint256 jobId = _post(_params(2, 1, 2));
        _acceptShards(jobId, 0);
        uint256 agg = views.taskOf(jobId, 0, 2);
        _draw(agg);
        address a = _replica(agg, 0).node;
        address b = _replica(agg, 1).node;
        bytes32[] memory h = _honest(views.getTask(agg).inputHash, 1);
        _commit(agg, a, h);
        _report(agg, 0, 1); // committed: still to come
        _commit(agg, b, _trace(views.getTask(agg).inputHash, 1, "other", 1)); // a's reveal does not reveal b's
        _reveal(agg, a, h);
        vm.prank(a);
        vm.expectRevert(abi.encodeWithSelector(NotReplica.selector, agg, a, ReplicaStatus.Assigned));
        jobs.reportUnavailable(agg, 0);
        _report(agg, 1, 0); // b has not revealed yet
    }

    function test_reportUnavailable_afterSubmit_reverts() public {
        uint256 jobId = _post(_params(2, 1, 1));
        _acceptShards(jobId, 0);
        uint256 agg = views.taskOf(jobId, 0, 2);
        _draw(agg);
        address solver = _replica(agg, 0).node;
        _submit(agg, solver, _honest(views.getTask(agg).inputHash, 1));
        vm.prank(solver);
        vm.expectRevert(abi.encodeWithSelector(NotReplica.selector, agg, solver, ReplicaStatus.Assigned));
        jobs.reportUnavailable(agg, 1);
    }

    function test_reportUnavailable_jobNotActive_reverts() public {
        uint256 jobId = _postOnly(_params(1, 1, 2));
        uint256 s0 = views.taskOf(jobId, 0, 0);
        vm.prank(submitter);
        jobs.cancelJob(jobId); // nothing was ever assigned
        vm.prank(nodes[0]);
        vm.expectRevert(abi.encodeWithSelector(JobNotActive.selector, jobId, JobStatus.Cancelled));
        jobs.reportUnavailable(s0, 0);
    }

    function test_reportUnavailable_completedJob_reverts() public {
        uint256 jobId = _post(_params(1, 1, 2));
        _runRoundHonest(jobId, 0);
        uint256 agg = views.taskOf(jobId, 0, 1);
        vm.prank(_replica(agg, 0).node);
        vm.expectRevert(abi.encodeWithSelector(JobNotActive.selector, jobId, JobStatus.Completed));
        jobs.reportUnavailable(agg, 0);
    }

    function test_reportUnavailable_unknownTask_reverts() public {
        vm.prank(nodes[0]);
        vm.expectRevert(abi.encodeWithSelector(TaskNotFound.selector, uint256(999)));
        jobs.reportUnavailable(999, 0);
    }

    /// @dev A report never outlives its holder. The AGGREGATE's slot-0 holder flags shard 1, then goes silent and is
    ///      reported late; the slot's new holder flags shard 0 only, the slot-1 holder flags shard 1. Had the old
    ///      holder's bit carried over, slot 0's mask would be {0, 1} and the AND with {1} would burn shard 1; with
    ///      the mask reset it is {0} AND {1} = {}: every shard is paid. The old holder cannot report any more.
    function test_reportUnavailable_redrawnSlotStartsEmpty_succeeds() public {
        uint256 jobId = _post(_params(2, 1, 2));
        uint256 s0 = views.taskOf(jobId, 0, 0);
        uint256 s1 = views.taskOf(jobId, 0, 1);
        _acceptShards(jobId, 0);
        uint256 agg = views.taskOf(jobId, 0, 2);
        _draw(agg);
        address old = _replica(agg, 0).node;
        address b = _replica(agg, 1).node;
        bytes32[] memory h = _honest(views.getTask(agg).inputHash, 1);
        _report(agg, 0, 1);
        _report(agg, 1, 1);
        _commit(agg, b, h);
        vm.warp(uint256(_replica(agg, 0).deadline) + 1);
        jobs.reportLate(agg, 0);
        vm.prank(old);
        vm.expectRevert(abi.encodeWithSelector(NotReplica.selector, agg, old, ReplicaStatus.Assigned));
        jobs.reportUnavailable(agg, 1);
        _heartbeatAll();
        _draw(agg);
        address fresh = _replica(agg, 0).node;
        assertTrue(fresh != old && fresh != b, "a new holder");
        _report(agg, 0, 0);
        _reveal(agg, fresh, h); // the last to commit: reveals b's equal commitment with its own
        uint256 supply = token.totalSupply();
        _finalizeAfterWindow(agg);
        assertEq(uint8(views.getJob(jobId).status), uint8(JobStatus.Completed), "completed");
        assertEq(token.totalSupply(), supply, "nothing burned: the old holder's report died with its slot");
        _assertPaid(_ids(s0, s1, agg), 2, "every shard paid");
        _assertConserved();
    }

    // ---------------------------------------------------------------- ending a job early

    /// @dev Shard 0 is accepted, shard 1 never finds a node: the submitter cancels. Shard 0's consumer will never
    ///      exist, so its replicas are paid without an availability verdict; the rest is refunded.
    function test_cancelJob_acceptedShardOtherStarved_paysAcceptedShard_succeeds() public {
        uint256 jobId = _postOnly(_params(2, 1, 2));
        uint256 s0 = views.taskOf(jobId, 0, 0);
        uint256 s1 = views.taskOf(jobId, 0, 1);
        _acceptTrain(s0, 2);
        assertEq(_paidToNodes(), 0, "deferred while the job runs");
        vm.warp(uint256(views.getTask(s1).openSince) + jobs.assignmentTimeout() + 1);
        uint256 escrowed = escrow.escrowOf(jobId);
        uint256 before = token.balanceOf(submitter);
        vm.expectEmit(true, false, false, true, address(jobs));
        emit IJobRegistry.JobCancelled(jobId, escrowed - 2 * PAYMENT);
        vm.prank(submitter);
        jobs.cancelJob(jobId);
        _assertPaid(_ids(s0), 2, "the accepted shard paid");
        assertEq(token.balanceOf(submitter) - before, escrowed - 2 * PAYMENT, "the rest refunded");
        assertEq(uint8(_status(s1)), uint8(TaskStatus.Cancelled), "starved shard cancelled");
        assertEq(escrow.escrowOf(jobId), 0, "nothing left");
        _assertConserved();
    }
}
