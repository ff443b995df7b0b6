// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Fixture} from "../base/Fixture.sol";
import {Handler} from "./Handler.sol";
import {System, Actors} from "./HandlerBase.sol";
import {ineligibleDeclaration} from "./AdversarySide.sol";
import {ROLE_SOLVER, ROLE_VERIFIER} from "../../../contracts/types/VerityTypes.sol";

/// @notice The system and the actors every invariant suite drives: honest nodes, a heavy adversary, a pool of funded
///         sybil identities (unregistered until they act), heavy identities no posted job accepts, and a griefing
///         poster; plus a scripted drive over every handler action for the coverage and mutation tests.
abstract contract InvariantSetup is Fixture {
    uint256 internal constant HONEST_NODES = 10;
    uint256 internal constant ADV_NODES = 3;
    uint256 internal constant SYBILS = 12;
    uint256 internal constant SYBIL_FUNDS = 1_000e18;
    uint256 internal constant INELIGIBLE_NODES = 4;
    uint256 internal constant INELIGIBLE_STAKE = 5_000e18;
    string internal constant INELIGIBLE_ADDR = "/ip4/127.0.0.1/tcp/4001/p2p/QmHeavy";

    Handler internal handler;
    address internal griefer = address(0x6B);
    address[] internal honestNodes;
    address[] internal advNodes;
    address[] internal sybilNodes;
    address[] internal ineligibleNodes;
    /// @dev Nodes registered by setUp (the registry's count moves only with the handler's registrations since).
    uint256 internal setupNodeCount;

    function setUp() public virtual override {
        super.setUp();
        for (uint256 i = 0; i < HONEST_NODES; ++i) {
            honestNodes.push(_newNode(i, ALL_ROLES, NODE_STAKE));
        }
        // The adversary stakes heavily so that it often holds both replicas of a task (collusion).
        for (uint256 i = 0; i < ADV_NODES; ++i) {
            advNodes.push(_newNode(HONEST_NODES + i, ROLE_SOLVER | ROLE_VERIFIER, 3 * NODE_STAKE));
        }
        for (uint256 i = 0; i < SYBILS; ++i) {
            sybilNodes.push(_fundIdentity(address(uint160(0x20000 + i)), SYBIL_FUNDS));
        }
        for (uint256 i = 0; i < INELIGIBLE_NODES; ++i) {
            ineligibleNodes.push(_ineligibleNode(i));
        }
        token.mint(griefer, FAUCET);
        vm.prank(griefer);
        token.approve(address(escrow), type(uint256).max);
        setupNodeCount = registry.nodeCount();
        handler = _newHandler(0);
        targetContract(address(handler));
    }

    /// @dev A funded identity that approved the registry and the game, counted in `nodes`, not registered.
    function _fundIdentity(address who, uint256 amount) internal returns (address) {
        token.mint(who, amount);
        vm.startPrank(who);
        token.approve(address(registry), type(uint256).max);
        token.approve(address(game), type(uint256).max);
        vm.stopPrank();
        nodes.push(who);
        return who;
    }

    /// @dev A registered identity with INELIGIBLE_STAKE whose declaration no posted job accepts.
    function _ineligibleNode(uint256 i) internal returns (address node) {
        node = _fundIdentity(address(uint160(0x30000 + i)), INELIGIBLE_STAKE);
        (uint8 roles, uint32 memoryMb, uint32 profiles) = ineligibleDeclaration(i);
        vm.startPrank(node);
        registry.register(roles, 0, memoryMb, 100, profiles, INELIGIBLE_ADDR);
        registry.stake(INELIGIBLE_STAKE - registry.MIN_REGISTRATION_STAKE());
        registry.heartbeat(); // registering is not a check-in: drawn only after one
        vm.stopPrank();
        _nextEpoch();
    }

    function _newHandler(uint8 sabotage) internal returns (Handler) {
        return new Handler(
            System(token, registry, randomness, escrow, jobs, panel, game, owner, submitter),
            Actors(honestNodes, advNodes, sybilNodes, ineligibleNodes, griefer),
            sabotage
        );
    }

    function _idx(address node) internal view returns (uint256) {
        for (uint256 i = 0; i < nodes.length; ++i) {
            if (nodes[i] == node) return i;
        }
        revert("unknown node");
    }

    /// @dev The action mixes a drive picks from: entry `seed % length` is the id `_act` dispatches on. CORE_MIX drives
    ///      the protocol paths of InvariantsTest; ALL_MIX adds the issue-9 adversaries and the owner. Keep both
    ///      byte-for-byte: the coverage tests' seeds were chosen for these exact sequences.
    bytes internal constant CORE_MIX = hex"00_01_01_02_03_04_05_06_07_07_08_09_0a_0b_0c_0d";
    bytes internal constant ALL_MIX = hex"00_01_01_02_03_04_05_06_07_08_09_0a_0b_0c_0d_0e_0f_10_10_11_12_13_0e_14_15";

    /// @dev One handler action: `action` is an id of the mixes above, `a` the pseudo-random argument word.
    function _act(uint8 action, uint256 a) internal {
        if (action == 0) handler.postJob(uint8(a), a % 2 == 0, uint8(a >> 8), uint8(a >> 16));
        else if (action == 1) handler.work(a);
        else if (action == 2) handler.finalize(a);
        else if (action == 3) handler.sybilChallenge(a, a >> 8);
        else if (action == 4) handler.honestChallenge(a);
        else if (action == 5) handler.dispute(a);
        else if (action == 6) handler.panelAct(a);
        else if (action == 7) handler.warp(uint16(a), a >> 16);
        else if (action == 8) handler.tick(uint16(a), a >> 16);
        else if (action == 9) handler.reportLate(a, a % 2 == 0);
        else if (action == 10) handler.setParams(uint8(a), a >> 8, a >> 80);
        else if (action == 11) handler.withdrawStake(a); // was withdrawCredits: the game and the panel pay at once now
        else if (action == 12) handler.openContest(a);
        else if (action == 13) handler.assign(a);
        else if (action == 14) handler.griefPost(a % 2 == 0, (a >> 1) % 2 == 0, (a >> 2) % 2 == 0, uint8(a >> 3));
        else if (action == 15) handler.advDecline(a, a % 2 == 0);
        else if (action == 16) handler.sybilRegister(a, uint8(a >> 8), uint96(a >> 16));
        else if (action == 17) handler.sybilLeave(a, uint96(a >> 8));
        else if (action == 18) handler.sybilWithdraw(a);
        else if (action == 19) handler.ineligibleRedeclare(a, uint8(a >> 8));
        else if (action == 20 && a % 8 == 0) handler.cancel(a);
        else if (action == 20) handler.unstake(a, uint96(a >> 8));
        else if (action == 21) handler.keeperDraws(a);
        else if (action == 22) handler.nudgeBeforeDraw(a, a >> 8, uint96(a >> 16), uint8(a >> 112));
        else revert("unknown action id in a drive mix");
    }

    /// @dev `steps` pseudo-random actions from `mix`, the chain of seeds starting at `seed`.
    function _driveMany(bytes memory mix, uint256 seed, uint256 steps) internal {
        for (uint256 i = 0; i < steps; ++i) {
            seed = uint256(keccak256(abi.encode(seed, i)));
            _act(uint8(mix[seed % mix.length]), seed >> 8);
        }
    }

    /// @dev Drives `mix` from `seed` until `check` fails for the reason it is about (its message contains `expected`;
    ///      "" takes any failure): a mutation the invariant must catch. Fails if it never does, or fails for another
    ///      reason.
    function _driveUntilCaught(
        bytes memory mix,
        uint256 seed,
        function() external view check,
        uint256 steps,
        string memory expected
    ) internal {
        for (uint256 i = 0; i < steps; ++i) {
            seed = uint256(keccak256(abi.encode(seed, i)));
            _act(uint8(mix[seed % mix.length]), seed >> 8);
            if (_caught(check, expected)) return;
        }
        fail("the invariant never caught the mutation");
    }

    /// @dev Every action (ALL_MIX) from seed 11 until `check` fails for the reason `expected` names.
    function _driveAllUntilFails(function() external view check, uint256 steps, string memory expected) internal {
        _driveUntilCaught(ALL_MIX, 11, check, steps, expected);
    }

    /// @dev Whether `check` fails now; a failure whose message lacks `expected` fails the test. A failure without a
    ///      message (a panic) counts only where any failure does (`expected` is "").
    function _caught(function() external view check, string memory expected) internal view returns (bool) {
        try check() {
            return false;
        } catch Error(string memory reason) {
            assertTrue(_contains(reason, expected), string.concat("caught for another reason: ", reason));
            return true;
        } catch {
            assertTrue(bytes(expected).length == 0, "caught by a failure without a message");
            return true;
        }
    }

    function _contains(string memory s, string memory part) internal pure returns (bool) {
        bytes memory a = bytes(s);
        bytes memory b = bytes(part);
        for (uint256 i = 0; i + b.length <= a.length; ++i) {
            bool same = true;
            for (uint256 j = 0; j < b.length && same; ++j) {
                same = a[i + j] == b[j];
            }
            if (same) return true;
        }
        return false;
    }
}
