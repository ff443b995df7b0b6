// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {HandlerBase, System, Actors} from "./HandlerBase.sol";
import {DisputeGame} from "../../../contracts/DisputeGame.sol";
import {DisputeLens} from "../../../contracts/DisputeLens.sol";
import {RefereePanel} from "../../../contracts/RefereePanel.sol";
import {Merkle} from "../../../contracts/lib/Merkle.sol";
import {
    Task,
    TaskStatus,
    DisputePhase,
    PanelPhase,
    PinpointProof
} from "../../../contracts/types/VerityTypes.sol";

/// @notice Dispute play, panel play and the honest side's turn of the invariant handler.
abstract contract HonestSide is HandlerBase {
    constructor(System memory s, Actors memory a, uint8 sabotage_) HandlerBase(s, a, sabotage_) {}

    // ---------------------------------------------------------------- disputes and panels

    /// @dev Parties reveal the requested leaf of their own trace: honest ones always, dishonest ones when `dishonestActs`;
    ///      stale disputes are abandoned and expired clocks timed out.
    function _playDispute(uint256 id, bool dishonestActs) internal {
        DisputeLens.Dispute memory d = disputeLens.getDispute(id);
        if (d.phase == DisputePhase.None || d.phase == DisputePhase.Resolved) return;
        if (views.getTask(d.taskId).epoch != d.epoch) {
            try game.abandon(id) {
                ++_honestActions;
            } catch {}
            return;
        }
        bytes32 honestRoot = Merkle.rootOf(_honestTrace(d.taskId));
        for (uint256 p = 0; p < 2; ++p) {
            if (d.phase != DisputePhase.Bisect0 || d.mid == 0 || d.sides[p].moved) continue;
            address party = d.sides[p].party;
            bytes32[] memory h = _sideTrace(d.taskId, party, d.sides[p].root);
            if (h.length == 0) continue;
            if (d.sides[p].root != honestRoot && !dishonestActs) continue;
            if (d.sides[p].root != honestRoot && uint256(keccak256(abi.encode(id, d.mid, p))) % 2 == 0) {
                _pinpointAs(id, d, p, h);
                return;
            }
            vm.prank(party);
            try game.revealLeaf(id, 0, d.mid, h[d.mid], Merkle.proofOf(h, d.mid)) {
                ++_honestActions;
            } catch {}
            d = disputeLens.getDispute(id);
        }
        if (d.phase == DisputePhase.Bisect0 || d.phase == DisputePhase.StepRoots || d.phase == DisputePhase.Bisect1) {
            (uint256 ra, uint256 rb) = disputeLens.clocksRemaining(id);
            if (ra == 0 || rb == 0) {
                try game.timeout(id) {
                    ++_honestActions;
                } catch {}
            }
        }
    }

    /// @dev A dishonest party pinpoints the last proven divergence of the two traces in one move (anyone may).
    function _pinpointAs(uint256 id, DisputeLens.Dispute memory d, uint256 p, bytes32[] memory mine) internal {
        bytes32[] memory other = _sideTrace(d.taskId, d.sides[1 - p].party, d.sides[1 - p].root);
        if (other.length != mine.length) return;
        (bytes32[] memory ha, bytes32[] memory hb) = p == 0 ? (mine, other) : (other, mine);
        for (uint256 i = ha.length - 1; i > 0; --i) {
            if (ha[i - 1] != hb[i - 1] || ha[i] == hb[i]) continue;
            PinpointProof memory pp = PinpointProof({
                index: uint32(i - 1),
                agreed: ha[i - 1],
                claimA: ha[i],
                claimB: hb[i],
                proofAgreedA: Merkle.proofOf(ha, i - 1),
                proofClaimA: Merkle.proofOf(ha, i),
                proofAgreedB: Merkle.proofOf(hb, i - 1),
                proofClaimB: Merkle.proofOf(hb, i)
            });
            vm.prank(d.sides[p].party);
            try game.pinpoint(id, pp) {
                ++ghostPinpoints;
                ++_honestActions;
            } catch {}
            return;
        }
    }

    /// @dev What an honest referee recomputes: h_{s+1} from the agreed h_s.
    function _honestVote(uint256 id) internal view returns (bytes32) {
        DisputeLens.Dispute memory d = disputeLens.getDispute(id);
        if (sabotage == 2) return d.sides[1].claim;
        return keccak256(abi.encode(HONEST, d.agreed, disputeLens.disputedStep(id) + 1));
    }

    /// @dev Seats (rolling past the randomness target), honest referees commit and reveal, deadlines advance. When
    ///      `mayNoShow`, one seat of a panel that was never redrawn may skip its commit (once per panel).
    function _playPanel(uint256 id, bool mayNoShow, uint256 seed) internal {
        RefereePanel.Panel memory p = panel.panelOf(id);
        if (p.phase == PanelPhase.Seating) {
            if (randomness.isStale(p.requestId)) randomness.renew(p.requestId); // its epoch ended unread
            uint256 target = randomness.targetOf(p.requestId);
            if (block.number <= target) vm.roll(target + 1);
            try panel.seat(id) {
                if (panel.panelOf(id).phase != PanelPhase.Seating) ++_honestActions;
            } catch {}
            p = panel.panelOf(id);
        }
        if (p.phase == PanelPhase.Committing) {
            if (block.timestamp > p.commitDeadline) {
                try panel.advance(id) {
                    ++_honestActions;
                } catch {}
                return;
            }
            bytes32 vote = _honestVote(id);
            for (uint256 i = 0; i < p.seats.length; ++i) {
                address r = p.seats[i];
                if (r == address(0) || noShow[id][r] || panel.voteOf(id, r).committed) continue;
                if (mayNoShow && !_panelHadNoShow[id] && p.redraws == 0 && seed % 3 == 0) {
                    noShow[id][r] = true;
                    ++noShowsOf[r];
                    _panelHadNoShow[id] = true;
                    ++ghostNoShows;
                    continue;
                }
                vm.prank(r);
                try panel.commitVote(id, keccak256(abi.encode(id, vote, _voteSalt(id, r), r))) {
                    ++_honestActions;
                } catch {}
            }
            p = panel.panelOf(id);
        }
        if (p.phase == PanelPhase.Revealing) {
            if (block.timestamp > p.revealDeadline) {
                try panel.advance(id) {
                    ++_honestActions;
                } catch {}
                return;
            }
            bytes32 vote = _honestVote(id);
            for (uint256 i = 0; i < p.seats.length; ++i) {
                address r = p.seats[i];
                if (r == address(0)) continue;
                RefereePanel.Vote memory v = panel.voteOf(id, r);
                if (!v.committed || v.revealed) continue;
                vm.prank(r);
                try panel.revealVote(id, vote, _voteSalt(id, r)) {
                    ++_honestActions;
                } catch {}
                if (panel.panelOf(id).phase != PanelPhase.Revealing) break;
            }
        }
    }

    function _voteSalt(uint256 id, address r) internal pure returns (bytes32) {
        return keccak256(abi.encode("vote", id, r));
    }

    // ---------------------------------------------------------------- the honest side's turn

    /// @dev Before time passes: every honest party does what is due (disputes, work, challenges, panels).
    function _honestTurn(uint256 seed) internal {
        // Until nothing is left to do (bounded): a settlement can open a new window, a challenge a new dispute.
        for (uint256 pass = 0; pass < 6; ++pass) {
            uint256 before = _honestActions;
            _honestDisputes((seed >> 64) % 2 == 0);
            uint256 tasks = jobs.taskCount();
            for (uint256 id = 1; id <= tasks; ++id) {
                Task memory t = views.getTask(id);
                if (t.status == TaskStatus.Contested && game.disputeOfTask(id) == 0) {
                    try game.openDispute(id) {
                        ++_honestActions;
                    } catch {}
                } else if (t.status == TaskStatus.Open || t.status == TaskStatus.Assigned) {
                    _work(id, false);
                }
                _honestChallengeOf(id, (seed % 1024) + id);
            }
            if (_honestActions == before) return;
        }
    }

    /// @dev Honest parties move in every live dispute; with `dishonestActs` the dishonest parties answer too (an
    ///      active adversary) instead of letting their clocks run out.
    function _honestDisputes(bool dishonestActs) internal {
        for (uint256 id = 1; id <= game.disputeCount(); ++id) {
            DisputePhase ph = disputeLens.getDispute(id).phase;
            if (ph == DisputePhase.Resolved) continue;
            _playDispute(id, dishonestActs);
            if (disputeLens.getDispute(id).phase == DisputePhase.Judging) _playPanel(id, false, 0);
        }
    }
}
