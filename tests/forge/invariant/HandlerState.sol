// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Test} from "../base/Test.sol";
import {VerityToken} from "../../../contracts/VerityToken.sol";
import {NodeRegistry} from "../../../contracts/NodeRegistry.sol";
import {NodeLens} from "../../../contracts/NodeLens.sol";
import {DisputeLens} from "../../../contracts/DisputeLens.sol";
import {JobRegistry} from "../../../contracts/JobRegistry.sol";
import {IJobViews} from "../../../contracts/interfaces/IJobRegistry.sol";
import {JobEscrow} from "../../../contracts/JobEscrow.sol";
import {DisputeGame} from "../../../contracts/DisputeGame.sol";
import {RefereePanel} from "../../../contracts/RefereePanel.sol";
import {BlockhashRandomness} from "../../../contracts/BlockhashRandomness.sol";

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

/// @notice What the invariant handler knows: the system, who acts, the ghost totals the invariants compare against
///         the contracts' books, and the two violation counters (honest slashes, broken rules) that must stay 0.
/// @dev The shared layers above it (traces, the log audit, the shared moves) add behaviour and no state, so all the
///      handler's shared state reads in one place. The chain is
///      HandlerState -> HandlerTraces -> HandlerAudit -> HandlerBase -> HonestSide -> AdversarySide -> Handler.
abstract contract HandlerState is Test {
    VerityToken internal token;
    NodeRegistry internal registry;
    NodeLens internal lens;
    BlockhashRandomness internal randomness;
    JobEscrow internal escrow;
    JobRegistry internal jobs;
    IJobViews internal views;
    RefereePanel internal panel;
    DisputeGame internal game;
    DisputeLens internal disputeLens;
    address internal owner;
    address internal submitter;


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
    /// @notice Tokens the escrow sent to payees: the sum of its PaymentSent amounts, each counted only when the
    ///         token's own Transfer(escrow -> payee, amount) log follows it (see HandlerAudit._countPayment).
    uint256 public ghostEscrowPaid;
    uint256 public ghostRefunded;
    /// @notice P10: tokens the escrow burned, the sum of its EscrowBurned amounts, each counted only when the token's
    ///         own Transfer(escrow -> 0, amount) log follows it (see HandlerAudit._countBurn).
    uint256 public ghostEscrowBurned;
    /// @notice P10: the sum of the registry's PaymentForfeited amounts (each checked to burn exactly its payment).
    uint256 public ghostForfeited;
    /// @notice P10: reportUnavailable calls that succeeded: all of them, and those an honest holder made.
    uint256 public ghostUnavailableReports;
    uint256 public ghostHonestReports;
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
    /// @notice Honest refusals' bets burned because the poisoned task they refused was completed by adversaries
    ///         (issue 23: the residual of decliner bets, at most POSTER_BOND a task).
    uint256 public ghostGriefedBets;
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
    /// @notice P10: the inputs (bit i = input i) each (consumer task, slot, holder) reported unavailable, as the
    ///         handler made the reports; the invariants decide from these alone which payments must be forfeited.
    mapping(uint256 => mapping(uint8 => mapping(address => uint32))) public reportedMask;
    /// @notice P10: per accepted task, the payments forfeited (PaymentForfeited amounts) and how many.
    mapping(uint256 => uint256) public forfeitedOf;
    mapping(uint256 => uint256) public forfeitsOf;
    /// @notice P10 audit failures (must stay 0): a forfeit that did not burn exactly its payment from the escrow, a
    ///         forfeit of a non-payee, a stake or lock that moved without its registry event.
    uint256 public availabilityViolations;
    string public lastAvailabilityViolation;
    /// @dev Every identity whose stake the per-action audit follows (1-based index into `_staked`).
    address[] internal _staked;
    mapping(address => uint256) internal _stakedIndex;
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
    ///         seal is lifted from storage before the owner tries to add a protocol contract, 8 = the handler's
    ///         ledger misses honest holders' availability reports (a registry that burns on reports nobody made looks
    ///         the same), 9 = every forfeit burns one more wei of its job's escrow behind the books.
    uint8 public immutable sabotage;

    constructor(System memory s, Actors memory a, uint8 sabotage_) {
        sabotage = sabotage_;
        token = s.token;
        registry = s.registry;
        lens = new NodeLens(address(s.registry));
        randomness = s.randomness;
        escrow = s.escrow;
        jobs = s.jobs;
        views = IJobViews(address(s.jobs));
        panel = s.panel;
        game = s.game;
        disputeLens = new DisputeLens(address(s.game));
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
        for (uint256 i = 0; i < everyone.length; ++i) {
            _follow(everyone[i]);
        }
        for (uint256 i = 0; i < a.sybils.length; ++i) {
            _follow(a.sybils[i]);
        }
        for (uint256 i = 0; i < a.ineligible.length; ++i) {
            _follow(a.ineligible[i]);
        }
    }

    function _follow(address node) private {
        _staked.push(node);
        _stakedIndex[node] = _staked.length;
    }

    function nodeList() external view returns (address[] memory) {
        return everyone;
    }

    function _rule(string memory why) internal {
        ++ruleViolations;
        lastRuleViolation = why;
    }

    function _unavailable(string memory why) internal {
        ++availabilityViolations;
        lastAvailabilityViolation = why;
    }

    function _violation(address node, string memory why) internal {
        ++honestSlashes;
        lastHonestSlash = string.concat(why, " ", vm.toString(uint256(uint160(node))));
    }
}
