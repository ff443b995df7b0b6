// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Vm} from "./Vm.sol";

/// @notice Minimal test base: cheatcodes, assertions that revert with a message, and the target lists forge's
///         invariant runner reads from a test contract.
abstract contract Test {
    Vm internal constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));

    struct FuzzSelector {
        address addr;
        bytes4[] selectors;
    }

    address[] private _targetContracts;
    FuzzSelector[] private _targetSelectors;
    address[] private _excludeSenders;

    /// @notice Read by forge's invariant runner.
    function targetContracts() public view returns (address[] memory) {
        return _targetContracts;
    }

    /// @notice Read by forge's invariant runner.
    function targetSelectors() public view returns (FuzzSelector[] memory) {
        return _targetSelectors;
    }

    /// @notice Read by forge's invariant runner.
    function excludeSenders() public view returns (address[] memory) {
        return _excludeSenders;
    }

    function targetContract(address target) internal {
        _targetContracts.push(target);
    }

    function targetSelector(FuzzSelector memory selector) internal {
        _targetSelectors.push(selector);
    }

    function excludeSender(address sender) internal {
        _excludeSenders.push(sender);
    }

    function fail(string memory message) internal pure {
        revert(message);
    }

    function assertTrue(bool condition, string memory message) internal pure {
        if (!condition) revert(message);
    }

    function assertFalse(bool condition, string memory message) internal pure {
        if (condition) revert(message);
    }

    function assertEq(uint256 a, uint256 b, string memory message) internal pure {
        if (a != b) revert(string.concat(message, ": ", vm.toString(a), " != ", vm.toString(b)));
    }

    function assertEq(address a, address b, string memory message) internal pure {
        if (a != b) revert(string.concat(message, ": address mismatch"));
    }

    function assertEq(bytes32 a, bytes32 b, string memory message) internal pure {
        if (a != b) revert(string.concat(message, ": bytes32 mismatch"));
    }

    function assertEq(bool a, bool b, string memory message) internal pure {
        if (a != b) revert(string.concat(message, ": bool mismatch"));
    }

    function assertNotEq(address a, address b, string memory message) internal pure {
        if (a == b) revert(string.concat(message, ": addresses equal"));
    }

    function assertLe(uint256 a, uint256 b, string memory message) internal pure {
        if (a > b) revert(string.concat(message, ": ", vm.toString(a), " > ", vm.toString(b)));
    }

    function assertGt(uint256 a, uint256 b, string memory message) internal pure {
        if (a <= b) revert(string.concat(message, ": ", vm.toString(a), " <= ", vm.toString(b)));
    }

    function bound(uint256 x, uint256 min, uint256 max) internal pure returns (uint256) {
        if (max < min) revert("bound: max < min");
        if (max == type(uint256).max && min == 0) return x;
        return min + (x % (max - min + 1));
    }
}
