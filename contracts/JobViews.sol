// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IJobViews} from "./interfaces/IJobRegistry.sol";
import {IJobEscrow} from "./interfaces/IJobEscrow.sol";
import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {IVerityToken} from "./interfaces/IVerityToken.sol";
import {IRandomness} from "./interfaces/IRandomness.sol";
import {JobRegistryBase} from "./JobRegistryBase.sol";
import {Job, JobStatus, Task, TaskStatus, Replica, ReplicaStatus} from "./types/VerityTypes.sol";
import {TaskIndexNotFound} from "./errors/JobRegistryErrors.sol";

/// @title JobViews
/// @notice The registry's views of jobs, tasks and replicas. JobRegistry deploys it and runs any call it has no function
///         for in this code, by delegatecall on the registry's storage (its fallback): clients and contracts call
///         the registry's address, whose ABI in the deployments file includes these functions.
/// @dev Issue 23, room to grow: the views left JobRegistry so that its room goes to rules. Called directly, every view
///      reads this contract's own empty storage; nothing here writes.
contract JobViews is IJobViews, JobRegistryBase {
    constructor(IVerityToken token_, INodeRegistry registry_, IJobEscrow escrow_, IRandomness randomness_)
        JobRegistryBase(token_, registry_, escrow_, randomness_)
    {}

    /// @inheritdoc IJobViews
    function getJob(uint256 jobId) external view returns (Job memory) {
        return _jobs[jobId];
    }

    /// @inheritdoc IJobViews
    /// @dev finalHash / resultCid: an Accepted replica's result, else the candidate's (0 while replicas hold it).
    function getTask(uint256 taskId) external view returns (Task memory t) {
        t = _tasks[taskId];
        (t.finalHash, t.resultCid) = _taskResult(taskId);
    }

    /// @inheritdoc IJobViews
    function getReplicas(uint256 taskId) external view returns (Replica[] memory reps) {
        uint8 replication = _jobs[_tasks[taskId].jobId].replication;
        reps = new Replica[](replication);
        for (uint8 s = 0; s < replication; ++s) {
            reps[s] = _replicaView(taskId, s);
        }
    }

    /// @notice One replica slot of a task.
    function getReplica(uint256 taskId, uint8 slot) external view returns (Replica memory) {
        return _replicaView(taskId, slot);
    }

    /// @notice The task id of (jobId, round, index); index == shards is the round's AGGREGATE task.
    function taskOf(uint256 jobId, uint32 round, uint32 index) external view returns (uint256 taskId) {
        taskId = _taskIds[jobId][round][index];
        if (taskId == 0) revert TaskIndexNotFound(jobId, round, index);
    }

    /// @notice Whether `finalize(taskId)` would accept the task now, and the second after which its challenge
    ///         window and reveal grace are over (0 unless Revealed). Keepers read this rather than copy the rule.
    function finalizable(uint256 taskId) external view returns (bool ready, uint64 windowEnd) {
        Task storage t = _tasks[taskId];
        if (t.status != TaskStatus.Revealed) return (false, 0);
        windowEnd = _windowEnd(t);
        ready = t.openDisputes == 0 && block.timestamp > windowEnd && _jobs[t.jobId].status == JobStatus.Active;
    }

    /// @notice Escrow a job with these parameters needs (the payments of every replica of every task + POSTER_BOND).
    function escrowFor(uint256 paymentPerTask, uint8 replication, uint32 shards, uint32 rounds)
        external
        pure
        returns (uint256)
    {
        return _escrowFor(paymentPerTask, replication, shards, rounds);
    }

    /// @notice Whether `node` was ever banned from `taskId` (late, lost a dispute, declined): it is never drawn for it
    ///         again.
    function isBanned(uint256 taskId, address node) external view returns (bool) {
        return _everBanned[taskId][node];
    }

    /// @notice The task's first FAIL_DECLINES invalid-inputs decliners: each bets its share of the poster bond until
    ///         the task is completed (burned) or the job ends otherwise (released).
    function invalidDeclinersOf(uint256 taskId) external view returns (address[] memory) {
        return _invalidDecliners[taskId];
    }

    /// @notice The most recent bans of a task (the draw's exclusion ring; `isBanned` holds them all).
    function bannedOf(uint256 taskId) external view returns (address[MAX_BANNED] memory) {
        return _banned[taskId];
    }

    /// @inheritdoc IJobViews
    function epochOf(uint256 taskId) external view returns (uint32) {
        return _tasks[taskId].epoch;
    }

    /// @dev A revealed slot's commitment is not stored (its slot holds the root): it is the hash of what it revealed.
    function _replicaView(uint256 taskId, uint8 s) internal view returns (Replica memory v) {
        ReplicaRecord storage r = _replicas[taskId][s];
        ReplicaRecord storage tr = _traceOf(taskId, s);
        (v.node, v.status, v.deadline) = (r.node, r.status, r.deadline);
        if (!r.sharesTrace && r.finalHash == 0) {
            v.commitment = r.commitOrRoot; // not revealed: the commitment (zero before a commit)
            return v;
        }
        (v.root, v.finalHash, v.resultCid) = (tr.commitOrRoot, tr.finalHash, _cidOf(taskId, s));
        v.commitment = _resultCommitment(v.root, v.finalHash, v.resultCid, v.node);
    }
}
