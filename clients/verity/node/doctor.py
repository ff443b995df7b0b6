"""`verity node doctor`: which determinism profiles this machine can honestly serve.

A node that registers a profile it computes differently loses its stake to the first honest
verifier, so it must know before it registers. Per profile: `check_environment` first (a refusal
names what is missing: torch release, ATen kernel level, MKL branch, GPU); then the short reference
tasks of verity.engine.reference under the profile, their roots compared with the recorded
vectors (tests/vectors/<profile>.json by default). A profile is served only when every root matches.

Results are cached, so `node run` does not retrain at every start: one JSON file per key under
`$XDG_CACHE_HOME/verity/doctor/` (default `~/.cache/verity/doctor/`), the key hashing everything
that decides the bits: environment_fingerprint() with the thread count the tasks run with, the
vector file's sha256, the source of clients/verity/engine and the torch version. Nodes starting
together take a lock per key, so one of them computes and the others read its result.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import torch

import verity
from verity.chain.protocol import PROFILE_BITS
from verity.engine import reference
from verity.engine.determinism import (CUBLAS_WORKSPACE, PROFILES, check_environment, deterministic,
                                       environment_fingerprint, get_profile)
from verity.engine.reference import ARCHES, read_vectors, run_reference, time_calibration
from verity.errors import ProfileUnsupported, VerityError

log = logging.getLogger("verity.node.doctor")

ENGINE_DIR = Path(reference.__file__).resolve().parent
DEFAULT_VECTORS = Path(verity.__file__).resolve().parents[2] / "tests" / "vectors"  # the repository's
CACHE_VERSION = 3  # 2: each task also carries its family's calibration timing (cal_ms_per_step); 3: CPU steps timed
# by the training thread's CPU clock (engine/reference.cpu_clock_is_step_time), so older wall-clock timings are dropped


class UnknownProfile(VerityError, ValueError):
    def __init__(self, name: str):
        super().__init__(f"unknown profile {name!r} (known: {', '.join(PROFILES)})")


class VectorsNotFound(VerityError, FileNotFoundError):
    def __init__(self, directory: Path):
        super().__init__(f"reference vectors directory {directory} does not exist: pass --vectors DIR "
                         "(a copy of the repository's tests/vectors)")


class NoProfileServed(VerityError, RuntimeError):
    def __init__(self, reasons: dict[str, str]):
        why = "; ".join(f"{p}: {r}" for p, r in reasons.items())
        super().__init__(f"this machine passes no determinism profile, so it could serve no job ({why}); "
                         "run `verity node doctor` for details")


@dataclass
class TaskCheck:
    root: str
    matches: bool
    ms_per_step: float
    cal_ms_per_step: float = 0.0  # the family's larger calibration task (reference.CALIBRATION), timed only; 0 = none


@dataclass
class ProfileCheck:
    """One profile's verdict: `ok` only when the environment allows it and every reference root matches."""
    profile: str
    ok: bool
    tasks: dict[str, TaskCheck] = field(default_factory=dict)
    reason: str | None = None
    cached: bool = False

    def to_json(self) -> dict:
        return {"ok": self.ok, "reason": self.reason,
                "tasks": {a: {"root": t.root, "matches": t.matches, "ms_per_step": t.ms_per_step,
                              "cal_ms_per_step": t.cal_ms_per_step} for a, t in self.tasks.items()}}

    @classmethod
    def from_json(cls, profile: str, doc: dict, cached: bool = False) -> "ProfileCheck":
        tasks = {a: TaskCheck(str(t["root"]), bool(t["matches"]), float(t["ms_per_step"]),
                              float(t.get("cal_ms_per_step", 0.0))) for a, t in doc["tasks"].items()}
        return cls(profile, bool(doc["ok"]), tasks, doc.get("reason"), cached)


