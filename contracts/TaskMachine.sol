// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IJobRegistry} from "./interfaces/IJobRegistry.sol";
import {IDisputeGame} from "./interfaces/IDisputeGame.sol";
import {IJobEscrow} from "./interfaces/IJobEscrow.sol";
import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {IVerityToken} from "./interfaces/IVerityToken.sol";
import {IRandomness} from "./interfaces/IRandomness.sol";
import {JobRegistryBase} from "./JobRegistryBase.sol";
import {Merkle} from "./lib/Merkle.sol";
import {Job, JobStatus, Task, TaskKind, TaskStatus, ReplicaStatus, DisputeOutcome, BPS} from "./types/VerityTypes.sol";
import {ZeroAddress} from "./errors/CommonErrors.sol";
import "./errors/JobRegistryErrors.sol";

/// @title TaskMachine
/// @notice The task state machine of the JobRegistry: commit-reveal (replication 2), optimistic submission
///         (replication 1), challenge windows and open disputes (P1), agreement as a claim rather than finality
///         (P2), dispute winners as new candidates with epochs (P3), acceptance and payment, rounds, late reports,
///         cancellation and escrow reclaim.
/// @dev Runs only by the JobRegistry's delegatecall, on its storage (JobRegistryBase); called directly it refuses.
///      Lifecycle: docs/protocol-v2.md "Task lifecycle".
contract TaskMachine is JobRegistryBase {
    address private immutable _self;

    modifier onlyDelegated() {
        // INVARIANT: this code only ever acts on the JobRegistry's storage, with the JobRegistry's authority.
        if (address(this) == _self) revert NotDelegated();
        _;
    }

    modifier onlyDisputeGame() {
        // INVARIANT: only the wired game reports challenges and outcomes (unset: nobody matches).
        if (msg.sender != disputeGame || msg.sender == address(0)) revert NotDisputeGame(msg.sender);
        _;
    }

    constructor(IVerityToken token_, INodeRegistry registry_, IJobEscrow escrow_, IRandomness randomness_)
        JobRegistryBase(token_, registry_, escrow_, randomness_)
    {
        _self = address(this);
    }

    // ---------------------------------------------------------------- submitter

    /// @notice Cancels an active job and refunds all escrow not yet credited. Allowed (a) before any slot was ever
    ///         assigned or (b) when a task of the current round has had an empty slot for over `assignmentTimeout`.
    ///         Tasks under dispute (Contested, or Revealed with open disputes) must be settled first; the stake of
    ///         every replica and candidate still holding a task is released.
    function cancelJob(uint256 jobId) external onlyDelegated {
        Job storage job = _jobs[jobId];
        if (job.status != JobStatus.Active) revert JobNotActive(jobId, job.status);
        if (msg.sender != job.submitter) revert NotSubmitter(jobId, msg.sender);
        (uint256 pending, bool starved) = _roundState(job, jobId);
        // INVARIANT: a live dispute's parties and stakes are settled by the game before the task can end.
        if (pending != 0) revert JobHasPendingTask(jobId, pending, _tasks[pending].status);
        if (job.everAssigned && !starved) revert CancelNotAllowed(jobId);
        _endRound(job, jobId, JobStatus.Cancelled);
        uint256 refund = escrow.refund(jobId, job.submitter);
        emit IJobRegistry.JobCancelled(jobId, refund);
    }

    // ---------------------------------------------------------------- solvers

    /// @notice Commits keccak256(abi.encode(root, finalHash, resultCid, msg.sender)) for a replicated task. The last
    ///         replica to commit may reveal instead (see reveal): nothing is left for it to copy.
    function commit(uint256 taskId, bytes32 commitment) external onlyDelegated {
        Task storage t = _activeTask(taskId);
        Job storage job = _jobs[t.jobId];
        if (job.replication < 2) revert WrongVerificationMode(taskId, job.replication);
        if (t.status != TaskStatus.Open && t.status != TaskStatus.Assigned) {
            revert UnexpectedTaskStatus(taskId, t.status);
        }
        uint8 slot = _slotOf(taskId, msg.sender, ReplicaStatus.Assigned, job.replication);
        ReplicaRecord storage r = _replicas[taskId][slot];
        _checkOnTime(taskId, slot, r.deadline, job);
        r.commitOrRoot = commitment;
        _setReplicaStatus(taskId, r, ReplicaStatus.Committed);
        r.deadline = 0;
        emit IJobRegistry.ResultCommitted(taskId, msg.sender, slot);
        if (_allAtLeastCommitted(taskId, job.replication)) {
            uint64 deadline = uint64(block.timestamp) + job.revealWindow;
            for (uint8 s = 0; s < job.replication; ++s) {
                _replicas[taskId][s].deadline = uint48(deadline);
            }
            emit IJobRegistry.RevealOpened(taskId, deadline);
        }
    }

    /// @notice Declines the caller's slot within the first DECLINE_GRACE_BPS of its execution window: a node that
    ///         finds the job's inputs invalid, or that cannot do the work in the window, says so at once instead of
    ///         being reported late and slashed for a window it never accepted (issue 9). Unslashed, not counted late;
    ///         the node is never drawn for this task again and the slot is drawn again. `invalidInputs`: the node
    ///         found the poster's inputs unusable; when FAIL_DECLINES distinct nodes said so of one task and none of
    ///         its replicas committed (a commit shows the inputs were usable), the job is failed (_failJob). `reason`:
    ///         the node's short ASCII note (`time 181/116 s`), emitted so the poster sees why (issue 24); unchecked
    ///         and never read on-chain.
    function decline(uint256 taskId, bool invalidInputs, bytes32 reason) external onlyDelegated {
        Task storage t = _activeTask(taskId);
        Job storage job = _jobs[t.jobId];
        uint8 slot = _slotOf(taskId, msg.sender, ReplicaStatus.Assigned, job.replication);
        ReplicaRecord storage r = _replicas[taskId][slot];
        uint256 graceEnd = uint256(r.deadline) - job.executionWindow
            + (uint256(job.executionWindow) * DECLINE_GRACE_BPS) / BPS;
        // INVARIANT: declining is free only early; past the grace the node accepted the window.
        if (block.timestamp > graceEnd) revert DeclineTooLate(taskId, slot, graceEnd);
        _setReplicaStatus(taskId, r, ReplicaStatus.Voided);
        r.deadline = 0;
        _ban(taskId, msg.sender);
        emit IJobRegistry.ReplicaDeclined(taskId, msg.sender, slot, reason);
        // INVARIANT (issue 23): a refusal that may share the poster's bond bets as much of its own stake: released
        // when the job fails for invalid inputs or ends unfinished, burned when the task is completed from the inputs
        // it refused (_settleDecliners). Sybil decliners cannot fail an honest job for free.
        bool bets = invalidInputs && _invalidDecliners[taskId].length < FAIL_DECLINES;
        _settleStake(msg.sender, 0, job.stakePerReplica - (bets ? DECLINE_BET : 0));
        if (invalidInputs && _countInvalid(taskId, job.replication) && _failJob(job, t.jobId, taskId)) return;
        _requestDraw(taskId);
    }

    /// @notice Reveals a result. Proves leaf 0 == the task's input hash and leaf n == finalHash. The caller is a
    ///         Committed replica whose reveal window is open (its commitment must match), or the last replica still
    ///         to commit, once every other slot committed (its reveal is its commitment: every other result is fixed,
    ///         so nothing is left to copy). A Committed partner whose commitment is this very result
    ///         (keccak256(abi.encode(root, finalHash, resultCid, partner))) is revealed with it, so agreeing replicas
    ///         need one reveal; otherwise the partner's reveal window opens (if not yet). Once both revealed, equal
    ///         (root, finalHash) wait out a challenge window (P2: agreement is not finality); anything else is
    ///         Contested.
    function reveal(
        uint256 taskId,
        bytes32 root,
        bytes32 finalHash,
        uint32 n,
        bytes32 resultCid,
        bytes32[] calldata proof0,
        bytes32[] calldata proofN
    ) external onlyDelegated {
        bytes32 commitment = _resultCommitment(root, finalHash, resultCid, msg.sender);
        (uint8 slot, uint64 revealWindow) = _checkReveal(taskId, commitment);
        _checkTrace(taskId, root, finalHash, n, proof0, proofN);
        _revealPartner(taskId, slot ^ 1, root, finalHash, resultCid, revealWindow);
        _recordResult(taskId, slot, msg.sender, root, finalHash, resultCid);
        _settleReveals(taskId);
    }

    /// @dev Slot `s`, if Committed: revealed with this result when its commitment is to it (it stores the result,
    ///      its spent commitment's slot taking the root, and the revealer then shares it); else its reveal window
    ///      opens now if it had none.
    function _revealPartner(
        uint256 taskId,
        uint8 s,
        bytes32 root,
        bytes32 finalHash,
        bytes32 resultCid,
        uint64 revealWindow
    ) internal {
        ReplicaRecord storage o = _replicas[taskId][s];
        if (o.status != ReplicaStatus.Committed) return;
        address partner = o.node;
        if (o.commitOrRoot == _resultCommitment(root, finalHash, resultCid, partner)) {
            _recordResult(taskId, s, partner, root, finalHash, resultCid);
        } else if (o.deadline == 0) {
            uint64 deadline = uint64(block.timestamp) + revealWindow;
            o.deadline = uint48(deadline);
            emit IJobRegistry.RevealOpened(taskId, deadline);
        }
    }

    /// @notice Submits the result of an optimistic task (replication 1); opens its challenge window.
    function submitResult(
        uint256 taskId,
        bytes32 root,
        bytes32 finalHash,
        uint32 n,
        bytes32 resultCid,
        bytes32[] calldata proof0,
        bytes32[] calldata proofN
    ) external onlyDelegated {
        Task storage t = _activeTask(taskId);
        Job storage job = _jobs[t.jobId];
        if (job.replication != 1) revert WrongVerificationMode(taskId, job.replication);
        if (t.status != TaskStatus.Assigned) revert UnexpectedTaskStatus(taskId, t.status);
        ReplicaRecord storage r = _replicas[taskId][0];
        if (r.node != msg.sender || r.status != ReplicaStatus.Assigned) {
            revert NotReplica(taskId, msg.sender, ReplicaStatus.Assigned);
        }
        _checkOnTime(taskId, 0, r.deadline, job);
        _checkTrace(taskId, root, finalHash, n, proof0, proofN);
        _recordResult(taskId, 0, msg.sender, root, finalHash, resultCid);
        _openChallengeWindow(taskId, job.challengeWindow);
    }

    /// @notice Accepts a Revealed task (anyone) once its challenge window and the reveal grace after it have passed
    ///         and no dispute against its candidate is open: pays and releases the candidate, or every Revealed
    ///         replica with the claimed result.
    function finalize(uint256 taskId) external onlyDelegated {
        Task storage t = _activeTask(taskId);
        if (t.status != TaskStatus.Revealed) revert UnexpectedTaskStatus(taskId, t.status);
        // INVARIANT (P1): no candidate is accepted while any challenge against it is undecided.
        if (t.openDisputes != 0) revert DisputesPending(taskId, t.openDisputes);
        uint64 end = _windowEnd(t);
        // INVARIANT (P1): a challenge committed by the deadline can still be revealed until `end`.
        if (block.timestamp <= end) revert ChallengeWindowOpen(taskId, end);
        if (t.candidate != address(0)) {
            _accept(taskId, t.finalHash, t.resultCid);
        } else {
            uint8 s = _revealedSlot(taskId);
            _accept(taskId, _traceOf(taskId, s).finalHash, _cidOf(taskId, s));
        }
    }

    /// @notice Reports a replica past its commit/submit/reveal deadline (anyone): burns the job's `lateSlashBps` (the
    ///         rate when the job was posted) of its task stake, unlocks the rest, counts late++, and requests a new
    ///         draw for the slot. If another replica already revealed,
    ///         that result becomes the candidate and waits out a challenge window instead (so a newcomer can't copy
    ///         it).
    function reportLate(uint256 taskId, uint8 slot) external onlyDelegated {
        Task storage t = _activeTask(taskId);
        Job storage job = _jobs[t.jobId];
        if (slot >= job.replication) revert InvalidSlot(taskId, slot);
        if (t.status != TaskStatus.Open && t.status != TaskStatus.Assigned) {
            revert UnexpectedTaskStatus(taskId, t.status);
        }
        ReplicaRecord storage r = _replicas[taskId][slot];
        bool pending = r.status == ReplicaStatus.Assigned || r.status == ReplicaStatus.Committed;
        if (!pending || r.deadline == 0 || block.timestamp <= r.deadline) {
            revert SlotNotLate(taskId, slot, r.status, r.deadline);
        }
        address node = r.node;
        uint256 slashed = (job.stakePerReplica * job.lateSlashBps) / BPS;
        _setReplicaStatus(taskId, r, ReplicaStatus.Late);
        r.deadline = 0;
        _ban(taskId, node);
        emit IJobRegistry.ReplicaLate(taskId, node, slot, slashed);

        _settleStake(node, slashed, job.stakePerReplica - slashed);
        registry.recordLate(node);

        bool otherRevealed = false;
        for (uint8 s = 0; s < job.replication; ++s) {
            ReplicaRecord storage o = _replicas[taskId][s];
            if (o.status == ReplicaStatus.Revealed) otherRevealed = true;
            // A partner still inside its reveal window waits for the new replica to commit.
            if (o.status == ReplicaStatus.Committed && o.deadline >= block.timestamp) o.deadline = 0;
        }
        if (otherRevealed) {
            _openChallengeWindow(taskId, job.challengeWindow);
        } else {
            _requestDraw(taskId);
        }
    }

    // ---------------------------------------------------------------- dispute hooks

    /// @notice See IJobRegistry.
    function onChallenge(uint256 taskId, uint32 epoch, uint64 committedAt) external onlyDisputeGame onlyDelegated {
        Task storage t = _activeTask(taskId);
        if (t.status != TaskStatus.Revealed) revert UnexpectedTaskStatus(taskId, t.status);
        // INVARIANT (P3): a challenge disputes the candidate it was made against, never a later one.
        if (epoch != t.epoch) revert StaleEpoch(taskId, t.epoch, epoch);
        uint64 deadline = t.challengeDeadline;
        // INVARIANT (P1): only challenges committed inside the window count ...
        if (committedAt > deadline) revert ChallengeCommittedLate(taskId, committedAt, deadline);
        uint64 end = _windowEnd(t);
        // ... and they are revealed by the end of the grace (which finalize waits out) or while another challenge of
        // the claim is undecided: a challenger may hold its reveal behind a dispute for the same result (issue 25).
        if (block.timestamp > end && t.openDisputes == 0) revert ChallengeWindowClosed(taskId, end);
        uint32 open = ++t.openDisputes;
        emit OpenDisputesChanged(taskId, epoch, open);
    }

    /// @notice See IJobRegistry.
    function onDisputeSettled(
        uint256 taskId,
        uint32 epoch,
        DisputeOutcome outcome,
        address challenger,
        bytes32 root,
        bytes32 finalHash,
        bytes32 resultCid
    ) external onlyDelegated onlyDisputeGame {
        Task storage t = _tasks[taskId];
        if (t.status == TaskStatus.None) revert TaskNotFound(taskId);
        // INVARIANT (P3): a dispute about an older candidate changes nothing (the game releases its parties).
        // Checked before anything else: a stale dispute may end after the task was accepted or cancelled.
        if (epoch != t.epoch) return;
        Job storage job = _jobs[t.jobId];
        if (t.status == TaskStatus.Contested) {
            _settleContest(taskId, t, job, outcome, challenger);
        } else if (t.status == TaskStatus.Revealed) {
            _settleChallenge(taskId, t, job, outcome, challenger, root, finalHash, resultCid);
        } else {
            revert UnexpectedTaskStatus(taskId, t.status);
        }
    }

    // ---------------------------------------------------------------- internals: checks

    /// @dev Caller holds a Committed slot whose reveal window is open, and the commitment opens to these values.
    /// @dev The revealing slot: Committed with its reveal window open and `commitment` its own, or Assigned as the
    ///      last to commit, on time (its promptness recorded). Returns the job's reveal window.
    function _checkReveal(uint256 taskId, bytes32 commitment) internal returns (uint8 slot, uint64 revealWindow) {
        Task storage t = _activeTask(taskId);
        Job storage job = _jobs[t.jobId];
        if (job.replication < 2) revert WrongVerificationMode(taskId, job.replication);
        if (t.status != TaskStatus.Assigned) revert UnexpectedTaskStatus(taskId, t.status);
        revealWindow = job.revealWindow;
        slot = _replicas[taskId][0].node == msg.sender ? 0 : 1;
        ReplicaRecord storage r = _replicas[taskId][slot];
        if (r.node != msg.sender) revert NotReplica(taskId, msg.sender, ReplicaStatus.Committed);
        if (r.status == ReplicaStatus.Assigned) {
            // INVARIANT (commit-reveal): an uncommitted replica reveals only once every other result is committed.
            if (_replicas[taskId][slot ^ 1].status != ReplicaStatus.Committed) revert RevealNotOpen(taskId);
            _checkOnTime(taskId, slot, r.deadline, job);
            return (slot, revealWindow);
        }
        if (r.status != ReplicaStatus.Committed) revert NotReplica(taskId, msg.sender, ReplicaStatus.Committed);
        if (r.deadline == 0) revert RevealNotOpen(taskId);
        if (block.timestamp > r.deadline) revert DeadlinePassed(taskId, slot, r.deadline);
        if (commitment != r.commitOrRoot) revert CommitmentMismatch(taskId, r.commitOrRoot, commitment);
    }

    /// @dev Reverts past the slot's execution deadline (deadline = assignment + window) or before the job's result
    ///      floor after the assignment; else records, for scheduling by measured performance (issue 9), the share of
    ///      its window the caller used.
    function _checkOnTime(uint256 taskId, uint8 slot, uint64 deadline, Job storage job) internal {
        uint64 window = job.executionWindow;
        if (block.timestamp > deadline) revert DeadlinePassed(taskId, slot, deadline);
        // INVARIANT (issue 23): no result leaves a replica before resultFloor after its assignment, so a fee check
        // (committed only while no result is public) gets the job's declared work to land, whoever fabricates.
        uint256 notBefore = deadline - window + job.resultFloor;
        if (block.timestamp < notBefore) revert ResultTooEarly(taskId, slot, notBefore);
        // Promptness is recorded when the result is accepted (NodeRegistry.unlockCompleted), not here: one registry
        // call per replica instead of two, and only work that was accepted counts (issue 23, lifecycle gas).
        _replicas[taskId][slot].usedBps = uint16(((block.timestamp + window - deadline) * BPS) / window); // <= BPS
    }

    function _checkTrace(
        uint256 taskId,
        bytes32 root,
        bytes32 finalHash,
        uint32 n,
        bytes32[] calldata proof0,
        bytes32[] calldata proofN
    ) internal view {
        Task storage t = _tasks[taskId];
        if (n != t.n) revert WrongTraceLength(taskId, t.n, n);
        // INVARIANT: a revealed final is never zero (a zero finalHash marks a slot that has not revealed).
        if (finalHash == 0) revert InvalidProof(taskId, n, finalHash);
        if (!Merkle.verify(root, 0, t.inputHash, proof0)) revert InvalidProof(taskId, 0, t.inputHash);
        if (!Merkle.verify(root, n, finalHash, proofN)) revert InvalidProof(taskId, n, finalHash);
    }

    function _allAtLeastCommitted(uint256 taskId, uint8 replication) internal view returns (bool) {
        for (uint8 s = 0; s < replication; ++s) {
            ReplicaStatus st = _replicas[taskId][s].status;
            if (st != ReplicaStatus.Committed && st != ReplicaStatus.Revealed) return false;
        }
        return true;
    }

    /// @dev Unlocks every replica still holding the task's stake and marks it Voided (job cancelled).
    function _releaseAll(uint256 taskId, uint8 replication, uint256 stakeAmount) internal {
        for (uint8 s = 0; s < replication; ++s) {
            ReplicaRecord storage r = _replicas[taskId][s];
            ReplicaStatus st = r.status;
            if (st == ReplicaStatus.Assigned || st == ReplicaStatus.Committed || st == ReplicaStatus.Revealed) {
                _setReplicaStatus(taskId, r, ReplicaStatus.Voided);
                _settleStake(r.node, 0, stakeAmount);
            }
        }
    }

    // ---------------------------------------------------------------- internals: results

    function _recordResult(
        uint256 taskId,
        uint8 slot,
        address node,
        bytes32 root,
        bytes32 finalHash,
        bytes32 resultCid
    ) internal {
        ReplicaRecord storage r = _replicas[taskId][slot];
        // slot ^ 1 is the other slot (replication <= 2; with replication 1 it is never Revealed).
        _storeResult(r, _replicas[taskId][slot ^ 1], root, finalHash, resultCid);
        _setReplicaStatus(taskId, r, ReplicaStatus.Revealed);
        r.deadline = 0;
        emit IJobRegistry.ResultRevealed(taskId, node, slot, root, finalHash, resultCid, _tasks[taskId].n);
    }

    /// @dev Writes r's result, or only marks it shared where it equals that of the already revealed other slot `o`.
    function _storeResult(
        ReplicaRecord storage r,
        ReplicaRecord storage o,
        bytes32 root,
        bytes32 finalHash,
        bytes32 resultCid
    ) internal {
        bool otherRevealed = o.status == ReplicaStatus.Revealed;
        if (otherRevealed && o.commitOrRoot == root && o.finalHash == finalHash) {
            r.sharesTrace = true;
        } else {
            r.commitOrRoot = root;
            r.finalHash = finalHash;
        }
        if (otherRevealed && o.resultCid == resultCid) r.sharesCid = true;
        else r.resultCid = resultCid;
    }

    /// @dev After a reveal (replication 2): once both revealed, an identical trace (root and final) becomes the
    ///      claim with a challenge window (P2); anything else, equal finals over different roots included, is
    ///      Contested.
    function _settleReveals(uint256 taskId) internal {
        if (_replicas[taskId][0].status != ReplicaStatus.Revealed) return;
        if (_replicas[taskId][1].status != ReplicaStatus.Revealed) return;
        ReplicaRecord storage a = _traceOf(taskId, 0);
        ReplicaRecord storage b = _traceOf(taskId, 1);
        if (a.commitOrRoot != b.commitOrRoot || a.finalHash != b.finalHash) {
            _setTaskStatus(taskId, _tasks[taskId], TaskStatus.Contested);
            emit IJobRegistry.TaskContested(taskId);
            return;
        }
        _openChallengeWindow(taskId, _jobs[_tasks[taskId].jobId].challengeWindow);
    }

    /// @dev Accepts the task: pays and releases its candidate, or every Revealed replica with this final hash (at
    ///      Revealed every Revealed replica stands behind the claim), then advances the job.
    function _accept(uint256 taskId, bytes32 finalHash, bytes32 resultCid) internal {
        Task storage t = _tasks[taskId];
        Job storage job = _jobs[t.jobId];
        _setTaskStatus(taskId, t, TaskStatus.Accepted);
        emit IJobRegistry.TaskAccepted(taskId, finalHash, resultCid);
        _settleDecliners(taskId, true);
        address candidate = t.candidate;
        if (candidate != address(0)) {
            // The game left the winning challenger's task stake locked for the registry to release. A candidate
            // reports nothing (it re-executed from inputs it obtained): its result finds every input available.
            // not drawn: no reputation (its pay is the slashed stake) and no promptness (it had no window)
            registry.unlockCompleted(candidate, job.stakePerReplica, false, NO_PROMPTNESS);
        } else {
            uint256 verdict = type(uint32).max;
            for (uint8 s = 0; s < job.replication; ++s) {
                ReplicaRecord storage r = _replicas[taskId][s];
                if (r.status != ReplicaStatus.Revealed || _traceOf(taskId, s).finalHash != finalHash) continue;
                _setReplicaStatus(taskId, r, ReplicaStatus.Accepted);
                registry.unlockCompleted(r.node, job.stakePerReplica, r.credited, r.usedBps);
                verdict &= _reportedBy(taskId, s, r.node);
            }
            if (verdict != 0) _inputVerdict[taskId] = uint32(verdict);
        }
        _advance(t, taskId, finalHash, resultCid);
    }

    /// @dev P10: pays an accepted task's payees (its candidate, or its Accepted replicas) once its consumer has been
    ///      accepted, or burns their payments when that consumer found its bundle unavailable. Each accepted task
    ///      is settled exactly once: by its consumer's acceptance (_advance), or when the job ends first (_endRound).
    function _settle(Job storage job, uint256 jobId, uint256 taskId, bool forfeit) internal {
        address candidate = _tasks[taskId].candidate;
        if (candidate != address(0)) return _settleOne(job, jobId, taskId, candidate, forfeit);
        for (uint8 s = 0; s < job.replication; ++s) {
            ReplicaRecord storage r = _replicas[taskId][s];
            if (r.status == ReplicaStatus.Accepted) _settleOne(job, jobId, taskId, r.node, forfeit);
        }
    }

    function _settleOne(Job storage job, uint256 jobId, uint256 taskId, address node, bool forfeit) internal {
        if (forfeit) {
            emit PaymentForfeited(taskId, node, job.paymentPerTask);
            escrow.burn(jobId, job.paymentPerTask);
        } else {
            escrow.pay(jobId, node, job.paymentPerTask);
        }
    }

    // ---------------------------------------------------------------- internals: dispute outcomes

    /// @dev A replica-vs-replica dispute ended. A winner's result is only the new claim (P3); both losing or no
    ///      verdict reopens the task.
    function _settleContest(uint256 taskId, Task storage t, Job storage job, DisputeOutcome outcome, address challenger)
        internal
    {
        if (outcome == DisputeOutcome.ChallengerWins || outcome == DisputeOutcome.DefenderWins) {
            uint8 a = _slotOf(taskId, challenger, ReplicaStatus.Revealed, job.replication);
            uint8 loser = outcome == DisputeOutcome.ChallengerWins ? a ^ 1 : a;
            ReplicaRecord storage l = _replicas[taskId][loser];
            // The game slashed the loser's task stake; the winner's stays locked as a Revealed replica's.
            _setReplicaStatus(taskId, l, ReplicaStatus.Slashed);
            _ban(taskId, l.node);
            ReplicaRecord storage w = _replicas[taskId][loser ^ 1];
            _newClaim(taskId, t, job, w.node, _traceOf(taskId, loser ^ 1).finalHash);
        } else if (outcome == DisputeOutcome.BothLose) {
            _reopen(taskId, t, job, ReplicaStatus.Slashed);
        } else if (outcome == DisputeOutcome.Voided) {
            _reopen(taskId, t, job, ReplicaStatus.Voided);
        } else {
            revert UnexpectedOutcome(taskId, outcome);
        }
    }

    /// @dev An optimistic challenge against the current claim ended.
    function _settleChallenge(
        uint256 taskId,
        Task storage t,
        Job storage job,
        DisputeOutcome outcome,
        address challenger,
        bytes32 root,
        bytes32 finalHash,
        bytes32 resultCid
    ) internal {
        // Fate follows claims: a co-defender the game did not slash (the other member alone made B's losing
        // step-level claim) is released before the claim's other replicas are dropped (nonzero only when B lost).
        _spare(taskId, job, IDisputeGame(msg.sender).sparedDefender());
        if (outcome == DisputeOutcome.DefenderWins || outcome == DisputeOutcome.Voided) {
            // The claim stands; other challenges against it may still be running. A challenge committed in the
            // window and held behind this one may be revealed for a fresh grace from now (issue 25).
            uint32 open = t.openDisputes;
            if (open > 0) t.openDisputes = --open;
            if (block.timestamp > t.challengeDeadline) t.revealHold = uint32(block.timestamp - t.challengeDeadline);
            emit OpenDisputesChanged(taskId, t.epoch, open);
        } else if (outcome == DisputeOutcome.ChallengerWins) {
            if (challenger == address(0)) revert ZeroAddress("challenger");
            _dropClaim(taskId, t, job, ReplicaStatus.Slashed);
            t.candidate = challenger;
            t.candidateRoot = root;
            t.finalHash = finalHash;
            t.resultCid = resultCid;
            _newClaim(taskId, t, job, challenger, finalHash);
        } else if (outcome == DisputeOutcome.BothLose) {
            _reopen(taskId, t, job, ReplicaStatus.Slashed);
        } else {
            revert UnexpectedOutcome(taskId, outcome);
        }
    }

    /// @dev P3: a dispute winner's result is the new claim, challengeable in a fresh window; disputes against the
    ///      old claim become stale.
    function _newClaim(uint256 taskId, Task storage t, Job storage job, address holder, bytes32 finalHash) internal {
        uint32 epoch = ++t.epoch;
        t.openDisputes = 0;
        emit IJobRegistry.CandidateReplaced(taskId, holder, finalHash, epoch);
        _openChallengeWindow(taskId, job.challengeWindow);
    }

    /// @dev The current claim lost: its Revealed replicas are marked `mark` (Voided ones get their stake back; the
    ///      game slashed the others) and banned, or its candidate is banned (the game slashed its stake).
    function _dropClaim(uint256 taskId, Task storage t, Job storage job, ReplicaStatus mark) internal {
        for (uint8 s = 0; s < job.replication; ++s) {
            ReplicaRecord storage r = _replicas[taskId][s];
            if (r.status != ReplicaStatus.Revealed) continue;
            _setReplicaStatus(taskId, r, mark);
            _ban(taskId, r.node);
            if (mark == ReplicaStatus.Voided) _settleStake(r.node, 0, job.stakePerReplica);
        }
        if (t.candidate != address(0)) _ban(taskId, t.candidate);
    }

    /// @dev The game spared `node`: its Revealed replica is Voided and its stake unlocked; it is not paid (nor banned).
    function _spare(uint256 taskId, Job storage job, address node) internal {
        if (node == address(0)) return;
        for (uint8 s = 0; s < job.replication; ++s) {
            ReplicaRecord storage r = _replicas[taskId][s];
            if (r.node != node || r.status != ReplicaStatus.Revealed) continue;
            _setReplicaStatus(taskId, r, ReplicaStatus.Voided);
            _settleStake(node, 0, job.stakePerReplica);
        }
    }

    /// @dev No acceptable result: drop the claim, forget any candidate, and request a new draw.
    function _reopen(uint256 taskId, Task storage t, Job storage job, ReplicaStatus mark) internal {
        _dropClaim(taskId, t, job, mark);
        t.candidate = address(0);
        t.candidateRoot = 0;
        t.finalHash = 0;
        t.resultCid = 0;
        ++t.epoch;
        t.openDisputes = 0;
        t.challengeDeadline = 0;
        emit IJobRegistry.TaskReopened(taskId);
        _requestDraw(taskId);
    }

    // ---------------------------------------------------------------- internals: ending a job early

    /// @dev The current round's first task under dispute (0: none), and whether one of its tasks has had an empty
    ///      slot for over `assignmentTimeout`.
    function _roundState(Job storage job, uint256 jobId) internal view returns (uint256 pending, bool starved) {
        uint32 round = job.currentRound;
        for (uint32 i = 0; i <= job.shards; ++i) {
            uint256 taskId = _taskIds[jobId][round][i];
            if (taskId == 0) continue;
            Task storage t = _tasks[taskId];
            if (t.status == TaskStatus.Contested || (t.status == TaskStatus.Revealed && t.openDisputes > 0)) {
                if (pending == 0) pending = taskId;
            }
            if (t.status == TaskStatus.Open && block.timestamp > uint256(t.openSince) + assignmentTimeout) {
                starved = true;
            }
        }
    }

    /// @dev Ends the current round's unaccepted tasks (no dispute may be live: callers check) and sets the job's
    ///      final status. The stake of every replica and candidate still holding a task is released.
    function _endRound(Job storage job, uint256 jobId, JobStatus status) internal {
        uint32 round = job.currentRound;
        for (uint32 i = 0; i <= job.shards; ++i) {
            uint256 taskId = _taskIds[jobId][round][i];
            if (taskId == 0) continue;
            Task storage t = _tasks[taskId];
            if (t.status == TaskStatus.Accepted) {
                // Accepted but its consumer never will be: paid without an availability verdict (P10).
                _settle(job, jobId, taskId, false);
                continue;
            }
            _setTaskStatus(taskId, t, TaskStatus.Cancelled);
            // Disputes still running in the game (all stale) stay no-ops for good.
            ++t.epoch;
            _settleDecliners(taskId, false);
            _releaseAll(taskId, job.replication, job.stakePerReplica);
            // INVARIANT: a candidate's task stake is released once: here, on acceptance, or slashed by the game.
            if (t.candidate != address(0)) _settleStake(t.candidate, 0, job.stakePerReplica);
        }
        // The previous AGGREGATE is settled when this round completes; a round ended before that pays it here.
        if (round > 0 && job.acceptedInRound < job.shards) {
            _settle(job, jobId, _taskIds[jobId][round - 1][job.shards], false);
        }
        job.status = status;
    }

    /// @dev Records an invalid-inputs decline of `taskId` by msg.sender (distinct: a decliner is banned from the
    ///      task); true once FAIL_DECLINES nodes did and no replica of the task holds a slot now (Assigned, Committed
    ///      or Revealed: a node still working on the inputs may find them usable, issue 23). Checked again on every
    ///      later invalid decline, so a holder that leaves or a live dispute that blocked the failure only delays it.
    function _countInvalid(uint256 taskId, uint8 replication) internal returns (bool) {
        address[] storage decliners = _invalidDecliners[taskId];
        // INVARIANT: the list is bounded: only the first FAIL_DECLINES decliners are recorded (and share the bond).
        if (decliners.length < FAIL_DECLINES) decliners.push(msg.sender);
        if (decliners.length < FAIL_DECLINES) return false;
        for (uint8 s = 0; s < replication; ++s) {
            if (!_isEmpty(_replicas[taskId][s].status)) return false;
        }
        return true;
    }

    /// @dev The bets of `taskId`'s recorded invalid-inputs decliners: burned when the task was `completed` from the
    ///      inputs they refused, else released (the job failed for invalid inputs, or ended first).
    function _settleDecliners(uint256 taskId, bool completed) internal {
        address[] storage decliners = _invalidDecliners[taskId];
        for (uint256 i = 0; i < decliners.length; ++i) {
            _settleStake(decliners[i], completed ? DECLINE_BET : 0, completed ? 0 : DECLINE_BET);
        }
    }

    /// @dev Burns `burned` of `node`'s locked stake and releases `released` more of it: every release and burn of a
    ///      task stake but a completed task's (unlockCompleted) goes through here.
    function _settleStake(address node, uint256 burned, uint256 released) internal {
        if (burned > 0) {
            registry.slash(node, burned, address(this));
            // INVARIANT: tokens are conserved: what is slashed here is burned.
            token.burn(burned);
        }
        if (released > 0) registry.unlock(node, released);
    }

    /// @dev Fails the job for invalid inputs: the round's tasks end, the decliners share POSTER_BOND, the rest of the
    ///      escrow is refunded. Not while a dispute of the round is live (false: the slot is simply drawn again).
    function _failJob(Job storage job, uint256 jobId, uint256 taskId) internal returns (bool) {
        (uint256 pending,) = _roundState(job, jobId);
        if (pending != 0) return false;
        _endRound(job, jobId, JobStatus.Failed);
        address[] storage decliners = _invalidDecliners[taskId];
        uint256 share = POSTER_BOND / decliners.length;
        // INVARIANT: tokens are conserved: the bond was deposited with the escrow and never paid for work.
        for (uint256 i = 0; i < decliners.length; ++i) {
            escrow.pay(jobId, decliners[i], share);
        }
        uint256 refund = escrow.refund(jobId, job.submitter);
        emit IJobRegistry.JobFailed(jobId, taskId, refund);
        return true;
    }

    // ---------------------------------------------------------------- internals: rounds

    /// @dev Called on every acceptance: completes a round's shards into an AGGREGATE, or an AGGREGATE into the next
    ///      round or the job's end.
    function _advance(Task storage t, uint256 taskId, bytes32 finalHash, bytes32 resultCid) internal {
        uint256 jobId = t.jobId;
        Job storage job = _jobs[jobId];
        uint32 round = t.round;
        if (t.kind == TaskKind.Train) {
            if (++job.acceptedInRound < job.shards) return;
            bytes32[] memory finals = new bytes32[](job.shards);
            bool unavailable = round > 0;
            for (uint32 i = 0; i < job.shards; ++i) {
                uint256 id = _taskIds[jobId][round][i];
                (finals[i],) = _taskResult(id);
                // The previous AGGREGATE was this round's one input: burned only if every task found it unavailable.
                unavailable = unavailable && _inputVerdict[id] & 1 != 0;
            }
            if (round > 0) _settle(job, jobId, _taskIds[jobId][round - 1][job.shards], unavailable);
            _createTask(jobId, round, job.shards, TaskKind.Aggregate, keccak256(abi.encode(finals)), 1);
            return;
        }
        // An AGGREGATE's inputs are its round's shard tasks: each paid, or burned where this result found it unavailable.
        uint32 verdict = _inputVerdict[taskId];
        for (uint32 i = 0; i < job.shards; ++i) {
            _settle(job, jobId, _taskIds[jobId][round][i], (verdict >> i) & 1 != 0);
        }
        if (round + 1 < job.rounds) {
            job.currentRound = round + 1;
            job.acceptedInRound = 0;
            job.roundInput = finalHash;
            emit IJobRegistry.RoundAdvanced(jobId, job.currentRound, finalHash);
            _createRoundTasks(jobId);
        } else {
            _settle(job, jobId, taskId, false); // the last AGGREGATE has no consumer: paid at once (P10)
            job.status = JobStatus.Completed;
            job.modelHash = finalHash;
            job.modelCid = resultCid;
            emit IJobRegistry.JobCompleted(jobId, finalHash, resultCid);
        }
    }
}
