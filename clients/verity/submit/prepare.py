"""Prepare a training job: every option checked, shards and manifest built and validated
in memory (CIDs computed locally), then uploaded to IPFS; the postJob parameters.

Used by `ape run submit` (scripts/submit.py, signing with an ape account), by
`verity job submit` (cli/job_submit.py, signing with web3), by the demo and the
tests. Nothing is uploaded or spent until `plan_job` has accepted every option;
the chain side is a `postJob` after an `approve` of the escrow to JobEscrow, then, when the
job has a verification pot (P5: verifiers paid for looking), an `approve` of the pot to
VerificationFees and its `fund`. The pot is paid after the job exists (fund needs an Active
job), so a failed funding leaves a posted, unfunded job: `PotNotFunded` says how to fund it.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import NamedTuple

from eth_utils import keccak
from web3.logs import DISCARD

from verity.chain.protocol import (BPS, DEVICE_CPU, DEVICE_CUDA, POSTER_BOND, PROFILE_BITS, PostJobParams,
                                   escrow_for, min_windows, region_code)
from verity.chain.views import read
from verity.units import duration
from verity.cid import cid_to_digest
from verity.engine.checkpoint import initial_state
from verity.engine.manifest import Manifest, load_manifest
from verity.errors import ManifestInvalid, VerityError
from verity.storage import Storage, cid_of_bytes
from verity.submit.data import Reading, load_job_data
from verity.submit.fit import JobFit, NetworkFit, choose_execution_window, job_fit, min_memory_mb, network_fit, \
    registered_nodes
from verity.submit.modules import (OPTION_OF, add_parallel, execution_window_for, result_floor_for,
                                   smallest_task_mb)
from verity.submit.network import OPTION_OF as NETWORK_OPTION_OF, add_network
from verity.submit.options import (BadJobSpec, JobSpec, fee_rate_bps, to_wei,
                                   validate_spec)

TOKEN = 10**18

__all__ = ["BadJobSpec", "JobSpec", "PreparedJob", "FeeTerms", "PotNotFunded", "plan_job", "upload_job", "prepare_job",
           "post_job_web3", "fees_address_web3", "fund_pot_web3", "verification_pot", "check_funds"]


class FeeTerms(NamedTuple):
    """VerificationFees.fund's arguments after the job id, in ABI order."""
    amount: int
    feePerCheck: int
    checksPerTask: int
    rateBps: int


def verification_pot(fee_per_check: int, checks_per_task: int, shards: int, rounds: int) -> int:
    """A pot that pays every fee slot of every task: each round's `shards` TRAIN tasks and its AGGREGATE."""
    return int(fee_per_check) * int(checks_per_task) * (int(shards) + 1) * int(rounds)


class PotNotFunded(VerityError):
    """The job was posted but its verification pot was not funded: it runs without one until its submitter funds it."""

    def __init__(self, job_id: int, terms: FeeTerms, fees_address: str, why: str):
        self.job_id = job_id
        super().__init__(
            f"job {job_id} is posted, but funding its verification pot failed ({why}); it runs without verification "
            f"fees until you fund it: approve {terms.amount} wei of VRT to VerificationFees at {fees_address}, then "
            f"call VerificationFees.fund({job_id}, {terms.amount}, {terms.feePerCheck}, {terms.checksPerTask}, "
            f"{terms.rateBps}) as the submitter (no CLI does this yet)")


