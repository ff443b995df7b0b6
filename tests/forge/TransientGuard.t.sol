// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Test} from "./base/Test.sol";
import {TransientGuard} from "../../contracts/lib/TransientGuard.sol";

/// @dev A guarded contract that can call back into itself, guarded or not.
contract Guarded is TransientGuard {
    uint256 public calls;

    function enter(bool again) external nonReentrant {
        ++calls;
        if (again) this.enter(false);
    }

    function unguarded() external {
        this.enter(false);
    }
}

contract TransientGuardTest is Test {
    Guarded internal g;

    function setUp() public {
        g = new Guarded();
    }

    function test_nonReentrant_reentry_reverts() public {
        vm.expectRevert(TransientGuard.ReentrancyGuardReentrantCall.selector);
        g.enter(true);
    }

    /// @dev The guard is cleared on return: later calls in the same transaction pass, and so does a guarded call
    ///      made from an unguarded one.
    function test_nonReentrant_sequentialCalls_succeeds() public {
        g.enter(false);
        g.enter(false);
        g.unguarded();
        assertEq(g.calls(), 3, "every call ran");
    }
}
