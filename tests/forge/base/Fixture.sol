// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Test} from "./Test.sol";
import {VerityToken} from "../../../contracts/VerityToken.sol";
import {NodeRegistry} from "../../../contracts/NodeRegistry.sol";
import {NodeLens} from "../../../contracts/NodeLens.sol";
import {DisputeLens} from "../../../contracts/DisputeLens.sol";
import {JobRegistry} from "../../../contracts/JobRegistry.sol";
import {JobEscrow} from "../../../contracts/JobEscrow.sol";
import {DisputeGame} from "../../../contracts/DisputeGame.sol";
import {RefereePanel} from "../../../contracts/RefereePanel.sol";
import {BlockhashRandomness} from "../../../contracts/BlockhashRandomness.sol";
import {IVerityToken} from "../../../contracts/interfaces/IVerityToken.sol";
import {INodeRegistry} from "../../../contracts/interfaces/INodeRegistry.sol";
import {IJobRegistry, IJobViews} from "../../../contracts/interfaces/IJobRegistry.sol";
import {IJobEscrow} from "../../../contracts/interfaces/IJobEscrow.sol";
import {IRandomness} from "../../../contracts/interfaces/IRandomness.sol";
import {IRefereePanel} from "../../../contracts/interfaces/IRefereePanel.sol";
import {Merkle} from "../../../contracts/lib/Merkle.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {
    PostJobParams,
    Job,
    Task,
    Replica,
    ReplicaStatus,
    TaskStatus,
    ROLE_SOLVER,
    ROLE_VERIFIER,
    ROLE_REFEREE,
    SELECTION_EPOCH_BLOCKS
} from "../../../contracts/types/VerityTypes.sol";

/// @notice The v2 system deployed and wired in docs/protocol-v2.md's order (token, registry, randomness, escrow, jobs,
/// @notice The cheatcodes that snapshot and restore the whole state (what-if probes: "the draw without acting").
interface VmState {
    function snapshotState() external returns (uint256);
    function revertToState(uint256) external returns (bool);
}

