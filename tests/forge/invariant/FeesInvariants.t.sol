// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "../base/Fixture.sol";
import {Test} from "../base/Test.sol";
import {VerificationFees} from "../../../contracts/VerificationFees.sol";
import {JobRegistry} from "../../../contracts/JobRegistry.sol";
import {VerityToken} from "../../../contracts/VerityToken.sol";
import {INodeRegistry} from "../../../contracts/interfaces/INodeRegistry.sol";
import {IJobRegistry, IJobViews} from "../../../contracts/interfaces/IJobRegistry.sol";
import {BlockhashRandomness} from "../../../contracts/BlockhashRandomness.sol";
import {Merkle} from "../../../contracts/lib/Merkle.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {Task, Job, TaskStatus, PostJobParams, JobStatus} from "../../../contracts/types/VerityTypes.sol";

/// @notice Drives VerificationFees with several verifier identities (honest ones that re-execute, copiers that act
///         only on published results, key forgers) over real optimistic jobs, including wrong results nobody
///         challenges, and tracks what was funded, paid and refunded.
contract FeesHandler is Test {
    uint64 internal constant CHAIN = 256;
    uint32 internal constant FLOOR = 20; // every job's result floor: checks land before it, results from it on

    VerificationFees internal fees;
    JobRegistry internal jobs;
    IJobViews internal views;
    BlockhashRandomness internal randomness;
    VerityToken internal token;
    address internal submitter;
    address[] internal verifiers;

    uint256 public calls;
    uint256 public ghostFunded;
    uint256 public ghostPaid;
    uint256 public ghostRefunded;
    uint256 public ghostClaims;
    uint256 public ghostCollects;
    uint256 public ghostBadPayments; // a fee paid for a check whose final is not the accepted one, or committed late
    mapping(uint256 => mapping(address => bytes32)) internal committedFinal;
    mapping(uint256 => mapping(address => bool)) internal committedBlind;
    mapping(uint256 => bytes32) internal submittedFinal;
    uint256[] internal taskIds;

    constructor(
        VerificationFees fees_,
        JobRegistry jobs_,
        BlockhashRandomness randomness_,
        VerityToken token_,
        address submitter_,
        address[] memory verifiers_
    ) {
        (fees, jobs, randomness, token, submitter, verifiers) = (fees_, jobs_, randomness_, token_, submitter_, verifiers_);
        views = IJobViews(address(jobs_));
    }

    modifier tracked() {
        ++calls;
        _;
    }

    function _seed(address v) internal pure returns (bytes32) {
        return keccak256(abi.encode("seed", v));
    }

    function _hashN(bytes32 h, uint256 n) internal pure returns (bytes32) {
        for (uint256 i = 0; i < n; ++i) {
            h = keccak256(abi.encodePacked(h));
        }
        return h;
    }

    function anchorAll() external {
        for (uint256 i = 0; i < verifiers.length; ++i) {
            vm.prank(verifiers[i]);
            fees.anchor(_hashN(_seed(verifiers[i]), CHAIN));
        }
    }

    function _trace(uint256 taskId, bool wrong) internal view returns (bytes32[] memory h) {
        h = new bytes32[](5);
        h[0] = views.getTask(taskId).inputHash;
        for (uint256 j = 1; j < 5; ++j) {
            h[j] = keccak256(abi.encode(wrong ? bytes32("wrong") : bytes32("honest"), h[0], j));
        }
    }

    // ---------------------------------------------------------------- actions

    function post(uint16 rateBps, uint8 checks) external tracked {
        PostJobParams memory p;
        p.manifestCid = keccak256("m");
        p.manifestHash = keccak256("h");
        p.initialStateHash = keccak256(abi.encode("input", calls));
        p.shards = 1;
        p.rounds = 1;
        p.stepsPerRound = 8;
        p.checkpointInterval = 2;
        p.paymentPerTask = 1e18;
        p.replication = 1;
        p.stakePerReplica = 10e18;
        p.minMemoryMb = 1_000;
        p.profileBit = 1;
        p.resultFloor = FLOOR;
        vm.startPrank(submitter);
        uint256 jobId = jobs.postJob(p);
        uint256 amount = 3e18;
        fees.fund(jobId, amount, 1e18, uint8(1 + checks % 3), uint16(1 + uint256(rateBps) % 10_000));
        vm.stopPrank();
        ghostFunded += amount;
        taskIds.push(views.taskOf(jobId, 0, 0));
    }

    function _pick(uint256 seed) internal view returns (uint256) {
        return taskIds.length == 0 ? 0 : taskIds[seed % taskIds.length];
    }

    function draw(uint256 seed) external tracked {
        uint256 id = _pick(seed);
        if (id == 0 || views.getTask(id).status != TaskStatus.Open) return;
        uint256 request = views.getTask(id).drawRequest;
        if (randomness.isStale(request)) randomness.renew(request); // its epoch ended unread
        uint256 target = randomness.targetOf(request);
        if (block.number <= target) vm.roll(target + 1);
        try jobs.assign(id) {} catch {}
    }

    /// @dev An honest verifier re-executed (knows the honest final); a liar commits a wrong final; both blind.
    function check(uint256 seed, uint256 who, bool lie) external tracked {
        uint256 id = _pick(seed);
        if (id == 0) return;
        address v = verifiers[who % verifiers.length];
        bytes32[] memory h = _trace(id, lie);
        vm.prank(v);
        try fees.commitCheck(id, keccak256(abi.encode(id, h[4], bytes32("salt"), v))) {
            committedFinal[id][v] = h[4];
            committedBlind[id][v] = submittedFinal[id] == bytes32(0);
        } catch {}
    }

    /// @dev The solver: honest or wrong (nobody challenges here: the fee only follows what is accepted).
    function solve(uint256 seed, bool wrong) external tracked {
        uint256 id = _pick(seed);
        if (id == 0 || views.getTask(id).status != TaskStatus.Assigned) return;
        bytes32[] memory h = _trace(id, wrong);
        address solver = views.getReplica(id, 0).node;
        uint256 notBefore = _notBefore(id);
        if (block.timestamp < notBefore) vm.warp(notBefore);
        vm.prank(solver);
        try jobs.submitResult(
            id, Merkle.rootOf(h), h[4], 4, keccak256("cid"), Merkle.proofOf(h, 0), Merkle.proofOf(h, 4)
        ) {
            submittedFinal[id] = h[4];
        } catch {}
    }

    /// @dev A copier commits the published final after the fact, or, with no result published yet, front-runs the
    ///      solver's pending submitResult at its floor with the final read from its calldata (both must revert).
    function copy(uint256 seed, uint256 who) external tracked {
        uint256 id = _pick(seed);
        if (id == 0) return;
        bytes32 fin = submittedFinal[id];
        if (fin == bytes32(0)) {
            if (views.getTask(id).status != TaskStatus.Assigned) return;
            uint256 notBefore = _notBefore(id);
            if (block.timestamp < notBefore) vm.warp(notBefore); // the pending result may land in this block
            fin = _trace(id, false)[4];
        }
        address v = verifiers[who % verifiers.length];
        vm.prank(v);
        try fees.commitCheck(id, keccak256(abi.encode(id, fin, bytes32("salt"), v))) {
            ++ghostBadPayments; // a commitment once a result is public or pending must never be accepted
        } catch {}
    }

    /// @dev When the task's one slot may first leave a result (TaskMachine._checkOnTime).
    function _notBefore(uint256 id) internal view returns (uint256) {
        Job memory job = views.getJob(views.getTask(id).jobId);
        return views.getReplica(id, 0).deadline - job.executionWindow + job.resultFloor;
    }

    function finalize(uint256 seed) external tracked {
        uint256 id = _pick(seed);
        if (id == 0 || views.getTask(id).status != TaskStatus.Revealed) return;
        Task memory t = views.getTask(id);
        uint256 end = uint256(t.challengeDeadline) + views.getJob(t.jobId).revealWindow;
        if (block.timestamp <= end) vm.warp(end + 1);
        jobs.finalize(id);
    }

    function claim(uint256 seed, uint256 who, bool forge) external tracked {
        uint256 id = _pick(seed);
        if (id == 0) return;
        address v = verifiers[who % verifiers.length];
        (,, uint64 anchorEpoch) = fees.chainOf(v);
        uint64 e = fees.epochOf(views.getTask(id).createdAt);
        if (e <= anchorEpoch || e - anchorEpoch > CHAIN) return;
        bytes32 key = forge ? keccak256(abi.encode("forged", id)) : _hashN(_seed(v), CHAIN - (e - anchorEpoch));
        bytes32 fin = committedFinal[id][v];
        vm.prank(v);
        try fees.claim(id, key, fin, bytes32("salt")) {
            ++ghostClaims;
            // a slot held by a bad claim would be paid at collect: counted as a bad payment at once
            if (forge || !committedBlind[id][v] || fin != fees.acceptedFinal(id, views.getTask(id))) ++ghostBadPayments;
        } catch {}
    }

    /// @dev Pays a task's slot holders (anyone), after its claim window; the window is warped past half the time.
    function collect(uint256 seed, bool wait) external tracked {
        uint256 id = _pick(seed);
        if (id == 0) return;
        uint64 closes = fees.claimClosesAt(id);
        if (wait && closes > block.timestamp) vm.warp(closes);
        VerificationFees.Slot[] memory held = fees.slotsOf(id);
        uint256 before;
        for (uint256 i = 0; i < held.length; ++i) {
            before += token.balanceOf(held[i].verifier);
        }
        try fees.collect(id) {
            uint256 after_;
            for (uint256 i = 0; i < held.length; ++i) {
                after_ += token.balanceOf(held[i].verifier);
            }
            ghostPaid += after_ - before;
            ++ghostCollects;
        } catch {}
    }

    function warp(uint16 secs) external tracked {
        vm.warp(block.timestamp + bound(secs, 1, 400));
        vm.roll(block.number + 1);
    }

    function closeAndRefund(uint256 seed) external tracked {
        uint256 id = _pick(seed);
        if (id == 0) return;
        uint256 jobId = views.getTask(id).jobId;
        if (views.getJob(jobId).status == JobStatus.Active) {
            vm.prank(submitter);
            try jobs.cancelJob(jobId) {} catch {}
        }
        try fees.close(jobId) {} catch {}
        uint256 before = token.balanceOf(submitter);
        vm.prank(submitter);
        try fees.refund(jobId) {
            ghostRefunded += token.balanceOf(submitter) - before;
        } catch {}
    }

    function taskCount() external view returns (uint256) {
        return taskIds.length;
    }

    function taskAt(uint256 i) external view returns (uint256) {
        return taskIds[i];
    }
}

