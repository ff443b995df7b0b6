// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {System, Actors} from "./HandlerBase.sol";
import {AdversarySide} from "./AdversarySide.sol";
import {
    PostJobParams,
    JobStatus,
    Task,
    TaskKind,
    TaskStatus,
    Replica,
    ReplicaStatus,
    Claim,
    DisputePhase
} from "../../../contracts/types/VerityTypes.sol";

/// @notice Drives random v2 traffic: jobs (replication 1 and 2), honest, cheating and adversarial replicas, sybil
///         challenges, honest challenges, dispute play, panels with no-shows, finalization, late reports, owner
///         parameter changes mid-flight, stake moves, withdrawals, cancel and reclaim, and P10 availability
///         reports (honest holders report only withheld inputs, adversaries lie). Time passes only in `warp`,
///         after the honest side has done everything due ("one honest staked party looks"). The issue-9 adversaries
///         (griefing poster, sybils, ineligible stake) act from AdversarySide; the owner moves every setter here.
contract Handler is AdversarySide {
    /// @dev A contract the owner may authorize before the seal (it never calls the registry) and never after.
    address public constant ROGUE = address(0xBAD);
    /// @notice Whether ROGUE was a protocol contract when the owner sealed the set (it must stay so for good).
    bool public rogueAtSeal;

    constructor(System memory s, Actors memory a, uint8 sabotage_) AdversarySide(s, a, sabotage_) {}

    function _pickTask(uint256 seed) internal view returns (uint256) {
        uint256 n = jobs.taskCount();
        return n == 0 ? 0 : 1 + (seed % n);
    }

    /// @dev The first task from a random start whose status is `st` (0 if none): actions are not wasted.
    function _pickTaskIn(uint256 seed, TaskStatus st) internal view returns (uint256) {
        uint256 n = jobs.taskCount();
        for (uint256 i = 0; i < n; ++i) {
            uint256 id = 1 + ((seed % n + i) % n);
            if (views.getTask(id).status == st) return id;
        }
        return 0;
    }

    /// @dev The first dispute from a random start that is not Resolved (0 if none).
    /// @dev The first dispute from a random start in phase `want` (None: any phase but Resolved), 0 if none.
    function _pickDispute(uint256 seed, DisputePhase want) internal view returns (uint256) {
        uint256 n = game.disputeCount();
        for (uint256 i = 0; i < n; ++i) {
            uint256 id = 1 + ((seed % n + i) % n);
            DisputePhase ph = disputeLens.getDispute(id).phase;
            if (want == DisputePhase.None ? ph != DisputePhase.Resolved : ph == want) return id;
        }
        return 0;
    }

    function _pickJob(uint256 seed) internal view returns (uint256) {
        uint256 n = jobs.jobCount();
        return n == 0 ? 0 : 1 + (seed % n);
    }

    // ---------------------------------------------------------------- submitter

    function postJob(uint8 shards, bool replicated, uint8 rounds, uint8 steps) external tracked {
        if (jobs.jobCount() - ghostGriefJobs - ghostIllegalJobs >= 4) return;
        PostJobParams memory p = _jobParams(shards, replicated, rounds, steps);
        uint256 amount = views.escrowFor(p.paymentPerTask, p.replication, p.shards, p.rounds);
        vm.prank(submitter);
        try jobs.postJob(p) {
            ghostEscrowPosted += amount;
        } catch {}
    }

    function cancel(uint256 seed) external tracked {
        uint256 jobId = _pickJob(seed);
        if (jobId == 0) return;
        vm.prank(views.getJob(jobId).submitter);
        try jobs.cancelJob(jobId) {} catch {} // its refund is counted from the escrow's logs (_countRefund)
    }

    function reclaim(uint256 seed) external tracked {
        uint256 jobId = _pickJob(seed);
        if (jobId == 0 || views.getJob(jobId).status != JobStatus.Completed) return;
        vm.prank(views.getJob(jobId).submitter);
        try jobs.reclaimEscrow(jobId) {} catch {} // its refund is counted from the escrow's logs (_countRefund)
    }

    // ---------------------------------------------------------------- solvers and keepers

    /// @dev Assigned replicas work; adversaries act or stay silent.
    function work(uint256 seed) external tracked {
        uint256 taskId = _pickTaskIn(seed, TaskStatus.Assigned);
        if (taskId == 0) return;
        _work(taskId, seed % 3 != 0);
    }

    function finalize(uint256 seed) external tracked {
        uint256 taskId = _pickTaskIn(seed, TaskStatus.Revealed);
        if (taskId == 0) return;
        Task memory t = views.getTask(taskId);
        if (t.status != TaskStatus.Revealed || t.openDisputes != 0) return;
        try jobs.finalize(taskId) {} catch {}
    }

    function reportLate(uint256 seed, bool slot1) external tracked {
        uint256 taskId = _pickTask(seed);
        if (taskId == 0) return;
        try jobs.reportLate(taskId, slot1 ? 1 : 0) {} catch {}
    }

    /// @dev P10: the holder of a consumer task's pending slot (Assigned or Committed) reports an input unavailable.
    ///      An adversary lies at will (any input, or one past the last: refused); an honest holder reports only an
    ///      input it really could not fetch (_withheld) and otherwise stays silent.
    function reportUnavailable(uint256 seed, uint32 index) external tracked {
        (uint256 taskId, uint8 slot) = _consumerSlot(seed);
        if (taskId == 0) return;
        Task memory t = views.getTask(taskId);
        address node = views.getReplica(taskId, slot).node;
        uint32 n = _inputs(t);
        if (isHonest[node]) {
            index %= n;
            if (!_withheld(_inputTask(t, index))) return;
        } else {
            index %= n + 1;
        }
        _report(taskId, slot, node, index);
    }

    /// @dev The first (consumer task, pending slot) from a random start of an Active job, held by an identity that
    ///      is not ineligible (0 if none): an AGGREGATE or a later round's TRAIN task.
    function _consumerSlot(uint256 seed) internal view returns (uint256, uint8) {
        uint256 n = jobs.taskCount();
        for (uint256 i = 0; i < n; ++i) {
            uint256 id = 1 + ((seed % n + i) % n);
            Task memory t = views.getTask(id);
            if (t.status != TaskStatus.Open && t.status != TaskStatus.Assigned) continue;
            if (t.kind == TaskKind.Train && t.round == 0) continue;
            if (views.getJob(t.jobId).status != JobStatus.Active) continue;
            Replica[] memory reps = views.getReplicas(id);
            for (uint256 k = 0; k < reps.length; ++k) {
                uint8 s = uint8(((seed >> 128) + k) % reps.length);
                ReplicaStatus st = reps[s].status;
                if (st != ReplicaStatus.Assigned && st != ReplicaStatus.Committed) continue;
                if (!isIneligible[reps[s].node]) return (id, s);
            }
        }
        return (0, 0);
    }

    function assign(uint256 seed) external tracked {
        uint256 taskId = _pickTaskIn(seed, TaskStatus.Open);
        if (taskId == 0 || views.getTask(taskId).status != TaskStatus.Open) return;
        try jobs.assign(taskId) {} catch {}
    }

    // ---------------------------------------------------------------- challenges

    /// @dev P1: an adversary identity challenges a Revealed claim with a wrong trace, then goes silent.
    function sybilChallenge(uint256 seed, uint256 who) external tracked {
        uint256 taskId = _pickTaskIn(seed, TaskStatus.Revealed);
        if (taskId == 0) return;
        Task memory t = views.getTask(taskId);
        if (t.status != TaskStatus.Revealed || block.timestamp > t.challengeDeadline) return;
        if (views.getJob(t.jobId).status != JobStatus.Active) return;
        Claim memory c = jobs.claimOf(taskId);
        address a = adv[who % adv.length];
        if (a == c.defender || a == c.coDefender) return;
        bytes32[] memory h = _sybilTrace(taskId, a);
        if (h[t.n] == c.finalHash) return;
        if (registry.freeStake(a) < views.getJob(t.jobId).stakePerReplica) return;
        if (_challenge(taskId, a, h) != 0) ++ghostSybilChallenges;
    }

    /// @dev An honest verifier challenges a Revealed claim whose final is wrong.
    function honestChallenge(uint256 seed) external tracked {
        uint256 taskId = _pickTaskIn(seed, TaskStatus.Revealed);
        if (taskId == 0) return;
        _honestChallengeOf(taskId, seed);
    }

    function openContest(uint256 seed) external tracked {
        uint256 taskId = _pickTaskIn(seed, TaskStatus.Contested);
        if (taskId == 0 || views.getTask(taskId).status != TaskStatus.Contested) return;
        if (game.disputeOfTask(taskId) != 0) return;
        try game.openDispute(taskId) {} catch {}
    }

    /// @dev Plays a dispute: honest parties move, dishonest ones move or stay silent; timeouts; stale ones abandoned.
    function dispute(uint256 seed) external tracked {
        uint256 id = _pickDispute(seed, DisputePhase.Bisect0);
        if (id == 0) id = _pickDispute(seed, DisputePhase.None);
        if (id == 0) return;
        _playDispute(id, seed % 2 == 0);
    }

    /// @dev Seats, votes (one seat may no-show) and advances a panel.
    function panelAct(uint256 seed) external tracked {
        uint256 id = _pickDispute(seed, DisputePhase.Judging);
        if (id == 0) return;
        _playPanel(id, true, seed / 7);
    }

    // ---------------------------------------------------------------- time

    /// @dev The honest side acts first, then time passes; every node sends a heartbeat.
    function warp(uint16 secs, uint256 seed) external tracked {
        _honestTurn(seed);
        vm.warp(block.timestamp + bound(secs, 1, 200));
        vm.roll(block.number + 1);
        _heartbeatAll();
    }

    /// @dev A keeper's block: the honest side acts, a minute or more passes, then every ready task is finalized
    ///      and every open one assigned (time moves faster, so runs of 64 calls complete jobs).
    function tick(uint16 secs, uint256 seed) external tracked {
        _honestTurn(seed);
        vm.warp(block.timestamp + bound(secs, 60, 240));
        vm.roll(block.number + 1);
        _heartbeatAll();
        for (uint256 id = 1; id <= jobs.taskCount(); ++id) {
            Task memory t = views.getTask(id);
            if (t.status == TaskStatus.Revealed && t.openDisputes == 0) {
                try jobs.finalize(id) {} catch {}
            } else if (t.status == TaskStatus.Open) {
                try jobs.assign(id) {} catch {}
            }
        }
    }

    // ---------------------------------------------------------------- owner

    /// @dev Every owner setter, each over its whole legal range (time-like ones capped so runs keep moving); the seal
    ///      (after which adding a protocol contract must revert), a mint past the supply cap (must revert) and the
    ///      one-time wirings (must revert). Parameters change mid-task: no honest party may be slashed for it.
    function setParams(uint8 which, uint256 a, uint256 b) external tracked {
        which = which % 16;
        if (which == 13) return _sealOrProbe(a);
        if (which == 14) return _mintPastCap(a);
        if (which == 15) return _rewire();
        vm.startPrank(owner);
        if (which == 0) game.setClockAllowance(uint64(bound(a, 30, 300)));
        else if (which == 1) game.setChallengerBond(bound(a, 1e18, 20e18));
        else if (which == 2) game.setShares(bound(a, 0, 6_000), bound(b, 0, 4_000));
        else if (which == 3) panel.setPanelSize(uint8(1 + 2 * bound(a, 0, 3)));
        else if (which == 4) panel.setRefereeStake(bound(a, 1e18, 10e18));
        else if (which == 5) panel.setSlashes(bound(a, 0, 10_000), bound(b, 0, 10_000));
        else if (which == 6) panel.setWindows(uint64(bound(a, 1, 300)), uint64(bound(b, 1, 300)));
        else if (which == 7) jobs.setLateSlashBps(bound(a, 0, 10_000));
        else if (which == 8) jobs.setAssignmentTimeout(uint64(bound(a, 1, 900)));
        else if (which == 9) jobs.setDefaultWindows(uint64(bound(a, 30, 300)), uint64(bound(b, 5, 200)), uint64(bound(a ^ b, 3, 200)));
        else if (which == 10) registry.setUnbondingPeriod(uint64(bound(a, 0, 600)));
        else if (which == 11) registry.setLivenessWindow(uint64(bound(a, 1, 1_200)));
        else if (!registry.protocolsSealed()) registry.setProtocol(ROGUE, a % 2 == 0);
        vm.stopPrank();
        ++ghostParamChanges;
    }

    /// @dev Seals the protocol set (one time in four), or once sealed checks that the owner can add no protocol
    ///      contract (sabotage 7 lifts the seal from storage first).
    function _sealOrProbe(uint256 a) internal {
        if (!registry.protocolsSealed()) {
            if (a % 2 != 0) return;
            vm.prank(owner);
            registry.sealProtocols();
            rogueAtSeal = registry.isProtocol(ROGUE);
            ++ghostSeals;
            return;
        }
        if (sabotage == 7) _corruptRegistryWord(1, type(uint256).max, this.sealedFlag); // 1 + max wraps to 0
        vm.prank(owner);
        try registry.setProtocol(ROGUE, true) {
            _rule("a protocol contract was added after the seal");
        } catch {
            ++ghostRejectedOwnerMoves;
        }
    }

    /// @notice The seal as a number (the view the sabotage-7 mutation probes for).
    function sealedFlag() external view returns (uint256) {
        return registry.protocolsSealed() ? 1 : 0;
    }

    /// @dev The owner mints within the cap (to itself: counted) and then past MAX_SUPPLY (must revert).
    function _mintPastCap(uint256 a) internal {
        uint256 room = token.MAX_SUPPLY() - token.totalMinted();
        vm.startPrank(owner);
        token.mint(owner, bound(a, 0, room < 1e18 ? room : 1e18));
        room = token.MAX_SUPPLY() - token.totalMinted();
        try token.mint(owner, room + 1 + (a % 1e18)) {
            _rule("a mint past MAX_SUPPLY");
        } catch {
            ++ghostRejectedOwnerMoves;
        }
        vm.stopPrank();
    }

    /// @dev The one-time wirings (game, escrow's registry, panel's game) cannot be swapped under live work.
    function _rewire() internal {
        vm.startPrank(owner);
        try jobs.setDisputeGame(ROGUE) {
            _rule("the dispute game was swapped");
        } catch {
            ++ghostRejectedOwnerMoves;
        }
        try escrow.setJobs(ROGUE) {
            _rule("the escrow's registry was swapped");
        } catch {
            ++ghostRejectedOwnerMoves;
        }
        try panel.setGame(ROGUE) {
            _rule("the panel's game was swapped");
        } catch {
            ++ghostRejectedOwnerMoves;
        }
        vm.stopPrank();
    }

    // ---------------------------------------------------------------- stake

    function stakeMore(uint256 who, uint96 amount) external tracked {
        address node = everyone[who % everyone.length];
        vm.prank(node);
        try registry.stake(bound(amount, 1, 100e18)) {} catch {}
    }

    /// @dev Honest nodes keep at least 700 of stake bonded (enough to verify and referee); adversaries anything.
    function unstake(uint256 who, uint96 amount) external tracked {
        address node = everyone[who % everyone.length];
        uint256 free = registry.freeStake(node);
        if (isHonest[node]) {
            uint256 bonded = registry.getNode(node).stake - registry.getNode(node).pendingUnstake;
            if (bonded <= 700e18) return;
            if (free > bonded - 700e18) free = bonded - 700e18;
        }
        _requestUnstake(node, amount, free);
    }

    function withdrawStake(uint256 who) external tracked {
        _withdrawStake(everyone[who % everyone.length]);
    }

}
