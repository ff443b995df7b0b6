// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Test} from "../base/Test.sol";
import {VerityToken} from "../../../contracts/VerityToken.sol";
import {NodeRegistry} from "../../../contracts/NodeRegistry.sol";
import {JobRegistry} from "../../../contracts/JobRegistry.sol";
import {DisputeGame} from "../../../contracts/DisputeGame.sol";
import {Merkle} from "../../../contracts/lib/Merkle.sol";
import {
    PostJobParams,
    Job,
    JobStatus,
    Task,
    TaskStatus,
    Replica,
    ReplicaStatus,
    DisputePhase
} from "../../../contracts/types/VerityTypes.sol";

/// @notice Drives random protocol traffic: jobs, honest and dishonest replicas, late reports, disputes settled by
///         clocks, optimistic challenges, stake moves and withdrawals. Each node is honest on a task unless
///         keccak(taskId, node) says otherwise (1 in 4).
contract Handler is Test {
    VerityToken internal token;
    NodeRegistry internal registry;
    JobRegistry internal jobs;
    DisputeGame internal game;
    address internal submitter;
    address[] internal nodes;

    uint256 public ghostEscrowPosted;
    uint256 public ghostPaymentsWithdrawn;
    uint256 public ghostRefunded;
    uint256 public calls;

    constructor(
        VerityToken token_,
        NodeRegistry registry_,
        JobRegistry jobs_,
        DisputeGame game_,
        address submitter_,
        address[] memory nodes_
    ) {
        token = token_;
        registry = registry_;
        jobs = jobs_;
        game = game_;
        submitter = submitter_;
        nodes = nodes_;
    }

    function nodeList() external view returns (address[] memory) {
        return nodes;
    }

    // ---------------------------------------------------------------- helpers

    function _isHonest(uint256 taskId, address node) internal pure returns (bool) {
        return uint256(keccak256(abi.encode(taskId, node))) % 4 != 0;
    }

    function _traceFor(uint256 taskId, address node) internal view returns (bytes32[] memory h) {
        Task memory t = jobs.getTask(taskId);
        h = new bytes32[](t.n + 1);
        h[0] = t.inputHash;
        bool ok = _isHonest(taskId, node);
        for (uint256 j = 1; j <= t.n; ++j) {
            h[j] = keccak256(abi.encode(ok || j < t.n ? bytes32("honest") : bytes32(uint256(uint160(node))), t.inputHash, j));
        }
    }

    function _pickTask(uint256 seed) internal view returns (uint256) {
        uint256 n = jobs.taskCount();
        return n == 0 ? 0 : 1 + (seed % n);
    }

    // ---------------------------------------------------------------- actions

    function postJob(uint8 shards, bool replicated, uint8 rounds) external {
        ++calls;
        if (jobs.jobCount() >= 3) return;
        PostJobParams memory p;
        p.manifestCid = keccak256("cid");
        p.manifestHash = keccak256("manifest");
        p.initialStateHash = keccak256(abi.encode("input", jobs.jobCount()));
        p.shards = uint32(bound(shards, 1, 2));
        p.rounds = uint32(bound(rounds, 1, 2));
        p.stepsPerRound = 4;
        p.checkpointInterval = 1;
        p.paymentPerTask = 3e18;
        p.replication = replicated ? 2 : 1;
        p.stakePerReplica = 100e18;
        p.profileBit = 1;
        uint256 escrow = jobs.escrowFor(p.paymentPerTask, p.replication, p.shards, p.rounds);
        vm.prank(submitter);
        jobs.postJob(p);
        ghostEscrowPosted += escrow;
    }

    function work(uint256 seed) external {
        ++calls;
        uint256 taskId = _pickTask(seed);
        if (taskId == 0) return;
        Task memory t = jobs.getTask(taskId);
        Job memory job = jobs.getJob(t.jobId);
        if (job.status != JobStatus.Active) return;
        Replica[] memory reps = jobs.getReplicas(taskId);
        for (uint8 s = 0; s < reps.length; ++s) {
            Replica memory r = reps[s];
            if (r.status != ReplicaStatus.Assigned || block.timestamp > r.deadline) continue;
            bytes32[] memory h = _traceFor(taskId, r.node);
            uint256 n = h.length - 1;
            vm.prank(r.node);
            if (job.replication == 1) {
                jobs.submitResult(taskId, Merkle.rootOf(h), h[n], uint32(n), h[n], Merkle.proofOf(h, 0), Merkle.proofOf(h, n));
            } else {
                jobs.commit(taskId, keccak256(abi.encode(Merkle.rootOf(h), h[n], bytes32("s"), r.node)));
            }
        }
        reps = jobs.getReplicas(taskId);
        for (uint8 s = 0; s < reps.length; ++s) {
            Replica memory r = reps[s];
            if (r.status != ReplicaStatus.Committed || r.deadline == 0 || block.timestamp > r.deadline) continue;
            if (jobs.getTask(taskId).status != TaskStatus.Assigned) break;
            bytes32[] memory h = _traceFor(taskId, r.node);
            uint256 n = h.length - 1;
            vm.prank(r.node);
            jobs.reveal(taskId, Merkle.rootOf(h), h[n], uint32(n), h[n], "s", Merkle.proofOf(h, 0), Merkle.proofOf(h, n));
        }
    }

    function finalize(uint256 seed) external {
        ++calls;
        uint256 taskId = _pickTask(seed);
        if (taskId == 0) return;
        Task memory t = jobs.getTask(taskId);
        if (t.status != TaskStatus.Revealed || block.timestamp <= t.challengeDeadline) return;
        jobs.finalize(taskId);
    }

    function reportLate(uint256 seed, bool slot1) external {
        ++calls;
        uint256 taskId = _pickTask(seed);
        if (taskId == 0) return;
        jobs.reportLate(taskId, slot1 ? 1 : 0);
    }

    function assign(uint256 seed) external {
        ++calls;
        uint256 taskId = _pickTask(seed);
        if (taskId == 0) return;
        jobs.assign(taskId);
    }

    function warp(uint16 secs) external {
        ++calls;
        vm.warp(block.timestamp + bound(secs, 1, 150));
        for (uint256 i = 0; i < nodes.length; ++i) {
            vm.prank(nodes[i]);
            registry.heartbeat();
        }
    }

    /// @dev Opens a dispute on a contested task, or plays the honest side of an open one, or times it out.
    function dispute(uint256 seed) external {
        ++calls;
        uint256 taskId = _pickTask(seed);
        if (taskId == 0) return;
        uint256 id = game.disputeOfTask(taskId);
        if (id == 0) {
            if (jobs.getTask(taskId).status == TaskStatus.Contested) game.openDispute(taskId);
            return;
        }
        DisputeGame.Dispute memory d = game.getDispute(id);
        if (d.phase == DisputePhase.Bisect0) {
            for (uint256 p = 0; p < 2; ++p) {
                address party = d.parties[p];
                if (d.moved[p] || !_isHonest(taskId, party)) continue;
                bytes32[] memory h = _traceFor(taskId, party);
                vm.prank(party);
                game.revealLeaf(id, 0, d.mid, h[d.mid], Merkle.proofOf(h, d.mid));
                return;
            }
        }
        game.timeout(id);
    }

    /// @dev A verifier challenges a dishonest optimistic result with the honest trace.
    function challenge(uint256 seed, uint256 who) external {
        ++calls;
        uint256 taskId = _pickTask(seed);
        if (taskId == 0) return;
        Task memory t = jobs.getTask(taskId);
        if (t.status != TaskStatus.Revealed) return;
        address verifier = nodes[who % nodes.length];
        bytes32[] memory h = new bytes32[](t.n + 1);
        h[0] = t.inputHash;
        for (uint256 j = 1; j <= t.n; ++j) {
            h[j] = keccak256(abi.encode(bytes32("honest"), t.inputHash, j));
        }
        uint256 n = t.n;
        vm.prank(verifier);
        game.challengeOptimistic(taskId, Merkle.rootOf(h), h[n], uint32(n), h[n], Merkle.proofOf(h, 0), Merkle.proofOf(h, n));
    }

    function stakeMore(uint256 who, uint96 amount) external {
        ++calls;
        address node = nodes[who % nodes.length];
        vm.prank(node);
        registry.stake(bound(amount, 1, 100e18));
    }

    function unstake(uint256 who, uint96 amount) external {
        ++calls;
        address node = nodes[who % nodes.length];
        uint256 free = registry.freeStake(node);
        if (free == 0) return;
        vm.prank(node);
        registry.requestUnstake(bound(amount, 1, free));
    }

    function withdrawStake(uint256 who) external {
        ++calls;
        address node = nodes[who % nodes.length];
        vm.prank(node);
        registry.withdraw();
    }

    function withdrawCredits(uint256 who) external {
        ++calls;
        address node = nodes[who % nodes.length];
        uint256 c = jobs.credits(node);
        if (c > 0) {
            vm.prank(node);
            jobs.withdrawPayment();
            ghostPaymentsWithdrawn += c;
        }
        if (game.credits(node) > 0) {
            vm.prank(node);
            game.withdraw();
        }
    }

    function cancel(uint256 seed) external {
        ++calls;
        uint256 count = jobs.jobCount();
        if (count == 0) return;
        uint256 jobId = 1 + (seed % count);
        uint256 escrow = jobs.getJob(jobId).escrow;
        vm.prank(submitter);
        jobs.cancelJob(jobId);
        ghostRefunded += escrow;
    }

    function reclaim(uint256 seed) external {
        ++calls;
        uint256 count = jobs.jobCount();
        if (count == 0) return;
        uint256 jobId = 1 + (seed % count);
        uint256 escrow = jobs.getJob(jobId).escrow;
        vm.prank(submitter);
        jobs.reclaimEscrow(jobId);
        ghostRefunded += escrow;
    }
}