/// @notice P5 invariants: the fee contract holds exactly its pots; funded == pots + paid + refunded; no fee is ever
///         paid for a check that was not blind, not the caller's own chain key, or not the accepted result.
contract FeesInvariantsTest is Fixture {
    FeesHandler internal handler;
    VerificationFees internal fees;

    function setUp() public override {
        super.setUp();
        _addNodes(6);
        fees = new VerificationFees(
            IERC20(address(token)), INodeRegistry(address(registry)), IJobViews(address(jobs)), 100
        );
        address[] memory vs = new address[](nodes.length);
        for (uint256 i = 0; i < nodes.length; ++i) {
            vs[i] = nodes[i];
        }
        handler = new FeesHandler(fees, jobs, randomness, token, submitter, vs);
        handler.anchorAll();
        vm.warp(block.timestamp + 100);
        vm.startPrank(submitter);
        token.approve(address(fees), type(uint256).max);
        vm.stopPrank();
        targetContract(address(handler));
    }

    /// forge-config: default.invariant.runs = 160
    /// forge-config: default.invariant.depth = 64
    function invariant_feesConservedAndOnlyBlindMatchingChecksPaid() public view {
        uint256 pots;
        uint256 reserved;
        for (uint256 i = 0; i < handler.taskCount(); ++i) {
            uint256 taskId = handler.taskAt(i);
            uint256 jobId = views.getTask(taskId).jobId;
            (uint256 balance, uint256 fee,, uint8 checks,) = fees.potOf(jobId);
            pots += balance;
            VerificationFees.Slot[] memory held = fees.slotsOf(taskId);
            reserved += held.length * fee;
            assertLe(held.length + fees.checksPaid(taskId), checks, "more fee slots than checksPerTask");
        }
        assertEq(token.balanceOf(address(fees)), pots + reserved, "the fee contract holds its pots and held slots");
        assertEq(
            handler.ghostFunded(), pots + reserved + handler.ghostPaid() + handler.ghostRefunded(), "funded accounted"
        );
        assertEq(handler.ghostBadPayments(), 0, "a fee paid for a late, forged or wrong check");
    }

    /// @notice The handler really reaches paid claims (a suite that never pays would prove nothing).
    function test_feesHandler_reachesPaidClaims_succeeds() public {
        for (uint256 i = 0; i < 40; ++i) {
            handler.post(9_999, 2); // rate 100 %, 3 checks per task
            handler.draw(i);
            handler.check(i, i, false);
            handler.check(i, i + 1, true);
            handler.solve(i, i % 3 == 0);
            handler.copy(i, i + 2);
            handler.finalize(i);
            handler.warp(300);
            handler.claim(i, i, false);
            handler.claim(i, i + 1, false);
            handler.claim(i, i + 2, true);
            handler.collect(i, true);
        }
        assertGt(handler.ghostClaims(), 0, "some fee was claimed");
        assertGt(handler.ghostCollects(), 0, "some fee was paid");
        invariant_feesConservedAndOnlyBlindMatchingChecksPaid();
    }
}

