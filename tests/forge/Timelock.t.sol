// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "./base/Fixture.sol";
import {Timelock} from "../../contracts/Timelock.sol";
import {ITimelock, IUnbondingPeriod} from "../../contracts/interfaces/ITimelock.sol";
import {ROLE_SOLVER} from "../../contracts/types/VerityTypes.sol";
import {ParameterOutOfRange, ZeroAddress} from "../../contracts/errors/CommonErrors.sol";
import {
    NotTimelockAdmin,
    NotTimelockSelf,
    CallAlreadyQueued,
    CallNotQueued,
    CallNotReady,
    TargetHasNoCode
} from "../../contracts/errors/TimelockErrors.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";

/// @notice Issue 9 (a timelock on every owner parameter setter): after deployment the Timelock owns every Ownable
///         contract, as scripts/deploy.py leaves them; an owner call applies only after a delay longer than the
///         registry's unbonding period (read at queue and again at execute), so any node can leave first.
contract TimelockTest is Fixture {
    Timelock internal timelock;
    address internal stranger = address(0xBAD);
    uint64 internal constant NEW_EXECUTION = 600;

    function setUp() public override {
        super.setUp();
        registry.sealProtocols();
        timelock = new Timelock(IUnbondingPeriod(address(registry)));
        // as scripts/deploy.py ends: every Ownable protocol contract handed to the timelock
        jobs.transferOwnership(address(timelock));
        game.transferOwnership(address(timelock));
        panel.transferOwnership(address(timelock));
        registry.transferOwnership(address(timelock));
        escrow.transferOwnership(address(timelock));
    }

    function _queueWindows() internal returns (bytes32 id) {
        id = timelock.queue(address(jobs), _windowsData());
    }

    function _windowsData() internal view returns (bytes memory) {
        return abi.encodeCall(jobs.setDefaultWindows, (NEW_EXECUTION, 10, 10));
    }

    // ---------------------------------------------------------------- ownership

    function test_constructor_adminIsDeployer_succeeds() public view {
        assertEq(timelock.admin(), address(this), "admin");
        assertEq(address(timelock.registry()), address(registry), "registry");
        assertEq(jobs.owner(), address(timelock), "jobs");
        assertEq(game.owner(), address(timelock), "game");
        assertEq(panel.owner(), address(timelock), "panel");
        assertEq(registry.owner(), address(timelock), "registry owner");
        assertEq(escrow.owner(), address(timelock), "escrow");
    }

    function test_constructor_zeroRegistry_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(ZeroAddress.selector, bytes32("registry")));
        new Timelock(IUnbondingPeriod(address(0)));
    }

    /// @dev After the transfer the old deployer cannot call any owner setter directly.
    function test_ownerSetters_oldDeployerDirect_reverts() public {
        bytes memory err = abi.encodeWithSelector(Ownable.OwnableUnauthorizedAccount.selector, address(this));
        vm.expectRevert(err);
        jobs.setDefaultWindows(NEW_EXECUTION, 10, 10);
        vm.expectRevert(err);
        jobs.setAssignmentTimeout(5);
        vm.expectRevert(err);
        game.setClockAllowance(15);
        vm.expectRevert(err);
        panel.setWindows(15, 15);
        vm.expectRevert(err);
        registry.setLivenessWindow(1);
        vm.expectRevert(err);
        registry.setUnbondingPeriod(0);
        vm.expectRevert(err);
        escrow.transferOwnership(address(this));
        assertEq(jobs.defaultExecutionWindow(), 120, "unchanged");
    }

    // ---------------------------------------------------------------- queue / execute

    function test_execute_afterDelay_succeeds() public {
        uint256 t0 = block.timestamp;
        bytes32 id = timelock.callId(address(jobs), _windowsData());
        vm.expectEmit(true, true, false, true, address(timelock));
        emit ITimelock.CallQueued(id, address(jobs), _windowsData(), t0 + timelock.MIN_DELAY());
        assertEq(_queueWindows(), id, "id");
        assertEq(timelock.readyAt(id), t0 + timelock.MIN_DELAY(), "ready at the floor (devnet unbonding 300 s)");
        vm.warp(timelock.readyAt(id));
        vm.expectEmit(true, true, false, true, address(timelock));
        emit ITimelock.CallExecuted(id, address(jobs), _windowsData());
        timelock.execute(address(jobs), _windowsData());
        assertEq(jobs.defaultExecutionWindow(), NEW_EXECUTION, "applied");
        (, uint64 eta) = timelock.queued(id);
        assertEq(uint256(eta), 0, "no longer queued");
        vm.expectRevert(abi.encodeWithSelector(CallNotQueued.selector, id));
        timelock.execute(address(jobs), _windowsData()); // not twice
    }

    /// @dev Issue 23, governance inside hard bounds: `setChallengerBond(1e9 VRT)` and `setRefereeStake(2^128 - 1)`
    ///      used to pass the Timelock, after which nobody could challenge (no node holds the bond) or no panel could
    ///      seat (no referee holds the stake), so a wrong result could never be disputed. Each now reverts with the
    ///      target's own range error at execute, and stays queued (the admin cancels it).
    function test_execute_boundsThatStopVerification_reverts() public {
        bytes[4] memory calls = [
            abi.encodeCall(game.setChallengerBond, (1e9 * 1e18)),
            abi.encodeCall(game.setChallengerBond, (0)),
            abi.encodeCall(panel.setRefereeStake, (type(uint128).max)),
            abi.encodeCall(panel.setRefereeStake, (1e18 - 1))
        ];
        address[4] memory targets = [address(game), address(game), address(panel), address(panel)];
        bytes[4] memory errors = [
            abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("challengerBond"), 1e9 * 1e18, 1e18, 100e18),
            abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("challengerBond"), 0, 1e18, 100e18),
            abi.encodeWithSelector(
                ParameterOutOfRange.selector, bytes32("refereeStake"), type(uint128).max, 1e18, 10e18
            ),
            abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("refereeStake"), 1e18 - 1, 1e18, 10e18)
        ];
        for (uint256 i = 0; i < calls.length; ++i) {
            bytes32 id = timelock.queue(targets[i], calls[i]);
            vm.warp(timelock.readyAt(id));
            vm.expectRevert(errors[i]);
            timelock.execute(targets[i], calls[i]);
            timelock.cancel(id);
        }
        assertEq(game.challengerBond(), 10e18, "bond unchanged");
        assertEq(panel.refereeStake(), 10e18, "referee stake unchanged");
        // the bounds themselves pass
        bytes[4] memory edges = [
            abi.encodeCall(game.setChallengerBond, (1e18)),
            abi.encodeCall(game.setChallengerBond, (100e18)),
            abi.encodeCall(panel.setRefereeStake, (1e18)),
            abi.encodeCall(panel.setRefereeStake, (10e18))
        ];
        for (uint256 i = 0; i < edges.length; ++i) {
            bytes32 id = timelock.queue(targets[i], edges[i]);
            vm.warp(timelock.readyAt(id));
            timelock.execute(targets[i], edges[i]);
        }
        assertEq(game.challengerBond(), 100e18, "upper bond bound applied");
        assertEq(panel.refereeStake(), 10e18, "upper referee stake bound applied");
    }

    function test_execute_tooEarly_reverts() public {
        bytes32 id = _queueWindows();
        uint256 ready = timelock.readyAt(id);
        vm.warp(ready - 1);
        vm.expectRevert(abi.encodeWithSelector(CallNotReady.selector, id, ready, ready - 1));
        timelock.execute(address(jobs), _windowsData());
        assertEq(jobs.defaultExecutionWindow(), 120, "not applied");
    }

    function test_execute_notQueued_reverts() public {
        bytes32 id = timelock.callId(address(jobs), _windowsData());
        vm.expectRevert(abi.encodeWithSelector(CallNotQueued.selector, id));
        timelock.execute(address(jobs), _windowsData());
    }

    function test_queue_twice_reverts() public {
        bytes32 id = _queueWindows();
        vm.expectRevert(abi.encodeWithSelector(CallAlreadyQueued.selector, id, timelock.readyAt(id)));
        _queueWindows();
    }

    function test_queue_targetWithoutCode_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(TargetHasNoCode.selector, address(0xC0FFEE)));
        timelock.queue(address(0xC0FFEE), _windowsData());
    }

    function test_adminActions_nonAdmin_reverts() public {
        bytes32 id = _queueWindows();
        vm.warp(timelock.readyAt(id));
        vm.startPrank(stranger);
        vm.expectRevert(abi.encodeWithSelector(NotTimelockAdmin.selector, stranger));
        timelock.queue(address(jobs), abi.encodeCall(jobs.setAssignmentTimeout, (5)));
        vm.expectRevert(abi.encodeWithSelector(NotTimelockAdmin.selector, stranger));
        timelock.execute(address(jobs), _windowsData());
        vm.expectRevert(abi.encodeWithSelector(NotTimelockAdmin.selector, stranger));
        timelock.cancel(id);
        vm.stopPrank();
        assertEq(jobs.defaultExecutionWindow(), 120, "not applied");
    }

    /// @dev The target's own error comes back (clients decode it) and the call stays queued.
    function test_execute_targetReverts_bubblesAndStaysQueued_reverts() public {
        bytes memory data = abi.encodeCall(registry.setLivenessWindow, (0));
        bytes32 id = timelock.queue(address(registry), data);
        vm.warp(timelock.readyAt(id));
        vm.expectRevert(
            abi.encodeWithSelector(ParameterOutOfRange.selector, bytes32("livenessWindow"), 0, 1, registry.MAX_PERIOD())
        );
        timelock.execute(address(registry), data);
        assertGt(timelock.readyAt(id), 0, "still queued");
    }

    // ---------------------------------------------------------------- the delay follows the unbonding period

    /// @dev A call queued before the unbonding period was raised waits for the raised period: a node that saw it
    ///      queued can still leave before it applies.
    function test_delay_tracksRaisedUnbondingPeriod_succeeds() public {
        uint256 t0 = block.timestamp;
        bytes32 windows = _queueWindows();
        bytes memory raise = abi.encodeCall(registry.setUnbondingPeriod, (20 days));
        bytes32 raiseId = timelock.queue(address(registry), raise);
        vm.warp(t0 + timelock.MIN_DELAY());
        timelock.execute(address(registry), raise);
        assertEq(uint256(registry.unbondingPeriod()), 20 days, "raised");
        assertEq(timelock.delay(), 20 days + timelock.MIN_MARGIN(), "delay follows");
        uint256 ready = t0 + 20 days + timelock.MIN_MARGIN();
        assertEq(timelock.readyAt(windows), ready, "queued call waits for the raised period");
        vm.expectRevert(abi.encodeWithSelector(CallNotReady.selector, windows, ready, block.timestamp));
        timelock.execute(address(jobs), _windowsData());
        vm.warp(ready);
        timelock.execute(address(jobs), _windowsData());
        assertEq(jobs.defaultExecutionWindow(), NEW_EXECUTION, "applied");
        vm.expectRevert(abi.encodeWithSelector(CallNotQueued.selector, raiseId));
        timelock.readyAt(raiseId);
    }

    /// @dev Lowering the period never shortens a call already queued (its eta at queue time still binds).
    function test_delay_loweredUnbondingKeepsQueuedEta_succeeds() public {
        vm.prank(address(timelock));
        registry.setUnbondingPeriod(10 days);
        bytes32 id = _queueWindows();
        uint256 eta = block.timestamp + 10 days + timelock.MIN_MARGIN();
        vm.prank(address(timelock));
        registry.setUnbondingPeriod(0);
        assertEq(timelock.readyAt(id), eta, "queued eta holds");
        vm.warp(eta - 1);
        vm.expectRevert(abi.encodeWithSelector(CallNotReady.selector, id, eta, eta - 1));
        timelock.execute(address(jobs), _windowsData());
    }

    function testFuzz_readyAt_afterUnbondingAndMargin_succeeds(uint64 period, uint32 wait) public {
        period = uint64(bound(period, 0, registry.MAX_PERIOD()));
        vm.prank(address(timelock));
        registry.setUnbondingPeriod(period);
        uint256 t0 = block.timestamp;
        bytes32 id = _queueWindows();
        uint256 ready = timelock.readyAt(id);
        assertLe(t0 + uint256(period) + timelock.MIN_MARGIN(), ready, "past unbonding + margin");
        assertLe(t0 + timelock.MIN_DELAY(), ready, "past the floor");
        uint256 at = t0 + bound(wait, 0, 40 days);
        vm.warp(at);
        if (at < ready) vm.expectRevert(abi.encodeWithSelector(CallNotReady.selector, id, ready, at));
        timelock.execute(address(jobs), _windowsData());
    }

    /// @dev What the delay is for: a node that sees the call queued leaves with its whole stake before it applies.
    function test_queuedChange_nodeLeavesFirst_succeeds() public {
        address node = _newNode(0, ROLE_SOLVER, NODE_STAKE);
        bytes32 id = _queueWindows();
        uint256 before = token.balanceOf(node);
        vm.prank(node);
        registry.leave();
        vm.warp(block.timestamp + registry.unbondingPeriod());
        vm.prank(node);
        registry.withdraw();
        assertEq(token.balanceOf(node) - before, NODE_STAKE, "stake back");
        assertLe(block.timestamp, timelock.readyAt(id) - timelock.MIN_MARGIN(), "left a margin before the change");
        assertEq(jobs.defaultExecutionWindow(), 120, "not applied yet");
    }

    // ---------------------------------------------------------------- cancel, admin

    function test_cancel_succeeds() public {
        bytes32 id = _queueWindows();
        vm.expectEmit(true, false, false, true, address(timelock));
        emit ITimelock.CallCancelled(id);
        timelock.cancel(id);
        vm.warp(block.timestamp + 60 days);
        vm.expectRevert(abi.encodeWithSelector(CallNotQueued.selector, id));
        timelock.execute(address(jobs), _windowsData());
        vm.expectRevert(abi.encodeWithSelector(CallNotQueued.selector, id));
        timelock.cancel(id);
        _queueWindows(); // queueable again
    }

    /// @dev The admin changes only through a queued call of the timelock itself (so the change waits the delay).
    function test_setAdmin_onlyThroughTheQueue_succeeds() public {
        vm.expectRevert(abi.encodeWithSelector(NotTimelockSelf.selector, address(this)));
        timelock.setAdmin(stranger);
        bytes memory data = abi.encodeCall(timelock.setAdmin, (stranger));
        bytes32 id = timelock.queue(address(timelock), data);
        vm.warp(timelock.readyAt(id));
        vm.expectEmit(true, true, false, true, address(timelock));
        emit ITimelock.AdminChanged(address(this), stranger);
        timelock.execute(address(timelock), data);
        assertEq(timelock.admin(), stranger, "new admin");
        vm.expectRevert(abi.encodeWithSelector(NotTimelockAdmin.selector, address(this)));
        timelock.queue(address(jobs), _windowsData());
    }
}
