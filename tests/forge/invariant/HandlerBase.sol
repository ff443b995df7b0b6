// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {HandlerAudit, System, Actors} from "./HandlerAudit.sol";
import {Merkle} from "../../../contracts/lib/Merkle.sol";
import {
    Job,
    JobStatus,
    Task,
    TaskKind,
    TaskStatus,
    Replica,
    ReplicaStatus,
    Claim,
    DisputePhase
} from "../../../contracts/types/VerityTypes.sol";

/// @notice The storage cheatcodes the mutation checks use (not in the shared Vm interface).
interface VmStore {
    function store(address target, bytes32 slot, bytes32 value) external;
    function load(address target, bytes32 slot) external view returns (bytes32);
}

/// @notice The moves both sides of the handler share: assigned replicas working, honest declines and challenges,
///         heartbeats, and the storage probe the mutation checks use to corrupt the registry.
abstract contract HandlerBase is HandlerAudit {
    VmStore internal constant vmStore = VmStore(address(uint160(uint256(keccak256("hevm cheat code")))));

    constructor(System memory s, Actors memory a, uint8 sabotage_) HandlerAudit(s, a, sabotage_) {}

    /// @dev Assigned replicas commit / submit, committed ones reveal. Adversaries act only when `advActs`.
    function _work(uint256 taskId, bool advActs) internal {
        Task memory t = views.getTask(taskId);
        if (t.status != TaskStatus.Open && t.status != TaskStatus.Assigned) return;
        Job memory job = views.getJob(t.jobId);
        if (job.status != JobStatus.Active) return;
        for (uint8 s = 0; s < job.replication; ++s) {
            Replica memory r = views.getReplica(taskId, s);
            if (r.status != ReplicaStatus.Assigned || block.timestamp > r.deadline) continue;
            if (isAdv[r.node] && !advActs) continue;
            // An ineligible identity is never drawn (checkIneligibleNeverDrawn); if it were, it would idle.
            if (isIneligible[r.node]) continue;
            if (isHonest[r.node] && _honestDeclines(taskId, t.jobId, job.executionWindow, r.node)) continue;
            if (isHonest[r.node]) _honestReports(t, taskId, s, r.node);
            bytes32[] memory h = _replicaTrace(taskId, r.node);
            bytes32 root = Merkle.rootOf(h);
            if (job.replication == 1) {
                if (t.status != TaskStatus.Assigned) continue;
                vm.prank(r.node);
                try jobs.submitResult(
                    taskId, root, h[t.n], t.n, _cid(h[t.n]), Merkle.proofOf(h, 0), Merkle.proofOf(h, t.n)
                ) {
                    ++_honestActions;
                } catch {}
            } else if ((taskId & 1) == 1 && views.getReplica(taskId, s ^ 1).status == ReplicaStatus.Committed) {
                // The last to commit reveals in place of its commit (half the tasks; the rest commit, then reveal).
                vm.prank(r.node);
                try jobs.reveal(
                    taskId, root, h[t.n], t.n, _cid(h[t.n]), Merkle.proofOf(h, 0), Merkle.proofOf(h, t.n)
                ) {
                    ++_honestActions;
                    _countCollusion(taskId);
                } catch {}
            } else {
                bytes32 c = keccak256(abi.encode(root, h[t.n], _cid(h[t.n]), r.node));
                vm.prank(r.node);
                try jobs.commit(taskId, c) {
                    ++_honestActions;
                } catch {}
            }
        }
        if (job.replication == 1) return;
        for (uint8 s = 0; s < 2; ++s) {
            if (views.getTask(taskId).status != TaskStatus.Assigned) return;
            Replica memory r = views.getReplica(taskId, s);
            if (r.status != ReplicaStatus.Committed || r.deadline == 0 || block.timestamp > r.deadline) continue;
            if (isAdv[r.node] && !advActs) continue;
            bytes32[] memory h = _replicaTrace(taskId, r.node);
            vm.prank(r.node);
            try jobs.reveal(
                taskId,
                Merkle.rootOf(h),
                h[t.n],
                t.n,
                _cid(h[t.n]),
                Merkle.proofOf(h, 0),
                Merkle.proofOf(h, t.n)
            ) {
                ++_honestActions;
                _countCollusion(taskId);
            } catch {}
        }
    }

    /// @dev An honest replica of a poisoned job declines it as invalid; of a job whose execution window is shorter
    ///      than the node needs, as one it cannot serve. At once: time passes only after the honest turn, so this is
    ///      always inside the decline grace. True when the node declined (or, sabotage 3, sat on the slot instead).
    function _honestDeclines(uint256 taskId, uint256 jobId, uint64 window, address node) internal returns (bool) {
        bool poison = poisoned[jobId];
        if (!poison && window >= workSeconds[node]) return false;
        if (sabotage == 3) return true;
        vm.prank(node);
        try jobs.decline(taskId, poison, bytes32(0)) {
            ++_honestActions;
            if (poison) {
                ++ghostInvalidDeclines;
                _noteInvalidDecline(taskId, node);
            } else {
                ++ghostWindowDeclines;
            }
        } catch {
            _violation(node, "honest decline refused");
        }
        return true;
    }

    // ---------------------------------------------------------------- P10: availability reports

    /// @dev A consumer task's inputs: an AGGREGATE's are its round's shards, a later round's TRAIN task's is the
    ///      previous AGGREGATE, a round-0 TRAIN task has none.
    function _inputs(Task memory t) internal view returns (uint32) {
        if (t.kind == TaskKind.Aggregate) return views.getJob(t.jobId).shards;
        return t.round > 0 ? 1 : 0;
    }

    /// @dev The task that produced input `i` of consumer `t` (i < _inputs(t)).
    function _inputTask(Task memory t, uint32 i) internal view returns (uint256) {
        if (t.kind == TaskKind.Aggregate) return views.taskOf(t.jobId, t.round, i);
        return views.taskOf(t.jobId, t.round - 1, views.getJob(t.jobId).shards);
    }

    /// @dev Whether an honest node cannot fetch accepted input task `inputId`'s bundle: its job is one whose
    ///      adversaries withhold (HandlerTraces.withholds) and every payee of the input is an adversary.
    function _withheld(uint256 inputId) internal view returns (bool) {
        Task memory t = views.getTask(inputId);
        if (t.status != TaskStatus.Accepted || !withholds(t.jobId)) return false;
        if (t.candidate != address(0)) return isAdv[t.candidate];
        Replica[] memory reps = views.getReplicas(inputId);
        bool any;
        for (uint256 s = 0; s < reps.length; ++s) {
            if (reps[s].status != ReplicaStatus.Accepted) continue;
            if (!isAdv[reps[s].node]) return false;
            any = true;
        }
        return any;
    }

    /// @dev An honest holder about to work on consumer `t` reports every input it could not fetch, and nothing else.
    function _honestReports(Task memory t, uint256 taskId, uint8 slot, address node) internal {
        uint32 n = _inputs(t);
        for (uint32 i = 0; i < n; ++i) {
            if ((reportedMask[taskId][slot][node] >> i) & 1 != 0 || !_withheld(_inputTask(t, i))) continue;
            if (!_report(taskId, slot, node, i)) _unavailable("an honest holder's report was refused");
        }
    }

    /// @dev `node`, holding slot `slot` of consumer `taskId`, reports input `index` unavailable; the handler's
    ///      ledger (reportedMask) records what succeeded (sabotage 8: not an honest holder's report).
    function _report(uint256 taskId, uint8 slot, address node, uint32 index) internal returns (bool) {
        vm.prank(node);
        try jobs.reportUnavailable(taskId, index) {
            ++ghostUnavailableReports;
            if (isHonest[node]) ++ghostHonestReports;
            if (sabotage != 8 || !isHonest[node]) reportedMask[taskId][slot][node] |= uint32(1) << index;
            return true;
        } catch {
            return false;
        }
    }

    /// @dev Mirrors the registry's list of distinct invalid-input decliners of a task (capped like it).
    function _noteInvalidDecline(uint256 taskId, address node) internal {
        if (_invalidDecliners[taskId].length < jobs.FAIL_DECLINES()) _invalidDecliners[taskId].push(node);
    }

    /// @dev Every node sends a heartbeat (sybils and ineligible identities only while registered).
    function _heartbeatAll() internal {
        for (uint256 i = 0; i < everyone.length; ++i) {
            vm.prank(everyone[i]);
            registry.heartbeat();
        }
        for (uint256 i = 0; i < sybils.length; ++i) {
            vm.prank(sybils[i]);
            try registry.heartbeat() {} catch {}
        }
        for (uint256 i = 0; i < ineligible.length; ++i) {
            vm.prank(ineligible[i]);
            registry.heartbeat();
        }
    }

    function _countCollusion(uint256 taskId) internal {
        if (views.getTask(taskId).status != TaskStatus.Revealed) return;
        Replica[] memory reps = views.getReplicas(taskId);
        if (reps.length == 2 && isAdv[reps[0].node] && isAdv[reps[1].node]) {
            if (reps[0].status == ReplicaStatus.Revealed && reps[1].status == ReplicaStatus.Revealed) {
                ++ghostCollusions;
            }
        }
    }


    /// @dev An honest verifier challenges a Revealed claim with a wrong final, unless an honest challenge of this
    ///      epoch is still live. Not of a poisoned job: its inputs are invalid for every honest node (the drawn ones
    ///      decline it), so no honest verifier holds a trace of it to challenge with (P9: the client logs the invalid
    ///      input and does not challenge). A made-up result accepted there burns honest refusals' bets: the residual
    ///      `ghostGriefedBets` counts.
    function _honestChallengeOf(uint256 taskId, uint256 seed) internal {
        if (sabotage == 1) return;
        Task memory t = views.getTask(taskId);
        if (t.status != TaskStatus.Revealed || block.timestamp > t.challengeDeadline) return;
        if (views.getJob(t.jobId).status != JobStatus.Active || poisoned[t.jobId]) return;
        Claim memory c = jobs.claimOf(taskId);
        bytes32[] memory h = _honestTrace(taskId);
        if (c.finalHash == h[t.n]) return;
        uint256 pending = _honestChallenge[taskId][t.epoch];
        if (pending != 0 && disputeLens.getDispute(pending).phase != DisputePhase.Resolved) return;
        uint256 stakeNeeded = views.getJob(t.jobId).stakePerReplica;
        for (uint256 i = 0; i < honest.length; ++i) {
            address v = honest[(seed % honest.length + i) % honest.length];
            if (v == c.defender || v == c.coDefender) continue;
            if (registry.freeStake(v) < stakeNeeded || token.balanceOf(v) < game.challengerBond()) continue;
            uint256 id = _challenge(taskId, v, h);
            if (id != 0) {
                ++_honestActions;
                _honestChallenge[taskId][t.epoch] = id;
                ++ghostHonestChallenges;
                return;
            }
        }
    }

    /// @dev Commit, next block, reveal (0 if the reveal failed).
    function _challenge(uint256 taskId, address who, bytes32[] memory h) internal returns (uint256 id) {
        uint32 n = uint32(h.length - 1);
        bytes32 root = Merkle.rootOf(h);
        bytes32 salt = keccak256(abi.encode(taskId, views.getTask(taskId).epoch, who));
        bytes32 c = keccak256(abi.encode(taskId, root, h[n], _cid(h[n]), salt, who));
        vm.prank(who);
        game.commitChallenge(c);
        vm.roll(block.number + 1);
        vm.prank(who);
        try game.challengeOptimistic(taskId, root, h[n], n, _cid(h[n]), salt, Merkle.proofOf(h, 0), Merkle.proofOf(h, n))
        returns (uint256 disputeId) {
            id = disputeId;
        } catch {}
    }

    /// @dev `node` asks to unbond `amount`, bounded to the `free` stake it may unbond (nothing when none is free).
    function _requestUnstake(address node, uint256 amount, uint256 free) internal {
        if (free == 0) return;
        vm.prank(node);
        try registry.requestUnstake(bound(amount, 1, free)) {} catch {}
    }

    /// @dev `node` withdraws whatever stake finished unbonding (a refusal is part of the traffic, not a failure).
    function _withdrawStake(address node) internal {
        vm.prank(node);
        try registry.withdraw() {} catch {}
    }

    /// @dev Mutation helper: finds the NodeRegistry storage word behind a view by probing (no layout is hard-coded):
    ///      the first of slots 0..127 holding `value` whose change moves `read()` away from `value`; it is left
    ///      holding `value + delta` (0 if none found: the mutation test then fails loudly).
    function _corruptRegistryWord(uint256 value, uint256 delta, function() external view returns (uint256) read)
        internal
        returns (uint256 slot)
    {
        for (slot = 0; slot < 128; ++slot) {
            bytes32 at = vmStore.load(address(registry), bytes32(slot));
            if (uint256(at) != value) continue;
            uint256 changed;
            unchecked {
                changed = value + delta;
            }
            vmStore.store(address(registry), bytes32(slot), bytes32(changed));
            if (read() != value) return slot;
            vmStore.store(address(registry), bytes32(slot), at);
        }
        revert("no NodeRegistry storage word behind the view");
    }
}
