// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {DisputeGame} from "./DisputeGame.sol";
import {ChessClock, Clock} from "./lib/ChessClock.sol";
import {DisputePhase, DisputeOutcome, Replica, Claim, TaskStatus} from "./types/VerityTypes.sol";
import {IJobRegistry, IJobViews} from "./interfaces/IJobRegistry.sol";

/// @notice What DisputeLens reads from the game.
interface IDisputeStorage {
    function extsload(bytes32 slot) external view returns (bytes32);
    function jobs() external view returns (IJobRegistry);
}

/// @title DisputeLens
/// @notice Read-only views of DisputeGame's disputes (the record, the clocks, the disputed step), kept out of the game
///         so that its room goes to rules (issue 23, "room to grow": a whole `Dispute` struct's ABI encoder took
///         about 1.5 KB of the game's code). Stateless: deploy one for any game.
/// @dev Reads the game's storage through `extsload` at the layout `forge inspect DisputeGame storageLayout` gives:
///      `_disputes` at DISPUTES_SLOT; a Dispute is 23 words (7 of its own, then two 8-word Sides). Every forge test
///      reads disputes through this contract, so a layout change that forgets it fails them.
contract DisputeLens {
    using ChessClock for Clock;

    /// @dev DisputeGame storage slot of `_disputes`.
    uint256 internal constant DISPUTES_SLOT = 13;
    /// @dev Words of a Dispute before its sides, and of one Side.
    uint256 internal constant HEAD_WORDS = 7;
    uint256 internal constant SIDE_WORDS = 8;

    IDisputeStorage public immutable game;

    constructor(address game_) {
        game = IDisputeStorage(game_);
    }

    /// @notice The dispute record.
    function getDispute(uint256 disputeId) public view returns (DisputeGame.Dispute memory d) {
        uint256 base = _base(disputeId);
        d.taskId = _word(base);
        uint256 w = _word(base + 1);
        d.phase = DisputePhase(uint8(w));
        d.outcome = DisputeOutcome(uint8(w >> 8));
        d.optimistic = uint8(w >> 16) != 0;
        d.level = uint8(w >> 24);
        d.epoch = uint32(w >> 32);
        d.n = uint32(w >> 64);
        d.k = uint32(w >> 96);
        d.lo = uint32(w >> 128);
        d.hi = uint32(w >> 160);
        d.mid = uint32(w >> 192);
        d.segment = uint32(w >> 224);
        w = _word(base + 2);
        d.step = uint32(w);
        d.winnerShareBps = uint16(w >> 32);
        d.refereeShareBps = uint16(w >> 48);
        d.allowance = uint64(w >> 64);
        d.phaseAt = uint64(w >> 128);
        d.fee = uint64(w >> 192);
        d.taskStake = _word(base + 3);
        d.bond = _word(base + 4);
        w = _word(base + 5);
        d.coDefender = address(uint160(w));
        d.movedB = uint8(w >> 160);
        d.stepRootBy = uint8(w >> 168);
        d.agreed = bytes32(_word(base + 6));
        for (uint256 s = 0; s < 2; ++s) {
            d.sides[s] = _side(base + HEAD_WORDS + s * SIDE_WORDS);
        }
        _fillResults(d);
    }

    /// @dev The game stores only an optimistic challenger's final and CID (issue 23, cheaper disputes); the others
    ///      are the job registry's: a contest's replicas, and the claim an optimistic challenge disputes while it stands
    ///      (0 once the task moved on). A contest's results are read from the replica slots as they are now: once the
    ///      task reopened (the dispute is stale), a party no longer holding a slot shows 0, and one drawn again shows its
    ///      new result. Clients read them only while the dispute is live.
    function _fillResults(DisputeGame.Dispute memory d) internal view {
        if (d.taskId == 0) return;
        IJobRegistry jobs = game.jobs();
        if (!d.optimistic) {
            Replica[] memory reps = IJobViews(address(jobs)).getReplicas(d.taskId);
            for (uint256 s = 0; s < 2; ++s) {
                for (uint256 r = 0; r < reps.length; ++r) {
                    if (reps[r].node != d.sides[s].party) continue;
                    d.sides[s].finalHash = reps[r].finalHash;
                    d.sides[s].resultCid = reps[r].resultCid;
                }
            }
        } else if (IJobViews(address(jobs)).getTask(d.taskId).status == TaskStatus.Revealed) {
            Claim memory c = jobs.claimOf(d.taskId);
            if (c.epoch == d.epoch) (d.sides[1].finalHash, d.sides[1].resultCid) = (c.finalHash, c.resultCid);
        }
    }

    /// @notice Seconds left on each party's clock (0 = ran out).
    function clocksRemaining(uint256 disputeId) external view returns (uint256 a, uint256 b) {
        DisputeGame.Dispute memory d = getDispute(disputeId);
        return (d.sides[0].clock.remaining(d.allowance), d.sides[1].clock.remaining(d.allowance));
    }

    /// @notice The global step s the referees recompute (segment * k + step) once pinpointed.
    function disputedStep(uint256 disputeId) external view returns (uint256) {
        uint256 base = _base(disputeId);
        uint256 w = _word(base + 1);
        return uint256(uint32(w >> 224)) * uint32(w >> 96) + uint32(_word(base + 2));
    }

    function _side(uint256 at) internal view returns (DisputeGame.Side memory s) {
        uint256 w = _word(at);
        s.party = address(uint160(w));
        s.moved = uint8(w >> 160) != 0;
        w = _word(at + 1);
        s.clock = Clock(uint64(w), uint64(w >> 64));
        s.root = bytes32(_word(at + 2));
        s.stepRoot = bytes32(_word(at + 3));
        s.finalHash = bytes32(_word(at + 4));
        s.resultCid = bytes32(_word(at + 5));
        s.claim = bytes32(_word(at + 6));
        s.midLeaf = bytes32(_word(at + 7));
    }

    function _base(uint256 disputeId) internal pure returns (uint256) {
        return uint256(keccak256(abi.encode(disputeId, DISPUTES_SLOT)));
    }

    function _word(uint256 slot) internal view returns (uint256) {
        return uint256(game.extsload(bytes32(slot)));
    }
}
