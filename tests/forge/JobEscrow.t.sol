// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Test} from "./base/Test.sol";
import {VerityToken} from "../../contracts/VerityToken.sol";
import {JobEscrow} from "../../contracts/JobEscrow.sol";
import {IJobEscrow} from "../../contracts/interfaces/IJobEscrow.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {ZeroAddress} from "../../contracts/errors/CommonErrors.sol";
import {NotJobs, JobsAlreadySet, InsufficientEscrow} from "../../contracts/errors/JobEscrowErrors.sol";

/// @notice JobEscrow alone, with this test contract wired as its JobRegistry: access, arithmetic, conservation, and
///         pushed payments (pay sends the payee its tokens at once: no credit is left behind to withdraw).
contract JobEscrowTest is Test {
    VerityToken internal token;
    JobEscrow internal escrow;
    address internal submitter = address(0x5B);
    address internal alice = address(0xA11CE);
    address internal bob = address(0xB0B);

    function setUp() public {
        token = new VerityToken(address(this)); // the test is the minter, as the deployer is for a genesis distribution
        escrow = new JobEscrow(IERC20(address(token)));
        escrow.setJobs(address(this));
        token.mint(submitter, token.MAX_SUPPLY());
        vm.prank(submitter);
        token.approve(address(escrow), type(uint256).max);
    }

    function _assertConserved() internal view {
        assertEq(token.balanceOf(address(escrow)), escrow.totalEscrow(), "balance = books");
    }

    // ---------------------------------------------------------------- wiring

    function test_constructor_zeroToken_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(ZeroAddress.selector, bytes32("token")));
        new JobEscrow(IERC20(address(0)));
    }

    function test_setJobs_twice_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(JobsAlreadySet.selector, address(this)));
        escrow.setJobs(alice);
    }

    function test_setJobs_zero_reverts() public {
        JobEscrow e = new JobEscrow(IERC20(address(token)));
        vm.expectRevert(abi.encodeWithSelector(ZeroAddress.selector, bytes32("jobs")));
        e.setJobs(address(0));
    }

    function test_setJobs_notOwner_reverts() public {
        JobEscrow e = new JobEscrow(IERC20(address(token)));
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(Ownable.OwnableUnauthorizedAccount.selector, alice));
        e.setJobs(alice);
    }

    function test_setJobs_emits_succeeds() public {
        JobEscrow e = new JobEscrow(IERC20(address(token)));
        vm.expectEmit(true, false, false, true, address(e));
        emit IJobEscrow.JobsSet(alice);
        e.setJobs(alice);
        assertEq(e.jobs(), alice, "wired");
    }

    function test_unwired_nobodyMoves_reverts() public {
        JobEscrow e = new JobEscrow(IERC20(address(token)));
        vm.expectRevert(abi.encodeWithSelector(NotJobs.selector, address(this)));
        e.deposit(1, submitter, 1);
    }

    function test_onlyJobs_reverts() public {
        vm.startPrank(alice);
        vm.expectRevert(abi.encodeWithSelector(NotJobs.selector, alice));
        escrow.deposit(1, submitter, 1);
        vm.expectRevert(abi.encodeWithSelector(NotJobs.selector, alice));
        escrow.pay(1, alice, 1);
        vm.expectRevert(abi.encodeWithSelector(NotJobs.selector, alice));
        escrow.refund(1, alice);
        vm.stopPrank();
    }

    // ---------------------------------------------------------------- flows

    function test_deposit_pullsAndBooks_succeeds() public {
        vm.expectEmit(true, true, false, true, address(escrow));
        emit IJobEscrow.EscrowDeposited(7, submitter, 100e18);
        escrow.deposit(7, submitter, 100e18);
        assertEq(escrow.escrowOf(7), 100e18, "job escrow");
        assertEq(escrow.totalEscrow(), 100e18, "total");
        assertEq(token.balanceOf(address(escrow)), 100e18, "held");
    }

    function test_pay_sendsToPayeeAtOnce_succeeds() public {
        escrow.deposit(1, submitter, 100e18);
        uint256 aliceBefore = token.balanceOf(alice);
        uint256 heldBefore = token.balanceOf(address(escrow));
        uint256 totalBefore = escrow.totalEscrow();
        vm.expectEmit(true, true, false, true, address(escrow));
        emit IJobEscrow.PaymentSent(1, alice, 30e18);
        escrow.pay(1, alice, 30e18);
        assertEq(escrow.escrowOf(1), 70e18, "escrow left");
        assertEq(token.balanceOf(alice) - aliceBefore, 30e18, "payee received the payment");
        assertEq(heldBefore - token.balanceOf(address(escrow)), 30e18, "escrow sent it");
        assertEq(totalBefore - escrow.totalEscrow(), 30e18, "books shrank by it");
        _assertConserved();
    }

    /// @dev A payee needs no transaction of its own: payments from several jobs land in its balance as they are made.
    function test_pay_severalJobsToOnePayee_succeeds() public {
        escrow.deposit(1, submitter, 100e18);
        escrow.deposit(2, submitter, 50e18);
        uint256 before = token.balanceOf(alice);
        escrow.pay(1, alice, 40e18);
        assertEq(token.balanceOf(alice) - before, 40e18, "first payment received");
        escrow.pay(2, alice, 5e18);
        assertEq(token.balanceOf(alice) - before, 45e18, "second payment received");
        assertEq(escrow.escrowOf(1), 60e18, "job 1 left");
        assertEq(escrow.escrowOf(2), 45e18, "job 2 left");
        assertEq(escrow.totalEscrow(), 105e18, "total");
        _assertConserved();
    }

    function test_pay_notJobs_reverts() public {
        escrow.deposit(1, submitter, 100e18);
        uint256 before = token.balanceOf(alice);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(NotJobs.selector, alice));
        escrow.pay(1, alice, 1);
        vm.prank(submitter); // not even the payer of the escrow can pay it out
        vm.expectRevert(abi.encodeWithSelector(NotJobs.selector, submitter));
        escrow.pay(1, alice, 1);
        assertEq(token.balanceOf(alice), before, "nothing sent");
        assertEq(escrow.escrowOf(1), 100e18, "untouched");
        _assertConserved();
    }

    function test_pay_moreThanJobEscrow_reverts() public {
        escrow.deposit(1, submitter, 10e18);
        escrow.deposit(2, submitter, 100e18);
        uint256 before = token.balanceOf(alice);
        vm.expectRevert(abi.encodeWithSelector(InsufficientEscrow.selector, 1, 10e18, 11e18));
        escrow.pay(1, alice, 11e18); // another job's escrow is never touched
        assertEq(token.balanceOf(alice), before, "nothing sent");
        assertEq(escrow.escrowOf(2), 100e18, "the other job untouched");
        _assertConserved();
    }

    function test_pay_zeroAddress_reverts() public {
        escrow.deposit(1, submitter, 10e18);
        vm.expectRevert(abi.encodeWithSelector(ZeroAddress.selector, bytes32("to")));
        escrow.pay(1, address(0), 1);
        assertEq(escrow.escrowOf(1), 10e18, "untouched");
        _assertConserved();
    }

    function test_refund_returnsRest_succeeds() public {
        escrow.deposit(1, submitter, 100e18);
        escrow.pay(1, alice, 40e18);
        uint256 before = token.balanceOf(submitter);
        uint256 amount = escrow.refund(1, submitter);
        assertEq(amount, 60e18, "rest");
        assertEq(token.balanceOf(submitter) - before, 60e18, "sent");
        assertEq(escrow.escrowOf(1), 0, "emptied");
        assertEq(escrow.refund(1, submitter), 0, "nothing twice");
        _assertConserved();
    }


    // ---------------------------------------------------------------- burn (P10: forfeited payments)

    function test_burn_notJobs_reverts() public {
        escrow.deposit(1, submitter, 100e18);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(NotJobs.selector, alice));
        escrow.burn(1, 1);
        vm.prank(submitter); // not even the payer of the escrow can burn it
        vm.expectRevert(abi.encodeWithSelector(NotJobs.selector, submitter));
        escrow.burn(1, 1);
        assertEq(escrow.escrowOf(1), 100e18, "untouched");
    }

    function test_burn_unwired_reverts() public {
        JobEscrow e = new JobEscrow(IERC20(address(token)));
        vm.expectRevert(abi.encodeWithSelector(NotJobs.selector, address(this)));
        e.burn(1, 0);
    }

    function test_burn_shrinksBooksAndSupply_succeeds() public {
        escrow.deposit(1, submitter, 100e18);
        escrow.pay(1, alice, 10e18);
        uint256 supply = token.totalSupply();
        uint256 burned = token.totalBurned();
        uint256 aliceBefore = token.balanceOf(alice);
        vm.expectEmit(true, false, false, true, address(escrow));
        emit IJobEscrow.EscrowBurned(1, 30e18);
        escrow.burn(1, 30e18);
        assertEq(escrow.escrowOf(1), 60e18, "job escrow");
        assertEq(escrow.totalEscrow(), 60e18, "total escrow");
        assertEq(token.balanceOf(alice), aliceBefore, "a sent payment is untouched");
        assertEq(supply - token.totalSupply(), 30e18, "supply fell by the burn");
        assertEq(token.totalBurned() - burned, 30e18, "counted as burned");
        assertEq(token.balanceOf(address(escrow)), 60e18, "held: the escrow alone");
        _assertConserved();
    }

    function test_burn_moreThanJobEscrow_reverts() public {
        escrow.deposit(1, submitter, 10e18);
        escrow.deposit(2, submitter, 100e18);
        vm.expectRevert(abi.encodeWithSelector(InsufficientEscrow.selector, 1, 10e18, 11e18));
        escrow.burn(1, 11e18); // another job's escrow is never burned
        escrow.pay(1, alice, 4e18);
        vm.expectRevert(abi.encodeWithSelector(InsufficientEscrow.selector, 1, 6e18, 10e18));
        escrow.burn(1, 10e18); // payments already sent out of the job are not its escrow any more
        escrow.burn(1, 6e18);
        assertEq(escrow.escrowOf(1), 0, "emptied");
        assertEq(escrow.escrowOf(2), 100e18, "the other job untouched");
        assertEq(escrow.refund(1, submitter), 0, "nothing left to refund");
        _assertConserved();
    }

    function testFuzz_burn_neverExceedsJob_succeeds(uint96 depositedSeed, uint96 askedSeed) public {
        uint256 deposited = bound(depositedSeed, 0, token.MAX_SUPPLY());
        uint256 asked = bound(askedSeed, 0, 2 * token.MAX_SUPPLY());
        escrow.deposit(1, submitter, deposited);
        uint256 supply = token.totalSupply();
        if (asked > deposited) {
            vm.expectRevert(abi.encodeWithSelector(InsufficientEscrow.selector, 1, deposited, asked));
            escrow.burn(1, asked);
            assertEq(token.totalSupply(), supply, "nothing burned");
        } else {
            escrow.burn(1, asked);
            assertEq(escrow.escrowOf(1), deposited - asked, "books");
            assertEq(supply - token.totalSupply(), asked, "supply");
        }
        _assertConserved();
    }

    // ---------------------------------------------------------------- fuzz

    /// @dev Any sequence of deposits, payments, refunds and burns over three jobs and two payees keeps
    ///      balance == totalEscrow, every job's escrow equals its deposits minus what left it, and each payee's balance
    ///      grows by exactly what it was paid.
    function testFuzz_conservation_anySequence_succeeds(uint256 seed) public {
        uint256[3] memory expected;
        address[2] memory payees = [alice, bob];
        uint256[2] memory paid;
        uint256[2] memory payeesBefore = [token.balanceOf(alice), token.balanceOf(bob)];
        for (uint256 i = 0; i < 24; ++i) {
            uint256 r = uint256(keccak256(abi.encode(seed, i)));
            uint256 job = r % 3;
            uint256 op = (r >> 8) % 4;
            uint256 amount = (r >> 16) % 1_000e18;
            if (op == 0) {
                escrow.deposit(job, submitter, amount);
                expected[job] += amount;
            } else if (op == 1) {
                uint256 pay = expected[job] == 0 ? 0 : amount % (expected[job] + 1);
                uint256 who = (r >> 200) & 1;
                escrow.pay(job, payees[who], pay);
                expected[job] -= pay;
                paid[who] += pay;
            } else if (op == 2) {
                assertEq(escrow.refund(job, submitter), expected[job], "refund = rest");
                expected[job] = 0;
            } else {
                uint256 burn = expected[job] == 0 ? 0 : amount % (expected[job] + 1);
                escrow.burn(job, burn);
                expected[job] -= burn;
            }
            _assertConserved();
            assertEq(escrow.escrowOf(job), expected[job], "job books");
            assertEq(token.balanceOf(alice) - payeesBefore[0], paid[0], "alice holds what she was paid");
            assertEq(token.balanceOf(bob) - payeesBefore[1], paid[1], "bob holds what he was paid");
        }
        assertEq(escrow.totalEscrow(), expected[0] + expected[1] + expected[2], "total escrow");
    }

    function testFuzz_pay_neverExceedsJob_succeeds(uint96 depositedSeed, uint96 askedSeed) public {
        uint256 deposited = bound(depositedSeed, 0, token.MAX_SUPPLY()); // every token that can exist
        uint256 asked = bound(askedSeed, 0, 2 * token.MAX_SUPPLY());
        escrow.deposit(1, submitter, deposited);
        uint256 before = token.balanceOf(alice);
        if (asked > deposited) {
            vm.expectRevert(abi.encodeWithSelector(InsufficientEscrow.selector, 1, deposited, asked));
        }
        escrow.pay(1, alice, asked);
        uint256 sent = asked > deposited ? 0 : asked;
        assertEq(token.balanceOf(alice) - before, sent, "payee got exactly the payment, or nothing");
        assertEq(escrow.escrowOf(1), deposited - sent, "books");
        _assertConserved();
    }
}
