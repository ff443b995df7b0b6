// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./Fixture.sol";
import {MockPanel} from "./MockPanel.sol";
import {Merkle} from "../../../contracts/lib/Merkle.sol";
import {DisputeLens} from "../../../contracts/DisputeLens.sol";
import {DisputeGame} from "../../../contracts/DisputeGame.sol";
import {JobRegistry} from "../../../contracts/JobRegistry.sol";
import {JobEscrow} from "../../../contracts/JobEscrow.sol";
import {IVerityToken} from "../../../contracts/interfaces/IVerityToken.sol";
import {INodeRegistry} from "../../../contracts/interfaces/INodeRegistry.sol";
import {IJobRegistry, IJobViews} from "../../../contracts/interfaces/IJobRegistry.sol";
import {IJobEscrow} from "../../../contracts/interfaces/IJobEscrow.sol";
import {IRandomness} from "../../../contracts/interfaces/IRandomness.sol";
import {IRefereePanel, IPanelGame} from "../../../contracts/interfaces/IRefereePanel.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {PinpointProof, TaskStatus, DisputePhase, Verdict} from "../../../contracts/types/VerityTypes.sol";

/// @notice The v2 system with the game wired to a hand-driven MockPanel (its own escrow, jobs and game), six staked
///         nodes, and traces: an honest and a cheating checkpoint trace (n = 4, k = 2) that diverge at checkpoint 3,
///         per-step traces of segment 2 that diverge at step 0, and traces for poisoned and sybil challengers.
abstract contract DisputeFixture is Fixture {
    MockPanel internal mock;
    uint256 internal jobId;
    uint256 internal taskId;
    address internal honest;
    address internal cheater;
    bytes32[] internal hH; // honest checkpoint trace
    bytes32[] internal hC; // cheater checkpoint trace (diverges at checkpoint 3)
    bytes32[] internal hP; // poisoned: honest up to checkpoint 3, wrong final
    bytes32[] internal hX; // a sybil's trace (diverges at checkpoint 1)
    bytes32[] internal sH; // honest per-step trace of segment 2
    bytes32[] internal sC; // cheater per-step trace of segment 2

    function setUp() public virtual override {
        super.setUp();
        _wireMockPanel();
        _addNodes(6);
        for (uint256 i = 0; i < nodes.length; ++i) {
            vm.prank(nodes[i]);
            token.approve(address(game), type(uint256).max);
        }
        hH = _honest(INPUT, 4);
        hC = _trace(INPUT, 4, "bad", 3);
        hP = _trace(INPUT, 4, "poison", 4);
        hX = _trace(INPUT, 4, "sybil", 1);
        sH = _steps(hH[2], keccak256("honest step 5"), hH[3]);
        sC = _steps(hH[2], keccak256("bad step 5"), hC[3]);
    }

    /// @dev A fresh escrow, job registry and game whose panel is the MockPanel (the registry trusts one game only).
    function _wireMockPanel() internal {
        mock = new MockPanel(IERC20(address(token)));
        escrow = new JobEscrow(IERC20(address(token)));
        jobs = new JobRegistry(
            IVerityToken(address(token)),
            INodeRegistry(address(registry)),
            IJobEscrow(address(escrow)),
            IRandomness(address(randomness))
        );
        views = IJobViews(address(jobs));
        game = new DisputeGame(
            IVerityToken(address(token)),
            INodeRegistry(address(registry)),
            IJobRegistry(address(jobs)),
            IRefereePanel(address(mock))
        );
        disputeLens = new DisputeLens(address(game));
        registry.setProtocol(address(jobs), true);
        registry.setProtocol(address(game), true);
        escrow.setJobs(address(jobs));
        jobs.setDisputeGame(address(game));
        vm.prank(submitter);
        token.approve(address(escrow), type(uint256).max);
    }

    function _steps(bytes32 a, bytes32 b, bytes32 c) internal pure returns (bytes32[] memory s) {
        s = new bytes32[](3);
        (s[0], s[1], s[2]) = (a, b, c);
    }

    // ---------------------------------------------------------------- replicated contest

    /// @dev Posts a replicated job and runs it to Contested (honest = slot 0 with hH, cheater = slot 1 with hC).
    function _contested() internal {
        jobId = _post(_params(1, 1, 2));
        taskId = views.taskOf(jobId, 0, 0);
        honest = _replica(taskId, 0).node;
        cheater = _replica(taskId, 1).node;
        _runReplicated(taskId, hH, hC);
        require(_status(taskId) == TaskStatus.Contested, "not contested");
    }

    /// @dev Honest opens with pinpoint (A = honest), both submit step roots, honest pinpoints the step.
    function _toJudging() internal returns (uint256 id) {
        _contested();
        vm.prank(honest);
        id = game.openDisputeWithPinpoint(taskId, _pp(hH, hC, 2));
        _submitStepRoot(id, honest, sH);
        _submitStepRoot(id, cheater, sC);
        game.pinpoint(id, _pp(sH, sC, 0));
        require(disputeLens.getDispute(id).phase == DisputePhase.Judging, "not judging");
    }

    // ---------------------------------------------------------------- optimistic challenges

    /// @dev Plays a dispute whose A holds hH and B holds hC (diverging at checkpoint 3) up to Judging.
    function _toJudgingAt2(uint256 id, address pa, address pb) internal {
        game.pinpoint(id, _pp(hH, hC, 2));
        _submitStepRoot(id, pa, sH);
        _submitStepRoot(id, pb, sC);
        game.pinpoint(id, _pp(sH, sC, 0));
        require(disputeLens.getDispute(id).phase == DisputePhase.Judging, "not judging");
    }

    /// @dev Posts an optimistic job whose solver submits `h`; returns the solver.
    function _optimistic(bytes32[] memory h) internal returns (address solver) {
        jobId = _post(_params(1, 1, 1));
        taskId = views.taskOf(jobId, 0, 0);
        solver = _replica(taskId, 0).node;
        _submit(taskId, solver, h);
    }

    function _cid(bytes32[] memory h) internal pure returns (bytes32) {
        return keccak256(abi.encode("challenger cid", h[h.length - 1]));
    }

    function _challengeCommitment(address who, bytes32[] memory h, bytes32 salt) internal view returns (bytes32) {
        uint256 n = h.length - 1;
        return keccak256(abi.encode(taskId, Merkle.rootOf(h), h[n], _cid(h), salt, who));
    }

    function _commitChallenge(address who, bytes32[] memory h, bytes32 salt) internal {
        bytes32 c = _challengeCommitment(who, h, salt);
        vm.prank(who);
        game.commitChallenge(c);
    }

    function _revealChallenge(address who, bytes32[] memory h, bytes32 salt) internal returns (uint256 id) {
        uint256 n = h.length - 1;
        bytes32 root = Merkle.rootOf(h);
        bytes32 cid = _cid(h);
        bytes32[] memory p0 = Merkle.proofOf(h, 0);
        bytes32[] memory pN = Merkle.proofOf(h, n);
        vm.prank(who);
        id = game.challengeOptimistic(taskId, root, h[n], uint32(n), cid, salt, p0, pN);
    }

    /// @dev Commits, mines a block, reveals.
    function _challenge(address who, bytes32[] memory h) internal returns (uint256 id) {
        _commitChallenge(who, h, "salt");
        vm.roll(block.number + 1);
        id = _revealChallenge(who, h, "salt");
    }

    /// @dev A node that is none of `a`, `b`, `c`.
    function _other(address a, address b, address c) internal view returns (address) {
        for (uint256 i = 0; i < nodes.length; ++i) {
            if (nodes[i] != a && nodes[i] != b && nodes[i] != c) return nodes[i];
        }
        revert("no other node");
    }

    // ---------------------------------------------------------------- moves

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

    function _submitStepRoot(uint256 id, address party, bytes32[] memory s) internal {
        vm.prank(party);
        game.submitStepRoot(id, Merkle.rootOf(s), Merkle.proofOf(s, 0), Merkle.proofOf(s, s.length - 1));
    }

    function _revealLeaf(uint256 id, address party, uint8 level, bytes32[] memory t, uint32 i) internal {
        vm.prank(party);
        game.revealLeaf(id, level, i, t[i], Merkle.proofOf(t, i));
    }

    /// @dev The MockPanel passes `v` back to the game; returns the referees' reward it received.
    function _decide(uint256 id, Verdict v) internal returns (uint256) {
        return mock.decide(IPanelGame(address(game)), id, v);
    }

    // ---------------------------------------------------------------- accounting

    /// @dev What a challenger that did not lose pays its panel from its bond: the fee beyond the referees' `share`.
    function _topUp(Verdict v, uint256 share) internal view returns (uint256) {
        if (v != Verdict.ForA && v != Verdict.NoDecision) return 0;
        uint256 fee = game.panelFee();
        return share < fee ? fee - share : 0;
    }

    /// @dev Every minted token is held by a participant, a contract of the system, or burned.
    function _conserved() internal view returns (bool) {
        uint256 sum = token.balanceOf(submitter) + token.balanceOf(address(escrow)) + token.balanceOf(address(jobs))
            + token.balanceOf(address(registry)) + token.balanceOf(address(game)) + token.balanceOf(address(mock))
            + token.totalBurned();
        for (uint256 i = 0; i < nodes.length; ++i) {
            sum += token.balanceOf(nodes[i]);
        }
        return sum == token.totalMinted();
    }

    /// @dev The game holds exactly its open bonds (it pays rewards and returned bonds at once).
    function _gameSolvent() internal view returns (bool) {
        return token.balanceOf(address(game)) == game.totalBonds();
    }
}
