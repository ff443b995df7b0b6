// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {TransientGuard} from "./lib/TransientGuard.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";

import {IDisputeGame} from "./interfaces/IDisputeGame.sol";
import {IJobRegistry, IJobViews} from "./interfaces/IJobRegistry.sol";
import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {IRefereePanel, IPanelGame} from "./interfaces/IRefereePanel.sol";
import {IVerityToken} from "./interfaces/IVerityToken.sol";
import {Merkle} from "./lib/Merkle.sol";
import {ChessClock, Clock} from "./lib/ChessClock.sol";
import {Settlement} from "./lib/Settlement.sol";
import {
    TaskContext,
    TaskStatus,
    Replica,
    Claim,
    DisputePhase,
    DisputeOutcome,
    Verdict,
    PanelRequest,
    PinpointProof,
    ROLE_VERIFIER,
    BPS,
    WORK_WINDOW_CAP
} from "./types/VerityTypes.sol";
import {ZeroAddress, ParameterOutOfRange} from "./errors/CommonErrors.sol";
import "./errors/DisputeGameErrors.sol";

/// @notice The chain's block time, from the job registry (JobRegistryBase.blockSeconds).
interface IBlockTime {
    function blockSeconds() external view returns (uint64);
}

/// @title DisputeGame
/// @notice Settles a disagreement about one task by narrowing it to a single training step (checkpoint level, then
///         step level) on chess clocks, then asking the RefereePanel to recompute that step. Optimistic challenges are
///         committed, then revealed (P6); any number may run against a candidate at once (P1). The rules of a
///         dispute (clock allowance, bond, shares, task stake) are copied into it when it opens (P8).
/// @dev Party index 0 = A (challenger / opener), 1 = B (defender; its co-defender may move for it). At each level the
///      game keeps "leaf lo agreed, leaf hi differs" (lo = 0 and hi = n are proven when the dispute opens).
///      Fate follows claims: B's two members share the checkpoint trace, so either moves at level 0 and both answer
///      for it; B's step root is the claim of the member that submitted it, which alone moves for B at level 1 and
///      alone answers for B's step-level loss (verdict or clock). The other member is then spared: not slashed, its
///      replica released by the job registry (`sparedDefender` during `onDisputeSettled`).
contract DisputeGame is IDisputeGame, IPanelGame, Ownable, TransientGuard {
    using SafeERC20 for IERC20;
    using ChessClock for Clock;

    /// @notice Largest value accepted for the clock allowance.
    uint64 public constant MAX_WINDOW = 7 days;
    /// @dev The least clock allowance (seconds; internal: DisputeGame has no room for a getter).
    uint64 internal constant MIN_CLOCK_ALLOWANCE = 30;
    /// @dev ... and at least this many blocks of the chain's block time (JobRegistry.blockSeconds).
    uint64 internal constant MIN_CLOCK_BLOCKS = 5;
    /// @notice Bounds of `challengerBond`: a challenge always costs something, and never more than ten times the
    ///         minimum registration stake (a node that can register can afford to challenge).
    uint256 internal constant MIN_CHALLENGER_BOND = 1e18;
    uint256 internal constant MAX_CHALLENGER_BOND = 100e18;
    /// @notice Most a panel fee may be: the least bond, so that a challenger's bond can always pay it.
    uint256 internal constant MAX_PANEL_FEE = MIN_CHALLENGER_BOND;

    /// @dev Transition table: bit (8 * from + to) is set when `from -> to` is legal.
    ///      None->Bisect0; Bisect0->StepRoots|Judging|Resolved; StepRoots->Bisect1|Resolved;
    ///      Bisect1->Judging|Resolved; Judging->Resolved.
    uint256 private constant _NEXT =
        (1 << 1) | (1 << 10) | (1 << 12) | (1 << 13) | (1 << 19) | (1 << 21) | (1 << 28) | (1 << 29) | (1 << 37);
    /// @dev Phase masks for `_live`.
    uint256 private constant _BISECTING = (1 << uint8(DisputePhase.Bisect0)) | (1 << uint8(DisputePhase.Bisect1));
    uint256 private constant _CLOCKED = _BISECTING | (1 << uint8(DisputePhase.StepRoots));

    /// @notice One party's position in a dispute. The party, its move flag and its chess clock share one word
    ///         (issue 23, cheaper disputes: a `Clock` struct took a word of its own per side, and a clock started and
    ///         stopped in the same second went back to zero and was paid as a fresh word again).
    struct Side {
        address party;
        bool moved; // made the move the game awaits
        uint40 used; // chess clock (ChessClock): seconds spent on finished turns
        uint40 since; // chess clock: start of the running turn (0 = stopped)
        bytes32 root; // level-0 trace root
        bytes32 stepRoot; // level-1 trace root
        bytes32 finalHash; // stored for an optimistic challenger only (DisputeLens fills the others in)
        bytes32 resultCid; // likewise
        bytes32 claim; // leaf at hi
        bytes32 midLeaf; // revealed leaf at mid
    }

    /// @dev Five words before the sides (DisputeLens decodes them): task and bisection state; the rest of the
    ///      bisection, snapshots and B's move bits; the amounts (token amounts fit 96 bits: VerityToken.MAX_SUPPLY is
    ///      10^27 wei); the co-defender; the agreed leaf.
    struct Dispute {
        uint64 taskId; // task ids count up from 1 (JobRegistry.taskCount)
        DisputePhase phase;
        DisputeOutcome outcome;
        bool optimistic; // A is a verifier that locked the task stake and posted a bond
        uint8 level;
        uint32 epoch; // the task's epoch when the dispute opened (stale once the task's epoch moves on)
        uint32 n; // level-0 trace length (leaves 0..n)
        uint32 k; // level-1 trace length (leaves 0..k)
        uint32 lo;
        uint32 hi;
        uint32 mid; // requested index while bisecting (0 = none: only a pinpoint can go on)
        uint32 segment; // pinpointed checkpoint index i
        uint32 step; // pinpointed step s inside the segment
        uint16 winnerShareBps; // snapshot
        uint16 refereeShareBps; // snapshot
        uint32 allowance; // snapshot of clockAllowance (at most MAX_WINDOW)
        uint40 phaseAt; // when `phase` was entered
        uint8 movedB; // B-side members that made a move: bit 1 = defender, bit 2 = co-defender
        uint8 stepRootBy; // the B-side member (same bits) that submitted B's step root (0 = none yet)
        uint96 taskStake; // snapshot
        uint96 bond; // snapshot (0 for a replicated contest)
        uint64 fee; // snapshot of panelFee (optimistic challenges; 0 for a replicated contest)
        address coDefender; // may move for B at level 0 and shares B's checkpoint-level fate (0 = none)
        bytes32 agreed; // leaf lo (both agree)
        Side[2] sides; // [A, B]
    }

    /// @notice A challenge commitment: when it was made.
    struct Commitment {
        uint64 blockNumber;
        uint64 timestamp;
    }

    /// @notice Token of stakes, bonds and rewards.
    IVerityToken public immutable token;
    /// @notice Node registry (stake locks, slashes, reputation).
    INodeRegistry public immutable registry;
    /// @notice Job registry (claims, task data and settlement hooks).
    IJobRegistry public immutable jobs;
    /// @notice Referee panel that judges pinpointed steps.
    IRefereePanel public immutable panel;

    /// @notice Seconds each party may spend awaiting its own moves in one dispute.
    uint64 public clockAllowance = 120;
    /// @notice Number of disputes (ids 1..disputeCount). 32 bits (4.29e9 disputes; `++` reverts past it) so that it
    ///         shares the owner's word, already nonzero: the first dispute of a deployment does not pay a fresh word
    ///         for it (issue 23, cheaper disputes).
    uint32 public disputeCount;
    /// @notice Bond an optimistic challenger posts on top of locking the task stake.
    uint256 public challengerBond = 10e18;
    /// @notice Share of the slashed pot credited to the winner, in basis points.
    uint256 public winnerShareBps = 5_000;
    /// @notice Share of the slashed pot paid to the panel (for its majority voters), in basis points.
    uint256 public refereeShareBps = 2_500;
    /// @notice Least a panel that judged (or was seated for) an optimistic challenge is paid: the challenger's bond
    ///         pays what the loser's slashed stake does not (issue 23: "panels cost who opens them").
    uint256 public panelFee = 0.25e18;

    /// @notice Open replicated-contest dispute of a task (0 = none); optimistic challenges are not listed.
    mapping(uint256 => uint256) public disputeOfTask;
    /// @notice Challenge commitments not yet revealed.
    mapping(bytes32 => Commitment) public commitments;
    /// @notice Sum of bonds held by open disputes: at rest the game holds exactly this. Rewards and returned bonds are
    ///         paid in the transaction that settles them (issue 23, cheaper disputes: credits to withdraw later cost a
    ///         fresh word per winner, a running total, and a withdrawal transaction each). VRT is an OpenZeppelin
    ///         ERC-20 without hooks or blocklist, so a transfer to a party, always a nonzero address, cannot fail or
    ///         call back: paying at once gives nobody a way to block a settlement.
    uint256 public totalBonds;

    /// @notice While the game calls `jobs.onDisputeSettled`: the co-defender member of a losing B side that the game
    ///         did not slash (the other member alone made B's losing step-level claim); the job registry releases its
    ///         replica (Voided, unlocked, unpaid). 0 otherwise.
    address public transient sparedDefender;

    mapping(uint256 => Dispute) internal _disputes;

    /// @notice The open optimistic challenge of a challenger against a task (0 = none): one at a time (issue 23).
    mapping(uint256 => mapping(address => uint256)) public openChallengeOf;

    constructor(IVerityToken token_, INodeRegistry registry_, IJobRegistry jobs_, IRefereePanel panel_)
        Ownable(msg.sender)
    {
        if (address(token_) == address(0)) revert ZeroAddress("token");
        if (address(registry_) == address(0)) revert ZeroAddress("registry");
        if (address(jobs_) == address(0)) revert ZeroAddress("jobs");
        if (address(panel_) == address(0)) revert ZeroAddress("panel");
        token = token_;
        registry = registry_;
        jobs = jobs_;
        panel = panel_;
    }

    // ---------------------------------------------------------------- owner

    /// @notice Sets each party's clock allowance (seconds) for disputes opened afterwards, within
    ///         [max(MIN_CLOCK_ALLOWANCE, MIN_CLOCK_BLOCKS blocks of the chain's block time), MAX_WINDOW].
    function setClockAllowance(uint64 value) external onlyOwner {
        // INVARIANT: a party always has time to fetch, replay a segment and land its moves, and never unbounded time
        // (issue 23: 1 s passed the Timelock, and no party can land a move in it: the timeout decided every dispute;
        // 30 s on a 12-s chain is 2.5 blocks for all of a party's moves).
        uint64 min = MIN_CLOCK_BLOCKS * IBlockTime(address(jobs)).blockSeconds();
        if (min < MIN_CLOCK_ALLOWANCE) min = MIN_CLOCK_ALLOWANCE;
        if (value < min || value > MAX_WINDOW) revert ParameterOutOfRange("clockAllowance", value, min, MAX_WINDOW);
        clockAllowance = value;
        emit ParameterSet("clockAllowance", value);
    }

    /// @notice Sets the optimistic challenger bond for challenges opened afterwards, within
    ///         [MIN_CHALLENGER_BOND, MAX_CHALLENGER_BOND].
    function setChallengerBond(uint256 value) external onlyOwner {
        // INVARIANT (issue 23): governance cannot shut challenges out (a 10^9 VRT bond passed the Timelock), nor make
        // them free to spam.
        unchecked {
            // one comparison for both bounds (a value below the minimum wraps far above the range): bytes are short here
            if (value - MIN_CHALLENGER_BOND > MAX_CHALLENGER_BOND - MIN_CHALLENGER_BOND) {
                revert ParameterOutOfRange("challengerBond", value, MIN_CHALLENGER_BOND, MAX_CHALLENGER_BOND);
            }
        }
        challengerBond = value;
        emit ParameterSet("challengerBond", value);
    }

    /// @notice Sets the least pay of a panel judging an optimistic challenge opened afterwards, within
    ///         [0, MAX_PANEL_FEE] (at most the least bond, which pays it).
    function setPanelFee(uint256 value) external onlyOwner {
        if (value > MAX_PANEL_FEE) revert ParameterOutOfRange("panelFee", value, 0, MAX_PANEL_FEE);
        panelFee = value;
        emit ParameterSet("panelFee", value);
    }

    /// @notice Sets the winner's and the referees' shares of a slashed pot (the rest is burned).
    function setShares(uint256 winnerBps, uint256 refereeBps) external onlyOwner {
        // INVARIANT: the shares never exceed the pot.
        if (winnerBps + refereeBps > BPS) revert ParameterOutOfRange("shares", winnerBps + refereeBps, 0, BPS);
        winnerShareBps = winnerBps;
        refereeShareBps = refereeBps;
        emit ParameterSet("winnerShareBps", winnerBps);
        emit ParameterSet("refereeShareBps", refereeBps);
    }

    // ---------------------------------------------------------------- opening

    /// @notice Opens the dispute of a Contested replicated task (anyone; a replica that calls is party A).
    /// @return disputeId The new dispute's id.
    function openDispute(uint256 taskId) external nonReentrant returns (uint256 disputeId) {
        Dispute storage d;
        bytes32 rootA;
        bytes32 rootB;
        (disputeId, d, rootA, rootB) = _openContest(taskId);
        // Leaf by leaf, the level-0 moves check against the roots: keep them.
        (d.sides[0].root, d.sides[1].root) = (rootA, rootB);
        _afterNarrow(disputeId, d);
    }

    /// @notice Opens the dispute of a Contested replicated task and pinpoints the checkpoint divergence at once.
    /// @return disputeId The new dispute's id.
    function openDisputeWithPinpoint(uint256 taskId, PinpointProof calldata p)
        external
        nonReentrant
        returns (uint256 disputeId)
    {
        Dispute storage d;
        bytes32 rootA;
        bytes32 rootB;
        (disputeId, d, rootA, rootB) = _openContest(taskId);
        _startClocks(d);
        // Level 0 ends in this transaction, so its roots are not stored (issue 23, cheaper disputes: two fresh words);
        // the job registry keeps them with the replicas, where DisputeLens reads them.
        _pinpointAgainst(disputeId, d, p, rootA, rootB);
    }

    /// @notice Commits a challenge: `c = keccak256(abi.encode(taskId, root, finalHash, resultCid, salt, challenger))`,
    ///         revealed by challengeOptimistic in a later block. The commitment hides the task and the result, and
    ///         binds the challenger: a copier of either transaction earns nothing.
    function commitChallenge(bytes32 c) external {
        Commitment storage s = commitments[c];
        // The first record stands: committing a copied value again cannot push its time past the deadline.
        if (s.blockNumber == 0) {
            s.blockNumber = uint64(block.number);
            s.timestamp = uint64(block.timestamp);
        }
        emit ChallengeCommitted(msg.sender, c);
    }

    /// @notice A staked VERIFIER reveals its committed challenge of the task's current claim with its own result
    ///         (trace `root` of length `n` from the task input to `finalHash`). Locks the task stake and posts the
    ///         bond; the job registry checks the challenge window.
    /// @return disputeId The new dispute's id.
    function challengeOptimistic(
        uint256 taskId,
        bytes32 root,
        bytes32 finalHash,
        uint32 n,
        bytes32 resultCid,
        bytes32 salt,
        bytes32[] calldata proof0,
        bytes32[] calldata proofN
    ) external nonReentrant returns (uint256 disputeId) {
        // INVARIANT: only staked verifiers challenge.
        if ((registry.rolesOf(msg.sender) & ROLE_VERIFIER) == 0) revert NotVerifier(msg.sender);
        uint64 committedAt = _useCommitment(keccak256(abi.encode(taskId, root, finalHash, resultCid, salt, msg.sender)));
        TaskContext memory c = jobs.taskContext(taskId);
        // INVARIANT: the challenger's trace runs from the task input to its final hash.
        if (n != c.n) revert IndexOutOfRange(0, n, c.n);
        _checkProof(0, 0, root, 0, c.inputHash, proof0);
        _checkProof(0, 0, root, n, finalHash, proofN);
        disputeId = _openChallenge(taskId, c, root, finalHash, resultCid, committedAt);
    }

    // ---------------------------------------------------------------- bisection

    /// @notice Narrows the current level to [p.index, p.index+1] in one move, with proofs against both roots
    ///         (anyone may call: the proofs speak for themselves).
    function pinpoint(uint256 disputeId, PinpointProof calldata p) external nonReentrant {
        _pinpoint(disputeId, _live(disputeId, _BISECTING), p);
    }

    /// @notice Reveals the requested leaf `index` of the caller's trace at `level`, with its Merkle proof
    ///         (party B's co-defender may move for B at level 0; at level 1 only B's step-root submitter moves for B).
    function revealLeaf(uint256 disputeId, uint8 level, uint32 index, bytes32 leafHash, bytes32[] calldata proof)
        external
        nonReentrant
    {
        Dispute storage d = _live(disputeId, _BISECTING);
        // INVARIANT: only the leaf the game requested, at the current level (0 = nothing requested).
        if (level != d.level) revert WrongPhase(disputeId, d.phase);
        if (index != d.mid || index == 0) revert NotRequestedIndex(disputeId, level, d.mid, index);
        (uint256 p,) = _mover(disputeId, d);
        // INVARIANT: the leaf belongs to the trace the party committed to.
        _checkProof(disputeId, level, level == 0 ? d.sides[p].root : d.sides[p].stepRoot, index, leafHash, proof);
        d.sides[p].midLeaf = leafHash;
        d.sides[p].moved = true;
        _stopClock(d.sides[p]);
        emit LeafRevealed(disputeId, msg.sender, level, index, leafHash);
        if (!d.sides[1 - p].moved) return;
        // INVARIANT: leaf lo agreed, leaf hi differs.
        (bytes32 leafA, bytes32 leafB) = (d.sides[0].midLeaf, d.sides[1].midLeaf);
        if (leafA == leafB) {
            d.lo = d.mid;
            d.agreed = leafA;
        } else {
            d.hi = d.mid;
            d.sides[0].claim = leafA;
            d.sides[1].claim = leafB;
        }
        _afterNarrow(disputeId, d);
    }

    /// @notice Commits the caller's per-step trace of the pinpointed segment: leaf 0 must be the agreed checkpoint,
    ///         leaf k the party's own checkpoint claim (either B-side member may submit B's, the first one counts: it
    ///         alone then moves for B at level 1 and answers for B's step-level loss).
    function submitStepRoot(
        uint256 disputeId,
        bytes32 stepRoot,
        bytes32[] calldata proofFirst,
        bytes32[] calldata proofLast
    ) external nonReentrant {
        Dispute storage d = _live(disputeId, 1 << uint8(DisputePhase.StepRoots));
        (uint256 p, uint8 member) = _mover(disputeId, d);
        // INVARIANT: the step trace joins the agreed checkpoint to the party's own checkpoint claim.
        _checkProof(disputeId, 1, stepRoot, 0, d.agreed, proofFirst);
        _checkProof(disputeId, 1, stepRoot, d.k, d.sides[p].claim, proofLast);
        d.sides[p].stepRoot = stepRoot;
        d.stepRootBy |= member; // A adds 0; B submits once
        d.sides[p].moved = true;
        _stopClock(d.sides[p]);
        emit StepRootSubmitted(disputeId, msg.sender, stepRoot);
        if (!d.sides[1 - p].moved) return;
        _transition(disputeId, d, DisputePhase.Bisect1);
        d.level = 1;
        d.lo = 0;
        d.hi = d.k;
        _afterNarrow(disputeId, d);
    }

    /// @notice Ends the dispute against every party whose clock ran out while the game awaited its move (anyone).
    function timeout(uint256 disputeId) external nonReentrant {
        Dispute storage d = _live(disputeId, _CLOCKED);
        bool outA = _clock(d.sides[0]).expired(d.allowance);
        bool outB = _clock(d.sides[1]).expired(d.allowance);
        // INVARIANT: only a party that ran out of time loses on time.
        if (!outA && !outB) revert ClockNotExpired(disputeId);
        _settle(
            disputeId,
            d,
            outA && outB
                ? DisputeOutcome.BothLose
                : (outA ? DisputeOutcome.DefenderWins : DisputeOutcome.ChallengerWins),
            false
        );
    }

    /// @notice Ends a dispute whose task moved on to a new candidate (anyone): nobody is slashed, the challenger's
    ///         stake is released and its bond paid back (less what a judging panel's committed seats are paid), the
    ///         panel cancelled.
    function abandon(uint256 disputeId) external nonReentrant {
        Dispute storage d = _disputes[disputeId];
        DisputePhase ph = d.phase;
        // INVARIANT: only a dispute still in play can be abandoned.
        if (ph == DisputePhase.None || ph == DisputePhase.Resolved) revert WrongPhase(disputeId, ph);
        // INVARIANT: only a stale dispute is abandoned; a live one is decided by its game.
        if (_epochOf(d.taskId) == d.epoch) revert DisputeNotStale(disputeId, d.epoch);
        // The referees that committed are paid the fee from the bond: a stale challenge costs part of its bond once
        // it has cost referees work (issue 23). The panel gets the whole fee, pays them and returns the rest.
        uint256 used;
        if (ph == DisputePhase.Judging) {
            uint256 fee = d.fee;
            if (fee > 0) IERC20(address(token)).safeTransfer(address(panel), fee);
            used = panel.cancel(disputeId, fee);
        }
        _abandon(disputeId, d, used);
    }

    /// @inheritdoc IPanelGame
    function onVerdict(uint256 disputeId, Verdict v) external nonReentrant returns (uint256 refereeReward) {
        // INVARIANT: only the panel decides, and only a dispute it is judging.
        if (msg.sender != address(panel)) revert NotPanel(msg.sender);
        Dispute storage d = _disputes[disputeId];
        if (d.phase != DisputePhase.Judging) revert WrongPhase(disputeId, d.phase);
        if (v == Verdict.None) revert InvalidVerdict(disputeId, v);
        // INVARIANT: a verdict about a replaced candidate slashes nobody; the referees are paid the fee from the bond.
        if (_epochOf(d.taskId) != d.epoch) {
            refereeReward = panel.revealedCount(disputeId) > 0 ? d.fee : 0;
            _abandon(disputeId, d, refereeReward);
        } else {
            DisputeOutcome outcome = v == Verdict.ForA
                ? DisputeOutcome.ChallengerWins
                : v == Verdict.ForB
                    ? DisputeOutcome.DefenderWins
                    : v == Verdict.Neither ? DisputeOutcome.BothLose : DisputeOutcome.Voided;
            refereeReward = _settle(disputeId, d, outcome, true);
        }
        if (refereeReward > 0) IERC20(address(token)).safeTransfer(address(panel), refereeReward);
    }

    /// @inheritdoc IPanelGame
    function partiesOf(uint256 disputeId) external view returns (address[3] memory) {
        Dispute storage d = _disputes[disputeId];
        return [d.sides[0].party, d.sides[1].party, d.coDefender];
    }

    /// @inheritdoc IPanelGame
    function claimsOf(uint256 disputeId) external view returns (bytes32, bytes32) {
        Dispute storage d = _disputes[disputeId];
        return (d.sides[0].claim, d.sides[1].claim);
    }

    // ---------------------------------------------------------------- views

    /// @notice One word of this contract's storage, for DisputeLens (which knows the layout: `forge inspect
    ///         DisputeGame storageLayout`) to show disputes, clocks and the disputed step without their views taking
    ///         room here.
    function extsload(bytes32 slot) external view returns (bytes32 value) {
        assembly ("memory-safe") {
            value := sload(slot)
        }
    }

    // ---------------------------------------------------------------- internals: opening

    function _useCommitment(bytes32 c) internal returns (uint64 committedAt) {
        Commitment memory s = commitments[c];
        // INVARIANT (P6): a challenge reveals a commitment of its own sender made in an earlier block.
        if (s.blockNumber == 0) revert ChallengeNotCommitted(c);
        if (s.blockNumber >= block.number) revert ChallengeCommitTooRecent(c, s.blockNumber);
        delete commitments[c];
        return s.timestamp;
    }

    function _openChallenge(
        uint256 taskId,
        TaskContext memory c,
        bytes32 root,
        bytes32 finalHash,
        bytes32 resultCid,
        uint64 committedAt
    ) internal returns (uint256 disputeId) {
        Claim memory claim = jobs.claimOf(taskId);
        // INVARIANT (issue 23): one open challenge per challenger and claim, so one identity cannot open panel after
        // panel against one claim (v2 let one open 12). A stale one (against a replaced claim) does not hold it back.
        uint256 open = openChallengeOf[taskId][msg.sender];
        if (open != 0 && _disputes[open].epoch == claim.epoch) revert ChallengeAlreadyOpen(taskId, msg.sender, open);
        // INVARIANT: a challenge disagrees with the claim at the end of the trace.
        if (finalHash == claim.finalHash) revert NoDisagreement(taskId, finalHash);
        // INVARIANT: nobody challenges a claim it stands behind.
        if (msg.sender == claim.defender || msg.sender == claim.coDefender) {
            revert ChallengerIsDefender(taskId, msg.sender);
        }
        Dispute storage d;
        (disputeId, d) = _create(taskId, c, claim.epoch, msg.sender, claim.defender);
        _setSide(d.sides[0], root, finalHash);
        // The challenger's result becomes the candidate if it wins: only its final and CID are kept (the defender's
        // stay in the job registry, where DisputeLens reads them).
        d.sides[0].finalHash = finalHash;
        d.sides[0].resultCid = resultCid;
        _setSide(d.sides[1], claim.root, claim.finalHash);
        d.optimistic = true;
        d.fee = uint64(panelFee);
        openChallengeOf[taskId][msg.sender] = disputeId;
        d.coDefender = claim.coDefender;
        uint256 bond = challengerBond;
        d.bond = uint96(bond);
        totalBonds += bond;
        registry.lock(msg.sender, d.taskStake);
        if (bond > 0) IERC20(address(token)).safeTransferFrom(msg.sender, address(this), bond);
        jobs.onChallenge(taskId, claim.epoch, committedAt);
        _afterNarrow(disputeId, d);
    }

    /// @dev Opens a contest; returns the parties' level-0 roots for the caller to store or use at once.
    function _openContest(uint256 taskId)
        internal
        returns (uint256 disputeId, Dispute storage d, bytes32 rootA, bytes32 rootB)
    {
        TaskContext memory c = jobs.taskContext(taskId);
        // INVARIANT: a replicated contest is disputed only while the task is Contested.
        if (c.status != TaskStatus.Contested || c.replication < 2) revert TaskNotDisputable(taskId, c.status);
        uint256 existing = disputeOfTask[taskId];
        // INVARIANT: one dispute per replicated contest.
        if (existing != 0) revert DisputeAlreadyOpen(taskId, existing);
        Replica[] memory reps = IJobViews(address(jobs)).getReplicas(taskId);
        (Replica memory a, Replica memory b) = (reps[0], reps[1]);
        if (b.node == msg.sender) (a, b) = (b, a);
        (disputeId, d) = _create(taskId, c, _epochOf(taskId), a.node, b.node);
        disputeOfTask[taskId] = disputeId;
        (d.sides[0].claim, d.sides[1].claim) = (a.finalHash, b.finalHash);
        (rootA, rootB) = (a.root, b.root);
    }

    function _create(uint256 taskId, TaskContext memory c, uint32 epoch, address partyA, address partyB)
        internal
        returns (uint256 disputeId, Dispute storage d)
    {
        disputeId = ++disputeCount;
        d = _disputes[disputeId];
        d.taskId = uint64(taskId);
        d.epoch = epoch;
        d.n = c.n;
        d.k = c.k;
        d.hi = c.n;
        // Issue 25: each party's clock is at least the task's execution window (capped): at 32 hosts on 2 cores a
        // party replaying its segment and moving at load 30 used more than the 120-s allowance and lost on time.
        uint64 work = c.executionWindow < WORK_WINDOW_CAP ? c.executionWindow : WORK_WINDOW_CAP;
        d.allowance = uint32(work > clockAllowance ? work : clockAllowance);
        d.winnerShareBps = uint16(winnerShareBps);
        d.refereeShareBps = uint16(refereeShareBps);
        // Never truncated: a replica locked this stake, and no stake exceeds the token's supply (< 2^96); checked anyway.
        d.taskStake = SafeCast.toUint96(c.stakePerReplica);
        d.agreed = c.inputHash;
        d.sides[0].party = partyA;
        d.sides[1].party = partyB;
        emit DisputeOpened(disputeId, taskId, partyA, partyB);
        _transition(disputeId, d, DisputePhase.Bisect0);
    }

    /// @dev A party's trace: its root and final hash as the level-0 claim at hi = n. Its final and CID are not copied
    ///      (issue 23, cheaper disputes: 4 fresh words of a contest): the job registry keeps them, and DisputeLens
    ///      shows them from there; only an optimistic challenger's are stored (they become the candidate's).
    function _setSide(Side storage s, bytes32 root, bytes32 finalHash) internal {
        s.root = root;
        s.claim = finalHash;
    }

    // ---------------------------------------------------------------- internals: moves

    /// @dev The dispute, in one of the phases of `mask`, against the task's current candidate.
    function _live(uint256 disputeId, uint256 mask) internal view returns (Dispute storage d) {
        d = _disputes[disputeId];
        // INVARIANT: a move is legal only in its phase.
        if ((mask >> uint8(d.phase)) & 1 == 0) revert WrongPhase(disputeId, d.phase);
        uint32 current = _epochOf(d.taskId);
        // INVARIANT: a dispute against a replaced candidate is not played on; abandon releases it.
        if (current != d.epoch) revert StaleDispute(disputeId, d.epoch, current);
    }

    /// @dev The caller's party index and B-side member bit (1 = defender, 2 = co-defender, 0 for A), checked to be
    ///      awaited and in time; records a B-side member's move.
    function _mover(uint256 disputeId, Dispute storage d) internal returns (uint256 p, uint8 member) {
        // INVARIANT: only A, B or B's co-defender (P2: same trace, same clock) move.
        if (msg.sender == d.sides[0].party) p = 0;
        else if (msg.sender == d.sides[1].party) (p, member) = (1, 1);
        else if (msg.sender == d.coDefender) (p, member) = (1, 2); // msg.sender is never 0
        else revert NotParty(disputeId, msg.sender);
        // INVARIANT: B's level-1 leaves are the step-root submitter's claims; only it moves for B at level 1.
        if (d.level == 1 && member != d.stepRootBy && p == 1) revert NotStepRootSubmitter(disputeId, msg.sender);
        d.movedB |= member;
        // INVARIANT: each party moves once per request.
        if (d.sides[p].moved) revert AlreadyMoved(disputeId, msg.sender);
        // INVARIANT (P8): a party whose own clock ran out cannot move any more; the timeout decides.
        if (_clock(d.sides[p]).expired(d.allowance)) revert ClockExpired(disputeId, uint8(p));
    }

    function _pinpoint(uint256 disputeId, Dispute storage d, PinpointProof calldata p) internal {
        (bytes32 rootA, bytes32 rootB) =
            d.level == 0 ? (d.sides[0].root, d.sides[1].root) : (d.sides[0].stepRoot, d.sides[1].stepRoot);
        _pinpointAgainst(disputeId, d, p, rootA, rootB);
    }

    /// @dev Narrows the current level to [p.index, p.index+1], the proofs checked against the level's roots.
    function _pinpointAgainst(
        uint256 disputeId,
        Dispute storage d,
        PinpointProof calldata p,
        bytes32 rootA,
        bytes32 rootB
    ) internal {
        // INVARIANT (P8): once a clock ran out the timeout decides; a pinpoint cannot rescue the late party.
        if (_clock(d.sides[0]).expired(d.allowance)) revert ClockExpired(disputeId, 0);
        if (_clock(d.sides[1]).expired(d.allowance)) revert ClockExpired(disputeId, 1);
        uint8 level = d.level;
        uint32 max = level == 0 ? d.n : d.k;
        // INVARIANT: the divergence lies inside the level's trace.
        if (p.index >= max) revert IndexOutOfRange(disputeId, p.index, max - 1);
        // INVARIANT: any proven (agreed i, different i+1) is a divergence, inside [lo, hi] or not.
        if (p.claimA == p.claimB) revert NotADivergence(disputeId, p.index);
        _checkProof(disputeId, level, rootA, p.index, p.agreed, p.proofAgreedA);
        _checkProof(disputeId, level, rootB, p.index, p.agreed, p.proofAgreedB);
        _checkProof(disputeId, level, rootA, p.index + 1, p.claimA, p.proofClaimA);
        _checkProof(disputeId, level, rootB, p.index + 1, p.claimB, p.proofClaimB);
        d.lo = p.index;
        d.hi = p.index + 1;
        d.agreed = p.agreed;
        d.sides[0].claim = p.claimA;
        d.sides[1].claim = p.claimB;
        _afterNarrow(disputeId, d);
    }

    function _checkProof(
        uint256 disputeId,
        uint8 level,
        bytes32 root,
        uint256 index,
        bytes32 leafHash,
        bytes32[] calldata proof
    ) internal pure {
        if (!Merkle.verify(root, index, leafHash, proof)) {
            revert InvalidDisputeProof(disputeId, level, index, leafHash);
        }
    }

    /// @dev After any narrowing: request the next midpoint (both clocks run), ask for step roots, or judge the step.
    function _afterNarrow(uint256 disputeId, Dispute storage d) internal {
        _stopClock(d.sides[0]);
        _stopClock(d.sides[1]);
        d.sides[0].moved = false;
        d.sides[1].moved = false;
        if (d.hi - d.lo > 1) {
            d.mid = d.lo + (d.hi - d.lo) / 2;
            _startClocks(d);
            emit LeafRequested(disputeId, d.level, d.mid);
            return;
        }
        if (d.sides[0].claim == d.sides[1].claim) {
            // Equal finals, different roots, and every requested leaf agreed: only a pinpoint of the divergence
            // the roots hide can go on; until then both clocks run.
            d.mid = 0;
            _startClocks(d);
            return;
        }
        if (d.level == 0) {
            d.segment = d.lo;
            emit CheckpointPinpointed(disputeId, d.lo, d.agreed, d.sides[0].claim, d.sides[1].claim);
            if (d.k > 1) {
                _transition(disputeId, d, DisputePhase.StepRoots);
                _startClocks(d);
                return;
            }
            // k == 1: the segment is a single step; the checkpoint claims are the step claims.
            d.step = 0;
        } else {
            d.step = d.lo;
        }
        emit StepPinpointed(disputeId, d.segment * d.k + d.step, d.agreed, d.sides[0].claim, d.sides[1].claim);
        _transition(disputeId, d, DisputePhase.Judging);
        TaskContext memory c = jobs.taskContext(d.taskId);
        panel.open(
            disputeId,
            PanelRequest({
                claimA: d.sides[0].claim,
                claimB: d.sides[1].claim,
                parties: [d.sides[0].party, d.sides[1].party, d.coDefender],
                deviceClass: c.deviceClass,
                minMemoryMb: c.minMemoryMb,
                profileBit: c.profileBit,
                workWindow: c.executionWindow
            })
        );
    }

    function _startClocks(Dispute storage d) internal {
        for (uint256 i = 0; i < 2; ++i) {
            Side storage s = d.sides[i];
            _setClock(s, _clock(s).started());
        }
    }

    function _stopClock(Side storage s) internal {
        _setClock(s, _clock(s).stopped());
    }

    /// @dev A side's chess clock (kept in the side's first word).
    function _clock(Side storage s) internal view returns (Clock memory) {
        return Clock(s.used, s.since);
    }

    function _setClock(Side storage s, Clock memory c) internal {
        (s.used, s.since) = (uint40(c.used), uint40(c.since));
    }

    /// @dev The one place a dispute changes phase: checks the transition table, stamps the time, emits.
    function _transition(uint256 disputeId, Dispute storage d, DisputePhase to) internal {
        DisputePhase from = d.phase;
        // INVARIANT: phases only move along the transition table.
        if ((_NEXT >> (uint256(from) * 8 + uint256(to))) & 1 == 0) revert IllegalTransition(disputeId, from, to);
        d.phase = to;
        d.phaseAt = uint40(block.timestamp);
        emit DisputePhaseChanged(disputeId, to, uint64(block.timestamp));
    }

    // ---------------------------------------------------------------- internals: settlement

    /// @dev Ends the dispute: slashes losers, pays the winner and a non-losing challenger's bond, burns the rest,
    ///      releases or keeps the parties' stakes, tells the job registry. Returns the referees' share (to the panel).
    function _settle(uint256 disputeId, Dispute storage d, DisputeOutcome outcome, bool judged)
        internal
        returns (uint256 toReferees)
    {
        _stopClock(d.sides[0]);
        _stopClock(d.sides[1]);
        _transition(disputeId, d, DisputePhase.Resolved);
        d.outcome = outcome;
        if (!d.optimistic) disputeOfTask[d.taskId] = 0;
        else _closeChallenge(disputeId, d);
        uint256 toWinner;
        uint256 toBurn;
        (toWinner, toReferees, toBurn) = Settlement.split(
            _collect(d, outcome),
            d.winnerShareBps,
            judged ? d.refereeShareBps : 0,
            outcome == DisputeOutcome.ChallengerWins || outcome == DisputeOutcome.DefenderWins
        );
        address a = d.sides[0].party;
        if (d.optimistic && outcome != DisputeOutcome.DefenderWins && outcome != DisputeOutcome.BothLose) {
            // A challenger that did not lose gets its bond back, less what a panel that judged it is owed beyond its
            // share of the pot (a verdict without a majority, or a win whose slashed stake pays less than the fee).
            // A panel in which nobody revealed (every seat a no-show) is owed nothing: the fee would only be burned.
            uint256 topUp =
                judged && toReferees < d.fee && panel.revealedCount(disputeId) > 0 ? d.fee - toReferees : 0;
            toReferees += topUp;
            _credit(a, d.bond - topUp);
        }
        _reward(disputeId, d, outcome, toWinner);
        // The game releases only the stake it locked: a challenger's that neither lost (slashed) nor won (its
        // result is now the candidate, the registry holds that stake). Replicas' stakes are the registry's.
        if (d.optimistic && outcome == DisputeOutcome.Voided) registry.unlock(a, d.taskStake);
        if (toBurn > 0) token.burn(toBurn);
        Side storage sa = d.sides[0];
        jobs.onDisputeSettled(d.taskId, d.epoch, outcome, a, sa.root, sa.finalHash, sa.resultCid);
        sparedDefender = address(0);
    }

    /// @dev Slashes the losers into the game and settles the bond; returns the pot.
    function _collect(Dispute storage d, DisputeOutcome outcome) internal returns (uint256 pot) {
        bool lostA = outcome == DisputeOutcome.DefenderWins || outcome == DisputeOutcome.BothLose;
        if (d.optimistic) {
            totalBonds -= d.bond;
            // A losing challenger's bond joins the pot; otherwise _settle gives it back (less any panel fee).
            if (lostA) pot += d.bond;
        }
        if (lostA) pot += _slash(d.sides[0].party, d.taskStake);
        if (outcome == DisputeOutcome.ChallengerWins || outcome == DisputeOutcome.BothLose) {
            // INVARIANT (fate follows claims): before B's step root both members stood behind the same checkpoint
            // claims and either could move: both answer. After it, B's claims are its submitter's alone.
            uint8 liable = d.stepRootBy == 0 ? 3 : d.stepRootBy;
            if (liable & 1 != 0) pot += _slash(d.sides[1].party, d.taskStake);
            address co = d.coDefender;
            if (co != address(0)) {
                if (liable & 2 != 0) pot += _slash(co, d.taskStake);
                // The member that made no step-level claim is spared: the job registry releases its replica.
                if (liable != 3) sparedDefender = liable == 1 ? co : d.sides[1].party;
            }
        }
    }

    /// @dev Pays the winner's share and records the win. When B wins, the share goes to the B-side members that
    ///      made a move, in equal parts (both, in equal parts, when neither moved).
    function _reward(uint256 disputeId, Dispute storage d, DisputeOutcome outcome, uint256 toWinner) internal {
        (address a, address b, address co) = (d.sides[0].party, d.sides[1].party, d.coDefender);
        if (outcome == DisputeOutcome.ChallengerWins) {
            _credit(a, toWinner);
            registry.recordDispute(a, true);
            emit DisputeResolved(disputeId, d.taskId, a, d.stepRootBy == 2 ? co : b, uint8(outcome));
        } else if (outcome == DisputeOutcome.DefenderWins) {
            uint8 paid = co == address(0) ? 1 : (d.movedB == 0 ? 3 : d.movedB);
            uint256 toCo = paid == 3 ? toWinner / 2 : toWinner;
            if (paid & 2 != 0) {
                _credit(co, toCo);
                registry.recordDispute(co, true);
            }
            if (paid & 1 != 0) {
                _credit(b, paid == 3 ? toWinner - toCo : toWinner);
                registry.recordDispute(b, true);
            }
            emit DisputeResolved(disputeId, d.taskId, paid == 2 ? co : b, a, uint8(outcome));
        } else {
            emit DisputeResolved(disputeId, d.taskId, address(0), address(0), uint8(outcome));
        }
    }

    /// @dev Stale dispute: Resolved / Voided, nobody slashed, the challenger released with its bond less `fee` (what
    ///      its panel is paid).
    function _abandon(uint256 disputeId, Dispute storage d, uint256 fee) internal {
        _stopClock(d.sides[0]);
        _stopClock(d.sides[1]);
        _transition(disputeId, d, DisputePhase.Resolved);
        d.outcome = DisputeOutcome.Voided;
        if (d.optimistic) {
            address a = d.sides[0].party;
            totalBonds -= d.bond;
            _closeChallenge(disputeId, d);
            _credit(a, d.bond - fee);
            registry.unlock(a, d.taskStake);
        } else {
            disputeOfTask[d.taskId] = 0;
        }
        emit DisputeAbandoned(disputeId, d.taskId, d.epoch);
    }

    /// @dev Clears the challenger's open challenge of the task, unless a newer one (against a newer claim) holds it.
    function _closeChallenge(uint256 disputeId, Dispute storage d) internal {
        mapping(address => uint256) storage open = openChallengeOf[d.taskId];
        address a = d.sides[0].party;
        if (open[a] == disputeId) delete open[a];
    }

    /// @dev The task's current epoch, through TaskMachine's view (a fifth of `getTask`'s gas).
    function _epochOf(uint256 taskId) internal view returns (uint32) {
        return IJobViews(address(jobs)).epochOf(taskId);
    }

    function _slash(address node, uint256 amount) internal returns (uint256) {
        registry.slash(node, amount, address(this));
        registry.recordDispute(node, false);
        return amount;
    }

    /// @dev Pays `amount` to `to` now (see totalBonds for why a transfer cannot block a settlement).
    function _credit(address to, uint256 amount) internal {
        if (amount == 0) return;
        emit Credited(to, amount);
        IERC20(address(token)).safeTransfer(to, amount);
    }
}
