// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {InvariantSetup} from "./InvariantSetup.sol";
import {JOB_MEMORY_MB} from "./AdversarySide.sol";
import {NodeMath} from "../../../contracts/lib/NodeMath.sol";
import {
    JobStatus,
    Task,
    TaskStatus,
    Replica,
    ReplicaStatus,
    Node,
    ROLE_SOLVER,
    ROLE_REFEREE,
    BPS
} from "../../../contracts/types/VerityTypes.sol";

/// @notice Issue 9's adversaries under the same random traffic as InvariantsTest: a griefing poster (minimal windows,
///         poisoned inputs), sybil identities that come and go with the minimum stake, heavy stake no posted job
///         accepts, and an owner moving every setter. Honest stake is InvariantsTest's check_honestNeverSlashed;
///         here: the selection trees match the registry, ineligible stake is never drawn, and no protocol rule the
///         adversaries push against (decline grace, minimum windows, the poster bond, the seal, the supply cap, the
///         one-time wirings) ever gives.
contract AdversaryInvariantsTest is InvariantSetup {
    /// @dev NodeRegistry constant, read once (the checks run after every call).
    uint256 internal MIN_REGISTRATION_STAKE;
    mapping(address => bool) internal _created;
    mapping(address => bool) internal _isHonestNode;
    uint256[2] internal _tiers;
    uint256 internal _tierCount;
    mapping(uint32 => uint256) internal _tierIndex;

    function setUp() public override {
        super.setUp();
        MIN_REGISTRATION_STAKE = registry.MIN_REGISTRATION_STAKE();
        for (uint256 i = 0; i < nodes.length; ++i) {
            _created[nodes[i]] = true;
        }
        for (uint256 i = 0; i < honestNodes.length; ++i) {
            _isHonestNode[honestNodes[i]] = true;
        }
        // The memory declarations the suite makes (16 GB, and the ineligible 0 MB and JOB_MEMORY_MB - 1) fall in two
        // tiers: _tierIndex is 1-based into _tiers.
        uint32[3] memory declared = [uint32(16_000), 0, JOB_MEMORY_MB - 1];
        for (uint256 i = 0; i < declared.length; ++i) {
            uint256 tier = lens.memoryTier(declared[i]);
            uint256 k = 0;
            while (k < _tierCount && _tiers[k] != tier) ++k;
            require(k < 2, "more than two memory tiers: widen the class check");
            if (k == _tierCount) _tiers[_tierCount++] = tier;
            _tierIndex[declared[i]] = k + 1;
        }
    }
    /// @notice One campaign (10,240 calls) checks the invariants below after every call: one campaign each
    ///         would cost the suite a minute more on the 2-core CI machine for the same traffic.
    function invariant_adversariesGainNothing() public view {
        checkSelectionTreeMatchesRegistry();
        checkIneligibleNeverDrawn();
        checkIneligibleStaysIneligible();
        checkNoRuleBroken();
    }

    // ---------------------------------------------------------------- registry and draws

    /// @notice The selection trees hold exactly the registered nodes' weights. No node's solver or referee weight
    ///         exceeds its bonded stake times its current reputation factor (0 without the role); the registry's
    ///         totals are their sums; every eligibility
    ///         class's tree (role, served profile, memory tier) totals exactly the weights of the nodes declared into
    ///         it, so stake is drawable only for jobs its declaration serves. Slots and nodeList are one bijection over
    ///         identities the run created (no phantom registrations); bonded stake is 0 or at least the minimum unless
    ///         a slash cut it; every honest node stays registered and drawable.
    function checkSelectionTreeMatchesRegistry() public view {
        uint256 count = registry.nodeCount();
        uint256 solverSum;
        uint256 refereeSum;
        uint256 honestDrawable;
        // [role][profile bit index][tier index]: the weight each class tree should hold.
        uint256[2][3][2] memory expected;
        for (uint256 slot = 1; slot <= count; ++slot) {
            address node = registry.nodeList(slot - 1);
            assertTrue(_created[node], "the registry lists a node the run never created");
            Node memory n = registry.getNode(node);
            assertEq(n.slot, slot, "slot does not map back to its node");
            uint256 bonded = n.stake - n.pendingUnstake;
            // Factors only rise between syncs (completed work; a drop - late, lost, slashed, unbonded - syncs at
            // once), and none exceeds 100 %: a weight never exceeds what the current reputation allows.
            // Issue 23: the weight counts at most the bonded stake capped by the free stake (NodeMath.weightBase).
            uint256 high = (NodeMath.weightBase(bonded, registry.freeStake(node)) * lens.reputationFactorBps(node)) / BPS;
            (uint256 ws, uint256 wr) = lens.weightsOf(node);
            _checkWeight(ws, (n.roles & ROLE_SOLVER) != 0, high, "solver weight above its stake's due");
            _checkWeight(wr, (n.roles & ROLE_REFEREE) != 0, high, "referee weight above its stake's due");
            solverSum += ws;
            refereeSum += wr;
            uint256 t = _tierIndex[n.memoryMb];
            assertGt(t, 0, "a memory declaration the suite does not know");
            assertEq(n.deviceClass, 0, "a CUDA declaration the suite does not make");
            for (uint256 p = 0; p < 3; ++p) {
                if ((n.profiles & (1 << p)) == 0) continue;
                expected[t - 1][p][0] += ws;
                expected[t - 1][p][1] += wr;
            }
            if (bonded != 0 && bonded < MIN_REGISTRATION_STAKE) {
                assertGt(lens.reputationOf(node).totalSlashed, 0, "bonded stake below the minimum, unslashed");
            }
            if (_isHonestNode[node] && ws > 0 && wr > 0) ++honestDrawable;
        }
        (uint256 solverTotal, uint256 refereeTotal) = lens.totalWeights();
        assertEq(solverTotal, solverSum, "solver tree total != sum of registered weights");
        assertEq(refereeTotal, refereeSum, "referee tree total != sum of registered weights");
        for (uint256 t = 0; t < 2; ++t) {
            for (uint256 p = 0; p < 3; ++p) {
                uint32 bit = uint32(1 << p);
                assertEq(
                    lens.classWeight(ROLE_SOLVER, 0, bit, false, _tiers[t]), expected[t][p][0], "solver class tree"
                );
                assertEq(
                    lens.classWeight(ROLE_REFEREE, 0, bit, false, _tiers[t]), expected[t][p][1], "referee class tree"
                );
            }
        }
        assertEq(honestDrawable, honestNodes.length, "an honest node lost its slot or its selection weight");
    }

    function _checkWeight(uint256 w, bool hasRole, uint256 high, string memory what) internal pure {
        if (!hasRole) return assertEq(w, 0, "weight without the role");
        assertLe(w, high, what);
    }

    /// @notice Stake whose declaration no posted job accepts absorbs no draw: it is never drawn into a replica slot
    ///         or a referee seat (every TaskAssigned and RefereesSeated event is audited) and never has stake locked
    ///         (every slot and seat locks some).
    function checkIneligibleNeverDrawn() public view {
        assertEq(handler.ineligibleDrawn(), 0, handler.lastIneligibleDraw());
        for (uint256 i = 0; i < ineligibleNodes.length; ++i) {
            address node = ineligibleNodes[i];
            // Every replica slot and referee seat locks stake: none locked, none held.
            assertEq(registry.getNode(node).locked, 0, "ineligible stake locked (holds a slot or a seat)");
        }
    }

    /// @notice The registry itself calls every ineligible identity ineligible for the posted jobs' requirements (the
    ///         draw filter the check above relies on).
    function checkIneligibleStaysIneligible() public view {
        for (uint256 i = 0; i < ineligibleNodes.length; ++i) {
            address node = ineligibleNodes[i];
            assertFalse(registry.isEligible(node, ROLE_SOLVER, 0, JOB_MEMORY_MB, 1, 0, 0, 1), "ineligible node eligible");
            assertFalse(registry.isEligible(node, ROLE_REFEREE, 0, JOB_MEMORY_MB, 1, 0, 0, 1), "ineligible node eligible");
        }
    }

    // ---------------------------------------------------------------- griefing, declines and the owner

    /// @notice The rules the adversaries push against hold: no decline past the grace, no window below the minimum,
    ///         a failed job's poster bond split among exactly its decliners with nothing left in escrow, a node banned
    ///         from a task (declined, late, lost) never holding it again, the protocol set fixed once sealed, the
    ///         supply cap, and the one-time wirings.
    function checkNoRuleBroken() public view {
        assertEq(handler.ruleViolations(), 0, handler.lastRuleViolation());
        uint256 jobCount = jobs.jobCount();
        bool[] memory failed = new bool[](jobCount + 1);
        for (uint256 jobId = 1; jobId <= jobCount; ++jobId) {
            if (views.getJob(jobId).status != JobStatus.Failed) continue;
            failed[jobId] = true;
            assertEq(escrow.escrowOf(jobId), 0, "a failed job kept escrow");
        }
        for (uint256 id = 1; id <= jobs.taskCount(); ++id) {
            Task memory t = views.getTask(id);
            if (failed[t.jobId]) {
                assertTrue(t.status == TaskStatus.Accepted || t.status == TaskStatus.Cancelled, "live task of a failed job");
                continue;
            }
            if (t.status != TaskStatus.Open && t.status != TaskStatus.Assigned && t.status != TaskStatus.Revealed) continue;
            Replica[] memory reps = views.getReplicas(id);
            for (uint256 s = 0; s < reps.length; ++s) {
                ReplicaStatus st = reps[s].status;
                bool live = st == ReplicaStatus.Assigned || st == ReplicaStatus.Committed || st == ReplicaStatus.Revealed;
                if (live) assertFalse(views.isBanned(id, reps[s].node), "a banned node holds the task again");
            }
        }
        if (registry.protocolsSealed()) {
            assertEq(registry.isProtocol(handler.ROGUE()), handler.rogueAtSeal(), "protocol set changed after the seal");
        }
        assertTrue(registry.isProtocol(address(jobs)) && registry.isProtocol(address(game)), "protocol removed");
        assertTrue(registry.isProtocol(address(panel)), "protocol removed");
        assertLe(token.totalMinted(), token.MAX_SUPPLY(), "minted past the cap");
        assertEq(jobs.disputeGame(), address(game), "dispute game swapped");
        assertEq(escrow.jobs(), address(jobs), "escrow registry swapped");
        assertEq(panel.game(), address(game), "panel game swapped");
    }

    // ---------------------------------------------------------------- coverage and teeth

    /// @notice A poisoned job and then a pseudo-random drive over every action reach each adversary's effect (griefing jobs, poisoned jobs
    ///         failed by honest invalid-input declines, window declines, adversary declines, sybils registering,
    ///         leaving, withdrawing out and coming back, ineligible redeclarations, draws, the seal and the owner's
    ///         rejected moves), and the invariants hold at the end.
    function test_handler_coversAdversaries_succeeds() public {
        // Scripted first: a poisoned optimistic job until three honest (or adversary) declines fail it.
        handler.griefPost(true, false, false, 0);
        for (uint256 i = 0; i < 120 && handler.ghostFailedJobs() == 0; ++i) {
            handler.tick(60, i);
            handler.reportLate(i, false);
        }
        _driveMany(ALL_MIX, 5, 900);
        assertGt(handler.ghostGriefJobs(), 0, "no griefing job");
        assertGt(handler.ghostPoisonedJobs(), 0, "no poisoned job");
        assertGt(handler.ghostInvalidDeclines(), 0, "no honest invalid-input decline");
        assertGt(handler.ghostWindowDeclines(), 0, "no honest window decline");
        assertGt(handler.ghostAdvDeclines(), 0, "no adversary decline");
        assertGt(handler.ghostFailedJobs(), 0, "no failed job");
        assertGt(handler.ghostSybilRegistrations(), 0, "no sybil registration");
        assertGt(handler.ghostSybilLeaves(), 0, "no sybil leaving");
        assertGt(handler.ghostSybilReturns(), 0, "no sybil coming back");
        assertGt(handler.ghostDeregistrations(), 0, "no deregistration");
        assertGt(handler.ghostRedeclarations(), 0, "no redeclaration");
        assertGt(handler.ghostAssignments(), 0, "no draw");
        assertGt(handler.ghostSeals(), 0, "never sealed");
        assertGt(handler.ghostRejectedOwnerMoves(), 0, "no owner move refused");
        assertGt(handler.ghostParamChanges(), 0, "no parameter change");
        invariant_adversariesGainNothing();
    }

    /// @notice Issue 23: the weight-nudging actor reaches draws (posts, nudges before draws, work, time) and never
    ///         seats more adversary identities than the draw it would have got without acting.
    function test_handler_nudgesBeforeDraws_neverSteer_succeeds() public {
        _driveMany(hex"00_00_0e_10_16_16_16_16_01_08_15", 7, 400);
        assertGt(handler.ghostNudgedDraws(), 10, "too few nudged draws");
        assertGt(handler.ghostAssignments(), 0, "no draw");
        assertEq(handler.ruleViolations(), 0, handler.lastRuleViolation());
        invariant_adversariesGainNothing();
    }

    /// @notice Mutation check: a solver-tree total that drifts from its weights is caught.
    function test_selectionTree_withCorruptTotal_detectsDrift_succeeds() public {
        handler = _newHandler(4);
        _driveAllUntilFails(this.checkSelectionTreeMatchesRegistry, 400, "solver tree total");
    }

    /// @notice Mutation check: identities that turn eligible behind the handler's back get drawn, and
    ///         checkIneligibleNeverDrawn catches it.
    function test_ineligible_turnedEligible_detectsDraw_succeeds() public {
        handler = _newHandler(5);
        _driveAllUntilFails(this.checkIneligibleNeverDrawn, 1_500, "drawn");
    }

    /// @notice Mutation check: escrow left behind in a failed job is caught.
    function test_failedJob_withEscrowLeft_detectsIt_succeeds() public {
        handler = _newHandler(6);
        _driveAllUntilFails(this.checkNoRuleBroken, 1_500, "a failed job kept escrow");
    }

    /// @notice Mutation check: a seal that does not hold lets the owner add a protocol contract, and it is caught.
    function test_seal_lifted_detectsOwnerAdd_succeeds() public {
        handler = _newHandler(7);
        handler.setParams(13, 0, 0); // seals
        assertFalse(_caught(this.checkNoRuleBroken, ""), "sealing alone broke the invariant");
        handler.setParams(13, 0, 0); // the owner tries to add ROGUE
        assertTrue(
            _caught(this.checkNoRuleBroken, "a protocol contract was added after the seal"),
            "the invariant never caught the mutation"
        );
    }
}
