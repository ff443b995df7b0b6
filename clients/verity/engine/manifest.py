"""The job manifest (DESIGN §3): a versioned, strictly validated pydantic model.

A manifest arrives as JSON bytes from IPFS. `load_manifest` caps its size,
refuses duplicate keys, validates every field (extra fields are forbidden,
every number is bounded) and the rules that tie fields together, and raises
`ManifestInvalid` naming the offending field. `manifest_schema()` is the
JSON schema (also in docs/manifest.schema.json).
"""
from __future__ import annotations

import json
import math
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.functional_validators import AfterValidator

from verity.errors import ManifestInvalid
from verity.engine.determinism import ANY_DEVICE, PROFILES
from verity.engine.models import MAX_PARAMETERS, ModelSpec, count_parameters
from verity.engine.modules import matching, parameter_shapes

SCHEMA_VERSION = 1
MAX_MANIFEST_BYTES = 64 * 1024
_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"


def _check_cidv0(cid: str) -> str:
    # CIDv0 = base58btc(0x12 0x20 ‖ sha2-256 digest): always 46 chars starting "Qm".
    if len(cid) != 46 or not cid.startswith("Qm"):
        raise ValueError("not a CIDv0 (expected 46 characters starting with 'Qm')")
    n = 0
    for ch in cid:
        i = _B58.find(ch)
        if i < 0:
            raise ValueError(f"not a CIDv0 (character {ch!r} is not base58btc)")
        n = n * 58 + i
    raw = n.to_bytes(34, "big") if n.bit_length() <= 272 else b""
    if raw[:2] != b"\x12\x20":
        raise ValueError("not a CIDv0 (multihash is not sha2-256/32)")
    return cid


Cid = Annotated[str, AfterValidator(_check_cidv0)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ShardRef(_Strict):
    cid: Cid
    samples: int = Field(ge=1, le=1_000_000_000)


class Init(_Strict):
    """Exactly one of: an init seed, or the CID of a safetensors weights file."""
    seed: int | None = Field(default=None, ge=0, le=2**63 - 1)
    weights: Cid | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> "Init":
        if (self.seed is None) == (self.weights is None):
            raise ValueError("give exactly one of 'seed' or 'weights'")
        return self


class SGD(_Strict):
    name: Literal["sgd"]
    lr: float = Field(gt=0, le=10)
    momentum: float = Field(default=0.0, ge=0, lt=1)
    weight_decay: float = Field(default=0.0, ge=0, le=1)


class Adam(_Strict):
    """`adam` (L2 added to the gradient) or `adamw` (decoupled weight decay)."""
    name: Literal["adam", "adamw"]
    lr: float = Field(gt=0, le=10)
    betas: tuple[Annotated[float, Field(ge=0, lt=1)], Annotated[float, Field(ge=0, lt=1)]] = (0.9, 0.999)
    eps: float = Field(default=1e-8, gt=0, le=1)
    weight_decay: float = Field(default=0.0, ge=0, le=1)


Optimizer = Annotated[Union[SGD, Adam], Field(discriminator="name")]


class Outer(_Strict):
    """DiLoCo-style outer optimizer over each round's merged model (engine/outer.py):
    SGD with (Nesterov) momentum on the pseudo-gradient prev - merged."""
    lr: float = Field(gt=0, le=10)
    momentum: float = Field(ge=0, lt=1)
    nesterov: bool = True


class Aggregation(_Strict):
    rule: Literal["mean", "median", "trimmed_mean"] = "mean"
    trim: float = Field(default=0.0, ge=0, lt=0.5)  # fraction cut at each end (trimmed_mean only)
    outer: Outer | None = None

    @model_validator(mode="after")
    def _trim_only_for_trimmed_mean(self) -> "Aggregation":
        if self.rule == "trimmed_mean" and self.trim <= 0:
            raise ValueError("trimmed_mean needs trim > 0")
        if self.rule != "trimmed_mean" and self.trim != 0:
            raise ValueError(f"trim is only meaningful for trimmed_mean, not {self.rule}")
        return self


class Verification(_Strict):
    replication: int = Field(default=1, ge=1, le=16)
    challenge_window: int = Field(default=3600, ge=3, le=30 * 24 * 3600)  # seconds, as posted on chain (>= its minimum)


class Hardware(_Strict):
    device_class: Literal["cpu", "cuda"] = "cpu"
    min_memory_mb: int = Field(default=1024, ge=1, le=1 << 22)
    # The poster's declared milliseconds per training step on this hardware class: nodes decline (as invalid
    # inputs) a job whose execution window is shorter than steps_per_round x this (node/feasibility.py).
    step_budget_ms: int | None = Field(default=None, ge=1, le=3_600_000)
    # Network requirements of the job's replica draws (NodeRegistry "network classes"): only nodes that declared this
    # region (a name of verity.chain.protocol.REGIONS) and at least this bandwidth, rounded up to a tier floor.
    region: str | None = Field(default=None, description="replicas only from nodes that declared this region: a "
                                                          "name of verity.chain.protocol.REGIONS")
    min_bandwidth_mbps: int | None = Field(default=None, ge=1, le=10_000,  # protocol.MAX_BANDWIDTH_FLOOR_MBPS
                                           description="replicas only from nodes declaring at least this many Mbit/s "
                                                       "(rounded up to a tier floor: 10, 100, 1000, 10000)")

    @field_validator("region")
    @classmethod
    def _known_region(cls, value: str | None) -> str | None:
        from verity.chain.protocol import REGIONS

        if value is not None and value not in REGIONS:
            raise ValueError(f"{value!r} is not a region ({', '.join(REGIONS)})")
        return value


Dim = Annotated[int, Field(ge=1, le=65536)]
ModuleName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_-]+$")]
ParamPrefix = Annotated[str, Field(min_length=1, max_length=256)]


