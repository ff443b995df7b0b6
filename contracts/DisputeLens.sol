// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

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
///      `_disputes` at DISPUTES_SLOT; a Dispute is 19 words (5 of its own, then two 7-word Sides). Every forge test
///      reads disputes through this contract, so a layout change that forgets it fails them. The views keep the
///      record's ABI from before the game packed it (full-width fields, a `clock` per side), so clients never see the
///      packing.
contract DisputeLens {
    using ChessClock for Clock;

    /// @dev DisputeGame storage slot of `_disputes`.
    uint256 internal constant DISPUTES_SLOT = 8;
    /// @dev Words of a Dispute before its sides, and of one Side.
    uint256 internal constant HEAD_WORDS = 5;
    uint256 internal constant SIDE_WORDS = 7;

    /// @notice One party's position in a dispute (DisputeGame.Side, its clock as a `Clock`).
    struct Side {
        address party;
        bool moved;
        Clock clock;
        bytes32 root;
        bytes32 stepRoot;
        bytes32 finalHash;
        bytes32 resultCid;
        bytes32 claim;
        bytes32 midLeaf;
    }

    /// @notice A dispute record (DisputeGame.Dispute, unpacked).
    struct Dispute {
        uint256 taskId;
        DisputePhase phase;
        DisputeOutcome outcome;
        bool optimistic;
        uint8 level;
        uint32 epoch;
        uint32 n;
        uint32 k;
        uint32 lo;
        uint32 hi;
        uint32 mid;
        uint32 segment;
        uint32 step;
        uint16 winnerShareBps;
        uint16 refereeShareBps;
        uint64 allowance;
        uint64 phaseAt;
        uint64 fee;
        uint256 taskStake;
        uint256 bond;
        address coDefender;
        uint8 movedB;
        uint8 stepRootBy;
        bytes32 agreed;
        Side[2] sides;
    }

    IDisputeStorage public immutable game;

    constructor(address game_) {
        game = IDisputeStorage(game_);
    }

    /// @notice The dispute record.
    function getDispute(uint256 disputeId) public view returns (Dispute memory d) {
        uint256 base = _base(disputeId);
        uint256 w = _word(base);
        d.taskId = uint64(w);
        d.phase = DisputePhase(uint8(w >> 64));
        d.outcome = DisputeOutcome(uint8(w >> 72));
        d.optimistic = uint8(w >> 80) != 0;
        d.level = uint8(w >> 88);
        d.epoch = uint32(w >> 96);
        d.n = uint32(w >> 128);
        d.k = uint32(w >> 160);
        d.lo = uint32(w >> 192);
        d.hi = uint32(w >> 224);
        w = _word(base + 1);
        d.mid = uint32(w);
        d.segment = uint32(w >> 32);
        d.step = uint32(w >> 64);
        d.winnerShareBps = uint16(w >> 96);
        d.refereeShareBps = uint16(w >> 112);
        d.allowance = uint32(w >> 128);
        d.phaseAt = uint40(w >> 160);
        d.movedB = uint8(w >> 200);
        d.stepRootBy = uint8(w >> 208);
        w = _word(base + 2);
        d.taskStake = uint96(w);
        d.bond = uint96(w >> 96);
        d.fee = uint64(w >> 192);
        d.coDefender = address(uint160(_word(base + 3)));
        d.agreed = bytes32(_word(base + 4));
        for (uint256 s = 0; s < 2; ++s) {
            d.sides[s] = _side(base + HEAD_WORDS + s * SIDE_WORDS);
        }
        _fillResults(d);
    }

    /// @dev The game stores only an optimistic challenger's final and CID (issue 23, cheaper disputes), and no
    ///      level-0 root of a contest opened with its pinpoint; the others are the job registry's: a contest's
    ///      replicas, and the claim an optimistic challenge disputes while it stands (0 once the task moved on). A
    ///      contest's results and roots are read from the replica slots as they are now: once the task reopened (the
    ///      dispute is stale), a party no longer holding a slot shows 0, and one drawn again shows its new result.
    ///      Clients read them only while the dispute is live.
    function _fillResults(Dispute memory d) internal view {
        if (d.taskId == 0) return;
        IJobRegistry jobs = game.jobs();
        if (!d.optimistic) {
            Replica[] memory reps = IJobViews(address(jobs)).getReplicas(d.taskId);
            for (uint256 s = 0; s < 2; ++s) {
                for (uint256 r = 0; r < reps.length; ++r) {
                    if (reps[r].node != d.sides[s].party) continue;
                    d.sides[s].finalHash = reps[r].finalHash;
                    d.sides[s].resultCid = reps[r].resultCid;
                    // openDisputeWithPinpoint plays level 0 out in one transaction and stores no level-0 root
                    if (d.sides[s].root == 0) d.sides[s].root = reps[r].root;
                }
            }
        } else if (IJobViews(address(jobs)).getTask(d.taskId).status == TaskStatus.Revealed) {
            Claim memory c = jobs.claimOf(d.taskId);
            if (c.epoch == d.epoch) (d.sides[1].finalHash, d.sides[1].resultCid) = (c.finalHash, c.resultCid);
        }
    }

    /// @notice Seconds left on each party's clock (0 = ran out).
    function clocksRemaining(uint256 disputeId) external view returns (uint256 a, uint256 b) {
        Dispute memory d = getDispute(disputeId);
        return (d.sides[0].clock.remaining(d.allowance), d.sides[1].clock.remaining(d.allowance));
    }

    /// @notice The global step s the referees recompute (segment * k + step) once pinpointed.
    function disputedStep(uint256 disputeId) external view returns (uint256) {
        uint256 base = _base(disputeId);
        uint256 w = _word(base + 1);
        return uint256(uint32(w >> 32)) * uint32(_word(base) >> 160) + uint32(w >> 64);
    }

    function _side(uint256 at) internal view returns (Side memory s) {
        uint256 w = _word(at);
        s.party = address(uint160(w));
        s.moved = uint8(w >> 160) != 0;
        s.clock = Clock(uint40(w >> 168), uint40(w >> 208));
        s.root = bytes32(_word(at + 1));
        s.stepRoot = bytes32(_word(at + 2));
        s.finalHash = bytes32(_word(at + 3));
        s.resultCid = bytes32(_word(at + 4));
        s.claim = bytes32(_word(at + 5));
        s.midLeaf = bytes32(_word(at + 6));
    }

    function _base(uint256 disputeId) internal pure returns (uint256) {
        return uint256(keccak256(abi.encode(disputeId, DISPUTES_SLOT)));
    }

    function _word(uint256 slot) internal view returns (uint256) {
        return uint256(game.extsload(bytes32(slot)));
    }
}
