// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {HandlerState, System, Actors} from "./HandlerState.sol";
import {Merkle} from "../../../contracts/lib/Merkle.sol";
import {Task} from "../../../contracts/types/VerityTypes.sol";

/// @notice The traces and commitments each kind of party produces, so that the handler can act for them and the
///         audits can tell an honest side from a wrong one.
/// @dev Traces are chained: h_0 = input, h_j = keccak(tag_j, h_{j-1}, j) with tag_j = "honest" before the trace's
///      divergence index and its own tag from there on. An honest referee recomputes step s from the agreed h_s.
abstract contract HandlerTraces is HandlerState {
    bytes32 internal constant HONEST = "honest";
    bytes32 internal constant ADV = "adversary";

    constructor(System memory s, Actors memory a, uint8 sabotage_) HandlerState(s, a, sabotage_) {}

    function _trace(bytes32 input, uint256 n, bytes32 tag, uint256 d) internal pure returns (bytes32[] memory h) {
        h = new bytes32[](n + 1);
        h[0] = input;
        for (uint256 j = 1; j <= n; ++j) {
            h[j] = keccak256(abi.encode(j < d ? HONEST : tag, h[j - 1], j));
        }
    }

    function _honestTrace(uint256 taskId) internal view returns (bytes32[] memory) {
        Task memory t = views.getTask(taskId);
        return _trace(t.inputHash, t.n, HONEST, type(uint256).max);
    }

    /// @notice The final hash an honest solver computes for a task.
    function honestFinal(uint256 taskId) public view returns (bytes32) {
        Task memory t = views.getTask(taskId);
        return _trace(t.inputHash, t.n, HONEST, type(uint256).max)[t.n];
    }

    /// @dev Honest nodes cheat on 1 task in 4 (their own wrong trace); adversaries always (but in the jobs where
    ///      they withhold instead), all with one wrong trace.
    function _cheats(uint256 taskId, address node) internal view returns (bool) {
        return isAdv[node] || uint256(keccak256(abi.encode(taskId, node))) % 4 == 0;
    }

    /// @notice P10: jobs (odd ids) whose adversary replicas do the work right, to be accepted and paid, and then
    ///         withhold their bundles: an input all of whose payees are adversaries cannot be fetched by an honest
    ///         consumer of such a job, which reports it unavailable (the only report an honest node makes). In the
    ///         other jobs adversaries cheat, as before P10.
    function withholds(uint256 jobId) public pure returns (bool) {
        return jobId % 2 == 1;
    }

    function _replicaTrace(uint256 taskId, address node) internal view returns (bytes32[] memory) {
        Task memory t = views.getTask(taskId);
        if (isAdv[node] && withholds(t.jobId)) return _trace(t.inputHash, t.n, HONEST, type(uint256).max);
        if (isAdv[node]) {
            return _trace(t.inputHash, t.n, ADV, 1 + uint256(keccak256(abi.encode(taskId, ADV))) % t.n);
        }
        if (_cheats(taskId, node)) {
            uint256 d = 1 + uint256(keccak256(abi.encode(taskId, node, "d"))) % t.n;
            return _trace(t.inputHash, t.n, bytes32(uint256(uint160(node))), d);
        }
        return _trace(t.inputHash, t.n, HONEST, type(uint256).max);
    }

    /// @dev A sybil's wrong trace: chained from its divergence, or (one node in two) honest leaves around a single
    ///      forged leaf and a forged final (not chain-consistent: bisection meets agreeing leaves after a difference).
    function _sybilTrace(uint256 taskId, address node) internal view returns (bytes32[] memory h) {
        Task memory t = views.getTask(taskId);
        uint256 r = uint256(keccak256(abi.encode(taskId, node, "sybil")));
        bytes32 tag = keccak256(abi.encode("sybil", node));
        h = _trace(t.inputHash, t.n, tag, 1 + r % t.n);
        if ((r >> 128) % 2 == 0) return h;
        h = _trace(t.inputHash, t.n, HONEST, type(uint256).max);
        h[1 + r % t.n] = tag;
        h[t.n] = keccak256(abi.encode(tag, "final"));
    }

    /// @dev The trace behind `root` among those `party` may have produced (empty if none).
    function _sideTrace(uint256 taskId, address party, bytes32 root) internal view returns (bytes32[] memory h) {
        h = _honestTrace(taskId);
        if (Merkle.rootOf(h) == root) return h;
        h = _replicaTrace(taskId, party);
        if (Merkle.rootOf(h) == root) return h;
        h = _sybilTrace(taskId, party);
        if (Merkle.rootOf(h) == root) return h;
        return new bytes32[](0);
    }

    function _cid(bytes32 finalHash) internal pure returns (bytes32) {
        return keccak256(abi.encode("cid", finalHash));
    }
}