@dataclass
class PreparedJob:
    manifest_doc: dict
    manifest_bytes: bytes
    manifest_cid: str
    initial_hash: bytes
    eval_cid: str | None
    spec: JobSpec
    init_cid: str | None = None    # --init-from: the initial weights' CID (manifest init.weights)
    shard_cids: list[str] = field(default_factory=list)
    blobs: list[bytes] = field(default_factory=list, repr=False)  # to upload: shards, eval, manifest
    block_seconds: int = 1  # the chain's (JobRegistry.blockSeconds), set by check_windows: the automatic result floor
    fit: JobFit | None = None   # the largest task's estimated time and memory (submit/fit.py)
    window_note: str = ""       # what check_windows chose, when it chose a window longer than the chain's default
    reveal_grace: int = 60      # the chain's default reveal window: finalize waits it out after the challenge window

    def post_params(self) -> PostJobParams:
        """PostJobParams in ABI field order (verity.chain.protocol; contracts/types/VerityTypes.sol).
        Replication 2 takes the registry's default challenge window (its agreement still waits one out)."""
        s = self.spec
        hardware = self.manifest_doc.get("hardware", {})
        return PostJobParams(
            manifestCid=cid_to_digest(self.manifest_cid), manifestHash=keccak(self.manifest_bytes),
            initialStateHash=self.initial_hash, shards=s.shards, rounds=s.rounds, stepsPerRound=s.steps,
            checkpointInterval=s.k, paymentPerTask=int(s.payment * TOKEN), replication=s.replication,
            stakePerReplica=int(s.stake * TOKEN), deviceClass=DEVICE_CUDA if _device(s) == "cuda" else DEVICE_CPU,
            minMemoryMb=int(hardware.get("min_memory_mb", 1024)), profileBit=PROFILE_BITS[s.profile], executionWindow=execution_window_for(s), revealWindow=s.reveal_window,
            challengeWindow=s.challenge_window,  # what the manifest records is what the chain enforces (job_mismatches)
            # from the manifest only: a node declines a job whose on-chain filters differ from it (job_mismatches)
            region=region_code(hardware.get("region")), minBandwidthMbps=int(hardware.get("min_bandwidth_mbps", 0)),
            resultFloor=self.result_floor())

    def result_floor(self) -> int:
        """PostJobParams.resultFloor (submit_modules.result_floor_for); the work is estimated from the manifest
        (FLOPs of a step of its largest task, engine/estimate.py) only when the floor is automatic and no per-step
        budget is declared."""
        s = self.spec
        if s.result_floor is not None or s.verification_fee is None or s.step_budget_ms:
            return result_floor_for(s, self.block_seconds)
        return result_floor_for(s, self.block_seconds, self.step_flops)

    @cached_property
    def step_flops(self) -> int:
        """Estimated FLOPs of one step of the job's largest task (read once: post_params is built more than once)."""
        from verity.engine.estimate import estimate_step_flops

        manifest = load_manifest(self.manifest_bytes)
        return max(estimate_step_flops(manifest, i) for i in range(len(manifest.shards)))

    def escrow(self) -> int:
        s = self.spec
        return escrow_for(int(s.payment * TOKEN), s.replication, s.shards, s.rounds)

    def fee_terms(self) -> FeeTerms | None:
        """The verification pot and its terms, or None when the job is posted without one."""
        s = self.spec
        if s.verification_fee is None:
            return None
        fee = to_wei(s.verification_fee)
        return FeeTerms(verification_pot(fee, s.checks_per_task, s.shards, s.rounds), fee, s.checks_per_task,
                        fee_rate_bps(s.fee_sample_rate))

    def pot(self) -> int:
        """VRT wei the verification pot takes from the submitter (0 without one)."""
        terms = self.fee_terms()
        return terms.amount if terms else 0

    def pot_status(self, funded: int, failed: bool) -> str:
        """What the submit commands print about the pot after `fund` was tried (`funded`: wei funded)."""
        if failed:
            return "verification pot NOT funded"
        return self.pot_text() if funded else "no verification pot"

    def pot_text(self) -> str:
        """The pot as the submit commands print it next to the escrow."""
        terms = self.fee_terms()
        if terms is None:
            return "no verification pot"
        s = self.spec
        sampled = "every verifier sampled" if terms.rateBps == BPS else f"verifiers sampled at {terms.rateBps / 100:g}%"
        return (f"{terms.amount / TOKEN:g} VRT verification pot ({terms.feePerCheck / TOKEN:g} VRT x "
                f"{terms.checksPerTask} check{'s' * (terms.checksPerTask != 1)} x {(s.shards + 1) * s.rounds} tasks, "
                f"{sampled})")


_ARCH_OF = {"llama": "decoder", "gpt2": "decoder"}  # --model names of the decoder family's shapes


