// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IRefereePanel, IPanelGame} from "../../../contracts/interfaces/IRefereePanel.sol";
import {PanelRequest, Verdict} from "../../../contracts/types/VerityTypes.sol";

/// @notice A referee panel a test drives by hand: records what the game asked, and `decide` passes a verdict back,
///         checking that the game transferred the referee reward it reports.
contract MockPanel is IRefereePanel {
    IERC20 public immutable token;
    mapping(uint256 => PanelRequest) internal _requests;
    mapping(uint256 => bool) public opened;
    mapping(uint256 => bool) public cancelled;
    /// @notice Panels a test marked as holding commitments: cancel takes the game's fee for them.
    mapping(uint256 => bool) public seated;
    /// @notice Panels a test marked as having no revealed vote (every seat a no-show); others report 3.
    mapping(uint256 => bool) public noReveals;
    uint256 public opens;
    uint256 public rewards;

    constructor(IERC20 token_) {
        token = token_;
    }

    /// @inheritdoc IRefereePanel
    function open(uint256 disputeId, PanelRequest calldata r) external {
        require(!opened[disputeId], "MockPanel: opened twice");
        opened[disputeId] = true;
        _requests[disputeId] = r;
        ++opens;
    }

    /// @inheritdoc IRefereePanel
    /// @dev As the real panel: the game sent the whole fee first; a seated panel keeps it, else it goes back.
    function cancel(uint256 disputeId, uint256 fee) external returns (uint256) {
        require(opened[disputeId], "MockPanel: cancel unopened");
        cancelled[disputeId] = true;
        if (seated[disputeId]) return fee;
        if (fee > 0) require(token.transfer(msg.sender, fee), "MockPanel: fee not returned");
        return 0;
    }

    function setSeated(uint256 disputeId, bool value) external {
        seated[disputeId] = value;
    }

    function setNoReveals(uint256 disputeId, bool value) external {
        noReveals[disputeId] = value;
    }

    /// @inheritdoc IRefereePanel
    function revealedCount(uint256 disputeId) external view returns (uint256) {
        return noReveals[disputeId] ? 0 : 3;
    }

    /// @notice What the game asked to judge.
    function requestOf(uint256 disputeId) external view returns (PanelRequest memory) {
        return _requests[disputeId];
    }

    /// @notice Passes `v` to `game`; reverts unless the reported reward arrived.
    function decide(IPanelGame game, uint256 disputeId, Verdict v) external returns (uint256 reward) {
        uint256 before = token.balanceOf(address(this));
        reward = game.onVerdict(disputeId, v);
        require(token.balanceOf(address(this)) - before == reward, "MockPanel: reward not transferred");
        rewards += reward;
    }
}
