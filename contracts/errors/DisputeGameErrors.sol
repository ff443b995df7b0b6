// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {DisputePhase, TaskStatus} from "../types/VerityTypes.sol";

/// @notice The dispute does not exist.
error DisputeNotFound(uint256 disputeId);

/// @notice The dispute is not in the phase this move needs.
error WrongPhase(uint256 disputeId, DisputePhase phase);

/// @notice The task already has a dispute in progress.
error DisputeAlreadyOpen(uint256 taskId, uint256 disputeId);

/// @notice The task is not in a status that can be disputed this way.
error TaskNotDisputable(uint256 taskId, TaskStatus status);

/// @notice The two claims agree at the end of the trace: nothing to dispute.
error NoDisagreement(uint256 taskId, bytes32 finalHash);

/// @notice The caller lacks the VERIFIER role.
error NotVerifier(address caller);

/// @notice The caller is not a party of the dispute.
error NotParty(uint256 disputeId, address caller);

/// @notice The party has already made this move.
error AlreadyMoved(uint256 disputeId, address party);

/// @notice A Merkle proof failed.
error InvalidDisputeProof(uint256 disputeId, uint8 level, uint256 index, bytes32 leafHash);

/// @notice The pinpointed leaves do not agree at i or do not differ at i+1.
error NotADivergence(uint256 disputeId, uint32 index);

/// @notice Index outside the level's trace.
error IndexOutOfRange(uint256 disputeId, uint256 index, uint256 max);

/// @notice The revealed index is not the one the game requested.
error NotRequestedIndex(uint256 disputeId, uint8 level, uint32 requested, uint32 given);

/// @notice No party's clock has run out yet.
error ClockNotExpired(uint256 disputeId);

/// @notice The caller is not a seated referee of the dispute.
error NotReferee(uint256 disputeId, address caller);

/// @notice The vote commit window has closed.
error VoteCommitClosed(uint256 disputeId, uint64 deadline);

/// @notice Vote reveal has not opened yet or has closed.
error VoteRevealNotOpen(uint256 disputeId, uint64 opensAfter, uint64 closesAt);

/// @notice The revealed vote does not match the commitment.
error VoteMismatch(uint256 disputeId, address referee);

/// @notice The referee already committed/revealed.
error AlreadyVoted(uint256 disputeId, address referee);

/// @notice resolve called before the reveal deadline with votes outstanding.
error VotingNotOver(uint256 disputeId, uint64 revealDeadline);

/// @notice The panel timeout has not passed.
error PanelTimeoutNotReached(uint256 disputeId, uint64 deadline);

/// @notice Still no eligible referee.
error NoEligibleReferee(uint256 disputeId);
