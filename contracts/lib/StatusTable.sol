// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// @title StatusTable
/// @notice The legal status changes of a task and of a replica slot (issue 23, "room to grow": one transition table,
///         one guarded setter each, as DisputeGame._transition has for disputes). Bit `8 * from + to` of a table is set
///         when `from -> to` is legal; JobRegistryBase._setTaskStatus and _setReplicaStatus are the only writers of a
///         status, and they revert IllegalStatusTransition on anything else.
library StatusTable {
    /// @dev Task (TaskStatus: None 0, Open 1, Assigned 2, Revealed 3, Contested 4, Accepted 5, Cancelled 6):
    ///      None -> Open (created, its draw requested);
    ///      Open -> Open (a slot emptied again while it waits: a new draw request), Assigned | Revealed | Contested ->
    ///      Open (a slot emptied: late, declined, or the claim lost and the task reopens);
    ///      Open -> Assigned (every slot filled);
    ///      Assigned -> Revealed (an optimistic result or two identical reveals: a challenge window), Revealed ->
    ///      Revealed and Contested -> Revealed (a dispute winner's result is the new claim, P3);
    ///      Assigned -> Contested (two reveals that differ);
    ///      Revealed -> Accepted (finalized);
    ///      Open | Assigned | Revealed | Contested -> Cancelled (its job ended early).
    uint256 internal constant TASK = (1 << (0 * 8 + 1)) | (1 << (1 * 8 + 1)) | (1 << (2 * 8 + 1)) | (1 << (3 * 8 + 1))
        | (1 << (4 * 8 + 1)) | (1 << (1 * 8 + 2)) | (1 << (2 * 8 + 3)) | (1 << (3 * 8 + 3)) | (1 << (4 * 8 + 3))
        | (1 << (2 * 8 + 4)) | (1 << (3 * 8 + 5)) | (1 << (1 * 8 + 6)) | (1 << (2 * 8 + 6)) | (1 << (3 * 8 + 6))
        | (1 << (4 * 8 + 6));

    /// @dev Replica slot (ReplicaStatus: None 0, Assigned 1, Committed 2, Revealed 3, Accepted 4, Slashed 5, Late 6,
    ///      Voided 7); a slot drawn again is cleared to None first:
    ///      None -> Assigned (drawn);
    ///      Assigned -> Committed (commit), Assigned -> Revealed (the last to commit reveals at once; an optimistic
    ///      result), Committed -> Revealed (reveal);
    ///      Assigned | Committed -> Late (reported late), Assigned | Committed -> Voided (declined, withdrawn from a
    ///      starved task, or its job ended);
    ///      Revealed -> Accepted (its claim finalized), Revealed -> Slashed (its claim lost a dispute), Revealed ->
    ///      Voided (released: spared by the game, its claim voided, or its job ended).
    uint256 internal constant REPLICA = (1 << (0 * 8 + 1)) | (1 << (1 * 8 + 2)) | (1 << (1 * 8 + 3))
        | (1 << (2 * 8 + 3)) | (1 << (1 * 8 + 6)) | (1 << (2 * 8 + 6)) | (1 << (1 * 8 + 7)) | (1 << (2 * 8 + 7))
        | (1 << (3 * 8 + 4)) | (1 << (3 * 8 + 5)) | (1 << (3 * 8 + 7));

    /// @notice Whether `table` allows `from -> to`.
    function allows(uint256 table, uint8 from, uint8 to) internal pure returns (bool) {
        return (table >> (uint256(from) * 8 + to)) & 1 != 0;
    }
}
