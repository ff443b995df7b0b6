// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {HandlerTraces, System, Actors} from "./HandlerTraces.sol";
import {DisputeGame} from "../../../contracts/DisputeGame.sol";
import {DisputeLens} from "../../../contracts/DisputeLens.sol";
import {IJobRegistry} from "../../../contracts/interfaces/IJobRegistry.sol";
import {IDisputeGame} from "../../../contracts/interfaces/IDisputeGame.sol";
import {IRefereePanel} from "../../../contracts/interfaces/IRefereePanel.sol";
import {INodeRegistry} from "../../../contracts/interfaces/INodeRegistry.sol";
import {IJobEscrow} from "../../../contracts/interfaces/IJobEscrow.sol";
import {JobRegistryBase} from "../../../contracts/JobRegistryBase.sol";
import {Merkle} from "../../../contracts/lib/Merkle.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {DisputeOutcome, Job, Task, TaskStatus, Replica, ReplicaStatus, Node} from "../../../contracts/types/VerityTypes.sol";

/// @notice The log cheatcodes (not in the shared Vm interface).
interface VmLogs {
    struct Log {
        bytes32[] topics;
        bytes data;
        address emitter;
    }

    function recordLogs() external;
    function getRecordedLogs() external returns (Log[] memory);
    function load(address target, bytes32 slot) external view returns (bytes32);
}

