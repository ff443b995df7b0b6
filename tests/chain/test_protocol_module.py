"""verity.chain.protocol is the one Python mirror of the protocol: it must agree with the contracts.

- enums and constants against contracts/types/VerityTypes.sol (parsed; no chain needed);
- struct builders' field order against VerityTypes.sol and the compiled ABI (ape's project);
- the commitment encodings against an independent word-by-word abi.encode, and the escrow formula against
  JobRegistry.escrowFor on a chain. (tests/chain's commit/reveal, challenge and vote flows check each
  commitment against the contract that recomputes it: a mismatch reverts the reveal.)
- no other module defines a protocol enum again.
"""
from __future__ import annotations

import re
from enum import IntEnum
from pathlib import Path

import pytest
from eth_hash.auto import keccak

from verity.chain import protocol
from verity.chain.protocol import (
    DECLINE_GRACE_BPS, FAIL_DECLINES, POSTER_BOND, PinpointProof, PostJobParams, challenge_commitment, check_commitment, escrow_for, fee_sampled, fee_ticket, replica_commitment, vote_commitment,
)

ROOT = Path(__file__).resolve().parents[2]
TYPES = ROOT / "contracts" / "types" / "VerityTypes.sol"


def _source() -> str:
    text = TYPES.read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _snake(name: str) -> str:
    """Solidity's CamelCase member -> protocol.py's UPPER_SNAKE (ChallengerWins -> CHALLENGER_WINS, Bisect0 -> BISECT0)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


def _enums() -> dict[str, list[str]]:
    return {m.group(1): [x.strip() for x in m.group(2).split(",") if x.strip()]
            for m in re.finditer(r"\benum\s+(\w+)\s*\{([^}]*)\}", _source())}


def _structs() -> dict[str, list[str]]:
    out = {}
    for m in re.finditer(r"\bstruct\s+(\w+)\s*\{([^}]*)\}", _source()):
        out[m.group(1)] = [decl.split()[-1] for decl in (d.strip() for d in m.group(2).split(";")) if decl]
    return out


def _constants() -> dict[str, int]:
    return {m.group(2): int(m.group(3).replace("_", ""), 0)
            for m in re.finditer(r"\b(u?int\d*)\s+constant\s+(\w+)\s*=\s*([0-9xa-fA-F_]+)\s*;", _source())}


def test_protocol_enums_match_verity_types_succeeds():
    enums = _enums()
    assert set(enums) == {"JobStatus", "TaskKind", "TaskStatus", "ReplicaStatus", "DisputePhase", "DisputeOutcome",
                          "Verdict", "PanelPhase"}
    for name, members in enums.items():
        mirror = getattr(protocol, name)
        assert issubclass(mirror, IntEnum), name
        assert [(m.name, m.value) for m in mirror] == [(_snake(x), i) for i, x in enumerate(members)], name


def test_protocol_constants_match_verity_types_succeeds():
    constants = _constants()
    assert {"ROLE_SOLVER", "ROLE_VERIFIER", "ROLE_REFEREE", "DEVICE_CPU", "DEVICE_CUDA", "PROFILE_CPU_F32_STRICT",
            "PROFILE_CUDA_F32_STRICT", "PROFILE_PORTABLE_F32", "BPS"} <= set(constants)
    for name, value in constants.items():
        assert getattr(protocol, name) == value, name
    assert protocol.PROFILE_BITS == {"cpu-f32-strict": constants["PROFILE_CPU_F32_STRICT"],
                                     "cuda-f32-strict": constants["PROFILE_CUDA_F32_STRICT"],
                                     "portable-f32": constants["PROFILE_PORTABLE_F32"]}


def test_struct_builders_match_verity_types_field_order_succeeds():
    structs = _structs()
    assert list(PostJobParams._fields) == structs["PostJobParams"]
    assert list(PinpointProof._fields) == structs["PinpointProof"]


def test_views_reexport_protocol_enums_succeeds():
    from verity.chain import views

    for name in _enums():
        assert getattr(views, name) is getattr(protocol, name)


def test_no_other_module_defines_a_protocol_enum_succeeds():
    pattern = re.compile(r"^\s*class\s+(" + "|".join(_enums()) + r")\s*\(", re.M)
    offenders = []
    for folder in ("clients", "scripts", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == Path(protocol.__file__).resolve() or ".venv" in path.parts:
                continue
            if pattern.search(path.read_text(errors="replace")):
                offenders.append(str(path.relative_to(ROOT)))
    assert offenders == [], "import the enums from verity.chain.protocol instead"


# ---------------------------------------------------------------- encodings


def _word(value) -> bytes:
    if isinstance(value, int):
        return value.to_bytes(32, "big")
    if isinstance(value, str):  # address
        return bytes.fromhex(value.removeprefix("0x")).rjust(32, b"\0")
    return bytes(value).rjust(32, b"\0")


ADDR = "0x" + "ab" * 20


@pytest.mark.parametrize("seed", [1, 2])
def test_commitment_encodings_are_abi_encode_of_their_words_succeeds(seed):
    root, final, salt, cid, vote = (keccak(bytes([seed, i])) for i in range(5))
    assert replica_commitment(root, final, cid, ADDR) == keccak(b"".join(map(_word, (root, final, cid, ADDR))))
    assert challenge_commitment(7, root, final, cid, salt, ADDR) == keccak(
        b"".join(map(_word, (7, root, final, cid, salt, ADDR))))
    assert vote_commitment(3, vote, salt, ADDR) == keccak(b"".join(map(_word, (3, vote, salt, ADDR))))
    # Every field binds: another challenger, task or dispute makes another commitment (P6, P7).
    other = "0x" + "cd" * 20
    assert challenge_commitment(7, root, final, cid, salt, other) != challenge_commitment(7, root, final, cid, salt, ADDR)
    assert challenge_commitment(8, root, final, cid, salt, ADDR) != challenge_commitment(7, root, final, cid, salt, ADDR)
    assert vote_commitment(4, vote, salt, ADDR) != vote_commitment(3, vote, salt, ADDR)
    assert check_commitment(7, final, salt, ADDR) == keccak(b"".join(map(_word, (7, final, salt, ADDR))))
    assert check_commitment(7, final, salt, other) != check_commitment(7, final, salt, ADDR)  # P5: binds the verifier


def test_fee_ticket_and_sampling_rule_succeeds():
    key = keccak(b"epoch key")
    t = fee_ticket(key, 5)
    assert t == int.from_bytes(keccak(_word(key) + _word(5))[:8], "big")
    assert fee_sampled(key, 5, 10_000)  # rate 100 %: always
    rate = t * 10_000 // 2**64  # the largest rate that still leaves this ticket out, and one above it
    assert not fee_sampled(key, 5, rate) and fee_sampled(key, 5, rate + 1)


def test_escrow_for_formula_succeeds():
    assert escrow_for(10, 2, 3, 4) == 10 * 2 * 4 * 4 + POSTER_BOND  # every replica of every task, + the bond
    p = PostJobParams(b"\1" * 32, b"\2" * 32, b"\3" * 32, 3, 4, 8, 2, 10, 2, 100)
    assert p.escrow() == escrow_for(10, 2, 3, 4) and p.n == 4


# ---------------------------------------------------------------- compiled ABI and a chain


def _abi(container) -> list[dict]:
    return [i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in container.contract_type.abi]


def _components(container, fn: str, arg: int) -> list[str]:
    item = next(i for i in _abi(container) if i.get("type") == "function" and i["name"] == fn)
    return [c["name"] for c in item["inputs"][arg]["components"]]


@pytest.mark.integration
def test_struct_builders_match_compiled_abi_succeeds(project):
    assert _components(project.JobRegistry, "postJob", 0) == list(PostJobParams._fields)
    assert _components(project.DisputeGame, "pinpoint", 1) == list(PinpointProof._fields)
    assert _components(project.DisputeGame, "openDisputeWithPinpoint", 1) == list(PinpointProof._fields)


@pytest.mark.integration
def test_job_registry_fallback_reaches_only_views_succeeds(project):
    """JobRegistry runs TaskMachine's code only through a stub per function, and any call it has no function for in
    JobViews' code (its fallback): every TaskMachine function must have a stub (none reachable by accident), JobViews
    must hold views only (a write cannot slip in through the fallback), and IJobViews must declare all of them."""
    def functions(container, *mutability: str) -> set[str]:
        return {i["name"] for i in _abi(container)
                if i.get("type") == "function" and (not mutability or i.get("stateMutability") in mutability)}

    assert functions(project.TaskMachine) - functions(project.JobRegistry) == set()
    reachable = functions(project.JobViews) - functions(project.JobRegistry)  # the base's getters are the registry's
    assert reachable - functions(project.JobViews, "view", "pure") == set()
    assert reachable == functions(project.IJobViews)
    assert {"getJob", "getTask", "getReplicas", "epochOf"} <= functions(project.IJobViews)


@pytest.mark.integration
def test_fee_ticket_matches_verification_fees_succeeds(system):
    for task_id in (1, 7, 2**40):
        key = keccak(task_id.to_bytes(8, "big"))
        assert system.fees.ticketOf(key, task_id) == fee_ticket(key, task_id)


@pytest.mark.integration
def test_escrow_for_matches_job_registry_succeeds(system):
    for args in ((10**18, 1, 1, 1), (3 * 10**18, 2, 4, 3), (7, 2, 32, 256)):
        assert system.jobs.escrowFor(*args) == escrow_for(*args)
    assert system.jobs.POSTER_BOND() == POSTER_BOND and system.jobs.FAIL_DECLINES() == FAIL_DECLINES
    assert system.jobs.DECLINE_GRACE_BPS() == DECLINE_GRACE_BPS  # node/feasibility.py and submit/modules.py use it


@pytest.mark.integration
def test_post_job_params_tuple_accepted_by_contract_succeeds(system, accounts):
    """A PostJobParams (NamedTuple) goes to postJob as is; the job records the fields in the same order."""
    submitter = accounts[1]
    p = PostJobParams(keccak(b"m"), keccak(b"h"), keccak(b"i"), 2, 3, 8, 2, 10**18, 1, 5 * 10**18,
                      minMemoryMb=1 << 30)  # nobody is eligible: no draw needed
    system.fund(submitter, p.escrow())
    system.token.approve(system.escrow, p.escrow(), sender=submitter)
    system.jobs.postJob(p, sender=submitter)
    job_id = system.jobs.jobCount()
    j = system.jobs.getJob(job_id)
    assert (j.shards, j.rounds, j.stepsPerRound, j.checkpointInterval, j.paymentPerTask, j.replication,
            j.stakePerReplica, j.minMemoryMb, j.profileBit) == (2, 3, 8, 2, 10**18, 1, 5 * 10**18, 1 << 30,
                                                                 protocol.PROFILE_CPU_F32_STRICT)
    assert system.escrow.escrowOf(job_id) == p.escrow()


# ---------------------------------------------------------------- network requirements (issue 9 item 4)


def test_region_table_and_bandwidth_tiers_match_verity_types_succeeds():
    constants = _constants()
    regions = {name: value for name, value in constants.items() if name.startswith("REGION_")}
    assert sorted(protocol.REGIONS.values()) == sorted(regions.values()) == list(range(1, constants["MAX_REGION"] + 1))
    for name, code in protocol.REGIONS.items():  # 'north-america' <-> REGION_NORTH_AMERICA
        assert regions["REGION_" + name.upper().replace("-", "_")] == code
    assert protocol.BANDWIDTH_TIER_FLOORS_MBPS[-1] == constants["MAX_BANDWIDTH_FLOOR_MBPS"]
    # appended: positional builders keep working
    assert list(PostJobParams._fields[-3:]) == ["region", "minBandwidthMbps", "resultFloor"]
    assert PostJobParams(b"", b"", b"", 1, 1, 1, 1, 1, 1, 1)[-3:] == (0, 0, 0)  # any region, any bandwidth, no floor


@pytest.mark.integration
def test_bandwidth_tiers_match_node_registry_succeeds(system):
    assert system.registry.BANDWIDTH_TIERS() == len(protocol.BANDWIDTH_TIER_FLOORS_MBPS)
    for mbps in (0, 9, 10, 99, 100, 999, 1_000, 9_999, 10_000, 2**32 - 1):
        assert system.lens.bandwidthTier(mbps) == protocol.bandwidth_tier(mbps), mbps


@pytest.mark.integration
def test_min_windows_and_decline_grace_match_job_registry_succeeds(system):
    """protocol.min_windows mirrors JobRegistryBase._minWindows: on a 1-, 2- and 12-second chain its windows are valid
    defaults and one second less is refused; decline_grace's constant is the registry's."""
    import ape

    jobs, owner = system.jobs, system.owner
    before = (jobs.defaultExecutionWindow(), jobs.defaultRevealWindow(), jobs.defaultChallengeWindow())
    assert jobs.DECLINE_GRACE_BPS() == protocol.DECLINE_GRACE_BPS
    for block_seconds in (1, 2, 12):
        mins = protocol.min_windows(block_seconds)
        jobs.setDefaultWindows(mins["execution"], mins["reveal"], mins["challenge"], sender=owner)
        jobs.setBlockSeconds(block_seconds, sender=owner)
        for name in mins:
            shorter = {**mins, name: mins[name] - 1}
            with ape.reverts():
                jobs.setDefaultWindows(shorter["execution"], shorter["reveal"], shorter["challenge"], sender=owner)
    jobs.setBlockSeconds(1, sender=owner)  # the shared deployment as it was
    jobs.setDefaultWindows(*before, sender=owner)
    # the grace of the shortest window is 4 blocks on any chain
    assert [protocol.decline_grace(protocol.min_windows(b)["execution"]) for b in (2, 12)] == [8, 48]


@pytest.mark.integration
def test_post_job_params_network_fields_recorded_succeeds(system, accounts):
    """A region job posted from the NamedTuple records its network filters in the Job (nobody is eligible: no draw)."""
    submitter = accounts[1]
    p = PostJobParams(keccak(b"m2"), keccak(b"h2"), keccak(b"i2"), 1, 1, 8, 2, 10**18, 1, 5 * 10**18,
                      region=protocol.REGION_OCEANIA, minBandwidthMbps=1_000)
    system.fund(submitter, p.escrow())
    system.token.approve(system.escrow, p.escrow(), sender=submitter)
    system.jobs.postJob(p, sender=submitter)
    j = system.jobs.getJob(system.jobs.jobCount())
    assert (j.region, j.minBandwidthMbps) == (protocol.REGION_OCEANIA, 1_000)