# ------------------------------------------------------------------ comparison
def compare(profile: str, vectors: dict, roots: dict[str, tuple]) -> ProfileCheck:
    """The verdict for `roots` (arch -> (root hex, ms per step[, calibration ms per step])) against a profile's
    vector document."""
    recorded = vectors["tasks"]   # a family without a recorded root never matches: its jobs are declined
    tasks = {arch: TaskCheck(r[0], arch in recorded and r[0] == recorded[arch]["root"], *r[1:])
             for arch, r in roots.items()}
    differ = [a for a in ARCHES if a in recorded and (a not in tasks or not tasks[a].matches)]
    if not differ:
        return ProfileCheck(profile, True, tasks)
    return ProfileCheck(profile, False, tasks, f"roots differ from the vectors (recorded with torch "
                                               f"{vectors['torch']}) for {', '.join(differ)}: this machine computes "
                                               f"other bits than the {vectors['pins'].get('class')} class")


def stale_pins(profile: str, vectors: dict) -> str | None:
    """Why a vector file cannot speak for the profile as defined now (None: it can)."""
    now = get_profile(profile).pins()
    if vectors["pins"] != now:
        changed = sorted(k for k in set(now) | set(vectors["pins"]) if now.get(k) != vectors["pins"].get(k))
        return f"the vectors were recorded for other pins ({', '.join(changed)}); rerun scripts/make_vectors.py"
    return None


# ------------------------------------------------------------------ cache
def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "verity" / "doctor"


def engine_digest() -> str:
    """sha256 over the engine's Python and C sources (path and bytes): any change there may change the bits."""
    h = hashlib.sha256()
    for path in sorted([*ENGINE_DIR.rglob("*.py"), *ENGINE_DIR.rglob("*.c")]):
        rel = path.relative_to(ENGINE_DIR).as_posix()
        h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def cache_key(profile: str, threads: int, vectors_sha256: str, *, fingerprint: dict | None = None,
              engine: str | None = None) -> str:
    """A name for one profile's result under everything that decides its bits."""
    fp = dict(fingerprint if fingerprint is not None else environment_fingerprint())
    fp["threads"] = threads  # the count the tasks run with, not the one the process happens to hold
    doc = {"v": CACHE_VERSION, "profile": profile, "fingerprint": fp, "threads": threads,
           "vectors": vectors_sha256, "engine": engine if engine is not None else engine_digest(),
           "torch": torch.__version__}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


class ResultCache:
    """One JSON file per key, written atomically (unique tmp file + rename); a lock file per key."""

    def __init__(self, directory: Path | None = None):
        self.dir = Path(directory) if directory is not None else cache_dir()

    def path(self, key: str) -> Path:
        return self.dir / f"{key}.json"

    def get(self, key: str) -> dict | None:
        try:
            doc = json.loads(self.path(key).read_text())
            ProfileCheck.from_json("?", doc)  # the shape is right
            return doc
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("ignoring unreadable doctor cache entry %s: %s", self.path(key), exc)
            return None

    def put(self, key: str, doc: dict) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=f".{key[:16]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(doc, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path(key))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Held while one process computes `key`; the others wait, then read its result."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / f"{key}.lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


# ------------------------------------------------------------------ the checks
def vectors_path(vectors_dir: Path, profile: str) -> Path:
    return Path(vectors_dir) / f"{profile}.json"


