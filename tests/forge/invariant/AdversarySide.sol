// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {System, Actors} from "./HandlerBase.sol";
import {HonestSide} from "./HonestSide.sol";
import {VmState} from "../base/Fixture.sol";
import {
    PostJobParams,
    Job,
    JobStatus,
    Task,
    TaskStatus,
    Replica,
    ReplicaStatus,
    BPS
} from "../../../contracts/types/VerityTypes.sol";

/// @dev Every posted job asks for this much memory and profile bit 1 (the ineligible declarations miss one).
uint32 constant JOB_MEMORY_MB = 1_000;

/// @notice The issue-9 adversaries of the invariant handler: a griefing poster (minimal windows, poisoned inputs,
///         illegal windows), adversary declines (early, late, "invalid" on a valid job), sybil identities that
///         register with the minimum stake, leave, withdraw and come back, and heavy identities whose declaration no
///         posted job accepts. Each keeps the ghost totals the invariants check.
abstract contract AdversarySide is HonestSide {
    string internal constant MULTIADDR = "/ip4/127.0.0.1/tcp/4001/p2p/QmSybil";
    /// @dev Jobs the griefer posts at most (the honest submitter posts 4 at most).
    uint256 internal constant MAX_GRIEF_JOBS = 4;
    /// @dev Jobs posted with an illegal window (must stay 0: each is also a rule violation).
    uint256 public ghostIllegalJobs;
    /// @dev Draws an adversary identity nudged its weight before (nudgeBeforeDraw).
    uint256 public ghostNudgedDraws;

    constructor(System memory s, Actors memory a, uint8 sabotage_) HonestSide(s, a, sabotage_) {}

    /// @dev The job shape every poster uses; windows 0 take the registry's defaults.
    function _jobParams(uint8 shards, bool replicated, uint8 rounds, uint8 steps)
        internal
        view
        returns (PostJobParams memory p)
    {
        p.manifestCid = keccak256("cid");
        p.manifestHash = keccak256("manifest");
        p.initialStateHash = keccak256(abi.encode("input", jobs.jobCount()));
        p.shards = uint32(bound(shards, 1, 2));
        p.rounds = uint32(bound(rounds, 1, 2));
        p.stepsPerRound = uint32(bound(steps, 2, 4));
        p.checkpointInterval = 1;
        p.paymentPerTask = 3e18;
        p.replication = replicated ? 2 : 1;
        p.stakePerReplica = 100e18;
        p.minMemoryMb = JOB_MEMORY_MB;
        p.profileBit = 1;
    }

    // ---------------------------------------------------------------- griefing poster

    /// @dev The griefer first tries an execution or reveal window below the protocol minimum (must revert), then posts a job with minimal
    ///      windows (`minimal`) and/or poisoned inputs (`poison`: honest nodes drawn for it decline it as invalid).
    function griefPost(bool poison, bool minimal, bool replicated, uint8 shards) external tracked {
        if (ghostGriefJobs >= MAX_GRIEF_JOBS) return;
        PostJobParams memory p = _jobParams(shards, replicated, 1, 2);
        uint256 amount = views.escrowFor(p.paymentPerTask, p.replication, p.shards, p.rounds);
        if (minimal) p.executionWindow = jobs.MIN_EXECUTION_WINDOW() - 1;
        else if (shards % 2 == 0) p.revealWindow = jobs.MIN_REVEAL_WINDOW() - 1;
        else p.challengeWindow = jobs.MIN_CHALLENGE_WINDOW() - 1; // a 1-second window: nothing could be challenged
        vm.prank(griefer);
        try jobs.postJob(p) {
            ghostEscrowPosted += amount;
            ++ghostIllegalJobs;
            _rule("a job with a window below the protocol minimum was posted");
        } catch {}
        p.initialStateHash = keccak256(abi.encode("input", jobs.jobCount()));
        p.executionWindow = minimal ? jobs.MIN_EXECUTION_WINDOW() : 0;
        p.revealWindow = minimal ? jobs.MIN_REVEAL_WINDOW() : 0;
        p.challengeWindow = minimal ? jobs.MIN_CHALLENGE_WINDOW() : 0;
        vm.prank(griefer);
        try jobs.postJob(p) returns (uint256 jobId) {
            ghostEscrowPosted += amount;
            ++ghostGriefJobs;
            if (poison) {
                poisoned[jobId] = true;
                ++ghostPoisonedJobs;
            }
        } catch {}
    }

    /// @dev An adversary (or sybil) replica declines its slot, early or late, claiming invalid inputs or not (it may
    ///      try to fail a valid job). A decline accepted past the grace breaks the protocol's rule.
    function advDecline(uint256 seed, bool invalid) external tracked {
        (uint256 taskId, uint8 slot) = _advAssignedSlot(seed);
        if (taskId == 0) return;
        Replica memory r = views.getReplica(taskId, slot);
        Job memory job = views.getJob(views.getTask(taskId).jobId);
        uint256 graceEnd =
            uint256(r.deadline) - job.executionWindow + (uint256(job.executionWindow) * jobs.DECLINE_GRACE_BPS()) / BPS;
        vm.prank(r.node);
        try jobs.decline(taskId, invalid, bytes32(0)) {
            ++ghostAdvDeclines;
            if (block.timestamp > graceEnd) _rule("a decline past the grace was accepted");
            if (invalid) _noteInvalidDecline(taskId, r.node);
        } catch {}
    }

    /// @dev A keeper fulfils an Open task's draw (rolling to its randomness target: no time passes) and the drawn nodes
    ///      answer at once: honest ones work or decline, adversaries decline (claiming invalid inputs or not) or keep
    ///      the slot. Up to three draws, preferring poisoned jobs, so that a griefer's job can fail inside one run.
    function keeperDraws(uint256 seed) external tracked {
        uint256 taskId = _openTask(seed, true);
        if (taskId == 0) taskId = _openTask(seed, false);
        if (taskId == 0) return;
        for (uint256 k = 0; k < 3 && _drawNow(taskId); ++k) {
            _work(taskId, false);
            _advResponds(taskId, seed >> (8 * k));
        }
    }

    /// @dev Rolls past an Open task's randomness target and fills its slots; false if it was not Open or drew nobody.
    function _drawNow(uint256 taskId) internal returns (bool) {
        Task memory t = views.getTask(taskId);
        if (t.status != TaskStatus.Open || views.getJob(t.jobId).status != JobStatus.Active) return false;
        if (randomness.isStale(t.drawRequest)) randomness.renew(t.drawRequest); // its epoch ended unread
        uint256 target = randomness.targetOf(t.drawRequest);
        if (block.number <= target) vm.roll(target + 1);
        try jobs.assign(taskId) {
            return true;
        } catch {
            return false;
        }
    }

    /// @dev Adversary replicas of a freshly drawn task decline it at once (seed-chosen), invalid inputs or not.
    function _advResponds(uint256 taskId, uint256 seed) internal {
        Replica[] memory reps = views.getReplicas(taskId);
        for (uint8 s = 0; s < reps.length; ++s) {
            address node = reps[s].node;
            if (reps[s].status != ReplicaStatus.Assigned || !isAdv[node] || (seed >> s) % 3 == 0) continue;
            _advDeclineNow(taskId, node, (seed >> (s + 2)) % 2 == 0);
        }
    }

    function _advDeclineNow(uint256 taskId, address node, bool invalid) internal {
        vm.prank(node);
        try jobs.decline(taskId, invalid, bytes32(0)) {
            ++ghostAdvDeclines;
            if (invalid) _noteInvalidDecline(taskId, node);
        } catch {}
    }

    /// @dev The first Open task of an Active job from a random start (of a poisoned job when `poisonedOnly`), or 0.
    function _openTask(uint256 seed, bool poisonedOnly) internal view returns (uint256) {
        uint256 n = jobs.taskCount();
        for (uint256 i = 0; i < n; ++i) {
            uint256 id = 1 + ((seed % n + i) % n);
            Task memory t = views.getTask(id);
            if (t.status != TaskStatus.Open || (poisonedOnly && !poisoned[t.jobId])) continue;
            if (views.getJob(t.jobId).status == JobStatus.Active) return id;
        }
        return 0;
    }

    /// @dev The first (task, slot) from a random start held Assigned by an adversary identity (0 if none).
    function _advAssignedSlot(uint256 seed) internal view returns (uint256, uint8) {
        uint256 n = jobs.taskCount();
        for (uint256 i = 0; i < n; ++i) {
            uint256 id = 1 + ((seed % n + i) % n);
            Task memory t = views.getTask(id);
            if (t.status != TaskStatus.Open && t.status != TaskStatus.Assigned) continue;
            Replica[] memory reps = views.getReplicas(id);
            for (uint8 s = 0; s < reps.length; ++s) {
                if (reps[s].status == ReplicaStatus.Assigned && isAdv[reps[s].node]) return (id, s);
            }
        }
        return (0, 0);
    }

    // ---------------------------------------------------------------- sybils

    /// @dev A fresh (or returning) sybil identity registers with the minimum stake, sometimes adding some (enough
    ///      to be drawn), with any roles.
    function sybilRegister(uint256 who, uint8 roles, uint96 extra) external tracked {
        address s = sybils[who % sybils.length];
        if (registry.getNode(s).slot != 0) return;
        bool returning = registry.getNode(s).registeredAt != 0;
        vm.startPrank(s);
        try registry.register(uint8(bound(roles, 1, 7)), 0, 16_000, 100, 3, MULTIADDR) {
            ++ghostSybilRegistrations;
            if (returning) ++ghostSybilReturns;
            registry.heartbeat(); // registering is not a check-in: drawn only after one
        } catch {}
        uint256 more = bound(extra, 0, 300e18);
        if (more > 0 && extra % 2 == 0) try registry.stake(more) {} catch {}
        vm.stopPrank();
        if (sabotage == 4) _corruptSolverTotal();
    }

    /// @dev A registered sybil leaves (everything) or unbonds part of its stake.
    function sybilLeave(uint256 who, uint96 amount) external tracked {
        address s = sybils[who % sybils.length];
        if (registry.getNode(s).slot == 0) return;
        if (amount % 3 != 0) {
            vm.prank(s);
            try registry.leave() {
                ++ghostSybilLeaves;
            } catch {}
        } else {
            _requestUnstake(s, amount, registry.freeStake(s));
        }
    }

    /// @dev A sybil withdraws what finished unbonding (all of it deregisters the identity).
    function sybilWithdraw(uint256 who) external tracked {
        _withdrawStake(sybils[who % sybils.length]);
    }

    /// @dev Sabotage 4: the registry's solver total drifts from its weights (a registry bug the invariant must catch).
    function _corruptSolverTotal() internal {
        (uint256 total,) = lens.totalWeights();
        // The registry keeps weights in whole gwei (WEIGHT_UNIT) and its view returns wei: probe for the stored units.
        _corruptRegistryWord(total / registry.WEIGHT_UNIT(), 1, this.solverTotal);
    }

    /// @notice The registry's solver total (the view the sabotage-4 mutation probes for).
    /// @dev The solver total in the registry's stored unit (gwei of weighted stake).
    function solverTotal() external view returns (uint256 total) {
        (total,) = lens.totalWeights();
        total /= registry.WEIGHT_UNIT();
    }

    // ---------------------------------------------------------------- draws fixed before their value

    /// @dev Issue 23, the weight-nudging actor: with an Open task's draw value readable, an adversary identity changes
    ///      its weight (unstake, stake, heartbeat, redeclare, or a sybil registering) and only then lets the keeper
    ///      draw. The draw it would have got without acting is simulated first: if the nudged draw seats more
    ///      adversary identities than that, the nudge steered it (a broken rule). Giving its own slot away is allowed.
    function nudgeBeforeDraw(uint256 seed, uint256 who, uint96 amount, uint8 kind) external tracked {
        uint256 taskId = _openTask(seed, false);
        if (taskId == 0) return;
        uint256 request = views.getTask(taskId).drawRequest;
        if (randomness.isStale(request)) randomness.renew(request); // its epoch ended unread
        uint256 target = randomness.targetOf(request);
        if (block.number <= target) vm.roll(target + 1);
        uint256 start = VmState(address(vm)).snapshotState();
        uint256 before = _advAssignedAfterDraw(taskId);
        VmState(address(vm)).revertToState(start);
        vmLogs.getRecordedLogs(); // drop the simulated draw's events: the stake audit reads only what happened
        _nudge(who, amount, kind);
        ++ghostNudgedDraws;
        if (_advAssignedAfterDraw(taskId) > before) _rule("a weight nudge after the draw's value steered it");
    }

    /// @dev Draws the task (if anyone is eligible) and counts the adversary and sybil identities holding its slots.
    function _advAssignedAfterDraw(uint256 taskId) internal returns (uint256 count) {
        try jobs.assign(taskId) {} catch {}
        Replica[] memory reps = views.getReplicas(taskId);
        for (uint256 i = 0; i < reps.length; ++i) {
            if (reps[i].status == ReplicaStatus.Assigned && (_listed(adv, reps[i].node) || _listed(sybils, reps[i].node))) {
                ++count;
            }
        }
    }

    function _nudge(uint256 who, uint96 amount, uint8 kind) internal {
        address node = who % 2 == 0 ? adv[(who >> 1) % adv.length] : sybils[(who >> 1) % sybils.length];
        uint256 units = bound(amount, 1, 1_000) * registry.WEIGHT_UNIT();
        vm.startPrank(node);
        kind %= 5;
        if (kind == 0) try registry.requestUnstake(units) {} catch {}
        if (kind == 1) try registry.stake(units) {} catch {}
        if (kind == 2) try registry.heartbeat() {} catch {}
        if (kind == 3) try registry.updateNode(amount % 2 == 0 ? 1 : 3, 0, 16_000, 100, 3, MULTIADDR) {} catch {}
        if (kind == 4) try registry.register(7, 0, 16_000, 100, 3, MULTIADDR) {} catch {}
        vm.stopPrank();
    }

    function _listed(address[] storage list, address node) internal view returns (bool) {
        for (uint256 i = 0; i < list.length; ++i) {
            if (list[i] == node) return true;
        }
        return false;
    }

    // ---------------------------------------------------------------- ineligible stake

    /// @dev A heavy ineligible identity changes its declaration to another one no posted job accepts (sabotage 5: to
    ///      an eligible one, while the handler still counts it ineligible).
    function ineligibleRedeclare(uint256 who, uint8 which) external tracked {
        address node = ineligible[who % ineligible.length];
        (uint8 roles, uint32 memoryMb, uint32 profiles) = ineligibleDeclaration(which);
        if (sabotage == 5) (roles, memoryMb, profiles) = (7, 16_000, 3);
        vm.prank(node);
        registry.updateNode(roles, 0, memoryMb, 100, profiles, MULTIADDR);
        ++ghostRedeclarations;
    }
}

/// @notice The declarations no posted job (CPU, JOB_MEMORY_MB, profile bit 1) accepts: no memory, only the CUDA
///         profile, one MB short, or the verifier role alone (neither solver nor referee).
function ineligibleDeclaration(uint256 which) pure returns (uint8 roles, uint32 memoryMb, uint32 profiles) {
    which %= 4;
    if (which == 0) return (7, 0, 3);
    if (which == 1) return (7, 16_000, 2);
    if (which == 2) return (5, JOB_MEMORY_MB - 1, 1);
    return (2, 16_000, 3);
}