def _default_model(spec: JobSpec, data: dict) -> dict:
    if spec.model_config is not None:
        return {"arch": _ARCH_OF.get(spec.model, spec.model), "config": spec.model_config}
    if spec.model == "mlp" and data["task"] == "classification":
        return {"arch": "mlp", "config": {"in_features": math.prod(data["x_shape"]), "hidden": [64], "out_features": data["num_classes"]}}
    if spec.model == "cnn" and data["task"] == "classification" and len(data["x_shape"]) == 3:
        c, h, w = data["x_shape"]
        return {"arch": "cnn", "config": {"in_channels": c, "height": h, "width": w, "channels": [8, 16], "num_classes": data["num_classes"]}}
    if spec.model == "gpt" and data["task"] == "lm":
        return {"arch": "gpt", "config": {"vocab_size": data["vocab_size"], "block_size": data["x_shape"][0],
                                          "n_layer": 2, "n_head": 2, "n_embd": 64}}
    if spec.model == "resnet" and data["task"] == "classification" and len(data["x_shape"]) == 3:
        c, h, w = data["x_shape"]
        return {"arch": "resnet", "config": {"in_channels": c, "height": h, "width": w, "widths": [16, 32],
                                             "blocks": 1, "groups": 8, "num_classes": data["num_classes"]}}
    if spec.model in ("llama", "gpt2") and data["task"] == "lm":
        return {"arch": "decoder", "config": _small_decoder(spec.model, data["vocab_size"], data["x_shape"][0])}
    raise BadJobSpec("model", f"{spec.model} does not fit the {data['task']} data of {spec.dataset!r} "
                              f"(x shape {data['x_shape']}); mlp, cnn and resnet classify, gpt, llama and gpt2 "
                              "model text")


def _small_decoder(shape: str, vocab: int, block: int) -> dict:
    """A small decoder of the family's shape: Llama (RoPE, RMSNorm, SwiGLU, grouped-query attention, no biases)
    or GPT-2 (learned positions, LayerNorm, tanh GELU, biases, tied embeddings)."""
    if shape == "llama":
        return {"vocab_size": vocab, "block_size": block, "n_layer": 2, "n_head": 4, "n_kv_head": 2, "n_embd": 64,
                "intermediate_size": 176}
    return {"vocab_size": vocab, "block_size": block, "n_layer": 2, "n_head": 2, "n_embd": 64,
            "positions": "learned", "norm": "layernorm", "activation": "gelu_tanh", "bias": True,
            "tie_embeddings": True}


def _option_of(field_: str, spec: JobSpec) -> str:
    """Which option a manifest field came from."""
    for prefix, option in {**OPTION_OF, **NETWORK_OPTION_OF}.items():
        if field_.startswith(prefix):
            return option
    if field_.startswith("model"):
        return "model_config" if spec.model_config is not None else "model"
    if field_.startswith("data"):
        return "model"  # the data is what it is: the model does not fit it
    return {"optimizer": "lr", "batch_size": "batch_size", "steps_per_round": "steps", "rounds": "rounds",
            "checkpoint_interval": "k", "aggregation": "trim", "verification": "challenge_window",
            "name": "name", "init": "seed"}.get(field_.split(".")[0], "dataset")


def _checked_manifest(raw: bytes, spec: JobSpec, weights: bytes | None = None) -> tuple[Manifest, bytes]:
    """The same validation every node applies, plus building the initial state (from `weights` with --init-from)."""
    try:
        manifest = load_manifest(raw)
    except ManifestInvalid as exc:
        raise BadJobSpec(_option_of(exc.field, spec), f"{exc.reason} (manifest field {exc.field})") from None
    try:
        return manifest, initial_state(manifest, weights).hash
    except (VerityError, ValueError, RuntimeError) as exc:  # a config the model zoo cannot build
        raise BadJobSpec(_option_of("model", spec), str(exc).splitlines()[0]) from None


def _device(spec: JobSpec) -> str:
    """The manifest's device class: the profile's own; portable-f32 runs anywhere and is posted as a CPU job."""
    from verity.engine.determinism import ANY_DEVICE, PROFILES

    device = PROFILES[spec.profile].device
    return "cpu" if device == ANY_DEVICE else device


