// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Test} from "../base/Test.sol";
import {VerityToken} from "../../../contracts/VerityToken.sol";
import {NodeRegistry} from "../../../contracts/NodeRegistry.sol";
import {JobRegistry} from "../../../contracts/JobRegistry.sol";
import {JobEscrow} from "../../../contracts/JobEscrow.sol";
import {DisputeGame} from "../../../contracts/DisputeGame.sol";
import {RefereePanel} from "../../../contracts/RefereePanel.sol";
import {BlockhashRandomness} from "../../../contracts/BlockhashRandomness.sol";
import {IJobRegistry} from "../../../contracts/interfaces/IJobRegistry.sol";
import {IDisputeGame} from "../../../contracts/interfaces/IDisputeGame.sol";
import {IRefereePanel} from "../../../contracts/interfaces/IRefereePanel.sol";
import {INodeRegistry} from "../../../contracts/interfaces/INodeRegistry.sol";
import {Merkle} from "../../../contracts/lib/Merkle.sol";
import {
    Job,
    JobStatus,
    Task,
    TaskStatus,
    Replica,
    ReplicaStatus,
    Claim,
    DisputePhase,
    DisputeOutcome
} from "../../../contracts/types/VerityTypes.sol";

/// @notice The log cheatcodes (not in the shared Vm interface).
interface VmLogs {
    struct Log {
        bytes32[] topics;
        bytes data;
        address emitter;
    }

    function recordLogs() external;
    function getRecordedLogs() external returns (Log[] memory);
}

/// @notice The system under test.
struct System {
    VerityToken token;
    NodeRegistry registry;
    BlockhashRandomness randomness;
    JobEscrow escrow;
    JobRegistry jobs;
    RefereePanel panel;
    DisputeGame game;
    address owner;
    address submitter;
}