def check_profile(profile: str, vectors_dir: Path = DEFAULT_VECTORS, *, threads: int | None = None,
                  cache: ResultCache | None = None, fresh: bool = False,
                  on_task: Callable[[str, str], None] | None = None) -> ProfileCheck:
    """Whether this process can serve `profile`: environment, then the reference tasks against the vectors.

    `threads` applies to portable-f32 only (a native class pins its own); None: the process's current count.
    With `cache`, a result for the same key is reused unless `fresh`; a computed result is stored either way."""
    if profile not in PROFILES:
        raise UnknownProfile(profile)
    try:
        p = check_environment(profile)
    except ProfileUnsupported as exc:
        return ProfileCheck(profile, False, reason=exc.reason)
    path = vectors_path(vectors_dir, profile)
    if not path.exists():
        return ProfileCheck(profile, False, reason=f"no reference vectors for this profile ({path} does not exist; "
                                                   "scripts/make_vectors.py records them on a machine of the class)")
    vectors = read_vectors(path, profile)
    stale = stale_pins(profile, vectors)
    if stale:
        return ProfileCheck(profile, False, reason=stale)
    if threads is not None and threads < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    run_threads = p.num_threads or threads or torch.get_num_threads()
    key = cache_key(profile, run_threads, hashlib.sha256(path.read_bytes()).hexdigest())
    with cache.lock(key) if cache is not None else contextlib.nullcontext():
        if cache is not None and not fresh and (doc := cache.get(key)) is not None:
            return ProfileCheck.from_json(profile, doc, cached=True)
        roots = {}
        with deterministic(profile), tempfile.TemporaryDirectory(prefix="verity-doctor-") as tmp:
            torch.set_num_threads(run_threads)
            for arch in ARCHES:
                if on_task is not None:
                    on_task(profile, arch)
                roots[arch] = (*run_reference(profile, arch, Path(tmp)), time_calibration(profile, arch))
        result = compare(profile, vectors, roots)
        if cache is not None:
            cache.put(key, result.to_json())
    return result


def run_doctor(profiles: list[str] | None = None, vectors_dir: Path = DEFAULT_VECTORS, *, threads: int | None = None,
               cache: ResultCache | None = None, fresh: bool = False,
               on_task: Callable[[str, str], None] | None = None) -> dict[str, ProfileCheck]:
    """Every profile asked (None: every known one), in order; UnknownProfile before anything runs."""
    names = list(PROFILES) if not profiles else list(dict.fromkeys(profiles))
    for name in names:
        if name not in PROFILES:
            raise UnknownProfile(name)
    if not Path(vectors_dir).is_dir():
        raise VectorsNotFound(Path(vectors_dir))
    if not torch.cuda.is_initialized():
        # cuBLAS reads it when CUDA starts, and the fingerprint (device name) starts CUDA: set it first, as
        # apply_profile would, so that reading the fingerprint does not make a CUDA profile refuse
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    return {name: check_profile(name, vectors_dir, threads=threads, cache=cache, fresh=fresh, on_task=on_task)
            for name in names}


def report(checks: dict[str, ProfileCheck]) -> dict:
    """The doctor's JSON: {"profiles": {P: {"ok", "reason", "tasks": {arch: {"root", "matches", "ms_per_step",
    "cal_ms_per_step"}}}}} (the last: the family's calibration task, engine/reference.CALIBRATION, timed only)."""
    return {"profiles": {name: c.to_json() for name, c in checks.items()}}


def exit_code(checks: dict[str, ProfileCheck], asked: bool) -> int:
    """0 when every profile asked for passes (`asked`), or when at least one passes (every profile checked)."""
    ok = [c.ok for c in checks.values()]
    return 0 if (all(ok) if asked else any(ok)) else 1


def profile_mask(checks: dict[str, ProfileCheck]) -> int:
    """The on-chain profile bits of the profiles that passed."""
    mask = 0
    for name, c in checks.items():
        if c.ok:
            mask |= PROFILE_BITS.get(name, 0)
    return mask


def profile_names(mask: int) -> list[str]:
    return [name for name, bit in PROFILE_BITS.items() if mask & bit]


def served_profiles(vectors_dir: Path = DEFAULT_VECTORS, cache: ResultCache | None = None) -> tuple[int, dict]:
    """What `node run` and `node register` serve: (mask, checks); NoProfileServed when none passes.
    Profiles the environment refuses cost nothing; the others run once per cache key."""
    checks = run_doctor(None, vectors_dir, cache=cache if cache is not None else ResultCache())
    for name, c in checks.items():
        if c.ok:
            log.info("profile %s: served (reference roots match%s)", name, ", cached" if c.cached else "")
        else:
            log.info("profile %s: not served: %s", name, c.reason)
    mask = profile_mask(checks)
    if mask == 0:
        raise NoProfileServed({n: c.reason or "failed" for n, c in checks.items()})
    return mask, checks
