// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {TransientGuard} from "./lib/TransientGuard.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IRefereePanel, IPanelGame} from "./interfaces/IRefereePanel.sol";
import {IRandomness} from "./interfaces/IRandomness.sol";
import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {IVerityToken} from "./interfaces/IVerityToken.sol";
import {PanelRequest, PanelPhase, Verdict, BPS, WORK_WINDOW_CAP} from "./types/VerityTypes.sol";
import {ZeroAddress, ParameterOutOfRange} from "./errors/CommonErrors.sol";
import "./errors/RefereePanelErrors.sol";

/// @title RefereePanel
/// @notice Seats a stake-weighted random panel with two-phase randomness, runs commit-reveal voting on one training
///         step's output, slashes and redraws no-shows, and passes the verdict back to the game
///         (docs/protocol-v2.md, "Referee panel", P4 and P7).
/// @dev Every rule a panel depends on is snapshotted when it opens (P8). At rest the panel holds no tokens: slashes
///      are burned, and rewards paid (DisputeGame.totalBonds says why a transfer cannot block), in the transaction
///      that takes them.
contract RefereePanel is IRefereePanel, Ownable, TransientGuard {
    using SafeERC20 for IERC20;

    /// @notice Largest panel.
    uint8 public constant MAX_PANEL = 7;
    /// @notice Redraw rounds after no-shows; one more no-show round ends the panel without a decision.
    uint8 public constant MAX_REDRAWS = 2;
    /// @notice Largest value accepted for any window.
    uint64 public constant MAX_WINDOW = 7 days;
    /// @notice Longest commit window a task's own execution window can buy its panel (see `_enterCommitting`).
    uint64 public constant MAX_WORK_WINDOW = WORK_WINDOW_CAP;
    /// @notice Bounds of `refereeStake`: at most NodeRegistry.MIN_REGISTRATION_STAKE (10 VRT), so any registered
    ///         referee with nothing locked can be seated; at least 1 VRT, so a blind vote always risks a slash.
    uint256 public constant MIN_REFEREE_STAKE = 1e18;
    uint256 public constant MAX_REFEREE_STAKE = 10e18;
    /// @notice Longest exclusion list NodeRegistry accepts (INodeRegistry MAX_EXCLUDE).
    uint256 public constant MAX_EXCLUDE = 16;

    /// @dev Slash reasons of RefereeSlashed.
    uint8 internal constant NO_COMMIT = 1;
    uint8 internal constant NO_REVEAL = 2;
    uint8 internal constant WRONG_VOTE = 3;

    /// @notice The rules of one panel, copied from the owner's parameters when it opens.
    struct Params {
        uint8 size;
        uint16 noShowSlashBps;
        uint16 wrongVoteSlashBps;
        uint64 commitWindow;
        uint64 revealWindow;
        uint256 refereeStake;
    }

    /// @notice One dispute's panel, as `panelOf` shows it. `seats[i] == address(0)` is an empty seat; `unseated` lists
    ///         the no-shows a window unseated (not drawn again while the exclusion list has room).
    struct Panel {
        PanelPhase phase;
        Verdict verdict;
        uint8 redraws;
        uint8 committed; // seats holding a commitment (revealed seats included)
        uint8 revealed; // seats holding a revealed vote
        uint32 attempt; // randomness requests made for this panel
        uint64 openedAt;
        uint64 seatingSince; // start of the current seating phase (a seating phase waits as long as it takes)
        uint64 commitDeadline;
        uint64 revealDeadline;
        uint64 decidedAt;
        uint64 requestId;
        uint32 rules; // the rules version in force when it opened (`rulesOf`), not a copy of them
        bytes32 majorityVote; // the revealed value more than half of the seats hold (0 = none)
        Case request;
        address[] seats;
        address[] unseated;
    }

    /// @notice Who may sit on the panel. The parties (never seated) and their claims are the game's, read when seats
    ///         are drawn and when the panel decides (`IPanelGame.partiesOf`, `claimsOf`), not copied here.
    struct Case {
        uint8 deviceClass;
        uint32 minMemoryMb;
        uint32 profileBit;
        uint32 workWindow; // the disputed task's execution window (PanelRequest.workWindow)
    }

    /// @notice A referee's standing in one panel, as `voteOf` shows it (`commitment` reads 0 once revealed).
    struct Vote {
        bool seated;
        bool committed;
        bool revealed;
        bytes32 commitment;
        bytes32 vote;
    }

    /// @dev Storage form of a Panel: two words of state, then one word per seat (the referee and its progress) and one
    ///      per vote (issue 23, cheaper disputes: the rules version, the case and the seat count took three fresh words
    ///      of their own at every open, and a referee's seat, flags and vote three at every seating). The majority is
    ///      not stored: `panelOf` counts it again from the votes, which never change once the panel decided.
    struct PanelState {
        PanelPhase phase;
        Verdict verdict;
        uint8 redraws;
        uint8 committed;
        uint8 revealed;
        uint32 attempt;
        uint40 openedAt;
        uint40 seatingSince;
        uint32 rules;
        uint8 deviceClass;
        uint32 minMemoryMb;
        uint32 profileBit;
        uint40 commitDeadline;
        uint40 revealDeadline;
        uint40 decidedAt;
        uint64 requestId;
        uint32 workWindow;
        Seat[MAX_PANEL] seats;
        bytes32[MAX_PANEL] values; // a seat's commitment, then its revealed vote in its place
        address[] unseated;
    }

    /// @dev One seat: its referee (0 = empty) and how far it got.
    struct Seat {
        address referee;
        bool committed;
        bool revealed;
    }

    /// @notice Token of stakes and rewards.
    IVerityToken public immutable token;
    /// @notice Node registry (referee draws, stake locks and slashes).
    INodeRegistry public immutable registry;
    /// @notice Two-phase randomness source.
    IRandomness public immutable randomness;
    /// @notice The game that opens panels and receives verdicts (set once).
    address public game;

    /// @notice Version of the owner's panel rules, the only copy of them: every setter publishes a new version, and a
    ///         panel keeps the version it opened under (P8) instead of copying the rules (issue 23, cheaper disputes:
    ///         two fresh words per panel). The parameter getters read the current version.
    uint32 public rulesVersion;
    mapping(uint256 => Params) internal _rules;

    mapping(uint256 => PanelState) internal _panels;

    modifier onlyGame() {
        if (msg.sender != game) revert NotGame(msg.sender);
        _;
    }

    constructor(IVerityToken token_, INodeRegistry registry_, IRandomness randomness_) Ownable(msg.sender) {
        if (address(token_) == address(0)) revert ZeroAddress("token");
        if (address(registry_) == address(0)) revert ZeroAddress("registry");
        if (address(randomness_) == address(0)) revert ZeroAddress("randomness");
        token = token_;
        registry = registry_;
        randomness = randomness_;
        // Defaults: 3 referees staking 10 VRT each; no-shows lose 10 %, minority votes 50 %; 60-s windows.
        _publish(Params({size: 3, noShowSlashBps: 1_000, wrongVoteSlashBps: 5_000, commitWindow: 60, revealWindow: 60,
            refereeStake: 10e18}));
    }

    // ---------------------------------------------------------------- parameters (the current rules version)

    /// @notice Referees per panel (odd, 1..MAX_PANEL).
    function panelSize() external view returns (uint8) {
        return _rules[rulesVersion].size;
    }

    /// @notice Stake each referee locks while seated.
    function refereeStake() external view returns (uint256) {
        return _rules[rulesVersion].refereeStake;
    }

    /// @notice Share of the referee stake burned for not committing or not revealing, in basis points.
    function noShowSlashBps() external view returns (uint256) {
        return _rules[rulesVersion].noShowSlashBps;
    }

    /// @notice Share of the referee stake burned for a vote against the majority, in basis points.
    function wrongVoteSlashBps() external view returns (uint256) {
        return _rules[rulesVersion].wrongVoteSlashBps;
    }

    /// @notice Seconds seated referees have to commit.
    function commitWindow() external view returns (uint64) {
        return _rules[rulesVersion].commitWindow;
    }

    /// @notice Seconds referees have to reveal once every seat committed.
    function revealWindow() external view returns (uint64) {
        return _rules[rulesVersion].revealWindow;
    }

    // ---------------------------------------------------------------- owner

    /// @notice Sets the game (once).
    function setGame(address game_) external onlyOwner {
        if (game_ == address(0)) revert ZeroAddress("game");
        if (game != address(0)) revert GameAlreadySet(game);
        game = game_;
        emit ParameterSet("game", uint256(uint160(game_)));
    }

    /// @notice Sets the panel size (odd, 1..MAX_PANEL) for panels opened afterwards.
    function setPanelSize(uint8 size) external onlyOwner {
        if (size == 0 || size > MAX_PANEL || size % 2 == 0) revert ParameterOutOfRange("panelSize", size, 1, MAX_PANEL);
        Params memory r = _rules[rulesVersion];
        r.size = size;
        _publish(r);
        emit ParameterSet("panelSize", size);
    }

    /// @notice Sets the stake each referee locks for panels opened afterwards, within
    ///         [MIN_REFEREE_STAKE, MAX_REFEREE_STAKE].
    function setRefereeStake(uint256 amount) external onlyOwner {
        // INVARIANT (issue 23): every registered referee can take a seat (2^128 - 1 passed the Timelock and no panel
        // could seat), and a seat always risks something.
        if (amount < MIN_REFEREE_STAKE || amount > MAX_REFEREE_STAKE) {
            revert ParameterOutOfRange("refereeStake", amount, MIN_REFEREE_STAKE, MAX_REFEREE_STAKE);
        }
        Params memory r = _rules[rulesVersion];
        r.refereeStake = amount;
        _publish(r);
        emit ParameterSet("refereeStake", amount);
    }

    /// @notice Sets the no-show and wrong-vote slashes (basis points of the referee stake) for later panels.
    function setSlashes(uint256 noShowBps, uint256 wrongVoteBps) external onlyOwner {
        if (noShowBps > BPS) revert ParameterOutOfRange("noShowSlashBps", noShowBps, 0, BPS);
        if (wrongVoteBps > BPS) revert ParameterOutOfRange("wrongVoteSlashBps", wrongVoteBps, 0, BPS);
        Params memory r = _rules[rulesVersion];
        (r.noShowSlashBps, r.wrongVoteSlashBps) = (uint16(noShowBps), uint16(wrongVoteBps));
        _publish(r);
        emit ParameterSet("noShowSlashBps", noShowBps);
        emit ParameterSet("wrongVoteSlashBps", wrongVoteBps);
    }

    /// @notice Sets the commit and reveal windows (seconds) for panels opened afterwards. Seating has no timeout:
    ///         a panel that cannot fill its seats yet waits and retries, it never releases the parties (issue 9).
    function setWindows(uint64 commitSeconds, uint64 revealSeconds) external onlyOwner {
        _checkWindow("commitWindow", commitSeconds);
        _checkWindow("revealWindow", revealSeconds);
        Params memory r = _rules[rulesVersion];
        (r.commitWindow, r.revealWindow) = (commitSeconds, revealSeconds);
        _publish(r);
        emit ParameterSet("commitWindow", commitSeconds);
        emit ParameterSet("revealWindow", revealSeconds);
    }

    // ---------------------------------------------------------------- game

    /// @inheritdoc IRefereePanel
    function open(uint256 disputeId, PanelRequest calldata r) external onlyGame nonReentrant {
        PanelState storage p = _panels[disputeId];
        if (p.phase != PanelPhase.None) revert PanelExists(disputeId);
        // INVARIANT: a vote must be able to tell the parties apart.
        if (r.claimA == r.claimB) revert ClaimsEqual(disputeId, r.claimA);
        // INVARIANT: the panel's rules are fixed now; later owner changes never reach it (P8).
        p.rules = rulesVersion;
        (p.deviceClass, p.minMemoryMb, p.profileBit, p.workWindow) =
            (r.deviceClass, r.minMemoryMb, r.profileBit, r.workWindow);
        p.openedAt = uint40(block.timestamp);
        _enterSeating(disputeId, p, true);
    }

    /// @inheritdoc IRefereePanel
    /// @dev Emits PanelDecided with verdict 0 (None) and no callback to the game.
    function cancel(uint256 disputeId, uint256 fee) external onlyGame nonReentrant returns (uint256 used) {
        PanelState storage p = _panels[disputeId];
        PanelPhase phase = p.phase;
        if (phase == PanelPhase.None || phase == PanelPhase.Decided) revert PanelNotLive(disputeId, phase);
        _enterDecided(disputeId, p, Verdict.None, bytes32(0));
        // The seats that did their part so far (hold a commitment) share the fee; a seat past its window without one
        // would have been slashed by `advance`, so it takes nothing.
        // The game sent the whole fee first; what the seats are not paid goes back to it (the challenger's).
        used = _pay(_seatsThat(p, false), fee);
        _releaseAll(disputeId, p);
        if (fee > used) IERC20(address(token)).safeTransfer(game, fee - used);
    }

    // ---------------------------------------------------------------- seating

    /// @notice Fills every empty seat from the panel's random value (anyone). A stale request is renewed instead.
    /// @dev The value comes from a block mined after the request, so the caller's choice of block does not matter (P4).
    function seat(uint256 disputeId) external nonReentrant {
        PanelState storage p = _panels[disputeId];
        _requirePhase(disputeId, p, PanelPhase.Seating);
        uint256 requestId = p.requestId;
        if (randomness.isStale(requestId)) {
            randomness.renew(requestId);
            return;
        }
        // INVARIANT: seats are drawn only from a value fixed after the request was made (P4).
        if (!randomness.isReady(requestId)) revert SeatingRandomnessPending(disputeId, requestId);
        bytes32 value = randomness.valueOf(requestId);
        Params memory params = _rules[p.rules];
        (address[] memory exclude, uint256 n) = _exclusions(disputeId, p);
        bool full = true;
        for (uint256 i = 0; i < params.size; ++i) {
            if (p.seats[i].referee != address(0)) continue;
            address referee = registry.drawReferee(
                keccak256(abi.encode(value, disputeId, i, p.attempt)),
                p.deviceClass,
                p.minMemoryMb,
                p.profileBit,
                params.refereeStake,
                exclude
            );
            if (referee == address(0)) {
                full = false;
                continue;
            }
            registry.lock(referee, params.refereeStake);
            p.seats[i].referee = referee;
            exclude[n++] = referee; // room for every empty seat was reserved
        }
        if (full) {
            _enterCommitting(disputeId, p);
        } else {
            // INVARIANT: a draw that finds no eligible referee never decides the dispute: it used to end in
            // NoDecision after a timeout, which released a cheater unslashed and let its result stand (issue 9).
            // The filled seats stay; the empty ones are drawn again from a fresh value, as long as it takes.
            uint64 retry = _request(p);
            p.requestId = retry;
            emit SeatingRetry(disputeId, retry);
        }
    }

    // ---------------------------------------------------------------- voting

    /// @notice Commits `c = keccak256(abi.encode(disputeId, vote, salt, msg.sender))` (seated referees).
    function commitVote(uint256 disputeId, bytes32 c) external nonReentrant {
        PanelState storage p = _panels[disputeId];
        _requirePhase(disputeId, p, PanelPhase.Committing);
        // INVARIANT: no commitment after the window; late seats are left to advance().
        if (block.timestamp > p.commitDeadline) revert WindowClosed(disputeId, p.phase, p.commitDeadline);
        uint256 i = _seatOf(disputeId, p, msg.sender);
        Seat storage v = p.seats[i];
        // INVARIANT: a zero commitment would be indistinguishable from none (P7).
        if (c == bytes32(0)) revert ZeroCommitment(disputeId, msg.sender);
        if (v.committed) revert AlreadyCommitted(disputeId, msg.sender);
        v.committed = true;
        p.values[i] = c;
        emit VoteCommitted(disputeId, msg.sender);
        if (++p.committed == _rules[p.rules].size) _enterRevealing(disputeId, p);
    }

    /// @notice Reveals the vote and salt of the caller's commitment; the last reveal decides the panel.
    function revealVote(uint256 disputeId, bytes32 vote, bytes32 salt) external nonReentrant {
        PanelState storage p = _panels[disputeId];
        // INVARIANT: reveals start only after every seat committed, so no referee votes knowing another's vote.
        _requirePhase(disputeId, p, PanelPhase.Revealing);
        if (block.timestamp > p.revealDeadline) revert WindowClosed(disputeId, p.phase, p.revealDeadline);
        uint256 i = _seatOf(disputeId, p, msg.sender);
        Seat storage v = p.seats[i];
        if (v.revealed) revert AlreadyRevealed(disputeId, msg.sender);
        // INVARIANT: the commitment binds the referee's address, so a copied commitment cannot be revealed.
        bytes32 commitment = p.values[i];
        if (keccak256(abi.encode(disputeId, vote, salt, msg.sender)) != commitment) {
            revert CommitmentMismatch(disputeId, msg.sender, commitment);
        }
        v.revealed = true;
        p.values[i] = vote;
        emit VoteRevealed(disputeId, msg.sender, vote);
        if (++p.revealed == _rules[p.rules].size) {
            (bytes32 majority, bool found) = _tally(p);
            _decide(disputeId, p, found ? _verdictOf(disputeId, majority) : Verdict.NoDecision, majority);
        }
    }

    /// @notice Handles a window that ended (anyone): slashes and unseats the seats that did not commit (or reveal),
    ///         then redraws them, decides when the missing votes can no longer change the majority, or ends with
    ///         NoDecision once MAX_REDRAWS redraw rounds were used.
    function advance(uint256 disputeId) external nonReentrant {
        PanelState storage p = _panels[disputeId];
        PanelPhase phase = p.phase;
        uint64 deadline = phase == PanelPhase.Committing
            ? p.commitDeadline
            : (phase == PanelPhase.Revealing ? p.revealDeadline : 0);
        // INVARIANT: only a window that has ended can make a referee late.
        if (deadline == 0 || block.timestamp <= deadline) revert NothingToAdvance(disputeId, phase, deadline);
        bool committing = phase == PanelPhase.Committing;
        Params memory params = _rules[p.rules];
        uint256 slashAmount = (params.refereeStake * params.noShowSlashBps) / BPS;
        for (uint256 i = 0; i < params.size; ++i) {
            Seat memory v = p.seats[i];
            if (committing ? v.committed : v.revealed) continue;
            if (v.committed) --p.committed;
            delete p.seats[i];
            delete p.values[i];
            address referee = v.referee;
            p.unseated.push(referee);
            _settle(disputeId, referee, params.refereeStake, slashAmount, committing ? NO_COMMIT : NO_REVEAL);
            registry.recordLate(referee);
        }
        if (!committing) {
            // Revealed votes are counted against every seat: a value already held by more than half of the seats
            // stays the majority whatever the missing seats would vote.
            (bytes32 majority, bool found) = _tally(p);
            if (found) {
                _decide(disputeId, p, _verdictOf(disputeId, majority), majority);
                return;
            }
        }
        if (p.redraws >= MAX_REDRAWS) {
            _decide(disputeId, p, Verdict.NoDecision, bytes32(0));
            return;
        }
        ++p.redraws;
        _enterSeating(disputeId, p, false);
    }

    // ---------------------------------------------------------------- views

    /// @notice The panel of `disputeId` (phase None if never opened).
    function panelOf(uint256 disputeId) external view returns (Panel memory v) {
        PanelState storage p = _panels[disputeId];
        (v.phase, v.verdict, v.redraws, v.committed, v.revealed, v.attempt) =
            (p.phase, p.verdict, p.redraws, p.committed, p.revealed, p.attempt);
        (v.openedAt, v.seatingSince, v.commitDeadline, v.revealDeadline, v.decidedAt, v.requestId, v.rules) =
            (p.openedAt, p.seatingSince, p.commitDeadline, p.revealDeadline, p.decidedAt, p.requestId, p.rules);
        if (p.phase == PanelPhase.Decided && p.verdict != Verdict.None) (v.majorityVote,) = _tally(p);
        v.request = Case(p.deviceClass, p.minMemoryMb, p.profileBit, p.workWindow);
        v.seats = _seatList(p);
        v.unseated = p.unseated;
    }

    /// @notice The rules the panel of `disputeId` runs under (fixed when it opened).
    function rulesOf(uint256 disputeId) external view returns (Params memory) {
        return _rules[_panels[disputeId].rules];
    }

    /// @notice Seats of the panel of `disputeId` holding a revealed vote (the game charges a panel fee only to a panel
    ///         that has someone to pay it to).
    function revealedCount(uint256 disputeId) external view returns (uint256) {
        return _panels[disputeId].revealed;
    }

    /// @notice `referee`'s standing in the panel of `disputeId`.
    function voteOf(uint256 disputeId, address referee) external view returns (Vote memory) {
        PanelState storage p = _panels[disputeId];
        uint256 size = _rules[p.rules].size;
        uint256 i = _seatIndex(p, referee, size);
        if (referee == address(0) || i == size) return Vote(false, false, false, bytes32(0), bytes32(0));
        Seat memory b = p.seats[i];
        bytes32 value = p.values[i];
        return Vote(true, b.committed, b.revealed, b.revealed ? bytes32(0) : value, b.revealed ? value : bytes32(0));
    }

    // ---------------------------------------------------------------- transitions

    /// @dev Starts a seating phase (and its clock) on a fresh value: at open, or to redraw no-shows.
    function _enterSeating(uint256 disputeId, PanelState storage p, bool opening) internal {
        p.phase = PanelPhase.Seating;
        p.seatingSince = uint40(block.timestamp);
        uint64 requestId = _request(p);
        p.requestId = requestId;
        if (opening) emit PanelOpened(disputeId, requestId);
        else emit SeatingRetry(disputeId, requestId);
    }

    function _request(PanelState storage p) internal returns (uint64) {
        ++p.attempt;
        return SafeCast.toUint64(randomness.request());
    }

    /// @dev Publishes `r` as the new rules version (panels opened from now on use it; open ones keep theirs).
    function _publish(Params memory r) internal {
        _rules[++rulesVersion] = r;
    }

    /// @dev A seated referee must fetch the disputed checkpoint and recompute a step of the task before it can commit.
    ///      The solvers were given the task's execution window for all of its steps on the same device class, so a
    ///      commit window that long can always be met by a node that could have solved the task (issue 25: honest
    ///      referees on a loaded host took 15-70 s against the 60-s default and were fined). The rules' window stays
    ///      the floor; MAX_WORK_WINDOW bounds how long a no-show can hold the dispute per seating round.
    function _enterCommitting(uint256 disputeId, PanelState storage p) internal {
        p.phase = PanelPhase.Committing;
        uint64 window = p.workWindow < MAX_WORK_WINDOW ? p.workWindow : MAX_WORK_WINDOW;
        uint64 floor = _rules[p.rules].commitWindow;
        uint64 deadline = uint64(block.timestamp) + (window > floor ? window : floor);
        p.commitDeadline = uint40(deadline);
        emit RefereesSeated(disputeId, _seatList(p), deadline);
    }

    function _enterRevealing(uint256 disputeId, PanelState storage p) internal {
        p.phase = PanelPhase.Revealing;
        uint64 deadline = uint64(block.timestamp) + _rules[p.rules].revealWindow;
        p.revealDeadline = uint40(deadline);
        emit RevealOpened(disputeId, deadline);
    }

    /// @dev Ends the panel: settles every seated referee, calls the game back, splits its reward among the majority.
    function _decide(uint256 disputeId, PanelState storage p, Verdict verdict, bytes32 majority) internal {
        _enterDecided(disputeId, p, verdict, majority);
        address[] memory winners;
        if (verdict == Verdict.NoDecision) {
            // Without a majority the reward (the challenger's panel fee) goes to every referee that revealed.
            winners = _seatsThat(p, true);
            _releaseAll(disputeId, p);
        } else {
            winners = _settleVotes(disputeId, p, majority);
        }

        uint256 before = token.balanceOf(address(this));
        uint256 reward = IPanelGame(game).onVerdict(disputeId, verdict);
        uint256 received = token.balanceOf(address(this)) - before;
        // INVARIANT: only tokens the panel holds are paid (it holds none at rest).
        if (received < reward) revert RewardNotReceived(disputeId, reward, received);
        if (reward == 0) return;
        // Rounding dust, and the whole reward when nobody is paid, is burned.
        uint256 remainder = reward - _pay(winners, reward);
        if (remainder > 0) token.burn(remainder);
    }

    /// @dev Pays `amount` to the nonzero entries of `to` in equal parts; returns what it paid.
    function _pay(address[] memory to, uint256 amount) internal returns (uint256 paid) {
        uint256 count;
        for (uint256 i = 0; i < to.length; ++i) {
            if (to[i] != address(0)) ++count;
        }
        uint256 share = count == 0 ? 0 : amount / count;
        if (share == 0) return 0;
        for (uint256 i = 0; i < to.length; ++i) {
            if (to[i] == address(0)) continue;
            emit Credited(to[i], share);
            IERC20(address(token)).safeTransfer(to[i], share);
        }
        paid = share * count;
    }

    /// @dev The seated referees that revealed a vote (`revealed`), or that hold a commitment (revealed or not).
    function _seatsThat(PanelState storage p, bool revealed) internal view returns (address[] memory list) {
        list = _seatList(p);
        for (uint256 i = 0; i < list.length; ++i) {
            Seat storage b = p.seats[i];
            if (!(revealed ? b.revealed : b.committed)) list[i] = address(0);
        }
    }

    /// @dev The referee of each seat of the panel's size (0 = empty).
    function _seatList(PanelState storage p) internal view returns (address[] memory list) {
        list = new address[](_rules[p.rules].size);
        for (uint256 i = 0; i < list.length; ++i) {
            list[i] = p.seats[i].referee;
        }
    }

    /// @dev The seat `referee` holds among the first `size`, or `size` when it holds none.
    function _seatIndex(PanelState storage p, address referee, uint256 size) internal view returns (uint256 i) {
        while (i < size && p.seats[i].referee != referee) ++i;
    }

    /// @dev The seat `referee` holds (reverts NotSeated when it holds none).
    function _seatOf(uint256 disputeId, PanelState storage p, address referee) internal view returns (uint256 i) {
        uint256 size = _rules[p.rules].size;
        i = _seatIndex(p, referee, size);
        if (i == size) revert NotSeated(disputeId, referee);
    }

    /// @dev Final phase; verdict None means cancelled by the game.
    function _enterDecided(uint256 disputeId, PanelState storage p, Verdict verdict, bytes32 majority) internal {
        p.phase = PanelPhase.Decided;
        p.decidedAt = uint40(block.timestamp);
        p.verdict = verdict;
        emit PanelDecided(disputeId, uint8(verdict), majority);
    }

    // ---------------------------------------------------------------- internals

    function _requirePhase(uint256 disputeId, PanelState storage p, PanelPhase expected) internal view {
        if (p.phase != expected) revert PanelNotInPhase(disputeId, p.phase, expected);
    }

    function _checkWindow(bytes32 name, uint64 value) internal pure {
        if (value == 0 || value > MAX_WINDOW) revert ParameterOutOfRange(name, value, 1, MAX_WINDOW);
    }

    /// @dev Parties, current seats, then earlier (unseated) referees newest first, capped so that the list plus one
    ///      entry per empty seat fits MAX_EXCLUDE. Returns the list (tail zero-filled for the seats about to be drawn)
    ///      and the number of entries filled. Zero entries are ignored by the registry.
    function _exclusions(uint256 disputeId, PanelState storage p) internal view returns (address[] memory list, uint256 n) {
        uint256 size = _rules[p.rules].size;
        uint256 empty;
        list = new address[](MAX_EXCLUDE);
        address[3] memory parties = IPanelGame(game).partiesOf(disputeId);
        for (uint256 i = 0; i < 3; ++i) {
            address party = parties[i];
            if (party != address(0)) list[n++] = party;
        }
        for (uint256 i = 0; i < size; ++i) {
            address s = p.seats[i].referee;
            if (s == address(0)) ++empty;
            else list[n++] = s;
        }
        // n + empty <= 3 + size <= 10, so parties and seats always fit; history fills what is left.
        uint256 room = MAX_EXCLUDE - empty;
        address[] storage history = p.unseated;
        for (uint256 i = history.length; i > 0 && n < room; --i) {
            address h = history[i - 1];
            if (_seatIndex(p, h, size) == size) list[n++] = h;
        }
    }

    /// @dev Most common revealed vote and whether it is held by more than half of all seats.
    function _tally(PanelState storage p) internal view returns (bytes32 majority, bool found) {
        uint256 size = _rules[p.rules].size;
        for (uint256 i = 0; i < size; ++i) {
            if (!p.seats[i].revealed) continue;
            bytes32 value = p.values[i];
            uint256 count;
            for (uint256 j = 0; j < size; ++j) {
                if (p.seats[j].revealed && p.values[j] == value) ++count;
            }
            if (count > size / 2) return (value, true);
        }
    }

    function _verdictOf(uint256 disputeId, bytes32 majority) internal view returns (Verdict) {
        (bytes32 claimA, bytes32 claimB) = IPanelGame(game).claimsOf(disputeId);
        if (majority == claimA) return Verdict.ForA;
        if (majority == claimB) return Verdict.ForB;
        return Verdict.Neither;
    }

    /// @dev Unlocks the majority (returned), slashes revealed votes against it, unlocks unrevealed seats unslashed.
    function _settleVotes(uint256 disputeId, PanelState storage p, bytes32 majority)
        internal
        returns (address[] memory winners)
    {
        Params memory params = _rules[p.rules];
        uint256 wrongSlash = (params.refereeStake * params.wrongVoteSlashBps) / BPS;
        winners = new address[](params.size);
        uint256 count;
        for (uint256 i = 0; i < params.size; ++i) {
            Seat memory v = p.seats[i];
            address referee = v.referee;
            if (referee == address(0)) continue;
            if (v.revealed && p.values[i] == majority) {
                winners[count++] = referee;
                registry.unlock(referee, params.refereeStake);
                registry.recordDispute(referee, true);
            } else if (v.revealed) {
                _settle(disputeId, referee, params.refereeStake, wrongSlash, WRONG_VOTE);
                registry.recordDispute(referee, false);
            } else {
                registry.unlock(referee, params.refereeStake);
            }
        }
        assembly ("memory-safe") {
            mstore(winners, count)
        }
    }

    /// @dev Releases every seated referee unslashed.
    function _releaseAll(uint256 disputeId, PanelState storage p) internal {
        uint256 stakeAmount = _rules[p.rules].refereeStake;
        for (uint256 i = 0; i < _rules[p.rules].size; ++i) {
            address referee = p.seats[i].referee;
            if (referee != address(0)) registry.unlock(referee, stakeAmount);
        }
    }

    /// @dev Burns `slashAmount` of `referee`'s locked referee stake and unlocks the rest.
    function _settle(uint256 disputeId, address referee, uint256 stakeAmount, uint256 slashAmount, uint8 reason)
        internal
    {
        if (slashAmount > 0) {
            registry.slash(referee, slashAmount, address(this));
            token.burn(slashAmount);
        }
        if (stakeAmount > slashAmount) registry.unlock(referee, stakeAmount - slashAmount);
        emit RefereeSlashed(disputeId, referee, slashAmount, reason);
    }
}
