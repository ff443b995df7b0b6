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
import {IJobEscrow} from "../../../contracts/interfaces/IJobEscrow.sol";
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

/// @notice The storage cheatcodes the mutation checks use (not in the shared Vm interface).
interface VmStore {
    function store(address target, bytes32 slot, bytes32 value) external;
    function load(address target, bytes32 slot) external view returns (bytes32);
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

/// @notice Who acts in the handler. `sybils`: fresh adversary identities (funded, not registered) that register with
///         the minimum stake, leave, withdraw and come back; `ineligible`: registered heavy stakes whose declaration
///         no posted job accepts; `griefer`: a poster of minimal-window and poisoned-input jobs.
struct Actors {
    address[] honest;
    address[] adv;
    address[] sybils;
    address[] ineligible;
    address griefer;
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

    VmStore internal constant vmStore = VmStore(address(uint160(uint256(keccak256("hevm cheat code")))));

    address[] internal honest;
    address[] internal adv;
    address[] internal everyone;
    address[] internal sybils;
    address[] internal ineligible;
    address internal griefer;
    mapping(address => bool) public isAdv;
    mapping(address => bool) public isHonest;
    mapping(address => bool) public isSybil;
    mapping(address => bool) public isIneligible;
    /// @notice Seconds an honest node needs to train one task: it declines (unslashed) a slot whose execution window
    ///         is shorter, instead of accepting a window it cannot meet.
    mapping(address => uint64) public workSeconds;
    /// @notice Jobs whose inputs are poisoned (ghost flag): every honest node drawn for one declines it as invalid.
    mapping(uint256 => bool) public poisoned;

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
    uint256 public ghostGriefJobs;
    uint256 public ghostPoisonedJobs;
    uint256 public ghostInvalidDeclines;
    uint256 public ghostWindowDeclines;
    uint256 public ghostAdvDeclines;
    uint256 public ghostFailedJobs;
    uint256 public ghostSybilRegistrations;
    uint256 public ghostSybilReturns;
    uint256 public ghostSybilLeaves;
    uint256 public ghostRegistrations;
    uint256 public ghostDeregistrations;
    uint256 public ghostRedeclarations;
    uint256 public ghostAssignments;
    uint256 public ghostSeals;
    uint256 public ghostRejectedOwnerMoves;
    /// @notice Draws (replica slots and referee seats) that took an identity ineligible for the job (must stay 0).
    uint256 public ineligibleDrawn;
    string public lastIneligibleDraw;
    /// @notice Broken protocol rules (must stay 0): a decline after the grace, an illegal window accepted, a failed
    ///         job's bond not split among its decliners, a protocol contract added after sealing, a mint past the cap.
    uint256 public ruleViolations;
    string public lastRuleViolation;
    /// @notice Calls per action selector (the action mix of one run).
    mapping(bytes4 => uint256) public hits;
    /// @notice Slashes of a party acting honestly (must stay 0) and the last one's description.
    uint256 public honestSlashes;
    string public lastHonestSlash;

    /// @dev (disputeId, referee) chosen by the handler to skip its commit.
    mapping(uint256 => mapping(address => bool)) public noShow;
    /// @notice Panels each node was chosen to skip (a deliberate no-show: the only way an honest node may be late).
    mapping(address => uint256) public noShowsOf;
    mapping(uint256 => bool) internal _panelHadNoShow;
    /// @dev The honest challenge pending against (taskId, epoch).
    mapping(uint256 => mapping(uint32 => uint256)) internal _honestChallenge;
    /// @dev The distinct nodes the handler saw decline a task for invalid inputs (mirrors the registry's list).
    mapping(uint256 => address[]) internal _invalidDecliners;
    /// @dev Successful honest-side transactions (the honest turn repeats until this stops moving).
    uint256 internal _honestActions;

    /// @notice Mutation switch for the tests that show the invariants have teeth (0 in the invariant runs):
    ///         1 = honest verifiers never challenge, 2 = honest referees vote for the defender's claim,
    ///         3 = honest nodes never decline (they sit on slots they cannot serve), 4 = the registry's solver tree
    ///         total is corrupted on a sybil registration, 5 = ineligible identities declare themselves eligible
    ///         behind the handler's back, 6 = a failed job's escrow is topped up behind the books, 7 = the protocol
    ///         seal is lifted from storage before the owner tries to add a protocol contract.
    uint8 public immutable sabotage;

    constructor(System memory s, Actors memory a, uint8 sabotage_) {
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
        honest = a.honest;
        adv = a.adv;
        sybils = a.sybils;
        ineligible = a.ineligible;
        griefer = a.griefer;
        for (uint256 i = 0; i < a.honest.length; ++i) {
            isHonest[a.honest[i]] = true;
            everyone.push(a.honest[i]);
            // 30 s (any legal window), 70 s or 110 s: the slower ones decline minimal-window jobs.
            workSeconds[a.honest[i]] = uint64(30 + 40 * (i % 3));
        }
        for (uint256 i = 0; i < a.adv.length; ++i) {
            isAdv[a.adv[i]] = true;
            everyone.push(a.adv[i]);
        }
        for (uint256 i = 0; i < a.sybils.length; ++i) {
            isAdv[a.sybils[i]] = true;
            isSybil[a.sybils[i]] = true;
        }
        for (uint256 i = 0; i < a.ineligible.length; ++i) {
            isIneligible[a.ineligible[i]] = true;
        }
    }

