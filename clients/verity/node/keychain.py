"""A verifier's fee key chain (P5, "looking pays"): the private epoch keys its fee tickets come from.

VerificationFees pays a verifier for a blind check of a task only if its ticket for the task,
keccak(k_e, taskId), is below the job's rate, where k_e is the verifier's key for the task's creation
epoch e. The keys form a hash chain anchored on-chain:

    head = keccak^N(seed)            anchored with `anchor(head)` in epoch A (the contract records A)
    k_e  = keccak^(N - (e - A))(seed)     for A < e <= A + N,  so  keccak^(e - A)(k_e) == head

Why a chain: a key must be fixed before the tasks it decides exist (else the verifier grinds keys
until its tickets win) and unknowable to everyone else until the verifier acts (else a solver knows
which tasks no verifier is paid to check and cheats exactly there). Anchoring the head fixes every
later key (ungrindable: a preimage of a committed hash is the only key the contract accepts), and
keccak's preimage resistance keeps k_e secret while k_{e-1} = keccak(k_e) and older keys are public.
The contract lets k_e be revealed (claimed with) only from epoch e + 2, when every task it decides
has had its execution epoch; a verifier claims its epochs in order, each claim moving the chain to
(k_e, e).

Seed. Derived from the node's existing sampling key (verity.node.sampling, `sampling.key`, 0600) and
the chain's generation, never the key itself: `chain_seed(key, generation)`. Two reasons: the last
key of a chain, k_{A+N}, is the seed itself, and the sampling key must never be revealed (it also
keys the private watch lottery); and a chain re-anchored after it ran out must not reuse keys the
old chain already revealed (same seed, same head, same keys: every future ticket would be public).
The generation is the epoch the node read just before anchoring (the contract's anchor epoch, or
one or two before it when the transaction crossed an epoch boundary), so nothing new is persisted:
`find_chain` recognises the node's own on-chain chain from the sampling key alone.

Cost: one key is up to N = 10_000 keccaks (~0.1 s). `KeyChain` caches every key it computed and
checkpoints along the way, so keys of later epochs (preimages: they must be walked down from the
seed) start from the nearest checkpoint instead of rehashing the whole chain per task.
"""
from __future__ import annotations

from functools import lru_cache

from eth_utils import keccak

# Epochs one chain serves (the contract allows any length whose gaps stay <= MAX_EPOCH_GAP = 20_000). With the
# devnet's 30 s epochs a chain lasts ~3.5 days; with one-hour epochs, ~14 months. A node re-anchors before its
# chain runs out (`ANCHOR_MARGIN` epochs before, verity.node.auditor).
N = 10_000
CHECKPOINT_EVERY = 128  # keys kept while walking down the chain: a later epoch's key costs at most this many hashes
SEED_DOMAIN = b"verity:fee-key-chain:v1"
ZERO32 = b"\0" * 32


def _check_seed(seed: bytes) -> bytes:
    seed = bytes(seed)
    if len(seed) != 32:
        raise ValueError(f"a key chain seed is 32 bytes, not {len(seed)}")
    return seed


def hash_n(value: bytes, times: int) -> bytes:
    """keccak^times(value), each step hashing the previous 32 bytes (Solidity's keccak256(abi.encodePacked(h)))."""
    if times < 0:
        raise ValueError(f"cannot hash a negative number of times ({times})")
    h = bytes(value)
    for _ in range(times):
        h = keccak(h)
    return h


def chain_seed(sampling_key: bytes, generation: int) -> bytes:
    """The seed of the node's chain of `generation` (see the module docstring): keccak(domain || key || uint256 g)."""
    if len(bytes(sampling_key)) != 32:
        raise ValueError(f"the sampling key is 32 bytes, not {len(bytes(sampling_key))}")
    if generation < 0:
        raise ValueError(f"a chain generation is an epoch number >= 0, not {generation}")
    return keccak(SEED_DOMAIN + bytes(sampling_key) + int(generation).to_bytes(32, "big"))


@lru_cache(maxsize=8)
def head(seed: bytes) -> bytes:
    """The value to anchor: keccak^N(seed)."""
    return hash_n(_check_seed(seed), N)


class KeyChain:
    """The keys of one anchored chain (`seed`, anchored in `anchor_epoch`), computed once each."""

    def __init__(self, seed: bytes, anchor_epoch: int):
        if anchor_epoch < 0:
            raise ValueError(f"an anchor epoch is >= 0, not {anchor_epoch}")
        self.seed, self.anchor_epoch = _check_seed(seed), int(anchor_epoch)
        self._by_power: dict[int, bytes] = {0: self.seed}  # power p -> keccak^p(seed): checkpoints and keys served

    @property
    def last_epoch(self) -> int:
        """The last epoch this chain has a key for."""
        return self.anchor_epoch + N

    def covers(self, epoch: int) -> bool:
        return self.anchor_epoch < epoch <= self.last_epoch

    def head(self) -> bytes:
        return head(self.seed)

    def key(self, epoch: int) -> bytes:
        """k_epoch = keccak^(N - (epoch - anchor))(seed); ValueError outside (anchor, anchor + N]."""
        epoch = int(epoch)
        if not self.covers(epoch):
            raise ValueError(f"epoch {epoch} is outside the key chain anchored in epoch {self.anchor_epoch} "
                             f"(it serves epochs {self.anchor_epoch + 1}..{self.last_epoch})")
        power = N - (epoch - self.anchor_epoch)
        if power in self._by_power:
            return self._by_power[power]
        start = max(p for p in self._by_power if p < power)  # the nearest known key below (0: the seed)
        h = self._by_power[start]
        for p in range(start + 1, power + 1):
            h = keccak(h)
            if p % CHECKPOINT_EVERY == 0:
                self._by_power[p] = h
        self._by_power[power] = h
        return h


@lru_cache(maxsize=8)
def _chain(seed: bytes, anchor_epoch: int) -> KeyChain:
    return KeyChain(seed, anchor_epoch)


def epoch_key(seed: bytes, anchor_epoch: int, e: int) -> bytes:
    """The key for epoch `e` of the chain `seed` anchored in `anchor_epoch` (cached per chain and epoch)."""
    return _chain(_check_seed(seed), int(anchor_epoch)).key(e)


def find_chain(sampling_key: bytes, last_key: bytes, last_epoch: int, anchor_epoch: int,
               slack: int = 2) -> KeyChain | None:
    """Our chain as the contract holds it (`chainOf(me)`: lastKey, lastEpoch, anchorEpoch), or None when the chain
    on-chain is not one of ours (none anchored, or anchored from another sampling key).

    Tries the generations the node may have used for that anchor (`anchor_epoch - slack` .. `anchor_epoch`) and
    accepts the one whose key for `last_epoch` is `last_key` (its head while nothing was claimed)."""
    if bytes(last_key) == ZERO32 or not anchor_epoch <= last_epoch <= anchor_epoch + N:
        return None
    for generation in range(int(anchor_epoch), max(-1, int(anchor_epoch) - slack - 1), -1):
        chain = _chain(chain_seed(sampling_key, generation), int(anchor_epoch))
        known = chain.head() if last_epoch == anchor_epoch else chain.key(last_epoch)
        if known == bytes(last_key):
            return chain
    return None
