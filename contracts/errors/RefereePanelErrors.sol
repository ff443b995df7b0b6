// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {PanelPhase} from "../types/VerityTypes.sol";

/// @notice Only the game may open or cancel panels.
/// @param caller The rejected caller.
error NotGame(address caller);

/// @notice The game is set once.
/// @param game The game already set.
error GameAlreadySet(address game);

/// @notice A panel already exists for `disputeId`.
/// @param disputeId The dispute.
error PanelExists(uint256 disputeId);

/// @notice Both parties' claims are equal: there is nothing to judge.
/// @param disputeId The dispute.
/// @param claim The common claim.
error ClaimsEqual(uint256 disputeId, bytes32 claim);

/// @notice The panel is not in the phase this call needs.
/// @param disputeId The dispute.
/// @param phase The panel's phase.
/// @param expected The phase the call needs.
error PanelNotInPhase(uint256 disputeId, PanelPhase phase, PanelPhase expected);

/// @notice The panel is not live (never opened, or already decided).
/// @param disputeId The dispute.
/// @param phase The panel's phase.
error PanelNotLive(uint256 disputeId, PanelPhase phase);

/// @notice The panel's randomness `requestId` is not ready yet (its target block is not mined).
/// @param disputeId The dispute.
/// @param requestId The pending request.
error SeatingRandomnessPending(uint256 disputeId, uint256 requestId);

/// @notice `referee` holds no seat of the panel.
/// @param disputeId The dispute.
/// @param referee The caller.
error NotSeated(uint256 disputeId, address referee);

/// @notice A zero commitment is not a commitment.
/// @param disputeId The dispute.
/// @param referee The caller.
error ZeroCommitment(uint256 disputeId, address referee);

/// @notice `referee` already committed its vote.
/// @param disputeId The dispute.
/// @param referee The caller.
error AlreadyCommitted(uint256 disputeId, address referee);

/// @notice `referee` already revealed its vote.
/// @param disputeId The dispute.
/// @param referee The caller.
error AlreadyRevealed(uint256 disputeId, address referee);

/// @notice The revealed vote and salt do not hash to `referee`'s commitment.
/// @param disputeId The dispute.
/// @param referee The caller.
/// @param commitment The stored commitment.
error CommitmentMismatch(uint256 disputeId, address referee, bytes32 commitment);

/// @notice The commit or reveal window ended at `deadline`.
/// @param disputeId The dispute.
/// @param phase The panel's phase.
/// @param deadline The last second of the window.
error WindowClosed(uint256 disputeId, PanelPhase phase, uint64 deadline);

/// @notice Nothing is late: the panel is not committing or revealing, or its window has not ended.
/// @param disputeId The dispute.
/// @param phase The panel's phase.
/// @param deadline The window's last second (0 outside Committing/Revealing).
error NothingToAdvance(uint256 disputeId, PanelPhase phase, uint64 deadline);

/// @notice The game declared `declared` as the referee reward but the panel received only `received`.
/// @param disputeId The dispute.
/// @param declared The reward onVerdict returned.
/// @param received The panel's balance increase during onVerdict.
error RewardNotReceived(uint256 disputeId, uint256 declared, uint256 received);
