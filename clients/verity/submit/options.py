"""Job options shared by `ape run submit`, `verity job submit` and `verity data shard`:
their defaults, help texts, and the checks that run before anything is uploaded or spent.

Every check raises `BadJobSpec`, whose one-line message starts with the option
a user typed (`--shards: 0 is not in 1..32`).
"""
from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from verity.chain.protocol import MIN_TASK_STAKE
from verity.errors import VerityError

# JobRegistry's bounds (contracts/JobRegistry.sol); a job outside them would revert after the approve.
MAX_SHARDS = 32
MAX_ROUNDS = 256
MAX_TRACE = 1 << 20
MAX_WINDOW = 7 * 24 * 3600
MIN_EXECUTION_WINDOW = 30  # JobRegistryBase.MIN_EXECUTION_WINDOW: no job's drawn solvers can be late by design
MIN_REVEAL_WINDOW = 5      # JobRegistryBase.MIN_REVEAL_WINDOW
MIN_CHALLENGE_WINDOW = 3   # JobRegistryBase.MIN_CHALLENGE_WINDOW (the manifest's lower bound too)
# VerificationFees' bounds (contracts/VerificationFees.sol): fund() reverts outside them, after the job is posted.
MAX_CHECKS = 8
BPS = 10_000  # rateBps of 10_000 samples every verifier

# Defaults of both `verity data shard` and the submit commands.
DATASET = "digits"
SHARDS = 4
EVAL_FRACTION = 0.15
SEED = 0
BLOCK = 32  # text: characters per sample

# Verification fees (P5): verifiers are paid for a matching blind check, so looking pays even when nothing is wrong.
FEE_OF_PAYMENT = 0.1  # default --verification-fee: this fraction of --payment
CHECKS_PER_TASK = 2
FEE_SAMPLE_RATE = 1.0

# gpt: nanoGPT's decoder; llama and gpt2: the decoder family (engine/decoder.py) in those shapes; resnet: a
# GroupNorm ResNet for images
MODELS = ("mlp", "cnn", "resnet", "gpt", "llama", "gpt2")
# The default runs on every node: a native class's bits hold only on the hardware its vectors were recorded on
# (tests/vectors/cpu-f32-strict.json, an Intel AVX2 CPU; an AMD EPYC computes other bits under the same pins), so a
# default job under it was served by nobody on such a network and never ran.
PROFILE = "portable-f32"
PROFILE_NAMES = ("cpu-f32-strict", "cuda-f32-strict", "portable-f32")  # verity.engine.determinism.PROFILES
AGGREGATIONS = ("mean", "median", "trimmed_mean")
OPTIMIZERS = ("sgd", "adam", "adamw")


@dataclass
class JobSpec:
    """What a job asks for; the defaults are the submit commands' (a light module: `verity --help` reads them)."""
    model: str = "mlp"                 # mlp | cnn | gpt
    model_config: dict | None = None   # default: sized to the dataset
    init_from: str = ""                # '' = initialised from --seed; else published or downloaded weights (verity/hf)
    dataset: str = DATASET             # 'digits', an (x, y) file, a .txt corpus, or a `verity data shard` dir
    shards: int | None = SHARDS        # None: as many as a shard directory holds (else SHARDS)
    rounds: int = 3
    steps: int = 40                    # steps per round
    k: int = 10                        # checkpoint interval
    replication: int = 2
    payment: float = 1.0               # VRT per accepted replica of each task
    stake: float = 10.0                # VRT locked by each replica
    aggregation: str = "mean"
    trim: float = 0.0
    batch_size: int = 32
    optimizer: str = "adam"
    lr: float = 0.01
    seed: int = SEED
    eval_fraction: float = EVAL_FRACTION
    block: int = BLOCK                 # text: tokens (characters, with --tokenizer char) per sample
    # how a source file is read (submit/formats.py, submit/data.Reading)
    features: str = ""                 # tables: comma-separated feature columns ('' = every column but the label)
    label: str = ""                    # tables: the label column ('' = the last)
    text_field: str = "text"           # .jsonl: the field holding the text
    image_size: int = 32               # image folders: pixels per side after resizing
    tokenizer: str = "char"            # text: char | bpe | a tokenizer.json path
    vocab_size: int = 512              # --tokenizer bpe: vocabulary size
    challenge_window: int = 60         # seconds (optimistic mode)
    execution_window: int = 0          # 0 = the contract's default
    reveal_window: int = 0
    result_floor: int | None = None    # seconds; None = automatic (submit_modules.result_floor_for)
    name: str = ""
    profile: str = PROFILE              # determinism profile: a native hardware class (fast) or portable-f32 (open)
    # Verification pot (VerificationFees.fund). None: no pot; the submit commands default it to 0.1 x payment
    # (submit_options.verification_fee_of); library callers opt in.
    verification_fee: float | None = None   # VRT per matching blind check
    checks_per_task: int = CHECKS_PER_TASK  # most paid checks per task, 1..8
    fee_sample_rate: float = FEE_SAMPLE_RATE  # fraction of verifiers sampled per task, (0, 1]
    # module-parallel training, the outer optimizer and the declared per-step budget (submit/modules.py)
    modules: str = ""                   # 'name=prefix,prefix;name=prefix'
    module_plan: str = ""               # 'a;b;a,b' per shard ('' = round-robin)
    outer_lr: float = 0.0               # 0 = plain aggregation
    outer_momentum: float = 0.9
    step_budget_ms: int = 0             # 0 = undeclared
    # network requirements of the replica draws (submit/network.py)
    region: str = ""                    # a name of protocol.REGIONS; '' = any region
    min_bandwidth_mbps: int = 0         # 0 = any