    function nodeList() external view returns (address[] memory) {
        return everyone;
    }

    modifier tracked() {
        ++calls;
        ++hits[msg.sig];
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
            // An ineligible identity is never drawn (checkIneligibleNeverDrawn); if it were, it would idle.
            if (isIneligible[r.node]) continue;
            if (isHonest[r.node] && _honestDeclines(taskId, t.jobId, job.executionWindow, r.node)) continue;
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

    /// @dev An honest replica of a poisoned job declines it as invalid; of a job whose execution window is shorter
    ///      than the node needs, as one it cannot serve. At once: time passes only after the honest turn, so this is
    ///      always inside the decline grace. True when the node declined (or, sabotage 3, sat on the slot instead).
    function _honestDeclines(uint256 taskId, uint256 jobId, uint64 window, address node) internal returns (bool) {
        bool poison = poisoned[jobId];
        if (!poison && window >= workSeconds[node]) return false;
        if (sabotage == 3) return true;
        vm.prank(node);
        try jobs.decline(taskId, poison) {
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
                else if (t0 == IJobRegistry.TaskAssigned.selector) _auditDraw(_addr(l.topics[2]), "replica");
                else if (t0 == IJobRegistry.ReplicaLate.selector && isHonest[_addr(l.topics[2])]) {
                    _violation(_addr(l.topics[2]), "honest replica counted late");
                } else if (t0 == IJobRegistry.JobFailed.selector) {
                    _auditFailure(logs, uint256(l.topics[1]), uint256(l.topics[2]), abi.decode(l.data, (uint256)));
                }
            } else if (l.emitter == address(game)) {
                if (t0 == IDisputeGame.DisputeOpened.selector) ++ghostDisputes;
            } else if (l.emitter == address(panel)) {
                if (t0 == IRefereePanel.RefereesSeated.selector) {
                    ++ghostPanelsSeated;
                    (address[] memory seated,) = abi.decode(l.data, (address[], uint64));
                    for (uint256 k = 0; k < seated.length; ++k) {
                        _auditDraw(seated[k], "referee");
                    }
                } else if (t0 == IRefereePanel.PanelDecided.selector) {
                    ++ghostVerdicts;
                }
            } else if (l.emitter == address(registry)) {
                if (t0 == INodeRegistry.StakeSlashed.selector) {
                    address node = _addr(l.topics[1]);
                    if (isHonest[node]) _auditSlash(logs, node, _addr(l.topics[2]));
                } else if (t0 == INodeRegistry.NodeRegistered.selector) {
                    ++ghostRegistrations;
                } else if (t0 == INodeRegistry.NodeLeft.selector) {
                    ++ghostDeregistrations;
                }
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

    function _addr(bytes32 topic) internal pure returns (address) {
        return address(uint160(uint256(topic)));
    }

    /// @dev A node was drawn into a replica slot or a referee seat: it must be eligible for the job.
    function _auditDraw(address node, string memory what) internal {
        if (bytes(what).length == 7) ++ghostAssignments; // "replica"
        if (!isIneligible[node]) return;
        ++ineligibleDrawn;
        lastIneligibleDraw = string.concat("ineligible ", what, " drawn: ", vm.toString(uint256(uint160(node))));
    }

    /// @dev A job failed for invalid inputs: its escrow is empty, its FAIL_DECLINES decliners (as the handler saw them
    ///      decline) were each credited POSTER_BOND / FAIL_DECLINES, nobody else was paid, and the refund is booked.
    function _auditFailure(VmLogs.Log[] memory logs, uint256 jobId, uint256 taskId, uint256 refund) internal {
        ++ghostFailedJobs;
        ghostRefunded += refund;
        address[] storage decliners = _invalidDecliners[taskId];
        uint256 share = jobs.POSTER_BOND() / jobs.FAIL_DECLINES();
        uint256 paid;
        for (uint256 i = 0; i < logs.length; ++i) {
            VmLogs.Log memory l = logs[i];
            if (l.emitter != address(escrow) || l.topics[0] != IJobEscrow.PaymentCredited.selector) continue;
            if (uint256(l.topics[1]) != jobId) continue;
            ++paid;
            bool listed;
            for (uint256 k = 0; k < decliners.length; ++k) {
                if (decliners[k] == _addr(l.topics[2])) listed = true;
            }
            if (!listed || abi.decode(l.data, (uint256)) != share) _rule("bond share to a non-decliner or of a wrong size");
        }
        if (paid != jobs.FAIL_DECLINES() || decliners.length != paid) _rule("bond not split among the decliners");
        if (escrow.escrowOf(jobId) != 0) _rule("failed job kept escrow");
        if (sabotage == 6) {
            // Escrow left behind the books after the failure (a registry bug the view must catch).
            vm.prank(address(jobs));
            escrow.deposit(jobId, griefer, 1);
        }
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

    function _rule(string memory why) internal {
        ++ruleViolations;
        lastRuleViolation = why;
    }

    function _violation(address node, string memory why) internal {
        ++honestSlashes;
        lastHonestSlash = string.concat(why, " ", vm.toString(uint256(uint160(node))));
    }
}