class Module(_Strict):
    """A named group of parameters: every parameter whose name starts with one of `params`."""
    name: ModuleName
    params: list[ParamPrefix] = Field(min_length=1, max_length=64)


class DataSpec(_Strict):
    """What every shard of the job holds (per sample; the leading axis is the sample)."""
    task: Literal["classification", "lm"]
    x_shape: list[Dim] = Field(min_length=1, max_length=4)
    x_dtype: Literal["float32", "int64"]
    y_shape: list[Dim] = Field(default_factory=list, max_length=4)
    y_dtype: Literal["int64"] = "int64"
    num_classes: int | None = Field(default=None, ge=2, le=65536)  # classification
    vocab_size: int | None = Field(default=None, ge=2, le=65536)   # lm
    # lm with a `tokenizers` tokenizer (submit/formats.py): its tokenizer.json's sha256, and where it is (absent: the
    # shards' own character vocabulary)
    tokenizer_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    tokenizer_cid: Cid | None = None

    @model_validator(mode="after")
    def _task_fields(self) -> "DataSpec":
        if self.task == "classification":
            if self.num_classes is None or self.vocab_size is not None or self.y_shape:
                raise ValueError("classification needs num_classes, no vocab_size, y_shape []")
            if self.tokenizer_sha256 is not None or self.tokenizer_cid is not None:
                raise ValueError("a tokenizer belongs to an lm job")
        else:
            if self.vocab_size is None or self.num_classes is not None:
                raise ValueError("lm needs vocab_size and no num_classes")
            if self.x_dtype != "int64" or len(self.x_shape) != 1 or self.y_shape != self.x_shape:
                raise ValueError("lm needs x_dtype int64 and x_shape == y_shape == [block]")
        return self


