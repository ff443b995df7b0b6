// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IRefereePanel, IPanelGame} from "../../../contracts/interfaces/IRefereePanel.sol";
import {PanelRequest, Verdict} from "../../../contracts/types/VerityTypes.sol";

/// @notice Test-only game: opens and cancels panels, and on onVerdict pays a configurable reward and records the verdict.
contract MockPanelGame is IPanelGame {
    IERC20 public immutable token;
    IRefereePanel public immutable panel;
    /// @notice Tokens transferred to the panel on each verdict.
    uint256 public reward;
    /// @notice Extra amount onVerdict declares on top of what it transfers (to test a lying game).
    uint256 public overstate;
    /// @notice Number of onVerdict calls.
    uint256 public verdictCount;
    /// @notice Last verdict per dispute.
    mapping(uint256 => Verdict) public verdictOf;

    constructor(IERC20 token_, IRefereePanel panel_) {
        token = token_;
        panel = panel_;
    }

    function setReward(uint256 amount, uint256 overstated) external {
        reward = amount;
        overstate = overstated;
    }

    mapping(uint256 => address[3]) internal _parties;
    mapping(uint256 => bytes32[2]) internal _claims;

    function open(uint256 disputeId, PanelRequest calldata r) external {
        _parties[disputeId] = r.parties;
        _claims[disputeId] = [r.claimA, r.claimB];
        panel.open(disputeId, r);
    }

    /// @inheritdoc IPanelGame
    function claimsOf(uint256 disputeId) external view returns (bytes32, bytes32) {
        return (_claims[disputeId][0], _claims[disputeId][1]);
    }

    /// @inheritdoc IPanelGame
    function partiesOf(uint256 disputeId) external view returns (address[3] memory) {
        return _parties[disputeId];
    }

    /// @notice Cancels with `fee` offered, as DisputeGame does: sends the whole fee first, the panel pays the seats
    ///         and returns the rest; checks that exactly `fee - used` came back.
    function cancel(uint256 disputeId, uint256 fee) external returns (uint256 used) {
        if (fee > 0) token.transfer(address(panel), fee);
        uint256 before = token.balanceOf(address(this));
        used = panel.cancel(disputeId, fee);
        require(token.balanceOf(address(this)) - before == fee - used, "MockPanelGame: the unused fee not returned");
    }

    /// @inheritdoc IPanelGame
    function onVerdict(uint256 disputeId, Verdict v) external returns (uint256) {
        require(msg.sender == address(panel), "not panel");
        verdictOf[disputeId] = v;
        ++verdictCount;
        if (reward > 0) token.transfer(address(panel), reward);
        return reward + overstate;
    }
}