_FLAGS = {"k": "-k/--checkpoint-interval", "alias": "--account", "test_account": "--test-account"}


def flag(field: str) -> str:
    """The command-line spelling of a JobSpec field or command parameter."""
    return _FLAGS.get(field, "--" + field.replace("_", "-"))


class BadJobSpec(VerityError, ValueError):
    """A submit option was rejected before anything was uploaded or spent."""

    def __init__(self, field_: str, why: str):
        self.field = field_
        super().__init__(f"{flag(field_)}: {why}")


HELP = {
    "model": "model architecture: mlp (tables) | cnn | resnet (images) | gpt | llama | gpt2 (text)",
    "init_from": "start from weights: a Hugging Face GPT-2 or Llama directory (config.json + model.safetensors), a "
                 ".safetensors file with its config.json beside it, or a model `verity job download` wrote; sets "
                 "the model (and the tokenizer, when one is beside the weights)",
    "model_config": "model config as a JSON object, or a .json file holding one (default: sized to the data)",
    "dataset": "'digits' (bundled), an .npz/.safetensors (x, y) pair, a .txt corpus, "
               "or a directory written by `verity data shard`",
    "shards": f"data shards per round, 1..{MAX_SHARDS} (default {SHARDS}, or as many as a shard directory holds)",
    "rounds": f"training rounds, 1..{MAX_ROUNDS}",
    "steps": "training steps per round (a multiple of -k)",
    "k": "checkpoint interval: a checkpoint hash is committed every k steps",
    "replication": "1 = optimistic (one solver, challenge window), 2 = commit-reveal by two solvers",
    "payment": "VRT paid to each accepted replica of each task (> 0)",
    "stake": "VRT each replica locks while it holds a task (at least 1: a dispute slashes its loser's task stake)",
    "aggregation": "how shard results are merged: mean | median | trimmed_mean",
    "trim": "fraction cut at each end by trimmed_mean (0 < trim < 0.5)",
    "batch_size": "samples per training step",
    "optimizer": "sgd | adam | adamw",
    "lr": "learning rate (0 < lr ≤ 10)",
    "seed": "seed of the data shuffle and the model init",
    "eval_fraction": "fraction of the data held out as the eval shard (0 ≤ f ≤ 0.9)",
    "block": "text corpus: characters per sample",
    "challenge_window": f"seconds an accepted result may be challenged, posted on chain as the manifest records it "
                        f"({MIN_CHALLENGE_WINDOW}..{MAX_WINDOW}; a chain with slow blocks may ask for more)",
    "result_floor": "seconds after its draw before a replica may commit or submit its result, so that verifiers "
                    "paid a fee can commit their blind checks first, even against a solver that makes its result "
                    "up at once (at most half the execution window; default with a verification pot: 4 s plus the "
                    "work, declared by --step-budget-ms or else estimated, and at least 3 blocks; 0 without one)",
    "profile": "determinism profile: portable-f32 (default: same bits on any CPU or GPU; any node can serve and check "
               "it) | cpu-f32-strict (x86-64 AVX2 class as recorded in the vectors; only nodes whose doctor passes it) "
               "| cuda-f32-strict (sm_90 class)",
    "name": "job name stored in the manifest (default: '<model> on <dataset>')",
    "verification_fee": f"VRT paid per matching blind check of a task from the job's verification pot (> 0; default "
                        f"{FEE_OF_PAYMENT:g} x --payment); the pot, fee x checks x tasks, is funded after postJob",
    "checks_per_task": f"most verifiers paid per task from the pot, 1..{MAX_CHECKS}",
    "fee_sample_rate": "fraction of verifiers whose private ticket samples them for a task's fee, in (0, 1] "
                       "(1 = every verifier; stored in basis points)",
    "no_verification_fee": "post the job without a verification pot (verifiers are paid only for catching faults)",
    "wait": "follow the job until the final model is downloaded and verified",
    "features": "tables (.csv, .tsv, .parquet): comma-separated feature columns (default: every column but the label)",
    "label": "tables: the label column, class ids 0, 1, … or names (default: the last column)",
    "text_field": ".jsonl: the field of each line's object that holds its text",
    "image_size": "image folders (one sub-directory per class, PNG/JPEG): pixels per side after resizing, 1..512",
    "tokenizer": "text (.txt, .jsonl): char (token = character), bpe (a byte-level BPE trained on the corpus), "
                 "or a tokenizer.json file; its sha256 goes into the manifest",
    "vocab_size": "--tokenizer bpe: vocabulary size, 257..65536",
    "execution_window": "seconds a drawn solver has for a task (default: the chain's, or longer when the job's "
                        "largest task needs it; a shorter one is refused with the numbers)",
    "yes": "post without asking (a terminal is asked to confirm the cost and the expected time)",
    "dry_run": "check the job against the chain and the registered nodes, print its cost, fit and expected time, "
               "and stop before anything is uploaded or spent",
    "timeout": "--wait gives up after this many seconds",
    "out": "write {job_id, manifest_cid, escrow, …} as JSON to this file",
}