def plan_job(spec: JobSpec) -> PreparedJob:
    """Check every option and build the job in memory; nothing is uploaded, nothing touches the chain."""
    validate_spec(spec)
    start = _init_from(spec)
    if start is not None and start.tokenizer is not None and spec.tokenizer == "char":
        spec = replace(spec, tokenizer=str(start.tokenizer))  # the model's own token ids, not characters
    reading = Reading(model=spec.model, block=spec.block, features=spec.features, label=spec.label,
                      text_field=spec.text_field, image_size=spec.image_size, tokenizer=spec.tokenizer,
                      vocab_size=spec.vocab_size)
    data = load_job_data(spec.dataset, spec.shards, eval_fraction=spec.eval_fraction, seed=spec.seed, reading=reading)
    spec = replace(spec, shards=len(data.shards))
    data_section = data.metas[0].spec().model_dump(mode="json", exclude_none=True)
    model = start.spec if start is not None else _default_model(spec, data_section)
    init_cid = cid_of_bytes(start.weights) if start is not None else None
    shard_cids = [cid_of_bytes(b) for b in data.shards]
    eval_cid = cid_of_bytes(data.eval) if data.eval is not None else None
    named = f"{model['arch']} from {start.name}" if start is not None else spec.model
    doc = {
        "schema_version": 1, "name": spec.name or f"{named} on {data.source}"[:128],
        "model": model, "init": {"weights": init_cid} if init_cid else {"seed": spec.seed}, "data": data_section,
        "shards": [{"cid": c, "samples": m.samples} for c, m in zip(shard_cids, data.metas)],
        "optimizer": {"name": spec.optimizer, "lr": spec.lr}, "batch_size": spec.batch_size,
        "steps_per_round": spec.steps, "rounds": spec.rounds, "checkpoint_interval": spec.k,
        "aggregation": {"rule": spec.aggregation, "trim": spec.trim},
        "verification": {"replication": spec.replication, "challenge_window": spec.challenge_window},
        "determinism": spec.profile, "hardware": {"device_class": _device(spec)},
    }
    add_parallel(doc, spec)
    add_network(doc, spec)
    if eval_cid:
        doc["eval_shard"] = {"cid": eval_cid, "samples": data.eval_meta.samples}
    if data.tokenizer is not None:  # uploaded with the job: what turns its token ids back into text
        doc["data"]["tokenizer_cid"] = cid_of_bytes(data.tokenizer)
    raw = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    manifest, initial_hash = _checked_manifest(raw, spec, start.weights if start is not None else None)
    fit = job_fit(manifest)
    if manifest.modules is not None:  # draw any node that can hold the smallest module task (the rest decline)
        doc["hardware"]["min_memory_mb"] = smallest_task_mb(manifest)
    elif min_memory_mb(fit) > manifest.hardware.min_memory_mb:  # draw only nodes that can hold the task
        doc["hardware"]["min_memory_mb"] = min_memory_mb(fit)
    if doc["hardware"].get("min_memory_mb", manifest.hardware.min_memory_mb) != manifest.hardware.min_memory_mb:
        raw = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
        load_manifest(raw)  # still valid; the initial state does not depend on the memory minimum
    blobs = [*data.shards, *([data.eval] if data.eval is not None else []), *([data.tokenizer] if data.tokenizer else []),
             *([start.weights] if start is not None else []), raw]
    return PreparedJob(doc, raw, cid_of_bytes(raw), initial_hash, eval_cid, spec, init_cid, shard_cids, blobs, fit=fit)


def _init_from(spec: JobSpec):
    """--init-from's model and weights (verity/hf/files.py), or None."""
    if not spec.init_from:
        return None
    if spec.model_config is not None:
        raise BadJobSpec("init_from", "the weights' config sets the model: leave out --model-config")
    from verity.hf.configs import HFUnsupported
    from verity.hf.files import read_init_from

    try:
        return read_init_from(spec.init_from)
    except HFUnsupported as exc:
        raise BadJobSpec("init_from", str(exc)) from None


def upload_job(prepared: PreparedJob, storage: Storage) -> PreparedJob:
    """Upload shards, eval shard and manifest; each CID must be the one computed locally."""
    tokenizer = prepared.manifest_doc["data"].get("tokenizer_cid")
    expected = [*prepared.shard_cids, *([prepared.eval_cid] if prepared.eval_cid else []),
                *([tokenizer] if tokenizer else []), *([prepared.init_cid] if prepared.init_cid else []),
                prepared.manifest_cid]
    for blob, cid in zip(prepared.blobs, expected, strict=True):
        got = storage.put_bytes(blob)
        if got != cid:
            raise VerityError(f"IPFS stored a blob as {got}, computed locally as {cid}")
    return prepared