class Manifest(_Strict):
    schema_version: Literal[1]
    name: str = Field(default="", max_length=128)
    model: ModelSpec
    init: Init
    data: DataSpec
    shards: list[ShardRef] = Field(min_length=1, max_length=1024)
    eval_shard: ShardRef | None = None
    optimizer: Optimizer
    batch_size: int = Field(ge=1, le=65536)
    steps_per_round: int = Field(ge=1, le=10_000_000)
    rounds: int = Field(ge=1, le=10_000)
    checkpoint_interval: int = Field(ge=1, le=10_000_000)
    aggregation: Aggregation = Aggregation()
    determinism: Literal["cpu-f32-strict", "cuda-f32-strict", "portable-f32"] = "cpu-f32-strict"
    verification: Verification = Verification()
    hardware: Hardware = Hardware()
    # Module-parallel training (engine/modules.py): both or neither; absent = every task trains everything.
    modules: list[Module] | None = Field(default=None, min_length=1, max_length=64)
    module_plan: list[Annotated[list[ModuleName], Field(min_length=1, max_length=64)]] | None = \
        Field(default=None, min_length=1, max_length=1024)
    # Micro-batches per step (engine/trainer.py, docs/engine.md "Several devices in one node"): the step's batch is
    # split into this many equal chunks whose gradients are summed in a fixed order, so the work can be spread over
    # processes or GPUs of one node bit for bit. A power of two dividing batch_size; absent = 1.
    micro_batches: int | None = Field(default=None, ge=1, le=64)

    @field_validator("micro_batches")
    @classmethod
    def _micro_batches_split_the_batch(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is None:
            return value
        if value & (value - 1):
            raise ValueError(f"{value} is not a power of two (the 1/micro_batches loss scale must be exact)")
        batch = info.data.get("batch_size")
        if batch is not None and batch % value:
            raise ValueError(f"{value} does not divide batch_size ({batch})")
        return value

    @property
    def n_checkpoints(self) -> int:
        """n: the trace of a TRAIN task has n + 1 hashes."""
        return self.steps_per_round // self.checkpoint_interval


def _cross_checks(m: Manifest) -> None:
    """Rules that tie fields together; each failure names a field."""
    if m.steps_per_round % m.checkpoint_interval:
        raise ManifestInvalid("checkpoint_interval",
                              f"{m.checkpoint_interval} does not divide steps_per_round ({m.steps_per_round})")
    device = PROFILES[m.determinism].device
    if device != ANY_DEVICE and device != m.hardware.device_class:  # portable-f32 runs on either
        raise ManifestInvalid("hardware.device_class",
                              f"{m.hardware.device_class!r} does not match determinism profile {m.determinism!r}")
    d, c = m.data, m.model.config
    if m.model.arch == "mlp":
        if d.task != "classification" or d.x_dtype != "float32":
            raise ManifestInvalid("data.task", "mlp needs float32 classification data")
        if math.prod(d.x_shape) != c.in_features:
            raise ManifestInvalid("model.config.in_features", f"{c.in_features} != prod(data.x_shape) = {math.prod(d.x_shape)}")
        if c.out_features != d.num_classes:
            raise ManifestInvalid("model.config.out_features", f"{c.out_features} != data.num_classes ({d.num_classes})")
    elif m.model.arch == "cnn":
        if d.task != "classification" or d.x_dtype != "float32":
            raise ManifestInvalid("data.task", "cnn needs float32 classification data")
        if d.x_shape != [c.in_channels, c.height, c.width]:
            raise ManifestInvalid("data.x_shape", f"{d.x_shape} != [in_channels, height, width] of the cnn")
        if c.num_classes != d.num_classes:
            raise ManifestInvalid("model.config.num_classes", f"{c.num_classes} != data.num_classes ({d.num_classes})")
    elif m.model.arch == "resnet":
        from verity.engine.resnet import check_resnet_data
        if (why := check_resnet_data(c, d)) is not None:
            raise ManifestInvalid(*why)
    elif m.model.arch == "gpt":
        if d.task != "lm":
            raise ManifestInvalid("data.task", "gpt needs lm data")
        if d.vocab_size != c.vocab_size:
            raise ManifestInvalid("model.config.vocab_size", f"{c.vocab_size} != data.vocab_size ({d.vocab_size})")
        if d.x_shape[0] > c.block_size:
            raise ManifestInvalid("data.x_shape", f"sequence length {d.x_shape[0]} exceeds block_size {c.block_size}")
    elif m.model.arch == "decoder":
        if d.task != "lm":
            raise ManifestInvalid("data.task", "decoder needs lm data")
        if d.vocab_size > c.vocab_size:   # a published model's vocabulary may be larger than its tokenizer's ids
            raise ManifestInvalid("model.config.vocab_size", f"{c.vocab_size} < data.vocab_size ({d.vocab_size}): "
                                                             "the model must have a row for every token id of the data")
        if d.x_shape[0] > c.block_size:
            raise ManifestInvalid("data.x_shape", f"sequence length {d.x_shape[0]} exceeds block_size {c.block_size}")
    else:
        raise ManifestInvalid("model.arch", f"unknown arch {m.model.arch!r}")
    if PROFILES[m.determinism].portable:
        _portable_fits(m)
    n_params = count_parameters(m.model)
    if n_params > MAX_PARAMETERS:
        raise ManifestInvalid("model.config", f"{n_params} parameters exceed the limit of {MAX_PARAMETERS}")
    _module_checks(m)


def _module_checks(m: Manifest) -> None:
    """modules / module_plan: defined together, every prefix selects something, no parameter in
    two modules, every module trained by some task, each plan entry a set of defined names."""
    if (m.modules is None) != (m.module_plan is None):
        field = "module_plan" if m.module_plan is None else "modules"
        raise ManifestInvalid(field, "modules and module_plan go together: give both or neither")
    if m.modules is None:
        return
    names = list(parameter_shapes(m.model))
    owner: dict[str, str] = {}
    defined: dict[str, int] = {}
    for i, mod in enumerate(m.modules):
        if mod.name in defined:
            raise ManifestInvalid(f"modules.{i}.name", f"{mod.name!r} is already module {defined[mod.name]}")
        defined[mod.name] = i
        for j, prefix in enumerate(mod.params):
            hits = matching(prefix, names)
            if not hits:
                raise ManifestInvalid(f"modules.{i}.params.{j}", f"prefix {prefix!r} matches no parameter of the model")
            for n in hits:
                if owner.get(n, mod.name) != mod.name:
                    raise ManifestInvalid(f"modules.{i}.params.{j}",
                                          f"parameter {n!r} is already in module {owner[n]!r} "
                                          "(modules must be disjoint)")
                owner[n] = mod.name
    if len(m.module_plan) != len(m.shards):
        raise ManifestInvalid("module_plan",
                              f"{len(m.module_plan)} entries for {len(m.shards)} shards (one per shard task)")
    trained: set[str] = set()
    for i, entry in enumerate(m.module_plan):
        for j, name in enumerate(entry):
            if name not in defined:
                raise ManifestInvalid(f"module_plan.{i}.{j}", f"{name!r} is not a module name")
        if len(set(entry)) != len(entry):
            raise ManifestInvalid(f"module_plan.{i}", "names a module twice")
        trained.update(entry)
    for i, mod in enumerate(m.modules):
        if mod.name not in trained:
            raise ManifestInvalid(f"modules.{i}", f"module {mod.name!r} is trained by no task of module_plan")


def _portable_fits(m: Manifest) -> None:
    """portable-f32's exact GEMMs bound the contraction length; refuse a job no node could run."""
    from verity.engine.portable.matmul import SCHEMES
    from verity.engine.portable.models import SCHEME, contraction_lengths
    limit = SCHEMES[SCHEME].max_contraction()
    for field, k in contraction_lengths(m.model, m.batch_size, m.data.x_shape).items():
        if k > limit:
            raise ManifestInvalid(field, f"portable-f32 sums at most {limit} products exactly per GEMM; this job "
                                         f"needs {k} (smaller batch, sequence or layer widths)")


def _no_duplicate_keys(pairs: list[tuple[str, object]]) -> dict:
    seen: dict = {}
    for key, value in pairs:
        if key in seen:
            raise ManifestInvalid(key, "duplicate key in JSON object")
        seen[key] = value
    return seen


def load_manifest(data: bytes, max_bytes: int = MAX_MANIFEST_BYTES) -> Manifest:
    """Parse and validate manifest bytes (as fetched from IPFS)."""
    if len(data) > max_bytes:
        raise ManifestInvalid("<document>", f"{len(data)} bytes exceed the cap of {max_bytes}")
    try:
        doc = json.loads(data, object_pairs_hook=_no_duplicate_keys)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ManifestInvalid("<document>", f"not JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ManifestInvalid("<document>", "top level must be a JSON object")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise ManifestInvalid("schema_version", f"{doc.get('schema_version')!r} is not supported (this client reads {SCHEMA_VERSION})")
    try:
        manifest = Manifest.model_validate_json(data)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "<document>"
        more = f" (+{e.error_count() - 1} more)" if e.error_count() > 1 else ""
        raise ManifestInvalid(field, err["msg"] + more) from None
    _cross_checks(manifest)
    return manifest


def validate_manifest(manifest: Manifest) -> Manifest:
    """Re-run every check on a manifest built in Python (e.g. by a submitter)."""
    return load_manifest(manifest_bytes(manifest))


# Optional fields added after manifests were in use: left out of the canonical bytes while
# unset, so every earlier manifest keeps its bytes, CID and hash.
_OMIT_WHEN_UNSET = (("modules",), ("module_plan",), ("aggregation", "outer"), ("hardware", "step_budget_ms"),
                    ("hardware", "region"), ("hardware", "min_bandwidth_mbps"), ("micro_batches",))


def manifest_bytes(manifest: Manifest) -> bytes:
    """Canonical JSON bytes to upload (sorted keys, no whitespace)."""
    doc = manifest.model_dump(mode="json")
    for *parents, key in _OMIT_WHEN_UNSET:
        d = doc
        for p in parents:
            d = d[p]
        if d.get(key, 0) is None:
            del d[key]
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def manifest_schema() -> dict:
    return Manifest.model_json_schema()