def _between(field_: str, value, lo, hi) -> None:
    if not lo <= value <= hi:
        raise BadJobSpec(field_, f"{value} is not in {lo}..{hi}")


def validate_spec(spec: JobSpec) -> None:
    """Checks on the options alone (no file, network or chain is touched)."""
    if spec.model not in MODELS:
        raise BadJobSpec("model", f"{spec.model!r} is not in the zoo ({', '.join(MODELS)})")
    if spec.shards is not None:
        _between("shards", spec.shards, 1, MAX_SHARDS)
    _between("rounds", spec.rounds, 1, MAX_ROUNDS)
    if spec.steps < 1:
        raise BadJobSpec("steps", f"{spec.steps} must be ≥ 1")
    _between("k", spec.k, 1, MAX_TRACE)
    if spec.steps % spec.k:
        raise BadJobSpec("k", f"{spec.k} does not divide --steps ({spec.steps})")
    if spec.steps // spec.k > MAX_TRACE:
        raise BadJobSpec("steps", f"{spec.steps} gives more than {MAX_TRACE} checkpoints per round")
    if spec.replication not in (1, 2):
        raise BadJobSpec("replication", f"{spec.replication} (v1 supports 1 = optimistic, 2 = commit-reveal)")
    for name in ("payment", "stake"):
        value = getattr(spec, name)
        if not (math.isfinite(value) and value > 0):
            raise BadJobSpec(name, f"{value:g} VRT must be a positive amount")
        if int(value * 10**18) == 0:
            raise BadJobSpec(name, f"{value:g} VRT is below one wei")
    if int(spec.stake * 10**18) < MIN_TASK_STAKE:
        raise BadJobSpec("stake", f"{spec.stake:g} VRT is below the contract's minimum task stake of "
                                  f"{MIN_TASK_STAKE / 10**18:g} VRT")
    if spec.profile not in PROFILE_NAMES:
        raise BadJobSpec("profile", f"{spec.profile!r} is not one of {', '.join(PROFILE_NAMES)}")
    if spec.aggregation not in AGGREGATIONS:
        raise BadJobSpec("aggregation", f"{spec.aggregation!r} is not one of {', '.join(AGGREGATIONS)}")
    if spec.aggregation == "trimmed_mean" and not 0 < spec.trim < 0.5:
        raise BadJobSpec("trim", f"{spec.trim:g}: trimmed_mean needs 0 < trim < 0.5")
    if spec.aggregation != "trimmed_mean" and spec.trim != 0:
        raise BadJobSpec("trim", f"{spec.trim:g}: only trimmed_mean trims (use --aggregation trimmed_mean)")
    if spec.batch_size < 1:
        raise BadJobSpec("batch_size", f"{spec.batch_size} must be ≥ 1")
    if spec.optimizer not in OPTIMIZERS:
        raise BadJobSpec("optimizer", f"{spec.optimizer!r} is not one of {', '.join(OPTIMIZERS)}")
    if not (math.isfinite(spec.lr) and 0 < spec.lr <= 10):
        raise BadJobSpec("lr", f"{spec.lr:g} is not in (0, 10]")
    if spec.seed < 0:
        raise BadJobSpec("seed", f"{spec.seed} must be ≥ 0")
    if not 0 <= spec.eval_fraction <= 0.9:
        raise BadJobSpec("eval_fraction", f"{spec.eval_fraction:g} is not in 0..0.9")
    if spec.block < 1:
        raise BadJobSpec("block", f"{spec.block} must be ≥ 1")
    # every job: the manifest records the challenge window the chain enforces (a chain with slow blocks may ask for
    # more: post_job_web3 reads its minimums)
    _between("challenge_window", spec.challenge_window, MIN_CHALLENGE_WINDOW, MAX_WINDOW)
    _between("execution_window", spec.execution_window, 0, MAX_WINDOW)
    _between("reveal_window", spec.reveal_window, 0, MAX_WINDOW)
    for name, least in (("execution_window", MIN_EXECUTION_WINDOW), ("reveal_window", MIN_REVEAL_WINDOW)):
        if 0 < getattr(spec, name) < least:
            raise BadJobSpec(name, f"{getattr(spec, name)} s is below the contract's minimum of {least} s "
                                   "(0 takes the registry's default)")
    if spec.result_floor is not None:
        _between("result_floor", spec.result_floor, 0, MAX_WINDOW // 2)
        if spec.execution_window and spec.result_floor > spec.execution_window // 2:
            raise BadJobSpec("result_floor", f"{spec.result_floor} s is more than half the execution window "
                                             f"({spec.execution_window} s): a replica keeps at least half of it")
    if len(spec.name) > 128:
        raise BadJobSpec("name", f"{len(spec.name)} characters; at most 128")
    validate_fees(spec)
    from verity.submit.modules import validate_parallel  # its module imports this one
    validate_parallel(spec)
    from verity.submit.network import validate_network
    validate_network(spec)


def verification_fee_of(payment: float, fee: float | None, no_fee: bool) -> float | None:
    """The --verification-fee a submit command posts with: the one given, else FEE_OF_PAYMENT x --payment;
    None with --no-verification-fee (no pot is funded)."""
    if no_fee:
        if fee is not None:
            raise BadJobSpec("no_verification_fee", "give --verification-fee or --no-verification-fee, not both")
        return None
    if fee is not None:
        return fee
    # in decimal: 10% of 1.5 VRT is 0.15 VRT, not 0.15000000000000002 (nan and inf stay so: --payment refuses them)
    return float(Decimal(repr(float(payment))) * Decimal(repr(FEE_OF_PAYMENT)))


def fee_rate_bps(rate: float) -> int:
    """--fee-sample-rate as VerificationFees' rateBps (nearest basis point)."""
    return round(rate * BPS)


def validate_fees(spec: JobSpec) -> None:
    """The pot's terms, checked here because `fund` would revert only after the job is posted and its escrow paid.
    --checks-per-task and --fee-sample-rate are checked even without a pot: a typo is still a typo."""
    _between("checks_per_task", spec.checks_per_task, 1, MAX_CHECKS)
    rate = spec.fee_sample_rate
    if not (math.isfinite(rate) and 0 < rate <= 1):
        raise BadJobSpec("fee_sample_rate", f"{rate:g} is not in (0, 1]")
    if fee_rate_bps(rate) == 0:
        raise BadJobSpec("fee_sample_rate", f"{rate:g} is below one basis point (0.0001)")
    fee = spec.verification_fee
    if fee is None:
        return
    if not (math.isfinite(fee) and fee > 0):
        raise BadJobSpec("verification_fee", f"{fee:g} VRT must be a positive amount (--no-verification-fee posts "
                                             "without a pot)")
    if to_wei(fee) == 0:
        raise BadJobSpec("verification_fee", f"{fee:g} VRT is below one wei (default: {FEE_OF_PAYMENT:g} x --payment)")


def to_wei(vrt: float) -> int:
    """VRT as wei, through the float's shortest decimal form (0.1 VRT is exactly 10**17 wei)."""
    return int(Decimal(repr(float(vrt))) * 10**18)


def parse_model_config(text: str | None) -> dict | None:
    """`--model-config`: inline JSON or the path of a .json file; must be a JSON object."""
    if text is None or text == "":
        return None
    source = text
    if not text.lstrip().startswith("{") and Path(text).is_file():
        try:
            source = Path(text).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BadJobSpec("model_config", f"cannot read {text}: {exc}") from None
    try:
        value = json.loads(source)
    except json.JSONDecodeError as exc:
        raise BadJobSpec("model_config", f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(value, dict):
        raise BadJobSpec("model_config", f"must be a JSON object, got {type(value).__name__}")
    return value


def check_writable(field_: str, path: Path | None) -> None:
    """A file can be written at `path`: its missing parent folders are created and a probe
    file is created and removed there (permission bits alone say nothing to root)."""
    if path is None:
        return
    path = Path(path)
    if path.is_dir():
        raise BadJobSpec(field_, f"{path} is a directory")
    existing = next(p for p in path.parents if p.exists())
    if not existing.is_dir():
        raise BadJobSpec(field_, f"cannot write {path}: {existing} is a file, not a directory")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            with open(path, "ab"):
                pass
        else:
            with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", suffix=".probe"):
                pass
    except OSError as exc:
        raise BadJobSpec(field_, f"cannot write {path}: {exc.strerror or exc}") from None