def prepare_job(spec: JobSpec, storage: Storage) -> PreparedJob:
    """`plan_job`, then `upload_job`."""
    return upload_job(plan_job(spec), storage)


def post_job_web3(chain, prepared: PreparedJob) -> int:
    """Approve the escrow to JobEscrow (which pulls it) and post the job with a web3 ChainClient; returns the job id."""
    c = chain
    check_windows(prepared, c.call(c.jobs.functions.blockSeconds()), c.call(c.jobs.functions.defaultExecutionWindow()),
                  c.call(c.jobs.functions.defaultRevealWindow()))
    c.transact(c.token.functions.approve(c.escrow.address, prepared.escrow()))
    receipt = c.transact(c.jobs.functions.postJob(prepared.post_params()))
    for ev in c.jobs.events.JobPosted().process_receipt(receipt, errors=DISCARD):  # other contracts' logs
        return int(ev["args"]["jobId"])
    raise VerityError("postJob succeeded but emitted no JobPosted event")


def check_windows(prepared: PreparedJob, block_seconds: int, default_execution: int,
                  default_reveal: int | None = None) -> None:
    """Chooses the execution window the job's largest task fits in when none was given (submit/fit.py: the chain's
    default, or longer when that is too short) and refuses a given one that is too short; records the chain's block
    time on the job (its automatic result floor counts blocks) and refuses, before
    anything is spent, a window below the chain's minimum (seconds floors and blocks of its block time,
    JobRegistry.blockSeconds: protocol.min_windows) or a result floor above half the execution window (0 takes the
    registry's default, `default_execution`), naming the option that fixes it."""
    prepared.block_seconds = int(block_seconds)
    if default_reveal is not None:
        prepared.reveal_grace = int(prepared.spec.reveal_window or default_reveal)
    if prepared.fit is not None:  # a window the largest task fits in (submit/fit.py), or a refusal with the numbers
        window, note = choose_execution_window(prepared.fit, prepared.spec.execution_window, int(default_execution),
                                               prepared.spec.step_budget_ms)
        prepared.spec = replace(prepared.spec, execution_window=window)
        prepared.window_note = note or prepared.window_note
    params = prepared.post_params()
    execution = int(params.executionWindow) or int(default_execution)
    if int(params.resultFloor) > execution // 2:
        raise BadJobSpec("result_floor", f"{int(params.resultFloor)} s is more than half the execution window "
                                         f"({execution} s): --result-floor {execution // 2} or less")
    mins = min_windows(block_seconds).values()
    for option, value, least in zip(("execution_window", "reveal_window", "challenge_window"),
                                    (params.executionWindow, params.revealWindow, params.challengeWindow), mins):
        if 0 < int(value) < int(least):
            raise BadJobSpec(option, f"{int(value)} s is below this chain's minimum of {int(least)} s "
                                     f"(--{option.replace('_', '-')} {int(least)} or more)")


def check_chain_web3(chain, prepared: PreparedJob) -> NetworkFit:
    """Before anything is uploaded or spent: the job's windows against the chain (check_windows) and its largest task
    against the registered solvers (network_fit), read with web3."""
    c = chain
    check_windows(prepared, c.call(c.jobs.functions.blockSeconds()), c.call(c.jobs.functions.defaultExecutionWindow()),
                  c.call(c.jobs.functions.defaultRevealWindow()))
    return network_fit_web3(chain, prepared)


def network_fit_web3(chain, prepared: PreparedJob) -> NetworkFit:
    """The registered solvers against the job's largest task (submit/fit.network_fit), read with web3."""
    reg = chain.registry
    nodes = registered_nodes(chain.call(reg.functions.nodeCount()), lambda i: chain.call(reg.functions.nodeList(i)),
                             lambda a: read(chain, reg, "getNode", a))
    params = prepared.post_params()
    return network_fit(nodes, prepared.fit, int(params.profileBit), int(params.deviceClass))