/// @notice State, traces, the honest side's turn and the per-call slash audit of the invariant handler.
/// @dev Traces are chained: h_0 = input, h_j = keccak(tag_j, h_{j-1}, j) with tag_j = "honest" before the trace's
///      divergence index and its own tag from there on. An honest referee recomputes step s from the agreed h_s.
abstract contract HandlerBase is Test {
    VmLogs internal constant vmLogs = VmLogs(address(uint160(uint256(keccak256("hevm cheat code")))));
    bytes32 internal constant HONEST = "honest";
    bytes32 internal constant ADV = "adversary";

    VerityToken internal token;
    NodeRegistry internal registry;
    BlockhashRandomness internal randomness;
    JobEscrow internal escrow;
    JobRegistry internal jobs;
    RefereePanel internal panel;
    DisputeGame internal game;
    address internal owner;
    address internal submitter;

    address[] internal honest;
    address[] internal adv;
    address[] internal everyone;
    mapping(address => bool) public isAdv;
    mapping(address => bool) public isHonest;

    // ---------------------------------------------------------------- ghosts
    uint256 public calls;
    uint256 public ghostEscrowPosted;
    uint256 public ghostEscrowWithdrawn;
    uint256 public ghostRefunded;
    uint256 public ghostDisputes;
    uint256 public ghostPanelsSeated;
    uint256 public ghostVerdicts;
    uint256 public ghostSybilChallenges;
    uint256 public ghostHonestChallenges;
    uint256 public ghostCandidateReplaced;
    uint256 public ghostCollusions;
    uint256 public ghostNoShows;
    uint256 public ghostAccepted;
    uint256 public ghostParamChanges;
    uint256 public ghostPinpoints;
    /// @notice Slashes of a party acting honestly (must stay 0) and the last one's description.
    uint256 public honestSlashes;
    string public lastHonestSlash;

    /// @dev (disputeId, referee) chosen by the handler to skip its commit.
    mapping(uint256 => mapping(address => bool)) public noShow;
    mapping(uint256 => bool) internal _panelHadNoShow;
    /// @dev The honest challenge pending against (taskId, epoch).
    mapping(uint256 => mapping(uint32 => uint256)) internal _honestChallenge;
    /// @dev Successful honest-side transactions (the honest turn repeats until this stops moving).
    uint256 internal _honestActions;

    /// @notice Mutation switch for the tests that show the invariants have teeth (0 in the invariant runs):
    ///         1 = honest verifiers never challenge, 2 = honest referees vote for the defender's claim.
    uint8 public immutable sabotage;

    constructor(System memory s, address[] memory honest_, address[] memory adv_, uint8 sabotage_) {
        sabotage = sabotage_;
        token = s.token;
        registry = s.registry;
        randomness = s.randomness;
        escrow = s.escrow;
        jobs = s.jobs;
        panel = s.panel;
        game = s.game;
        owner = s.owner;
        submitter = s.submitter;
        honest = honest_;
        adv = adv_;
        for (uint256 i = 0; i < honest_.length; ++i) {
            isHonest[honest_[i]] = true;
            everyone.push(honest_[i]);
        }
        for (uint256 i = 0; i < adv_.length; ++i) {
            isAdv[adv_[i]] = true;
            everyone.push(adv_[i]);
        }
    }

    function nodeList() external view returns (address[] memory) {
        return everyone;
    }

    modifier tracked() {
        ++calls;
        vmLogs.recordLogs();
        _;
        _scanLogs();
    }

    // ---------------------------------------------------------------- traces

    function _trace(bytes32 input, uint256 n, bytes32 tag, uint256 d) internal pure returns (bytes32[] memory h) {
        h = new bytes32[](n + 1);
        h[0] = input;
        for (uint256 j = 1; j <= n; ++j) {
            h[j] = keccak256(abi.encode(j < d ? HONEST : tag, h[j - 1], j));
        }
    }

    function _honestTrace(uint256 taskId) internal view returns (bytes32[] memory) {
        Task memory t = jobs.getTask(taskId);
        return _trace(t.inputHash, t.n, HONEST, type(uint256).max);
    }

    /// @notice The final hash an honest solver computes for a task.
    function honestFinal(uint256 taskId) public view returns (bytes32) {
        Task memory t = jobs.getTask(taskId);
        return _trace(t.inputHash, t.n, HONEST, type(uint256).max)[t.n];
    }

    /// @dev Honest nodes cheat on 1 task in 4 (their own wrong trace); adversaries always, all with one wrong trace.
    function _cheats(uint256 taskId, address node) internal view returns (bool) {
        return isAdv[node] || uint256(keccak256(abi.encode(taskId, node))) % 4 == 0;
    }

    function _replicaTrace(uint256 taskId, address node) internal view returns (bytes32[] memory) {
        Task memory t = jobs.getTask(taskId);
        if (isAdv[node]) {
            return _trace(t.inputHash, t.n, ADV, 1 + uint256(keccak256(abi.encode(taskId, ADV))) % t.n);
        }
        if (_cheats(taskId, node)) {
            uint256 d = 1 + uint256(keccak256(abi.encode(taskId, node, "d"))) % t.n;
            return _trace(t.inputHash, t.n, bytes32(uint256(uint160(node))), d);
        }
        return _trace(t.inputHash, t.n, HONEST, type(uint256).max);
    }

    /// @dev A sybil's wrong trace: chained from its divergence, or (one node in two) honest leaves around a single
    ///      forged leaf and a forged final (not chain-consistent: bisection meets agreeing leaves after a difference).
    function _sybilTrace(uint256 taskId, address node) internal view returns (bytes32[] memory h) {
        Task memory t = jobs.getTask(taskId);
        uint256 r = uint256(keccak256(abi.encode(taskId, node, "sybil")));
        bytes32 tag = keccak256(abi.encode("sybil", node));
        h = _trace(t.inputHash, t.n, tag, 1 + r % t.n);
        if ((r >> 128) % 2 == 0) return h;
        h = _trace(t.inputHash, t.n, HONEST, type(uint256).max);
        h[1 + r % t.n] = tag;
        h[t.n] = keccak256(abi.encode(tag, "final"));
    }

    /// @dev The trace behind `root` among those `party` may have produced (empty if none).
    function _sideTrace(uint256 taskId, address party, bytes32 root) internal view returns (bytes32[] memory h) {
        h = _honestTrace(taskId);
        if (Merkle.rootOf(h) == root) return h;
        h = _replicaTrace(taskId, party);
        if (Merkle.rootOf(h) == root) return h;
        h = _sybilTrace(taskId, party);
        if (Merkle.rootOf(h) == root) return h;
        return new bytes32[](0);
    }

    function _cid(bytes32 finalHash) internal pure returns (bytes32) {
        return keccak256(abi.encode("cid", finalHash));
    }

    // ---------------------------------------------------------------- work

    /// @dev Assigned replicas commit / submit, committed ones reveal. Adversaries act only when `advActs`.
    function _work(uint256 taskId, bool advActs) internal {
        Task memory t = jobs.getTask(taskId);
        if (t.status != TaskStatus.Open && t.status != TaskStatus.Assigned) return;
        Job memory job = jobs.getJob(t.jobId);
        if (job.status != JobStatus.Active) return;
        for (uint8 s = 0; s < job.replication; ++s) {
            Replica memory r = jobs.getReplica(taskId, s);
            if (r.status != ReplicaStatus.Assigned || block.timestamp > r.deadline) continue;
            if (isAdv[r.node] && !advActs) continue;
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
            } else {
                bytes32 c = keccak256(abi.encode(root, h[t.n], _salt(r.node), r.node));
                vm.prank(r.node);
                try jobs.commit(taskId, c) {
                    ++_honestActions;
                } catch {}
            }
        }
        if (job.replication == 1) return;
        for (uint8 s = 0; s < 2; ++s) {
            if (jobs.getTask(taskId).status != TaskStatus.Assigned) return;
            Replica memory r = jobs.getReplica(taskId, s);
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
                _salt(r.node),
                Merkle.proofOf(h, 0),
                Merkle.proofOf(h, t.n)
            ) {
                ++_honestActions;
                _countCollusion(taskId);
            } catch {}
        }
    }

    function _countCollusion(uint256 taskId) internal {
        if (jobs.getTask(taskId).status != TaskStatus.Revealed) return;
        Replica[] memory reps = jobs.getReplicas(taskId);
        if (reps.length == 2 && isAdv[reps[0].node] && isAdv[reps[1].node]) {
            if (reps[0].status == ReplicaStatus.Revealed && reps[1].status == ReplicaStatus.Revealed) {
                ++ghostCollusions;
            }
        }
    }

    function _salt(address node) internal pure returns (bytes32) {
        return bytes32(uint256(uint160(node)));
    }

    /// @dev An honest verifier challenges a Revealed claim with a wrong final, unless an honest challenge of this
    ///      epoch is still live.
    function _honestChallengeOf(uint256 taskId, uint256 seed) internal {
        if (sabotage == 1) return;
        Task memory t = jobs.getTask(taskId);
        if (t.status != TaskStatus.Revealed || block.timestamp > t.challengeDeadline) return;
        if (jobs.getJob(t.jobId).status != JobStatus.Active) return;
        Claim memory c = jobs.claimOf(taskId);
        bytes32[] memory h = _honestTrace(taskId);
        if (c.finalHash == h[t.n]) return;
        uint256 pending = _honestChallenge[taskId][t.epoch];
        if (pending != 0 && game.getDispute(pending).phase != DisputePhase.Resolved) return;
        uint256 stakeNeeded = jobs.getJob(t.jobId).stakePerReplica;
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
        bytes32 salt = keccak256(abi.encode(taskId, jobs.getTask(taskId).epoch, who));
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

    // ---------------------------------------------------------------- slash audit

    function _scanLogs() internal {
        VmLogs.Log[] memory logs = vmLogs.getRecordedLogs();
        for (uint256 i = 0; i < logs.length; ++i) {
            VmLogs.Log memory l = logs[i];
            if (l.topics.length == 0) continue;
            bytes32 t0 = l.topics[0];
            if (l.emitter == address(jobs)) {
                if (t0 == IJobRegistry.CandidateReplaced.selector) ++ghostCandidateReplaced;
                else if (t0 == IJobRegistry.TaskAccepted.selector) ++ghostAccepted;
            } else if (l.emitter == address(game)) {
                if (t0 == IDisputeGame.DisputeOpened.selector) ++ghostDisputes;
            } else if (l.emitter == address(panel)) {
                if (t0 == IRefereePanel.RefereesSeated.selector) ++ghostPanelsSeated;
                else if (t0 == IRefereePanel.PanelDecided.selector) ++ghostVerdicts;
            } else if (l.emitter == address(registry) && t0 == INodeRegistry.StakeSlashed.selector) {
                address node = address(uint160(uint256(l.topics[1])));
                if (isHonest[node]) _auditSlash(logs, node, address(uint160(uint256(l.topics[2]))));
            }
        }
    }

    function _auditSlash(VmLogs.Log[] memory logs, address node, address to) internal {
        if (to == address(jobs)) return _violation(node, "late slash of an honest replica");
        if (to == address(panel)) {
            for (uint256 i = 0; i < logs.length; ++i) {
                VmLogs.Log memory l = logs[i];
                if (l.emitter != address(panel) || l.topics[0] != IRefereePanel.RefereeSlashed.selector) continue;
                if (address(uint160(uint256(l.topics[2]))) != node) continue;
                (, uint8 reason) = abi.decode(l.data, (uint256, uint8));
                if (reason != 3 && noShow[uint256(l.topics[1])][node]) return;
            }
            return _violation(node, "referee slashed for an honest vote");
        }
        if (to == address(game)) {
            for (uint256 i = 0; i < logs.length; ++i) {
                VmLogs.Log memory l = logs[i];
                if (l.emitter != address(game) || l.topics[0] != IDisputeGame.DisputeResolved.selector) continue;
                DisputeGame.Dispute memory d = game.getDispute(uint256(l.topics[1]));
                bool lostA = d.outcome == DisputeOutcome.DefenderWins || d.outcome == DisputeOutcome.BothLose;
                bool lostB = d.outcome == DisputeOutcome.ChallengerWins || d.outcome == DisputeOutcome.BothLose;
                uint256 side = 2;
                if (node == d.sides[0].party && lostA) side = 0;
                else if ((node == d.sides[1].party || node == d.coDefender) && lostB) side = 1;
                if (side == 2) continue;
                if (d.sides[side].root == Merkle.rootOf(_honestTrace(d.taskId))) {
                    return _violation(node, "honest party lost a dispute");
                }
                return;
            }
            return _violation(node, "unexplained game slash");
        }
        _violation(node, "slash to an unknown address");
    }

    function _violation(address node, string memory why) internal {
        ++honestSlashes;
        lastHonestSlash = string.concat(why, " ", vm.toString(uint256(uint160(node))));
    }
}
