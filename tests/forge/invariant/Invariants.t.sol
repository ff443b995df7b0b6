// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "../base/Fixture.sol";
import {Handler} from "./Handler.sol";
import {DisputeGame} from "../../../contracts/DisputeGame.sol";
import {
    Job,
    JobStatus,
    Task,
    TaskStatus,
    Replica,
    ReplicaStatus,
    Node,
    DisputePhase
} from "../../../contracts/types/VerityTypes.sol";

/// @notice Protocol-wide invariants under random traffic from Handler.
contract InvariantsTest is Fixture {
    Handler internal handler;

    function setUp() public override {
        super.setUp();
        _addNodes(6);
        game.setChallengerBond(5e18);
        handler = new Handler(token, registry, jobs, game, submitter, nodes);
        targetContract(address(handler));
    }

    /// @notice balances + escrow + stake + credits + burned == minted, and each contract holds exactly its books.
    function invariant_tokensConserved() public view {
        uint256 sum = token.balanceOf(submitter) + token.balanceOf(address(jobs)) + token.balanceOf(address(registry))
            + token.balanceOf(address(game)) + token.totalBurned();
        uint256 stakes;
        for (uint256 i = 0; i < nodes.length; ++i) {
            sum += token.balanceOf(nodes[i]);
            stakes += registry.getNode(nodes[i]).stake;
        }
        assertEq(sum, token.totalMinted(), "tokens conserved");
        assertEq(token.balanceOf(address(registry)), stakes, "registry holds the stakes");
        assertEq(token.balanceOf(address(jobs)), jobs.totalEscrow() + jobs.totalCredits(), "jobs holds escrow + credits");
        assertEq(token.balanceOf(address(game)), game.totalCredits() + game.totalBonds(), "game holds credits + bonds");
        assertEq(
            handler.ghostEscrowPosted(),
            jobs.totalEscrow() + jobs.totalCredits() + handler.ghostPaymentsWithdrawn() + handler.ghostRefunded(),
            "escrow accounted"
        );
    }

    /// @notice Every node's locked stake is exactly what its live work holds; nothing locked is withdrawable.
    function invariant_lockedMatchesWork() public view {
        uint256[] memory expected = new uint256[](nodes.length);
        uint256 tasks = jobs.taskCount();
        for (uint256 id = 1; id <= tasks; ++id) {
            Task memory t = jobs.getTask(id);
            if (t.status == TaskStatus.Cancelled) continue;
            Job memory job = jobs.getJob(t.jobId);
            Replica[] memory reps = jobs.getReplicas(id);
            for (uint256 s = 0; s < reps.length; ++s) {
                ReplicaStatus st = reps[s].status;
                bool active = st == ReplicaStatus.Assigned || st == ReplicaStatus.Committed || st == ReplicaStatus.Revealed;
                if (active) expected[_idx(reps[s].node)] += job.stakePerReplica;
            }
        }
        uint256 disputes = game.disputeCount();
        for (uint256 id = 1; id <= disputes; ++id) {
            DisputeGame.Dispute memory d = game.getDispute(id);
            if (d.phase == DisputePhase.Resolved) continue;
            if (d.optimistic) expected[_idx(d.parties[0])] += d.taskStake;
            if (d.phase == DisputePhase.Voting) {
                address[] memory panel = game.panelOf(id);
                for (uint256 i = 0; i < panel.length; ++i) {
                    expected[_idx(panel[i])] += game.refereeStake();
                }
            }
        }
        for (uint256 i = 0; i < nodes.length; ++i) {
            Node memory n = registry.getNode(nodes[i]);
            assertEq(n.locked, expected[i], "locked == live work");
            assertLe(n.locked + n.pendingUnstake, n.stake, "locked and unbonding within stake");
        }
    }

    /// @notice Task and replica states agree, and no task paid more replicas than it has slots.
    function invariant_statesConsistent() public view {
        uint256 tasks = jobs.taskCount();
        uint256 maxPaid;
        for (uint256 id = 1; id <= tasks; ++id) {
            Task memory t = jobs.getTask(id);
            Job memory job = jobs.getJob(t.jobId);
            Replica[] memory reps = jobs.getReplicas(id);
            uint256 accepted;
            uint256 empty;
            uint256 pending;
            for (uint256 s = 0; s < reps.length; ++s) {
                ReplicaStatus st = reps[s].status;
                if (st == ReplicaStatus.Accepted) ++accepted;
                if (st == ReplicaStatus.Assigned || st == ReplicaStatus.Committed) ++pending;
                if (st == ReplicaStatus.None || st == ReplicaStatus.Late || st == ReplicaStatus.Slashed || st == ReplicaStatus.Voided) ++empty;
                for (uint256 o = s + 1; o < reps.length; ++o) {
                    if (reps[s].node != address(0) && !_emptyish(st) && !_emptyish(reps[o].status)) {
                        assertTrue(reps[s].node != reps[o].node, "one node holds two replicas");
                    }
                }
            }
            if (t.status == TaskStatus.Accepted) {
                assertEq(pending, 0, "accepted task with pending replica");
                maxPaid += job.replication * job.paymentPerTask;
            } else {
                assertEq(accepted, 0, "accepted replica in unaccepted task");
            }
            if (t.status == TaskStatus.Assigned) assertEq(empty, 0, "assigned task with empty slot");
            if (t.status == TaskStatus.Open && job.status == JobStatus.Active) assertGt(empty, 0, "open task without empty slot");
            if (t.status == TaskStatus.Contested) assertEq(uint8(job.status), uint8(JobStatus.Active), "contested in inactive job");
        }
        assertLe(jobs.totalCredits() + handler.ghostPaymentsWithdrawn(), maxPaid, "nothing paid twice");
    }

    function _emptyish(ReplicaStatus st) internal pure returns (bool) {
        return st == ReplicaStatus.None || st == ReplicaStatus.Late || st == ReplicaStatus.Slashed || st == ReplicaStatus.Voided;
    }

    function _idx(address node) internal view returns (uint256) {
        for (uint256 i = 0; i < nodes.length; ++i) {
            if (nodes[i] == node) return i;
        }
        revert("unknown node");
    }

    /// @notice Sanity check that the handler is actually driven (forge reads targetContracts()).
    function invariant_handlerIsCalled() public view {
        // Evaluated before any call (calls == 0) and after each call; it only fails if targeting broke.
        assertLe(handler.calls(), 1_000_000, "calls");
    }
}
