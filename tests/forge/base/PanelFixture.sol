// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {Test} from "./Test.sol";
import {MockPanelGame} from "./MockPanelGame.sol";
import {VerityToken} from "../../../contracts/VerityToken.sol";
import {NodeRegistry} from "../../../contracts/NodeRegistry.sol";
import {NodeLens} from "../../../contracts/NodeLens.sol";
import {BlockhashRandomness} from "../../../contracts/BlockhashRandomness.sol";
import {RefereePanel} from "../../../contracts/RefereePanel.sol";
import {IVerityToken} from "../../../contracts/interfaces/IVerityToken.sol";
import {INodeRegistry} from "../../../contracts/interfaces/INodeRegistry.sol";
import {IRandomness} from "../../../contracts/interfaces/IRandomness.sol";
import {IRefereePanel} from "../../../contracts/interfaces/IRefereePanel.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {
    PanelRequest, PanelPhase, ROLE_REFEREE, ROLE_VERIFIER, SELECTION_EPOCH_BLOCKS
} from "../../../contracts/types/VerityTypes.sol";

/// @notice Cheatcodes this suite needs beyond base/Vm.sol.
interface VmPanel {
    function setBlockhash(uint256 blockNumber, bytes32 blockHash) external;
    function snapshotState() external returns (uint256 snapshotId);
    function revertToState(uint256 snapshotId) external returns (bool success);
}

