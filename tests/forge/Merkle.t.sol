// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Test} from "./base/Test.sol";
import {Merkle} from "../../contracts/lib/Merkle.sol";

/// @dev External wrapper so calldata-free memory arrays from JSON can be passed in.
contract MerkleHarness {
    function verify(bytes32 root, uint256 index, bytes32 h, bytes32[] memory proof) external pure returns (bool) {
        return Merkle.verify(root, index, h, proof);
    }

    function rootOf(bytes32[] memory hashes) external pure returns (bytes32) {
        return Merkle.rootOf(hashes);
    }
}

contract MerkleTest is Test {
    MerkleHarness internal m;

    function setUp() public {
        m = new MerkleHarness();
    }

    /// @dev The same vectors pytest checks the Python implementation against.
    function test_vectors_matchPython_succeeds() public view {
        string memory json = vm.readFile("tests/vectors/merkle.json");
        uint256 cases = 0;
        for (uint256 c = 0; c < 64; ++c) {
            string memory key = string.concat(".cases[", vm.toString(c), "]");
            if (!vm.keyExistsJson(json, key)) break;
            bytes32[] memory hashes = vm.parseJsonBytes32Array(json, string.concat(key, ".hashes"));
            bytes32 root = vm.parseJsonBytes32(json, string.concat(key, ".root"));
            assertEq(m.rootOf(hashes), root, "root");
            for (uint256 j = 0; j < hashes.length; ++j) {
                bytes32[] memory proof =
                    vm.parseJsonBytes32Array(json, string.concat(key, ".proofs[", vm.toString(j), "]"));
                assertTrue(m.verify(root, j, hashes[j], proof), "vector proof");
                assertEq(keccak256(abi.encode(proof)), keccak256(abi.encode(Merkle.proofOf(hashes, j))), "proof");
            }
            ++cases;
        }
        assertGt(cases, 0, "no vectors read");
    }

    function test_verify_singleLeafIsRoot_succeeds() public view {
        bytes32[] memory h = new bytes32[](1);
        h[0] = keccak256("x");
        assertEq(m.rootOf(h), keccak256(abi.encode(uint256(0), h[0])), "single leaf");
        assertTrue(m.verify(m.rootOf(h), 0, h[0], new bytes32[](0)), "verify");
    }

    function test_verify_indexBeyondDepthRejected_succeeds() public view {
        bytes32[] memory h = new bytes32[](2);
        h[0] = "a";
        h[1] = "b";
        bytes32[] memory proof = Merkle.proofOf(h, 1);
        assertTrue(m.verify(m.rootOf(h), 1, h[1], proof), "valid");
        assertFalse(m.verify(m.rootOf(h), 3, h[1], proof), "index 3 with depth 1");
    }

    function testFuzz_verify_roundTrip_succeeds(bytes32 seed, uint8 len, uint8 pick) public view {
        uint256 n = bound(len, 1, 40);
        bytes32[] memory h = new bytes32[](n);
        for (uint256 i = 0; i < n; ++i) {
            h[i] = keccak256(abi.encode(seed, i));
        }
        uint256 j = bound(pick, 0, n - 1);
        bytes32 root = m.rootOf(h);
        bytes32[] memory proof = Merkle.proofOf(h, j);
        assertTrue(m.verify(root, j, h[j], proof), "round trip");
        assertFalse(m.verify(root, j, h[j] ^ bytes32(uint256(1)), proof), "wrong leaf");
        if (n > 1) assertFalse(m.verify(root, (j + 1) % n, h[j], proof), "wrong index");
    }
}
