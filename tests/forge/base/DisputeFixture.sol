// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./Fixture.sol";
import {Merkle} from "../../../contracts/lib/Merkle.sol";
import {DisputeGame} from "../../../contracts/DisputeGame.sol";
import {PinpointProof, TaskStatus, DisputePhase} from "../../../contracts/types/VerityTypes.sol";

/// @notice A contested replicated task (1 shard, 1 round, n = 4, k = 2) with an honest and a dishonest replica
///         that diverge at checkpoint 3, plus per-step traces of segment 2 that diverge at step 0.
abstract contract DisputeFixture is Fixture {
    uint256 internal jobId;
    uint256 internal taskId;
    address internal honest;
    address internal cheater;
    bytes32[] internal hH; // honest checkpoint trace
    bytes32[] internal hC; // cheater checkpoint trace
    bytes32[] internal sH; // honest per-step trace of segment 2
    bytes32[] internal sC; // cheater per-step trace of segment 2

    function setUp() public virtual override {
        super.setUp();
        _addNodes(6);
        hH = _honest(INPUT, 4);
        hC = _trace(INPUT, 4, "bad", 3);
        sH = new bytes32[](3);
        sC = new bytes32[](3);
        sH[0] = hH[2];
        sC[0] = hH[2];
        sH[1] = keccak256("honest step 5");
        sC[1] = keccak256("bad step 5");
        sH[2] = hH[3];
        sC[2] = hC[3];
    }

    /// @dev Posts a replicated job and runs it to Contested.
    function _contested() internal {
        jobId = _post(_params(1, 1, 2));
        taskId = jobs.taskOf(jobId, 0, 0);
        honest = _replica(taskId, 0).node;
        cheater = _replica(taskId, 1).node;
        _runReplicated(taskId, hH, hC);
        require(_status(taskId) == TaskStatus.Contested, "not contested");
    }

    function _pp(bytes32[] memory a, bytes32[] memory b, uint32 i) internal pure returns (PinpointProof memory p) {
        p.index = i;
        p.agreed = a[i];
        p.claimA = a[i + 1];
        p.claimB = b[i + 1];
        p.proofAgreedA = Merkle.proofOf(a, i);
        p.proofClaimA = Merkle.proofOf(a, i + 1);
        p.proofAgreedB = Merkle.proofOf(b, i);
        p.proofClaimB = Merkle.proofOf(b, i + 1);
    }

    function _submitStepRoot(uint256 disputeId, address party, bytes32[] memory s) internal {
        vm.prank(party);
        game.submitStepRoot(disputeId, Merkle.rootOf(s), Merkle.proofOf(s, 0), Merkle.proofOf(s, s.length - 1));
    }

    function _revealLeaf(uint256 disputeId, address party, uint8 level, bytes32[] memory t, uint32 i) internal {
        vm.prank(party);
        game.revealLeaf(disputeId, level, i, t[i], Merkle.proofOf(t, i));
    }

    /// @dev Public path: honest opens with pinpoint (A = honest), both submit step roots, honest pinpoints step.
    function _toVoting() internal returns (uint256 disputeId) {
        _contested();
        vm.prank(honest);
        disputeId = game.openDisputeWithPinpoint(taskId, _pp(hH, hC, 2));
        _submitStepRoot(disputeId, honest, sH);
        _submitStepRoot(disputeId, cheater, sC);
        vm.prank(honest);
        game.pinpoint(disputeId, _pp(sH, sC, 0));
        require(game.getDispute(disputeId).phase == DisputePhase.Voting, "not voting");
    }

    function _vote(uint256 disputeId, address referee, bytes32 vote) internal {
        vm.prank(referee);
        game.commitVote(disputeId, keccak256(abi.encode(vote, bytes32("salt"), referee)));
    }

    function _revealVote(uint256 disputeId, address referee, bytes32 vote) internal {
        vm.prank(referee);
        game.revealVote(disputeId, vote, "salt");
    }

    function _allVote(uint256 disputeId, bytes32[] memory votes) internal {
        address[] memory panel = game.panelOf(disputeId);
        for (uint256 i = 0; i < panel.length; ++i) {
            _vote(disputeId, panel[i], votes[i]);
        }
        for (uint256 i = 0; i < panel.length; ++i) {
            _revealVote(disputeId, panel[i], votes[i]);
        }
    }

    function _same(bytes32 v, uint256 count) internal pure returns (bytes32[] memory a) {
        a = new bytes32[](count);
        for (uint256 i = 0; i < count; ++i) {
            a[i] = v;
        }
    }

    function _conserved() internal view returns (bool) {
        uint256 sum = token.balanceOf(submitter) + token.balanceOf(address(jobs)) + token.balanceOf(address(registry))
            + token.balanceOf(address(game)) + token.totalBurned();
        for (uint256 i = 0; i < nodes.length; ++i) {
            sum += token.balanceOf(nodes[i]);
        }
        return sum == token.totalMinted();
    }
}