///         panel, game), funded staked nodes, and trace/commitment helpers.
abstract contract Fixture is Test {
    uint256 internal constant FAUCET = 1_000_000e18;
    uint256 internal constant NODE_STAKE = 1_000e18;
    uint256 internal constant PAYMENT = 10e18;
    uint256 internal constant TASK_STAKE = 100e18;
    uint8 internal constant ALL_ROLES = ROLE_SOLVER | ROLE_VERIFIER | ROLE_REFEREE;
    bytes32 internal constant INPUT = keccak256("round-0 input");
    string internal constant MULTIADDR = "/ip4/127.0.0.1/tcp/4001/p2p/QmNode";

    VerityToken internal token;
    NodeRegistry internal registry;
    NodeLens internal lens;
    BlockhashRandomness internal randomness;
    JobEscrow internal escrow;
    JobRegistry internal jobs;
    /// @dev The registry's address as its views (JobViews, reached through its fallback).
    IJobViews internal views;
    RefereePanel internal panel;
    DisputeGame internal game;
    DisputeLens internal disputeLens;
    address internal owner = address(this);
    address internal submitter = address(0x5B);
    address[] internal nodes;

    function setUp() public virtual {
        vm.warp(1_700_000_000);
        token = new VerityToken(address(this)); // the test is the minter, as the deployer is for a genesis distribution
        registry = new NodeRegistry(IERC20(address(token)));
        lens = new NodeLens(address(registry));
        randomness = new BlockhashRandomness(2);
        escrow = new JobEscrow(IERC20(address(token)));
        jobs = new JobRegistry(
            IVerityToken(address(token)),
            INodeRegistry(address(registry)),
            IJobEscrow(address(escrow)),
            IRandomness(address(randomness))
        );
        views = IJobViews(address(jobs));
        panel = new RefereePanel(
            IVerityToken(address(token)), INodeRegistry(address(registry)), IRandomness(address(randomness))
        );
        game = new DisputeGame(
            IVerityToken(address(token)),
            INodeRegistry(address(registry)),
            IJobRegistry(address(jobs)),
            IRefereePanel(address(panel))
        );
        disputeLens = new DisputeLens(address(game));
        escrow.setJobs(address(jobs));
        jobs.setDisputeGame(address(game));
        panel.setGame(address(game));
        registry.setProtocol(address(jobs), true);
        registry.setProtocol(address(game), true);
        registry.setProtocol(address(panel), true);
        token.mint(submitter, FAUCET);
        vm.prank(submitter);
        token.approve(address(escrow), type(uint256).max);
    }

    // ---------------------------------------------------------------- nodes

    /// @dev A registered node whose stake is `stakeAmount` (register pulls MIN_REGISTRATION_STAKE of it, `stake`
    ///      adds the rest; amounts below the minimum leave the node at the minimum).
    /// @dev registry.drawSolver's node alone (tests of who is drawn; the eligible share is tested in Reputation.t.sol).
    function _solverDrawn(
        bytes32 seed,
        uint8 deviceClass,
        uint32 minMemoryMb,
        uint32 profileBit,
        uint8 region,
        uint32 minBandwidthMbps,
        uint256 minFreeStake,
        address[] memory exclude
    ) internal view returns (address node) {
        (node,) = registry.drawSolver(
            seed, deviceClass, minMemoryMb, profileBit, region, minBandwidthMbps, minFreeStake, exclude
        );
    }

    function _newNode(uint256 i, uint8 roles, uint256 stakeAmount) internal returns (address node) {
        node = address(uint160(0x10000 + i));
        vm.label(node, string.concat("node", vm.toString(i)));
        token.mint(node, FAUCET);
        vm.startPrank(node);
        token.approve(address(registry), type(uint256).max);
        token.approve(address(game), type(uint256).max);
        registry.register(roles, 0, 16_000, 100, 3, MULTIADDR);
        uint256 min = registry.MIN_REGISTRATION_STAKE();
        if (stakeAmount > min) registry.stake(stakeAmount - min);
        registry.heartbeat(); // registering is not a check-in: drawn only after one
        vm.stopPrank();
        nodes.push(node);
        _nextEpoch();
    }

    /// @dev Rolls to the next selection epoch's first block: draws read the weights as their epoch began, so a node
    ///      registered (or a stake changed) in this epoch is drawn from the next one on.
    function _nextEpoch() internal {
        vm.roll((block.number / SELECTION_EPOCH_BLOCKS + 1) * SELECTION_EPOCH_BLOCKS);
    }

    /// @dev A staked node with 128 GB declared memory (eligible for jobs the standard nodes cannot take); not in
    ///      `nodes`.
    function _bigNode(uint160 addr) internal returns (address big) {
        big = address(addr);
        token.mint(big, NODE_STAKE);
        vm.startPrank(big);
        token.approve(address(registry), type(uint256).max);
        registry.register(ALL_ROLES, 0, 128_000, 1, 1, MULTIADDR);
        registry.stake(NODE_STAKE - registry.MIN_REGISTRATION_STAKE());
        registry.heartbeat(); // registering is not a check-in: drawn only after one
        vm.stopPrank();
        _nextEpoch();
    }

    function _addNodes(uint256 count) internal {
        uint256 start = nodes.length;
        for (uint256 i = 0; i < count; ++i) {
            _newNode(start + i, ALL_ROLES, NODE_STAKE);
        }
    }

    function _heartbeatAll() internal {
        for (uint256 i = 0; i < nodes.length; ++i) {
            vm.prank(nodes[i]);
            registry.heartbeat();
        }
    }

    // ---------------------------------------------------------------- jobs

    function _params(uint32 shards, uint32 rounds, uint8 replication) internal pure returns (PostJobParams memory p) {
        p.manifestCid = keccak256("manifest cid");
        p.manifestHash = keccak256("manifest");
        p.initialStateHash = INPUT;
        p.shards = shards;
        p.rounds = rounds;
        p.stepsPerRound = 8;
        p.checkpointInterval = 2;
        p.paymentPerTask = PAYMENT;
        p.replication = replication;
        p.stakePerReplica = TASK_STAKE;
        p.deviceClass = 0;
        p.minMemoryMb = 1_000;
        p.profileBit = 1;
    }

    /// @dev Posts a job and draws its round-0 tasks' replicas (see _draw); a task nobody is eligible for stays Open.
    function _post(PostJobParams memory p) internal returns (uint256 jobId) {
        jobId = _postOnly(p);
        for (uint32 i = 0; i < p.shards; ++i) {
            _tryDraw(views.taskOf(jobId, 0, i));
        }
    }

    /// @dev _draw, but a task with no eligible node stays Open instead of failing the test.
    function _tryDraw(uint256 taskId) internal {
        _rollToDraw(taskId);
        try jobs.assign(taskId) {} catch {}
    }

    /// @dev _draw for a task that is Open (a new round's task, the AGGREGATE, a slot reported late); else nothing.
    function _drawIfOpen(uint256 taskId) internal {
        if (_status(taskId) == TaskStatus.Open) _draw(taskId);
    }

    /// @dev Rolls past the draw's target block; a request whose epoch ended unread (the test rolled past it, e.g.
    ///      to add a node) is renewed first, as a keeper's assign would.
    function _rollToDraw(uint256 taskId) internal {
        uint256 requestId = views.getTask(taskId).drawRequest;
        if (randomness.isStale(requestId)) randomness.renew(requestId);
        uint256 target = randomness.targetOf(requestId);
        if (block.number <= target) vm.roll(target + 1);
    }

    /// @dev Posts a job; its tasks stay Open until their draws are fulfilled.
    function _postOnly(PostJobParams memory p) internal returns (uint256 jobId) {
        vm.prank(submitter);
        jobId = jobs.postJob(p);
    }

    /// @dev Rolls past the task's randomness target block (if needed) and fulfils its draw (P4: two-phase draws).
    function _draw(uint256 taskId) internal {
        _rollToDraw(taskId);
        jobs.assign(taskId);
    }

    function _replica(uint256 taskId, uint8 slot) internal view returns (Replica memory) {
        return views.getReplica(taskId, slot);
    }

    function _status(uint256 taskId) internal view returns (TaskStatus) {
        return views.getTask(taskId).status;
    }

    // ---------------------------------------------------------------- traces

    /// @dev h_0 = input; h_j = keccak(honest, input, j) for j < divergeAt, keccak(tag, input, j) from divergeAt on.
    function _trace(bytes32 input, uint256 n, bytes32 tag, uint256 divergeAt)
        internal
        pure
        returns (bytes32[] memory h)
    {
        h = new bytes32[](n + 1);
        h[0] = input;
        for (uint256 j = 1; j <= n; ++j) {
            h[j] = keccak256(abi.encode(j < divergeAt ? bytes32("honest") : tag, input, j));
        }
    }

    function _honest(bytes32 input, uint256 n) internal pure returns (bytes32[] memory) {
        return _trace(input, n, "honest", type(uint256).max);
    }

    /// @dev A replica's commitment to trace `h` with the result CID _reveal uses (protocol.replica_commitment).
    function _commitment(bytes32[] memory h, address node) internal pure returns (bytes32) {
        return keccak256(abi.encode(Merkle.rootOf(h), h[h.length - 1], _resultCid(h), node));
    }

    function _resultCid(bytes32[] memory h) internal pure returns (bytes32) {
        return keccak256(abi.encode("cid", h[h.length - 1]));
    }

    function _commit(uint256 taskId, address node, bytes32[] memory h) internal {
        vm.prank(node);
        jobs.commit(taskId, _commitment(h, node));
    }

    function _reveal(uint256 taskId, address node, bytes32[] memory h) internal {
        uint256 n = h.length - 1;
        vm.prank(node);
        jobs.reveal(
            taskId,
            Merkle.rootOf(h),
            h[n],
            uint32(n),
            _resultCid(h),
            Merkle.proofOf(h, 0),
            Merkle.proofOf(h, n)
        );
    }

    function _submit(uint256 taskId, address node, bytes32[] memory h) internal {
        uint256 n = h.length - 1;
        vm.prank(node);
        jobs.submitResult(
            taskId,
            Merkle.rootOf(h),
            h[n],
            uint32(n),
            keccak256(abi.encode("cid", h[n])),
            Merkle.proofOf(h, 0),
            Merkle.proofOf(h, n)
        );
    }

    /// @dev Accepts a Revealed task once its challenge window and the reveal grace after it have passed.
    function _finalizeAfterWindow(uint256 taskId) internal {
        Task memory t = views.getTask(taskId);
        uint256 end = uint256(t.challengeDeadline) + t.revealHold + views.getJob(t.jobId).revealWindow;
        if (block.timestamp <= end) vm.warp(end + 1);
        jobs.finalize(taskId);
    }

    /// @dev Every minted token is held by the submitter, a node, a contract of the system, or burned.
    function _tokensHeld() internal view returns (uint256 sum) {
        sum = token.balanceOf(submitter) + token.balanceOf(address(escrow)) + token.balanceOf(address(jobs))
            + token.balanceOf(address(registry)) + token.balanceOf(address(game)) + token.balanceOf(address(panel))
            + token.totalBurned();
        for (uint256 i = 0; i < nodes.length; ++i) {
            sum += token.balanceOf(nodes[i]);
        }
    }

    /// @dev Replication 2 as nodes run it: slot 0 commits, slot 1 (the last to commit) reveals in place of its
    ///      commit, which also reveals slot 0 when its commitment is the same result; else slot 0 reveals its own.
    ///      Equal traces leave the task Revealed, different ones Contested.
    function _runReplicated(uint256 taskId, bytes32[] memory h0, bytes32[] memory h1) internal {
        address a = _replica(taskId, 0).node;
        address b = _replica(taskId, 1).node;
        _commit(taskId, a, h0);
        _reveal(taskId, b, h1);
        if (_replica(taskId, 0).status == ReplicaStatus.Committed) _reveal(taskId, a, h0);
    }

    /// @dev Runs every task of `round` honestly (each result waits out its window, then is finalized), then the
    ///      AGGREGATE.
    function _runRoundHonest(uint256 jobId, uint32 round) internal {
        Job memory job = views.getJob(jobId);
        uint256 n = job.stepsPerRound / job.checkpointInterval;
        bytes32[] memory finals = new bytes32[](job.shards);
        for (uint32 i = 0; i < job.shards; ++i) {
            uint256 taskId = views.taskOf(jobId, round, i);
            _drawIfOpen(taskId);
            bytes32[] memory h = _honest(job.roundInput, n);
            finals[i] = h[n];
            if (job.replication == 1) _submit(taskId, _replica(taskId, 0).node, h);
            else _runReplicated(taskId, h, h);
        }
        for (uint32 i = 0; i < job.shards; ++i) {
            _finalizeAfterWindow(views.taskOf(jobId, round, i));
        }
        uint256 aggId = views.taskOf(jobId, round, job.shards);
        require(views.getTask(aggId).inputHash == keccak256(abi.encode(finals)), "aggregate input");
        _acceptAggregate(jobId, round);
    }

    // ---------------------------------------------------------------- P10: deferred payment

    /// @dev P10 defers a TRAIN task's payment to its consumer's acceptance: draws round `round`'s AGGREGATE (it exists
    ///      once the round's last shard was accepted), runs it honestly (n = 1 from its input; no slot reports
    ///      anything unavailable) and finalizes it after its window, which settles the round's shards. Every node
    ///      heartbeats first: tests warp past the 600 s liveness window, and only live nodes are drawn. Every node's
    ///      balance is recorded right before that finalize (the payment), for _paidSince and _paidBesides.
    function _acceptAggregate(uint256 jobId, uint32 round) internal returns (uint256 aggId) {
        Job memory job = views.getJob(jobId);
        aggId = views.taskOf(jobId, round, job.shards);
        _heartbeatAll();
        _drawIfOpen(aggId);
        bytes32[] memory ha = _honest(views.getTask(aggId).inputHash, 1);
        if (job.replication == 1) _submit(aggId, _replica(aggId, 0).node, ha);
        else _runReplicated(aggId, ha, ha);
        _recordBalances();
        _finalizeAfterWindow(aggId);
    }

    // ---------------------------------------------------------------- pushed payments

    /// @dev Each node's token balance when _recordBalances last ran, and whether it was recorded at all.
    mapping(address => uint256) private _heldAtRecord;
    mapping(address => bool) private _recorded;

    /// @dev Records every node's token balance. JobEscrow pushes payments (pay transfers at once), and nodes also hold
    ///      faucet tokens and pay dispute bonds from them, so what a node was paid over an action is its balance's
    ///      growth over exactly that action: record right before it, read _paidSince right after.
    function _recordBalances() internal {
        for (uint256 i = 0; i < nodes.length; ++i) {
            _heldAtRecord[nodes[i]] = token.balanceOf(nodes[i]);
            _recorded[nodes[i]] = true;
        }
    }

    /// @dev What `node`'s balance grew by since _recordBalances (a balance that shrank fails the test: a payee never
    ///      pays anything over a paying action).
    function _paidSince(address node) internal view returns (uint256) {
        require(_recorded[node], "_paidSince: balance never recorded");
        return token.balanceOf(node) - _heldAtRecord[node];
    }

    /// @dev What `node` was paid since _recordBalances (run right before the job's last AGGREGATE `aggId` was
    ///      finalized, as _acceptAggregate does), less what it earned as an Accepted replica of that AGGREGATE (paid
    ///      at its own acceptance): a shard payee's payment then reads the same whichever nodes that draw took.
    function _paidBesides(address node, uint256 aggId) internal view returns (uint256 paid) {
        paid = _paidSince(node);
        Task memory agg = views.getTask(aggId);
        Job memory job = views.getJob(agg.jobId);
        if (agg.status != TaskStatus.Accepted || agg.round + 1 < job.rounds) return paid;
        for (uint8 s = 0; s < job.replication; ++s) {
            Replica memory r = _replica(aggId, s);
            if (r.node == node && r.status == ReplicaStatus.Accepted) paid -= job.paymentPerTask;
        }
    }
}