/// @notice The per-call audit of the invariant handler: every `tracked` action records the logs it caused, and each
///         slash, draw and failed job in them is checked against what the handler knows (ghost counts bumped here).
abstract contract HandlerAudit is HandlerTraces {
    VmLogs internal constant vmLogs = VmLogs(address(uint160(uint256(keccak256("hevm cheat code")))));

    /// @dev The storage slot of the registry's node records (found by probing: no layout is hard-coded).
    uint256 internal _nodesSlot;

    constructor(System memory s, Actors memory a, uint8 sabotage_) HandlerTraces(s, a, sabotage_) {
        _nodesSlot = _findNodesSlot(a.honest[0]);
    }

    /// @dev The per-action stake audit reads each identity's (stake, locked) word straight from the registry's storage:
    ///      getNode copies a whole record (multiaddr included) and would cost most of a drive's gas. The word is the
    ///      record's third (uint128 stake, uint128 locked); the mapping's slot is the first of 0..127 where it holds
    ///      `node`'s getNode values, checked again after a change (revert if none: the audit would then read junk).
    function _findNodesSlot(address node) internal view returns (uint256 slot) {
        Node memory n = registry.getNode(node);
        require(n.stake != 0, "probe node has no stake");
        for (slot = 0; slot < 128; ++slot) {
            if (_stakeWord(node, slot) == (uint256(n.locked) << 128 | n.stake)) return slot;
        }
        revert("no NodeRegistry node records found");
    }

    function _stakeWord(address node, uint256 base) internal view returns (uint256) {
        return uint256(vmLogs.load(address(registry), bytes32(uint256(keccak256(abi.encode(node, base))) + 2)));
    }

    modifier tracked() {
        ++calls;
        ++hits[msg.sig];
        uint256[2][] memory books = _stakeBooks();
        vmLogs.recordLogs();
        _;
        _scanLogs(books);
    }

    /// @dev Every followed identity's (stake, locked) in the registry now.
    function _stakeBooks() internal view returns (uint256[2][] memory books) {
        books = new uint256[2][](_staked.length);
        uint256 base = _nodesSlot;
        for (uint256 i = 0; i < _staked.length; ++i) {
            uint256 word = _stakeWord(_staked[i], base);
            books[i] = [uint256(uint128(word)), word >> 128];
        }
    }

    function _scanLogs(uint256[2][] memory books) internal {
        VmLogs.Log[] memory logs = vmLogs.getRecordedLogs();
        _auditStakeBooks(logs, books);
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
                    _auditFailure(logs, uint256(l.topics[1]), uint256(l.topics[2]));
                } else if (t0 == JobRegistryBase.PaymentForfeited.selector) {
                    _countForfeit(logs, i);
                }
            } else if (l.emitter == address(escrow)) {
                if (t0 == IJobEscrow.PaymentSent.selector) _countPayment(logs, i);
                else if (t0 == IJobEscrow.EscrowBurned.selector) _countBurn(logs, i);
                else if (t0 == IJobEscrow.EscrowRefunded.selector) _countRefund(logs, i);
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

    /// @dev Adds the escrow's payment at `logs[i]` (PaymentSent) to ghostEscrowPaid once the token's ledger shows it
    ///      left the escrow: JobEscrow.pay emits PaymentSent, then transfers, so the very next log must be the
    ///      token's Transfer(escrow -> payee, amount). Payments are pushed, so this is what used to sit in credits
    ///      plus what was withdrawn. The ghost is exact and independent of the escrow's books: it counts tokens that
    ///      moved on the token's ledger, one log per payment. The alternatives are not: deposits - totalEscrow -
    ///      refunds - burns is the escrow's own arithmetic (it would make "escrow accounted" hold by construction),
    ///      and a payee's balance delta over an action also moves with what that action stakes, bonds or withdraws
    ///      from the game and the panel (a payment from either, a challenge, a registration), so it cannot be attributed.
    function _countPayment(VmLogs.Log[] memory logs, uint256 i) internal {
        address to = _addr(logs[i].topics[2]);
        uint256 amount = abi.decode(logs[i].data, (uint256));
        if (i + 1 < logs.length) {
            VmLogs.Log memory t = logs[i + 1];
            if (
                t.emitter == address(token) && t.topics.length == 3 && t.topics[0] == IERC20.Transfer.selector
                    && _addr(t.topics[1]) == address(escrow) && _addr(t.topics[2]) == to
                    && abi.decode(t.data, (uint256)) == amount
            ) {
                ghostEscrowPaid += amount;
                return;
            }
        }
        _rule("a payment the token did not move to its payee");
    }

    /// @dev Adds the escrow's burn at `logs[i]` (EscrowBurned) to ghostEscrowBurned once the token's ledger shows the
    ///      tokens left the escrow for good: JobEscrow.burn emits EscrowBurned, then burns, so the very next log must
    ///      be the token's Transfer(escrow -> 0, amount). Independent of the escrow's books, like _countPayment.
    function _countBurn(VmLogs.Log[] memory logs, uint256 i) internal {
        uint256 amount = abi.decode(logs[i].data, (uint256));
        if (i + 1 < logs.length && _isTransfer(logs[i + 1], address(escrow), address(0), amount)) {
            ghostEscrowBurned += amount;
            return;
        }
        _unavailable("an escrow burn the token did not burn");
    }

    /// @dev Adds the escrow's refund at `logs[i]` (EscrowRefunded) to ghostRefunded once the token's ledger shows it
    ///      left the escrow (the next log is the token's Transfer(escrow -> to, amount); a zero refund moves nothing).
    ///      Counted from the logs, not as escrowOf before the call: a cancel first pays the accepted tasks it settles
    ///      (P10, pushed), and only the rest is refunded.
    function _countRefund(VmLogs.Log[] memory logs, uint256 i) internal {
        uint256 amount = abi.decode(logs[i].data, (uint256));
        if (amount == 0) return;
        if (i + 1 < logs.length && _isTransfer(logs[i + 1], address(escrow), _addr(logs[i].topics[2]), amount)) {
            ghostRefunded += amount;
            return;
        }
        _rule("a refund the token did not move to its recipient");
    }

    /// @dev P10: the registry forfeited an accepted task's payment (PaymentForfeited at `logs[i]`). It must be one of
    ///      the task's payees, and the forfeit must be exactly a burn of that payment from the task's job escrow and
    ///      nothing else: the next two logs are EscrowBurned(job, amount) and the token's Transfer(escrow -> 0,
    ///      amount), so no stake, lock or payment moved in between (with _auditStakeBooks: a forfeit never touches
    ///      stake).
    function _countForfeit(VmLogs.Log[] memory logs, uint256 i) internal {
        uint256 taskId = uint256(logs[i].topics[1]);
        address node = _addr(logs[i].topics[2]);
        uint256 amount = abi.decode(logs[i].data, (uint256));
        uint256 jobId = views.getTask(taskId).jobId;
        ghostForfeited += amount;
        forfeitedOf[taskId] += amount;
        ++forfeitsOf[taskId];
        if (amount != views.getJob(jobId).paymentPerTask) _unavailable("a forfeit of a wrong size");
        if (_payees(taskId, node) == 0) _unavailable("a forfeit of a non-payee");
        bool burned = i + 2 < logs.length && logs[i + 1].emitter == address(escrow)
            && logs[i + 1].topics.length == 2 && logs[i + 1].topics[0] == IJobEscrow.EscrowBurned.selector
            && uint256(logs[i + 1].topics[1]) == jobId && abi.decode(logs[i + 1].data, (uint256)) == amount
            && _isTransfer(logs[i + 2], address(escrow), address(0), amount);
        if (!burned) _unavailable("a forfeit that was not exactly a burn of its payment from its job's escrow");
        if (sabotage == 9) {
            // A burn behind the books: the escrow loses one more wei of the job than was forfeited.
            vm.prank(address(jobs));
            escrow.burn(jobId, 1);
            ghostEscrowBurned += 1;
            vmLogs.getRecordedLogs(); // counted here, not again by the next action's scan
        }
    }

    /// @dev Whether `l` is the token's Transfer(from -> to, amount).
    function _isTransfer(VmLogs.Log memory l, address from, address to, uint256 amount) internal view returns (bool) {
        return l.emitter == address(token) && l.topics.length == 3 && l.topics[0] == IERC20.Transfer.selector
            && _addr(l.topics[1]) == from && _addr(l.topics[2]) == to && abi.decode(l.data, (uint256)) == amount;
    }

    /// @dev Every followed identity's stake and lock moved over the action by exactly its registry events (stake:
    ///      + Staked - Withdrawn - StakeSlashed; locked: + StakeLocked - StakeUnlocked - StakeSlashed), so nothing
    ///      else, a forfeit included, ever touches stake.
    function _auditStakeBooks(VmLogs.Log[] memory logs, uint256[2][] memory books) internal {
        _replayStakeEvents(logs, books);
        uint256[2][] memory now_ = _stakeBooks();
        for (uint256 k = 0; k < now_.length; ++k) {
            if (now_[k][0] != books[k][0]) _unavailable("a stake moved without its registry event");
            if (now_[k][1] != books[k][1]) _unavailable("a lock moved without its registry event");
        }
    }

    function _replayStakeEvents(VmLogs.Log[] memory logs, uint256[2][] memory books) internal view {
        // Unchecked: a wrong book must be reported, not revert the action (forge drops reverted handler calls).
        unchecked {
            for (uint256 i = 0; i < logs.length; ++i) {
                VmLogs.Log memory l = logs[i];
                if (l.emitter != address(registry) || l.topics.length < 2) continue;
                uint256 k = _stakedIndex[_addr(l.topics[1])];
                if (k == 0) continue;
                bytes32 t0 = l.topics[0];
                if (t0 == INodeRegistry.Staked.selector) {
                    (uint256 amount,) = abi.decode(l.data, (uint256, uint256));
                    books[k - 1][0] += amount;
                } else if (t0 == INodeRegistry.Withdrawn.selector) {
                    books[k - 1][0] -= abi.decode(l.data, (uint256));
                } else if (t0 == INodeRegistry.StakeSlashed.selector) {
                    uint256 amount = abi.decode(l.data, (uint256));
                    books[k - 1][0] -= amount;
                    books[k - 1][1] -= amount;
                } else if (t0 == INodeRegistry.StakeLocked.selector) {
                    books[k - 1][1] += abi.decode(l.data, (uint256));
                } else if (t0 == INodeRegistry.StakeUnlocked.selector) {
                    books[k - 1][1] -= abi.decode(l.data, (uint256));
                }
            }
        }
    }

    /// @dev Issue 23: whether `node`'s slash in these logs is its invalid-inputs bet, burned because a poisoned task it
    ///      refused was accepted with adversaries' results only (the only way an honest refusal's bet can be lost).
    function _griefedBet(VmLogs.Log[] memory logs, address node) internal view returns (bool) {
        for (uint256 i = 0; i < logs.length; ++i) {
            VmLogs.Log memory l = logs[i];
            if (l.emitter != address(jobs) || l.topics[0] != IJobRegistry.TaskAccepted.selector) continue;
            uint256 taskId = uint256(l.topics[1]);
            Task memory t = views.getTask(taskId);
            if (!poisoned[t.jobId]) continue;
            address[] memory refusers = views.invalidDeclinersOf(taskId);
            bool refused;
            for (uint256 k = 0; k < refusers.length; ++k) {
                refused = refused || refusers[k] == node;
            }
            if (!refused) continue;
            if (t.candidate != address(0)) return isAdv[t.candidate];
            Replica[] memory reps = views.getReplicas(taskId);
            for (uint256 s = 0; s < reps.length; ++s) {
                if (reps[s].status == ReplicaStatus.Accepted && !isAdv[reps[s].node]) return false;
            }
            return true;
        }
        return false;
    }

    function _auditSlash(VmLogs.Log[] memory logs, address node, address to) internal {
        if (to == address(jobs)) {
            if (!_griefedBet(logs, node)) return _violation(node, "late slash of an honest replica");
            ++ghostGriefedBets;
            return;
        }
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
                DisputeLens.Dispute memory d = disputeLens.getDispute(uint256(l.topics[1]));
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

    /// @dev After a job ended in its current round: how many payee payments that ending owed (P10: the round's accepted
    ///      tasks, and the previous AGGREGATE when the round was incomplete).
    function _unsettledPayees(uint256 jobId) internal view returns (uint256 count) {
        Job memory job = views.getJob(jobId);
        for (uint32 i = 0; i < job.shards; ++i) {
            count += _payees(views.taskOf(jobId, job.currentRound, i), address(0));
        }
        if (job.currentRound > 0 && job.acceptedInRound < job.shards) {
            count += _payees(views.taskOf(jobId, job.currentRound - 1, job.shards), address(0));
        }
    }

    /// @dev Whether `node` is a payee of a task _unsettledPayees counts.
    function _isUnsettledPayee(uint256 jobId, address node) internal view returns (bool) {
        Job memory job = views.getJob(jobId);
        for (uint32 i = 0; i < job.shards; ++i) {
            if (_payees(views.taskOf(jobId, job.currentRound, i), node) > 0) return true;
        }
        if (job.currentRound > 0 && job.acceptedInRound < job.shards) {
            return _payees(views.taskOf(jobId, job.currentRound - 1, job.shards), node) > 0;
        }
        return false;
    }

    /// @dev An Accepted task's payees (its candidate, or its Accepted replicas), or only `node`'s share of them when
    ///      `node` is nonzero; 0 for a task not Accepted.
    function _payees(uint256 taskId, address node) internal view returns (uint256 count) {
        Task memory t = views.getTask(taskId);
        if (t.status != TaskStatus.Accepted) return 0;
        if (t.candidate != address(0)) return node == address(0) || node == t.candidate ? 1 : 0;
        Replica[] memory reps = views.getReplicas(taskId);
        for (uint256 s = 0; s < reps.length; ++s) {
            if (reps[s].status == ReplicaStatus.Accepted && (node == address(0) || node == reps[s].node)) ++count;
        }
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
    ///      decline) were each paid POSTER_BOND / FAIL_DECLINES (the refund is booked by _countRefund). Before the
    ///      bond shares (the job's last payments) the only other payments are P10's settlements: paymentPerTask to
    ///      each payee of the failed round's accepted tasks and of the previous AGGREGATE if that round was
    ///      incomplete.
    function _auditFailure(VmLogs.Log[] memory logs, uint256 jobId, uint256 taskId) internal {
        ++ghostFailedJobs; // its refund is counted from the escrow's logs (_countRefund)
        address[] storage decliners = _invalidDecliners[taskId];
        uint256 share = jobs.POSTER_BOND() / jobs.FAIL_DECLINES();
        uint256 payments;
        for (uint256 i = 0; i < logs.length; ++i) {
            VmLogs.Log memory l = logs[i];
            if (l.emitter == address(escrow) && l.topics[0] == IJobEscrow.PaymentSent.selector) {
                if (uint256(l.topics[1]) == jobId) ++payments;
            }
        }
        uint256 settlements = _unsettledPayees(jobId);
        uint256 paid;
        uint256 settled;
        for (uint256 i = 0; i < logs.length; ++i) {
            VmLogs.Log memory l = logs[i];
            if (l.emitter != address(escrow) || l.topics[0] != IJobEscrow.PaymentSent.selector) continue;
            if (uint256(l.topics[1]) != jobId) continue;
            address to = _addr(l.topics[2]);
            uint256 amount = abi.decode(l.data, (uint256));
            if (settled < settlements) {
                ++settled;
                if (amount != views.getJob(jobId).paymentPerTask || !_isUnsettledPayee(jobId, to)) {
                    _rule("settlement to a non-payee or of a wrong size");
                }
                continue;
            }
            ++paid;
            bool listed;
            for (uint256 k = 0; k < decliners.length; ++k) {
                if (decliners[k] == to) listed = true;
            }
            if (!listed || amount != share) _rule("bond share to a non-decliner or of a wrong size");
        }
        if (payments != settlements + paid) _rule("payments uncounted");
        if (paid != jobs.FAIL_DECLINES() || decliners.length != paid) _rule("bond not split among the decliners");
        if (escrow.escrowOf(jobId) != 0) _rule("failed job kept escrow");
        if (sabotage == 6) {
            // Escrow left behind the books after the failure (a registry bug the view must catch).
            vm.prank(address(jobs));
            escrow.deposit(jobId, griefer, 1);
        }
    }
}