/// @notice Token, registry, randomness and a panel wired to a MockPanelGame; staked referees; vote helpers.
abstract contract PanelFixture is Test {
    uint256 internal constant FAUCET = 1_000_000e18;
    uint256 internal constant NODE_STAKE = 1_000e18;
    uint256 internal constant REF_STAKE = 10e18;
    uint256 internal constant REWARD = 30e18;
    uint64 internal constant DELAY = 3;
    bytes32 internal constant CLAIM_A = keccak256("claim A");
    bytes32 internal constant CLAIM_B = keccak256("claim B");
    bytes32 internal constant CLAIM_X = keccak256("a third value");
    string internal constant MULTIADDR = "/ip4/127.0.0.1/tcp/4001/p2p/QmNode";

    VmPanel internal constant vmx = VmPanel(address(uint160(uint256(keccak256("hevm cheat code")))));

    VerityToken internal token;
    NodeRegistry internal registry;
    NodeLens internal lens;
    BlockhashRandomness internal randomness;
    RefereePanel internal panel;
    MockPanelGame internal game;
    address internal partyA = address(0xA11CE);
    address internal partyB = address(0xB0B);
    address internal coDefender = address(0xC0DE);
    address[] internal referees;

    function setUp() public virtual {
        vm.warp(1_700_000_000);
        vm.roll(1_000);
        token = new VerityToken(address(this)); // the test is the minter, as the deployer is for a genesis distribution
        registry = new NodeRegistry(IERC20(address(token)));
        lens = new NodeLens(address(registry));
        randomness = new BlockhashRandomness(DELAY);
        panel = new RefereePanel(
            IVerityToken(address(token)), INodeRegistry(address(registry)), IRandomness(address(randomness))
        );
        game = new MockPanelGame(IERC20(address(token)), IRefereePanel(address(panel)));
        registry.setProtocol(address(panel), true);
        panel.setGame(address(game));
        token.mint(address(game), FAUCET);
        game.setReward(REWARD, 0);
        // The parties are staked referees too: only the exclusion list keeps them off their own panel.
        _register(partyA);
        _register(partyB);
        _register(coDefender);
        _addReferees(6);
    }

    // ---------------------------------------------------------------- nodes

    function _register(address node) internal {
        token.mint(node, FAUCET);
        vm.startPrank(node);
        token.approve(address(registry), type(uint256).max);
        registry.register(ROLE_REFEREE | ROLE_VERIFIER, 0, 16_000, 100, 3, MULTIADDR); // pulls the minimum stake
        registry.stake(NODE_STAKE - registry.MIN_REGISTRATION_STAKE());
        registry.heartbeat(); // registering is not a check-in: drawn only after one
        vm.stopPrank();
        _walletAtRegistration[node] = token.balanceOf(node);
        _registered[node] = true;
        _nextEpoch();
    }

    /// @dev A registered node's wallet right after registering: only the panel pays into it afterwards.
    mapping(address => uint256) private _walletAtRegistration;
    mapping(address => bool) private _registered;

    /// @dev What the panel has paid `node` so far (it pays rewards at once: there are no credits to read).
    function _paid(address node) internal view returns (uint256) {
        require(_registered[node], "_paid: not a registered node");
        return token.balanceOf(node) - _walletAtRegistration[node];
    }

    /// @dev Rolls to the next selection epoch's first block: draws read the weights as their epoch began.
    function _nextEpoch() internal {
        vm.roll((block.number / SELECTION_EPOCH_BLOCKS + 1) * SELECTION_EPOCH_BLOCKS);
    }

    function _addReferees(uint256 count) internal {
        uint256 start = referees.length;
        for (uint256 i = 0; i < count; ++i) {
            address r = address(uint160(0x20000 + start + i));
            vm.label(r, string.concat("referee", vm.toString(start + i)));
            _register(r);
            referees.push(r);
        }
    }

    function _heartbeatAll() internal {
        for (uint256 i = 0; i < referees.length; ++i) {
            vm.prank(referees[i]);
            registry.heartbeat();
        }
    }

    function _locked(address node) internal view returns (uint256) {
        return registry.getNode(node).locked;
    }

    function _stake(address node) internal view returns (uint256) {
        return registry.getNode(node).stake;
    }

    // ---------------------------------------------------------------- panels

    function _request() internal view returns (PanelRequest memory r) {
        r.claimA = CLAIM_A;
        r.claimB = CLAIM_B;
        r.parties = [partyA, partyB, coDefender];
        r.deviceClass = 0;
        r.minMemoryMb = 1_000;
        r.profileBit = 1;
    }

    function _open(uint256 id) internal {
        game.open(id, _request());
    }

    function _panel(uint256 id) internal view returns (RefereePanel.Panel memory) {
        return panel.panelOf(id);
    }

    function _target(uint256 id) internal view returns (uint64) {
        return randomness.targetOf(_panel(id).requestId);
    }

    /// @dev Mines up to the first block in which the panel's randomness is readable.
    function _rollToReady(uint256 id) internal {
        uint256 requestId = _panel(id).requestId;
        if (randomness.isStale(requestId)) randomness.renew(requestId); // the test rolled past its epoch
        uint64 target = _target(id);
        if (block.number <= target) vm.roll(target + 1);
    }

    function _seat(uint256 id) internal returns (address[] memory) {
        _rollToReady(id);
        panel.seat(id);
        return _panel(id).seats;
    }

    function _openAndSeat(uint256 id) internal returns (address[] memory seats) {
        _open(id);
        seats = _seat(id);
        assertTrue(_panel(id).phase == PanelPhase.Committing, "panel not committing");
    }

    // ---------------------------------------------------------------- votes

    function _salt(address referee) internal pure returns (bytes32) {
        return keccak256(abi.encode("salt", referee));
    }

    function _commitment(uint256 id, bytes32 vote, address referee) internal pure returns (bytes32) {
        return keccak256(abi.encode(id, vote, _salt(referee), referee));
    }

    function _commit(uint256 id, address referee, bytes32 vote) internal {
        vm.prank(referee);
        panel.commitVote(id, _commitment(id, vote, referee));
    }

    function _reveal(uint256 id, address referee, bytes32 vote) internal {
        vm.prank(referee);
        panel.revealVote(id, vote, _salt(referee));
    }

    /// @dev Every seat commits `votes[i]`, then every seat reveals (the last reveal decides).
    function _vote(uint256 id, bytes32[] memory votes) internal {
        address[] memory seats = _panel(id).seats;
        for (uint256 i = 0; i < seats.length; ++i) {
            _commit(id, seats[i], votes[i]);
        }
        for (uint256 i = 0; i < seats.length; ++i) {
            _reveal(id, seats[i], votes[i]);
        }
    }

    function _votes3(bytes32 a, bytes32 b, bytes32 c) internal pure returns (bytes32[] memory v) {
        v = new bytes32[](3);
        (v[0], v[1], v[2]) = (a, b, c);
    }

    function _isParty(address a) internal view returns (bool) {
        return a == partyA || a == partyB || a == coDefender;
    }
}