def summary(prepared: PreparedJob, network: NetworkFit | None = None) -> list[str]:
    """What the submit commands print before asking to post: the cost, the fit and a rough time to finish."""
    s, params, fit = prepared.spec, prepared.post_params(), prepared.fit
    pot = prepared.pot()
    payments = prepared.escrow() - POSTER_BOND
    lines = [f"cost: {prepared.escrow() / TOKEN:g} VRT escrow ({payments / TOKEN:g} VRT of payments for "
             f"{(s.shards + 1) * s.rounds} tasks x {s.replication} replicas, {POSTER_BOND / TOKEN:g} VRT poster bond; "
             f"what is not spent comes back)" + (f" + {pot / TOKEN:g} VRT verification pot" if pot else "")
             + ", plus gas"]
    if fit is not None:
        window = int(params.executionWindow)
        lines.append(f"fit: {fit.text()}; posted with "
                     + (f"an execution window of {window:,} s" if window else "the chain's default execution window"))
    if prepared.window_note:
        lines.append(prepared.window_note)
    if network is not None:
        lines.append(network.warning(s.profile) or f"network: {network.solvers} registered solver(s) serve {s.profile}"
                     f", {network.eligible} of them declare enough memory (largest {network.largest_mb:,} MB)")
    if fit is not None:
        block = max(1, prepared.block_seconds)
        # a task: its draw (two-phase: a few blocks), the node's start, training (or the result floor), commit and
        # reveal, the challenge window, the reveal grace after it, then finalize
        per_task = (4 * block + 10 + max(fit.task_seconds, prepared.result_floor()) + 3 * block + s.challenge_window
                    + prepared.reveal_grace + block)
        lines.append(f"expected: about {duration(round(2 * per_task * s.rounds))} to finish on reference nodes with "
                     f"no disputes ({s.rounds} round(s), each its shard tasks in parallel, then its AGGREGATE)")
    return lines


def fees_address_web3(chain, prepared: PreparedJob) -> str | None:
    """VerificationFees' address when the job funds a pot (None without one); refuses, before anything is uploaded or
    spent, a deployment that has none, since funding would fail only after the job is posted."""
    if prepared.fee_terms() is None:
        return None
    contract = chain.contracts.get("VerificationFees")
    if contract is None or not chain.w3.eth.get_code(contract.address):
        raise BadJobSpec("verification_fee", "this deployment has no VerificationFees contract "
                                             "(redeploy, or pass --no-verification-fee)")
    return contract.address


def fund_pot_web3(chain, job_id: int, prepared: PreparedJob) -> int:
    """Approve the pot to VerificationFees (which pulls it) and fund the posted job's pot; returns the amount funded
    (0 without a pot). Any failure becomes PotNotFunded: the job exists and its submitter must know how to fund it."""
    terms = prepared.fee_terms()
    if terms is None:
        return 0
    c, where = chain, "its deployed address"
    try:
        where = c.fees.address
        c.transact(c.token.functions.approve(c.fees.address, terms.amount))
        c.transact(c.fees.functions.fund(job_id, *terms))
    except Exception as exc:  # noqa: BLE001 - whatever failed, the job is posted: say so, with the way to fund it
        raise PotNotFunded(job_id, terms, where, (str(exc).splitlines() or [type(exc).__name__])[0]) from exc
    return terms.amount


def check_funds(balance: int, prepared: PreparedJob, address: str) -> None:
    """Refuse before anything is uploaded or approved when the submitter cannot pay the escrow and the pot."""
    escrow, pot = prepared.escrow(), prepared.pot()
    plus = f" (plus a {pot / TOKEN:g} VRT verification pot)" if pot else ""
    if balance < escrow:
        raise BadJobSpec("payment", f"the escrow is {escrow / TOKEN:g} VRT{plus} but {address} holds "
                                    f"{balance / TOKEN:g} VRT (lower the payment, or fund that account)")
    if balance < escrow + pot:
        raise BadJobSpec("verification_fee", f"the escrow ({escrow / TOKEN:g} VRT) and the verification pot "
                                             f"({pot / TOKEN:g} VRT) come to {(escrow + pot) / TOKEN:g} VRT but {address} "
                                             f"holds {balance / TOKEN:g} VRT (lower the fee or --checks-per-task, pass "
                                             "--no-verification-fee, or fund that account)")
