// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture, VmState} from "./base/Fixture.sol";
import {JobStatus, TaskStatus, ReplicaStatus} from "../../contracts/types/VerityTypes.sol";

interface VmHash {
    function setBlockhash(uint256 blockNumber, bytes32 blockHash) external;
}

/// @notice Issue 23, item 8: sybil decliners neither fail an honest job nor take its poster bond. In v2 a job failed
///         once FAIL_DECLINES distinct nodes declined a task for "invalid inputs" while no replica had committed, and
///         the decliners shared the poster bond: three identities refusing whenever drawn, while the honest replica
///         drawn beside them was still training, failed 2 of 2 honest jobs in the issue's trial and lost nothing.
///         Now a refusal bets its share of the bond from its own stake (burned when the task is completed from the
///         inputs it refused), and a job fails only when no drawn node still holds a slot of the task.
///
///         The trial: 12 equal stakes, 3 of them the attacker's, an honest replication-2 job, each draw from its own
///         random value. The sybils refuse whenever drawn beside an honest node (the v2 attack); when both slots are
///         theirs one refuses and the other keeps its slot, refusing last once its refusal would be the
///         FAIL_DECLINES-th with the other slot empty (the best they can do now). Honest holders train until both
///         slots are honest, then complete the task.
contract SybilDeclinersTest is Fixture {
    VmState internal constant vmx = VmState(address(uint160(uint256(keccak256("hevm cheat code")))));
    VmHash internal constant vmh = VmHash(address(uint160(uint256(keccak256("hevm cheat code")))));
    uint256 internal constant TRIALS = 1_000;
    uint256 internal constant SYBILS = 3;

    function setUp() public override {
        super.setUp();
        _addNodes(12);
    }

    function _sybil(address node) internal view returns (bool) {
        for (uint256 i = 0; i < SYBILS; ++i) {
            if (nodes[i] == node) return true;
        }
        return false;
    }

    /// @dev The attacker's wealth: free and locked stake plus tokens held.
    function _wealth() internal view returns (uint256 sum) {
        for (uint256 i = 0; i < SYBILS; ++i) {
            sum += registry.getNode(nodes[i]).stake + token.balanceOf(nodes[i]);
        }
    }

    function _drawFrom(uint256 taskId, bytes32 value) internal {
        _rollToDraw(taskId);
        vmh.setBlockhash(randomness.targetOf(views.getTask(taskId).drawRequest), value);
        jobs.assign(taskId);
    }

    function _holds(uint256 taskId, uint8 s) internal view returns (bool) {
        return _replica(taskId, s).status == ReplicaStatus.Assigned;
    }

    function _refuse(uint256 taskId, uint8 s) internal {
        vm.prank(_replica(taskId, s).node);
        jobs.decline(taskId, true, bytes32(0));
    }

    /// @dev One honest job against the sybils; true when it failed. The state is rolled back afterwards.
    function _trial(uint256 seed) internal returns (bool failed, int256 gained) {
        uint256 snap = vmx.snapshotState();
        uint256 before = _wealth();
        uint256 jobId = _postOnly(_params(1, 1, 2));
        uint256 taskId = views.taskOf(jobId, 0, 0);
        uint256 refusals;
        for (uint256 round = 0; round < 24 && !failed; ++round) {
            if (_status(taskId) == TaskStatus.Open) _drawFrom(taskId, keccak256(abi.encode(seed, round)));
            for (uint8 step = 0; step < 2 && !failed; ++step) {
                bool[2] memory held = [_holds(taskId, 0), _holds(taskId, 1)];
                bool[2] memory mine = [held[0] && _sybil(_replica(taskId, 0).node),
                    held[1] && _sybil(_replica(taskId, 1).node)];
                int8 refuse = -1;
                if (mine[0] && mine[1]) refuse = 0; // keep the other as the closer
                for (uint8 s = 0; s < 2 && refuse < 0; ++s) {
                    if (!mine[s]) continue;
                    bool honestBeside = held[s ^ 1] && !mine[s ^ 1];
                    bool closes = !held[s ^ 1] && refusals + 1 >= jobs.FAIL_DECLINES();
                    if (honestBeside || closes) refuse = int8(s);
                }
                if (refuse < 0) break;
                _refuse(taskId, uint8(refuse));
                ++refusals;
                failed = views.getJob(jobId).status == JobStatus.Failed;
            }
            if (!failed && _holds(taskId, 0) && _holds(taskId, 1) && !_sybil(_replica(taskId, 0).node)
                && !_sybil(_replica(taskId, 1).node)) {
                bytes32[] memory h = _honest(INPUT, 4);
                _runReplicated(taskId, h, h);
                _finalizeAfterWindow(taskId);
                break;
            }
        }
        gained = int256(_wealth()) - int256(before);
        vmx.revertToState(snap);
    }

    function test_sybilDecliners_failFewHonestJobsAndLoseTheirBets_succeeds() public {
        vm.pauseGasMetering(); // 1,000 jobs: over forge's per-test gas limit
        uint256 failures;
        int256 gained;
        for (uint256 i = 0; i < TRIALS; ++i) {
            (bool failed, int256 g) = _trial(i);
            if (failed) ++failures;
            gained += g;
        }
        // Expected now: both slots theirs (3/12 x 2/11) and the third sybil drawn into the freed slot (1/10): 0.45 %.
        // Allowed: 1.1 % (3 standard errors above; 0.7 % measured).
        // In v2 the same strategy failed the job far more often.
        assertLe(failures * 1000, TRIALS * 11, string.concat("honest jobs failed per mille: ",
            vm.toString(failures * 1000 / TRIALS)));
        assertTrue(gained < 0, string.concat("the sybils' net result over the trials (wei): ", _signed(gained)));
    }

    function _signed(int256 x) internal pure returns (string memory) {
        return x < 0 ? string.concat("-", vm.toString(uint256(-x))) : vm.toString(uint256(x));
    }
}
