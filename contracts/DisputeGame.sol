// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

import {IDisputeGame} from "./interfaces/IDisputeGame.sol";
import {IJobRegistry} from "./interfaces/IJobRegistry.sol";
import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {IVerityToken} from "./interfaces/IVerityToken.sol";
import {Merkle} from "./lib/Merkle.sol";
import {
    TaskContext,
    TaskStatus,
    Replica,
    ReplicaStatus,
    DisputePhase,
    DisputeOutcome,
    PinpointProof,
    ROLE_VERIFIER,
    BPS
} from "./types/VerityTypes.sol";
import {ZeroAddress, ParameterOutOfRange, NothingToWithdraw} from "./errors/CommonErrors.sol";
import "./errors/DisputeGameErrors.sol";

/// @title DisputeGame
/// @notice Settles a disagreement about one task by narrowing it to a single training step (checkpoint level, then
///         step level), then letting a stake-weighted random referee panel recompute that step. Parties move on
///         chess clocks; the loser's task stake pays the winner and the referees, the rest is burned.
/// @dev Party index 0 = A (challenger / opener), 1 = B (defender). At each level the game keeps the invariant
///      "leaf lo agreed, leaf hi differs" (lo = 0 and hi = n are proven when results are revealed).
contract DisputeGame is IDisputeGame, Ownable, ReentrancyGuard {
    using SafeERC20 for IERC20;

    /// @notice Largest referee panel.
    uint8 public constant MAX_PANEL = 7;
    /// @notice Largest value accepted for any clock or window.
    uint64 public constant MAX_WINDOW = 7 days;

    struct Dispute {
        uint256 taskId;
        DisputePhase phase;
        DisputeOutcome outcome;
        bool optimistic; // A is a verifier that locked stake and posted a bond
        uint8 level;
        uint32 n; // level-0 trace length (leaves 0..n)
        uint32 k; // level-1 trace length (leaves 0..k)
        uint32 lo;
        uint32 hi;
        uint32 mid; // requested index while bisecting
        uint32 segment; // pinpointed checkpoint index i
        uint32 step; // pinpointed step s inside the segment
        uint32 drawNonce;
        uint8 committedVotes;
        uint8 revealedVotes;
        uint64 openedAt;
        uint64 commitDeadline;
        uint64 revealDeadline;
        uint64 panelDeadline;
        uint256 taskStake;
        uint256 bond;
        bytes32 agreed; // leaf lo (both agree)
        address[2] parties;
        bytes32[2] roots; // level-0 roots
        bytes32[2] stepRoots; // level-1 roots
        bytes32[2] finals;
        bytes32[2] resultCids;
        bytes32[2] claims; // leaves at hi
        bytes32[2] midLeaves;
        bool[2] moved; // party has made the move the game awaits
        uint64[2] clockUsed;
        uint64[2] clockSince; // 0 = clock stopped
    }

    struct Vote {
        bool seated;
        bool revealed;
        bytes32 commitment;
        bytes32 vote;
    }

    /// @notice Token of stakes, bonds and rewards.
    IVerityToken public immutable token;
    /// @notice Node registry (stake locks, slashes, referee draws).
    INodeRegistry public immutable registry;
    /// @notice Job registry (task data and settlement hooks).
    IJobRegistry public immutable jobs;

    /// @notice Seconds each party may spend awaiting its own moves in one dispute.
    uint64 public clockAllowance = 120;
    /// @notice Bond an optimistic challenger posts on top of locking the task stake.
    uint256 public challengerBond = 10e18;
    /// @notice Referees drawn per dispute (odd).
    uint8 public panelSize = 3;
    /// @notice Stake each referee locks while seated.
    uint256 public refereeStake = 10e18;
    /// @notice Share of a seated referee's stake burned if it does not reveal, in basis points.
    uint256 public refereeSlashBps = 1_000;
    /// @notice Seconds referees have to commit votes.
    uint64 public voteCommitWindow = 60;
    /// @notice Seconds after the commit window to reveal votes.
    uint64 public voteRevealWindow = 60;
    /// @notice Seconds a dispute may wait for an eligible referee before it is voided.
    uint64 public panelTimeout = 300;
    /// @notice Share of the slashed pot credited to a single winner, in basis points.
    uint256 public winnerShareBps = 5_000;
    /// @notice Share of the slashed pot split among revealing referees, in basis points.
    uint256 public refereeShareBps = 2_500;

    /// @notice Number of disputes (ids 1..disputeCount).
    uint256 public disputeCount;
    /// @notice Open dispute of a task (0 = none).
    mapping(uint256 => uint256) public disputeOfTask;
    /// @notice Rewards and returned bonds waiting to be withdrawn.
    mapping(address => uint256) public credits;
    /// @notice Sum of all credits.
    uint256 public totalCredits;
    /// @notice Sum of bonds held by open disputes.
    uint256 public totalBonds;

    mapping(uint256 => Dispute) internal _disputes;
    mapping(uint256 => address[]) internal _panels;
    mapping(uint256 => mapping(address => Vote)) internal _votes;

    constructor(IVerityToken token_, INodeRegistry registry_, IJobRegistry jobs_) Ownable(msg.sender) {
        if (address(token_) == address(0)) revert ZeroAddress("token");
        if (address(registry_) == address(0)) revert ZeroAddress("registry");
        if (address(jobs_) == address(0)) revert ZeroAddress("jobs");
        token = token_;
        registry = registry_;
        jobs = jobs_;
    }

    // ---------------------------------------------------------------- owner

    /// @notice Sets each party's clock allowance (seconds).
    function setClockAllowance(uint64 value) external onlyOwner {
        _checkWindow("clockAllowance", value);
        clockAllowance = value;
        emit ParameterSet("clockAllowance", value);
    }

    /// @notice Sets the optimistic challenger bond.
    function setChallengerBond(uint256 value) external onlyOwner {
        challengerBond = value;
        emit ParameterSet("challengerBond", value);
    }

    /// @notice Sets the panel size (odd, 1..MAX_PANEL), the referee stake and the non-reveal slash.
    function setPanel(uint8 size, uint256 stakeAmount, uint256 slashBps) external onlyOwner {
        if (size == 0 || size > MAX_PANEL || size % 2 == 0) revert ParameterOutOfRange("panelSize", size, 1, MAX_PANEL);
        if (stakeAmount == 0) revert ParameterOutOfRange("refereeStake", 0, 1, type(uint256).max);
        if (slashBps > BPS) revert ParameterOutOfRange("refereeSlashBps", slashBps, 0, BPS);
        panelSize = size;
        refereeStake = stakeAmount;
        refereeSlashBps = slashBps;
        emit ParameterSet("panelSize", size);
        emit ParameterSet("refereeStake", stakeAmount);
        emit ParameterSet("refereeSlashBps", slashBps);
    }

    /// @notice Sets the vote commit and reveal windows and the panel timeout (seconds).
    function setVoteWindows(uint64 commitWindow, uint64 revealWindow, uint64 panelWait) external onlyOwner {
        _checkWindow("voteCommitWindow", commitWindow);
        _checkWindow("voteRevealWindow", revealWindow);
        _checkWindow("panelTimeout", panelWait);
        voteCommitWindow = commitWindow;
        voteRevealWindow = revealWindow;
        panelTimeout = panelWait;
        emit ParameterSet("voteCommitWindow", commitWindow);
        emit ParameterSet("voteRevealWindow", revealWindow);
        emit ParameterSet("panelTimeout", panelWait);
    }

    /// @notice Sets the winner's and the referees' shares of a slashed pot (the rest is burned).
    function setShares(uint256 winnerBps, uint256 refereeBps) external onlyOwner {
        if (winnerBps + refereeBps > BPS) revert ParameterOutOfRange("shares", winnerBps + refereeBps, 0, BPS);
        winnerShareBps = winnerBps;
        refereeShareBps = refereeBps;
        emit ParameterSet("winnerShareBps", winnerBps);
        emit ParameterSet("refereeShareBps", refereeBps);
    }

    // ---------------------------------------------------------------- opening

    /// @notice Opens a dispute on a Contested replicated task (anyone; a replica that calls is party A).
    /// @return disputeId The new dispute's id.
    function openDispute(uint256 taskId) external nonReentrant returns (uint256 disputeId) {
        disputeId = _openReplicated(taskId);
    }

    /// @notice Opens a dispute and pinpoints the checkpoint divergence in the same transaction.
    function openDisputeWithPinpoint(uint256 taskId, PinpointProof calldata p)
        external
        nonReentrant
        returns (uint256 disputeId)
    {
        disputeId = _openReplicated(taskId);
        if (_disputes[disputeId].phase == DisputePhase.Bisect0) _pinpoint(disputeId, p);
    }

    /// @notice A staked VERIFIER challenges a Revealed task inside its challenge window with its own result.
    ///         Locks the task stake and posts `challengerBond`.
    function challengeOptimistic(
        uint256 taskId,
        bytes32 root,
        bytes32 finalHash,
        uint32 n,
        bytes32 resultCid,
        bytes32[] calldata proof0,
        bytes32[] calldata proofN
    ) external nonReentrant returns (uint256 disputeId) {
        (TaskContext memory c, Replica memory d) = _checkChallenge(taskId, root, finalHash, n, proof0, proofN);
        disputeId = _openOptimistic(taskId, c, d, root, finalHash, resultCid);
    }

    // ---------------------------------------------------------------- bisection

    /// @notice Narrows the current level to [p.index, p.index+1] in one move, with proofs against both roots
    ///         (anyone may call: the proofs speak for themselves).
    function pinpoint(uint256 disputeId, PinpointProof calldata p) external nonReentrant {
        _pinpoint(disputeId, p);
    }

    /// @notice Reveals the requested leaf `index` of the caller's trace at `level`, with its Merkle proof.
    function revealLeaf(uint256 disputeId, uint8 level, uint32 index, bytes32 leafHash, bytes32[] calldata proof)
        external
        nonReentrant
    {
        Dispute storage d = _bisecting(disputeId);
        if (level != d.level) revert WrongPhase(disputeId, d.phase);
        if (index != d.mid) revert NotRequestedIndex(disputeId, level, d.mid, index);
        uint256 p = _party(d, disputeId, msg.sender);
        if (d.moved[p]) revert AlreadyMoved(disputeId, msg.sender);
        bytes32 root = level == 0 ? d.roots[p] : d.stepRoots[p];
        if (!Merkle.verify(root, index, leafHash, proof)) revert InvalidDisputeProof(disputeId, level, index, leafHash);
        d.midLeaves[p] = leafHash;
        d.moved[p] = true;
        _stopClock(d, p);
        emit LeafRevealed(disputeId, msg.sender, level, index, leafHash);
        if (!d.moved[1 - p]) return;
        // INVARIANT: leaf lo agreed, leaf hi differs.
        if (d.midLeaves[0] == d.midLeaves[1]) {
            d.lo = d.mid;
            d.agreed = d.midLeaves[0];
        } else {
            d.hi = d.mid;
            d.claims = d.midLeaves;
        }
        d.moved = [false, false];
        _afterNarrow(disputeId);
    }

    /// @notice Commits the caller's per-step trace of the pinpointed segment: leaf 0 must be the agreed checkpoint,
    ///         leaf k the caller's own checkpoint claim.
    function submitStepRoot(
        uint256 disputeId,
        bytes32 stepRoot,
        bytes32[] calldata proofFirst,
        bytes32[] calldata proofLast
    ) external nonReentrant {
        Dispute storage d = _disputes[disputeId];
        if (d.phase != DisputePhase.StepRoots) revert WrongPhase(disputeId, d.phase);
        uint256 p = _party(d, disputeId, msg.sender);
        if (d.moved[p]) revert AlreadyMoved(disputeId, msg.sender);
        if (!Merkle.verify(stepRoot, 0, d.agreed, proofFirst)) {
            revert InvalidDisputeProof(disputeId, 1, 0, d.agreed);
        }
        if (!Merkle.verify(stepRoot, d.k, d.claims[p], proofLast)) {
            revert InvalidDisputeProof(disputeId, 1, d.k, d.claims[p]);
        }
        d.stepRoots[p] = stepRoot;
        d.moved[p] = true;
        _stopClock(d, p);
        emit StepRootSubmitted(disputeId, msg.sender, stepRoot);
        if (!d.moved[1 - p]) return;
        d.phase = DisputePhase.Bisect1;
        d.level = 1;
        d.lo = 0;
        d.hi = d.k;
        d.moved = [false, false];
        _afterNarrow(disputeId);
    }

    /// @notice Ends the dispute against every party whose clock ran out while the game awaited its move.
    function timeout(uint256 disputeId) external nonReentrant {
        Dispute storage d = _bisectingOrRoots(disputeId);
        bool outA = _expired(d, 0);
        bool outB = _expired(d, 1);
        if (!outA && !outB) revert ClockNotExpired(disputeId);
        _settle(
            disputeId,
            outA && outB ? DisputeOutcome.BothLose : (outA ? DisputeOutcome.DefenderWins : DisputeOutcome.ChallengerWins)
        );
    }

    // ---------------------------------------------------------------- referees

    /// @notice Retries the referee draw of a dispute waiting for a panel (anyone).
    function drawPanel(uint256 disputeId) external nonReentrant {
        Dispute storage d = _disputes[disputeId];
        if (d.phase != DisputePhase.AwaitingPanel) revert WrongPhase(disputeId, d.phase);
        if (_drawPanel(disputeId) == 0) revert NoEligibleReferee(disputeId);
    }

    /// @notice A seated referee commits keccak256(abi.encode(vote, salt, referee)).
    function commitVote(uint256 disputeId, bytes32 commitment) external {
        Dispute storage d = _disputes[disputeId];
        if (d.phase != DisputePhase.Voting) revert WrongPhase(disputeId, d.phase);
        Vote storage v = _votes[disputeId][msg.sender];
        if (!v.seated) revert NotReferee(disputeId, msg.sender);
        if (v.commitment != bytes32(0)) revert AlreadyVoted(disputeId, msg.sender);
        if (block.timestamp > d.commitDeadline) revert VoteCommitClosed(disputeId, d.commitDeadline);
        v.commitment = commitment;
        ++d.committedVotes;
        emit VoteCommitted(disputeId, msg.sender);
    }

    /// @notice A referee reveals its vote (its recomputed h_{s+1}) once all committed or the commit window closed.
    function revealVote(uint256 disputeId, bytes32 vote, bytes32 salt) external {
        Dispute storage d = _disputes[disputeId];
        if (d.phase != DisputePhase.Voting) revert WrongPhase(disputeId, d.phase);
        Vote storage v = _votes[disputeId][msg.sender];
        if (!v.seated) revert NotReferee(disputeId, msg.sender);
        if (v.revealed) revert AlreadyVoted(disputeId, msg.sender);
        bool open = d.committedVotes == _panels[disputeId].length || block.timestamp > d.commitDeadline;
        if (!open || block.timestamp > d.revealDeadline) {
            revert VoteRevealNotOpen(disputeId, d.commitDeadline, d.revealDeadline);
        }
        if (v.commitment == bytes32(0) || keccak256(abi.encode(vote, salt, msg.sender)) != v.commitment) {
            revert VoteMismatch(disputeId, msg.sender);
        }
        v.vote = vote;
        v.revealed = true;
        ++d.revealedVotes;
        emit VoteRevealed(disputeId, msg.sender, vote);
    }

    /// @notice Settles a dispute after voting (reveal deadline passed or every referee revealed), or voids one that
    ///         found no referee within `panelTimeout`.
    function resolve(uint256 disputeId) external nonReentrant {
        Dispute storage d = _disputes[disputeId];
        if (d.phase == DisputePhase.AwaitingPanel) {
            if (block.timestamp <= d.panelDeadline) revert PanelTimeoutNotReached(disputeId, d.panelDeadline);
            _settle(disputeId, DisputeOutcome.Voided);
            return;
        }
        if (d.phase != DisputePhase.Voting) revert WrongPhase(disputeId, d.phase);
        address[] storage panel = _panels[disputeId];
        if (d.revealedVotes < panel.length && block.timestamp <= d.revealDeadline) {
            revert VotingNotOver(disputeId, d.revealDeadline);
        }
        uint256 forA;
        uint256 forB;
        for (uint256 i = 0; i < panel.length; ++i) {
            Vote storage v = _votes[disputeId][panel[i]];
            if (!v.revealed) continue;
            if (v.vote == d.claims[0]) ++forA;
            else if (v.vote == d.claims[1]) ++forB;
        }
        uint256 revealed = d.revealedVotes;
        DisputeOutcome outcome;
        if (revealed == 0) outcome = DisputeOutcome.Voided;
        else if (forA * 2 > revealed) outcome = DisputeOutcome.ChallengerWins;
        else if (forB * 2 > revealed) outcome = DisputeOutcome.DefenderWins;
        else outcome = DisputeOutcome.BothLose;
        _settle(disputeId, outcome);
    }

    /// @notice Withdraws the caller's credits (rewards, returned bonds).
    function withdraw() external nonReentrant {
        uint256 amount = credits[msg.sender];
        if (amount == 0) revert NothingToWithdraw(msg.sender);
        credits[msg.sender] = 0;
        totalCredits -= amount;
        emit CreditWithdrawn(msg.sender, amount);
        IERC20(address(token)).safeTransfer(msg.sender, amount);
    }

    // ---------------------------------------------------------------- views

    /// @notice The dispute record.
    function getDispute(uint256 disputeId) external view returns (Dispute memory) {
        return _disputes[disputeId];
    }

    /// @notice The seated referees.
    function panelOf(uint256 disputeId) external view returns (address[] memory) {
        return _panels[disputeId];
    }

    /// @notice A referee's seat and vote.
    function voteOf(uint256 disputeId, address referee) external view returns (Vote memory) {
        return _votes[disputeId][referee];
    }

    /// @notice Seconds left on each party's clock (0 = ran out).
    function clocksRemaining(uint256 disputeId) external view returns (uint256 a, uint256 b) {
        Dispute storage d = _disputes[disputeId];
        return (_remaining(d, 0), _remaining(d, 1));
    }

    /// @notice The global step s the referees recompute (segment * k + step) once pinpointed.
    function disputedStep(uint256 disputeId) external view returns (uint256) {
        Dispute storage d = _disputes[disputeId];
        return uint256(d.segment) * d.k + d.step;
    }

    // ---------------------------------------------------------------- internals: setup

    function _checkWindow(bytes32 name, uint64 value) internal pure {
        if (value == 0 || value > MAX_WINDOW) revert ParameterOutOfRange(name, value, 1, MAX_WINDOW);
    }

    function _openReplicated(uint256 taskId) internal returns (uint256 disputeId) {
        TaskContext memory c = jobs.taskContext(taskId);
        if (c.status != TaskStatus.Contested || c.replication < 2) revert TaskNotDisputable(taskId, c.status);
        uint256 existing = disputeOfTask[taskId];
        if (existing != 0) revert DisputeAlreadyOpen(taskId, existing);
        Replica[] memory reps = jobs.getReplicas(taskId);
        // v1: replication 2, so the parties are the two revealed replicas.
        (Replica memory a, Replica memory b) = (reps[0], reps[1]);
        if (b.node == msg.sender) (a, b) = (b, a);
        disputeId = _create(taskId, c, [a.node, b.node], [a.root, b.root], [a.finalHash, b.finalHash]);
        _disputes[disputeId].resultCids = [a.resultCid, b.resultCid];
        _afterNarrow(disputeId);
    }

    function _create(
        uint256 taskId,
        TaskContext memory c,
        address[2] memory parties,
        bytes32[2] memory roots,
        bytes32[2] memory finals
    ) internal returns (uint256 disputeId) {
        disputeId = ++disputeCount;
        disputeOfTask[taskId] = disputeId;
        Dispute storage d = _disputes[disputeId];
        d.taskId = taskId;
        d.phase = DisputePhase.Bisect0;
        d.n = c.n;
        d.k = c.k;
        d.hi = c.n;
        d.openedAt = uint64(block.timestamp);
        d.taskStake = c.stakePerReplica;
        d.agreed = c.inputHash;
        d.parties = parties;
        d.roots = roots;
        d.finals = finals;
        d.claims = finals;
        emit DisputeOpened(disputeId, taskId, parties[0], parties[1]);
    }

    function _checkChallenge(
        uint256 taskId,
        bytes32 root,
        bytes32 finalHash,
        uint32 n,
        bytes32[] calldata proof0,
        bytes32[] calldata proofN
    ) internal view returns (TaskContext memory c, Replica memory d) {
        if ((registry.rolesOf(msg.sender) & ROLE_VERIFIER) == 0) revert NotVerifier(msg.sender);
        c = jobs.taskContext(taskId);
        if (c.status != TaskStatus.Revealed) revert TaskNotDisputable(taskId, c.status);
        if (n != c.n) revert IndexOutOfRange(0, n, c.n);
        if (!Merkle.verify(root, 0, c.inputHash, proof0)) revert InvalidDisputeProof(0, 0, 0, c.inputHash);
        if (!Merkle.verify(root, n, finalHash, proofN)) revert InvalidDisputeProof(0, 0, n, finalHash);
        d = _revealedReplica(taskId, c.replication);
        if (d.finalHash == finalHash) revert NoDisagreement(taskId, finalHash);
        if (d.node == msg.sender) revert NotParty(0, msg.sender);
    }

    function _openOptimistic(
        uint256 taskId,
        TaskContext memory c,
        Replica memory d,
        bytes32 root,
        bytes32 finalHash,
        bytes32 resultCid
    ) internal returns (uint256 disputeId) {
        uint256 bond = challengerBond;
        disputeId = _create(taskId, c, [msg.sender, d.node], [root, d.root], [finalHash, d.finalHash]);
        Dispute storage dp = _disputes[disputeId];
        dp.optimistic = true;
        dp.bond = bond;
        dp.resultCids = [resultCid, d.resultCid];
        totalBonds += bond;

        registry.lock(msg.sender, c.stakePerReplica);
        jobs.onChallenge(taskId);
        if (bond > 0) IERC20(address(token)).safeTransferFrom(msg.sender, address(this), bond);
        _afterNarrow(disputeId);
    }

    function _revealedReplica(uint256 taskId, uint8 replication) internal view returns (Replica memory r) {
        Replica[] memory reps = jobs.getReplicas(taskId);
        for (uint256 s = 0; s < replication; ++s) {
            if (reps[s].status == ReplicaStatus.Revealed) return reps[s];
        }
        revert TaskNotDisputable(taskId, TaskStatus.Revealed);
    }

    // ---------------------------------------------------------------- internals: moves

    function _bisecting(uint256 disputeId) internal view returns (Dispute storage d) {
        d = _disputes[disputeId];
        if (d.phase != DisputePhase.Bisect0 && d.phase != DisputePhase.Bisect1) revert WrongPhase(disputeId, d.phase);
    }

    function _bisectingOrRoots(uint256 disputeId) internal view returns (Dispute storage d) {
        d = _disputes[disputeId];
        DisputePhase ph = d.phase;
        if (ph != DisputePhase.Bisect0 && ph != DisputePhase.Bisect1 && ph != DisputePhase.StepRoots) {
            revert WrongPhase(disputeId, ph);
        }
    }

    function _party(Dispute storage d, uint256 disputeId, address who) internal view returns (uint256) {
        if (who == d.parties[0]) return 0;
        if (who == d.parties[1]) return 1;
        revert NotParty(disputeId, who);
    }

    function _pinpoint(uint256 disputeId, PinpointProof calldata p) internal {
        Dispute storage d = _bisecting(disputeId);
        uint8 level = d.level;
        uint32 max = level == 0 ? d.n : d.k;
        if (p.index >= max) revert IndexOutOfRange(disputeId, p.index, max - 1);
        if (p.claimA == p.claimB) revert NotADivergence(disputeId, p.index);
        (bytes32 rootA, bytes32 rootB) = level == 0 ? (d.roots[0], d.roots[1]) : (d.stepRoots[0], d.stepRoots[1]);
        _checkProof(disputeId, level, rootA, p.index, p.agreed, p.proofAgreedA);
        _checkProof(disputeId, level, rootB, p.index, p.agreed, p.proofAgreedB);
        _checkProof(disputeId, level, rootA, p.index + 1, p.claimA, p.proofClaimA);
        _checkProof(disputeId, level, rootB, p.index + 1, p.claimB, p.proofClaimB);
        // INVARIANT: any proven (agreed i, different i+1) is a valid divergence, inside [lo, hi] or not.
        d.lo = p.index;
        d.hi = p.index + 1;
        d.agreed = p.agreed;
        d.claims = [p.claimA, p.claimB];
        d.moved = [false, false];
        _afterNarrow(disputeId);
    }

    function _checkProof(
        uint256 disputeId,
        uint8 level,
        bytes32 root,
        uint256 index,
        bytes32 leafHash,
        bytes32[] calldata proof
    ) internal pure {
        if (!Merkle.verify(root, index, leafHash, proof)) revert InvalidDisputeProof(disputeId, level, index, leafHash);
    }

    /// @dev After any narrowing: either request the next midpoint (both clocks run) or finish the level.
    function _afterNarrow(uint256 disputeId) internal {
        Dispute storage d = _disputes[disputeId];
        _stopClock(d, 0);
        _stopClock(d, 1);
        if (d.hi - d.lo > 1) {
            d.mid = d.lo + (d.hi - d.lo) / 2;
            _startClock(d, 0);
            _startClock(d, 1);
            emit LeafRequested(disputeId, d.level, d.mid);
            return;
        }
        if (d.level == 0) {
            d.segment = d.lo;
            emit CheckpointPinpointed(disputeId, d.lo, d.agreed, d.claims[0], d.claims[1]);
            if (d.k > 1) {
                d.phase = DisputePhase.StepRoots;
                _startClock(d, 0);
                _startClock(d, 1);
                return;
            }
            // k == 1: the segment is a single step; the checkpoint claims are the step claims.
            d.step = 0;
        } else {
            d.step = d.lo;
        }
        emit StepPinpointed(disputeId, d.segment * d.k + d.step, d.agreed, d.claims[0], d.claims[1]);
        if (_drawPanel(disputeId) == 0) {
            d.phase = DisputePhase.AwaitingPanel;
            d.panelDeadline = uint64(block.timestamp) + panelTimeout;
            emit PanelPending(disputeId, d.panelDeadline);
        }
    }

    // ---------------------------------------------------------------- internals: clocks

    function _startClock(Dispute storage d, uint256 p) internal {
        if (d.clockSince[p] == 0) d.clockSince[p] = uint64(block.timestamp);
    }

    function _stopClock(Dispute storage d, uint256 p) internal {
        uint64 since = d.clockSince[p];
        if (since == 0) return;
        d.clockUsed[p] += uint64(block.timestamp) - since;
        d.clockSince[p] = 0;
    }

    function _elapsed(Dispute storage d, uint256 p) internal view returns (uint256) {
        uint64 since = d.clockSince[p];
        return uint256(d.clockUsed[p]) + (since == 0 ? 0 : block.timestamp - since);
    }

    function _remaining(Dispute storage d, uint256 p) internal view returns (uint256) {
        uint256 used = _elapsed(d, p);
        return used >= clockAllowance ? 0 : clockAllowance - used;
    }

    /// @dev A party is out when its clock is running (the game awaits it) and exceeds the allowance.
    function _expired(Dispute storage d, uint256 p) internal view returns (bool) {
        return d.clockSince[p] != 0 && _elapsed(d, p) > clockAllowance;
    }

    // ---------------------------------------------------------------- internals: panel

    /// @dev Draws up to panelSize referees (odd count) excluding the parties; returns the seated count.
    function _drawPanel(uint256 disputeId) internal returns (uint256 seated) {
        Dispute storage d = _disputes[disputeId];
        TaskContext memory c = jobs.taskContext(d.taskId);
        uint256 size = panelSize;
        // Unused seats stay address(0), which the registry ignores.
        address[] memory exclude = new address[](2 + size);
        exclude[0] = d.parties[0];
        exclude[1] = d.parties[1];
        address[] memory drawn = new address[](size);
        for (uint256 seat = 0; seat < size; ++seat) {
            bytes32 seed = keccak256(abi.encode(block.prevrandao, disputeId, seat, d.drawNonce));
            ++d.drawNonce;
            address referee =
                registry.drawReferee(seed, c.deviceClass, c.minMemoryMb, c.profileBit, refereeStake, exclude);
            if (referee == address(0)) break;
            drawn[seated] = referee;
            exclude[2 + seated] = referee;
            ++seated;
        }
        if (seated == 0) return 0;
        if (seated % 2 == 0) --seated; // odd panel: no ties between the two claims
        address[] storage panel = _panels[disputeId];
        uint64 commitDeadline = uint64(block.timestamp) + voteCommitWindow;
        d.phase = DisputePhase.Voting;
        d.commitDeadline = commitDeadline;
        d.revealDeadline = commitDeadline + voteRevealWindow;
        for (uint256 i = 0; i < seated; ++i) {
            panel.push(drawn[i]);
            _votes[disputeId][drawn[i]].seated = true;
        }
        emit RefereesDrawn(disputeId, panel, commitDeadline, d.revealDeadline);
        uint256 stakeAmount = refereeStake;
        for (uint256 i = 0; i < seated; ++i) {
            registry.lock(drawn[i], stakeAmount);
        }
    }

    // ---------------------------------------------------------------- internals: settlement

    /// @dev Ends the dispute: slashes losers, pays winner and revealing referees, burns the rest, settles the task.
    function _settle(uint256 disputeId, DisputeOutcome outcome) internal {
        Dispute storage d = _disputes[disputeId];
        uint256 taskId = d.taskId;
        d.phase = DisputePhase.Resolved;
        d.outcome = outcome;
        d.clockSince = [uint64(0), uint64(0)];
        disputeOfTask[taskId] = 0;
        bool lostA = outcome == DisputeOutcome.BothLose || outcome == DisputeOutcome.DefenderWins;
        bool lostB = outcome == DisputeOutcome.BothLose || outcome == DisputeOutcome.ChallengerWins;
        (address winner, address loser) = outcome == DisputeOutcome.ChallengerWins
            ? (d.parties[0], d.parties[1])
            : (outcome == DisputeOutcome.DefenderWins ? (d.parties[1], d.parties[0]) : (address(0), address(0)));
        emit DisputeResolved(disputeId, taskId, winner, loser, uint8(outcome));

        uint256 pot = 0;
        if (lostA) pot += d.taskStake + d.bond;
        if (lostB) pot += d.taskStake;
        uint256 burnAmount = pot;
        if (winner != address(0)) burnAmount -= _credit(winner, (pot * winnerShareBps) / BPS);
        burnAmount -= _payReferees(disputeId, (pot * refereeShareBps) / BPS);
        if (d.optimistic) {
            totalBonds -= d.bond;
            if (!lostA) _credit(d.parties[0], d.bond);
        }

        if (lostA) _slashParty(d.parties[0], d.taskStake);
        if (lostB) _slashParty(d.parties[1], d.taskStake);
        if (outcome != DisputeOutcome.Voided && winner != address(0)) registry.recordDispute(winner, true);
        if (d.optimistic && !lostA) registry.unlock(d.parties[0], d.taskStake);
        burnAmount += _releaseReferees(disputeId);
        if (burnAmount > 0) token.burn(burnAmount);

        if (outcome == DisputeOutcome.ChallengerWins) {
            jobs.onDisputeResolved(taskId, d.parties[0], d.parties[1], d.finals[0], d.resultCids[0]);
        } else if (outcome == DisputeOutcome.DefenderWins) {
            jobs.onDisputeResolved(taskId, d.parties[1], d.parties[0], d.finals[1], d.resultCids[1]);
        } else if (outcome == DisputeOutcome.BothLose) {
            jobs.onDisputeBothLost(taskId);
        } else {
            jobs.onDisputeVoided(taskId);
        }
    }

    function _credit(address to, uint256 amount) internal returns (uint256) {
        if (amount == 0) return 0;
        credits[to] += amount;
        totalCredits += amount;
        emit Credited(to, amount);
        return amount;
    }

    function _slashParty(address party, uint256 amount) internal {
        registry.slash(party, amount, address(this));
        registry.recordDispute(party, false);
    }

    /// @dev Splits `share` equally among referees that revealed; returns what was paid out.
    function _payReferees(uint256 disputeId, uint256 share) internal returns (uint256 paid) {
        uint256 revealed = _disputes[disputeId].revealedVotes;
        if (revealed == 0 || share == 0) return 0;
        uint256 each = share / revealed;
        address[] storage panel = _panels[disputeId];
        for (uint256 i = 0; i < panel.length; ++i) {
            if (_votes[disputeId][panel[i]].revealed) paid += _credit(panel[i], each);
        }
    }

    /// @dev Unlocks revealing referees; slashes `refereeSlashBps` of silent ones. Returns the slashed amount (to burn).
    function _releaseReferees(uint256 disputeId) internal returns (uint256 slashed) {
        address[] storage panel = _panels[disputeId];
        uint256 stakeAmount = refereeStake;
        uint256 penalty = (stakeAmount * refereeSlashBps) / BPS;
        for (uint256 i = 0; i < panel.length; ++i) {
            address referee = panel[i];
            if (_votes[disputeId][referee].revealed) {
                registry.unlock(referee, stakeAmount);
                continue;
            }
            if (penalty > 0) registry.slash(referee, penalty, address(this));
            registry.unlock(referee, stakeAmount - penalty);
            registry.recordLate(referee);
            slashed += penalty;
        }
    }
}
