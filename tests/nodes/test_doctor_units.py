"""Unit tests of `verity node doctor` (verity.node.doctor) and of nodes serving only the profiles they pass:
comparing roots with vector files, what a cache key depends on, the cache itself, the checks that run no
task (refused environment, missing or stale vectors, a cached result), and the node's gates (the context,
the verifier and the auditor decline a job under a profile the node does not serve). No reference task
runs here: tests/nodes/test_doctor_cli.py runs the real command."""
from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from verity.chain.protocol import PROFILE_BITS, PROFILE_CPU_F32_STRICT, PROFILE_PORTABLE_F32, TaskStatus
from verity.engine.determinism import PROFILES, environment_fingerprint
from verity.engine.reference import ARCHES, VectorsInvalid, read_vectors, vector_doc
from verity.errors import ProfileUnsupported
from verity.node import doctor
from verity.node.app import ServingContext
from verity.node.auditor import AuditorRole
from verity.node.doctor import (DEFAULT_VECTORS, NoProfileServed, ProfileCheck, ResultCache, TaskCheck, UnknownProfile,
                                VectorsNotFound, cache_key, check_profile, compare, exit_code, profile_mask,
                                run_doctor, stale_pins)
from verity.node.phases import Phase
from verity.node.snapshot import Snapshot
from verity.node.verifier import VerifierRole, watch_key

ROOTS = {arch: hashlib.sha256(arch.encode()).hexdigest() for arch in ARCHES}
SHA = "00" * 32


def _vectors(profile="portable-f32", roots=ROOTS) -> dict:
    return json.loads(json.dumps(vector_doc(profile, roots)))  # as read back from a file


def _write(directory: Path, doc) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{doc['profile'] if isinstance(doc, dict) and 'profile' in doc else 'portable-f32'}.json"
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


# ---------------------------------------------------------------- comparing with vectors
def test_compare_everyRootMatches_isOk_succeeds():
    c = compare("portable-f32", _vectors(), {a: (r, 1.5) for a, r in ROOTS.items()})
    assert c.ok and c.reason is None and set(c.tasks) == set(ARCHES)
    assert all(t.matches and t.ms_per_step == 1.5 for t in c.tasks.values())


def test_compare_oneRootDiffers_notOkNamingTheTask_fails():
    roots = {a: (r, 1.0) for a, r in ROOTS.items()}
    roots["cnn"] = ("ff" * 32, 1.0)
    c = compare("portable-f32", _vectors(), roots)
    assert not c.ok and [a for a, t in c.tasks.items() if not t.matches] == ["cnn"]
    assert "cnn" in c.reason and "mlp" not in c.reason


def test_compare_familyWithoutRecordedRoot_profileOkButFamilyNotServed_succeeds():
    """A native class's file records the families a machine of the class ran; a newer family (decoder) has no root
    there: the profile still passes on the others, and the family is marked unmatched (its jobs are declined)."""
    doc = _vectors("cpu-f32-strict")
    del doc["tasks"]["decoder"]
    c = compare("cpu-f32-strict", doc, {a: (r, 1.0) for a, r in ROOTS.items()})
    assert c.ok and [a for a, t in c.tasks.items() if not t.matches] == ["decoder"]


def test_compare_missingTask_notOk_fails():
    roots = {a: (r, 1.0) for a, r in ROOTS.items() if a != "gpt"}
    c = compare("portable-f32", _vectors(), roots)
    assert not c.ok and "gpt" in c.reason


def test_checkedInVectors_readAndMatchTheProfilesPins_succeeds():
    for profile in ("portable-f32", "cpu-f32-strict"):
        doc = read_vectors(DEFAULT_VECTORS / f"{profile}.json", profile)
        assert stale_pins(profile, doc) is None
    # portable-f32's roots are the same on every machine: all families; a native class's come from a machine of the
    # class, and the families added after the Intel AVX2 recording (decoder, resnet) wait for one
    assert set(read_vectors(DEFAULT_VECTORS / "portable-f32.json", "portable-f32")["tasks"]) == set(ARCHES)
    assert set(read_vectors(DEFAULT_VECTORS / "cpu-f32-strict.json", "cpu-f32-strict")["tasks"]) == {"mlp", "cnn", "gpt"}
    assert not (DEFAULT_VECTORS / "cuda-f32-strict.json").exists()   # recorded only on a machine of the class


@pytest.mark.parametrize("content, why", [
    ("{not json", "not JSON"),
    ("[1, 2]", "expected an object"),
    (json.dumps({"profile": "cpu-f32-strict", "torch": "x", "pins": {}, "tasks": {}}), "records profile"),
    (json.dumps(vector_doc("portable-f32", ROOTS) | {"tasks": {}}), "some of"),
    (json.dumps(vector_doc("portable-f32", ROOTS) | {"tasks": {"vgg": {"root": ROOTS["mlp"]}}}), "some of"),
    (json.dumps(vector_doc("portable-f32", ROOTS | {"gpt": "0x" + ROOTS["gpt"][2:]})), "tasks.gpt.root"),
    (json.dumps(vector_doc("portable-f32", ROOTS) | {"pins": [1]}), "pins must be"),
])
def test_readVectors_corruptFile_raisesNamingIt_fails(tmp_path, content, why):
    path = tmp_path / "portable-f32.json"
    path.write_text(content)
    with pytest.raises(VectorsInvalid, match=why) as e:
        read_vectors(path, "portable-f32")
    assert str(path) in str(e.value) and "make_vectors.py" in str(e.value)


def test_stalePins_changedPin_namesIt_fails():
    doc = _vectors("cpu-f32-strict")
    doc["pins"]["aten_capability"] = "AVX512"
    assert "aten_capability" in stale_pins("cpu-f32-strict", doc)
    assert stale_pins("cpu-f32-strict", _vectors("cpu-f32-strict")) is None


# ---------------------------------------------------------------- cache key and cache
def test_cacheKey_changesWithEverythingThatDecidesTheBits_succeeds(monkeypatch):
    fp = environment_fingerprint()
    base = dict(profile="portable-f32", threads=1, vectors_sha256=SHA, fingerprint=fp, engine="e1")

    def key(**change):
        args = base | change
        return cache_key(args.pop("profile"), args.pop("threads"), args.pop("vectors_sha256"), **args)

    k = key()
    assert key() == k and len(k) == 64
    def other(field, a, b):  # a fingerprint with `field` changed (import verity already sets some of them)
        return fp | {field: a if fp[field] != a else b}

    variants = [key(profile="cpu-f32-strict"), key(threads=2), key(vectors_sha256="11" * 32), key(engine="e2"),
                key(fingerprint=other("aten_cpu_capability", "default", "avx2")),
                key(fingerprint=other("cpu_capability", "DEFAULT", "AVX2")),
                key(fingerprint=other("mkl_cbwr", "AUTO", "COMPATIBLE")),
                key(fingerprint=other("device", "NVIDIA H200", "cpu"))]
    assert len({k, *variants}) == len(variants) + 1
    assert key(fingerprint=fp | {"threads": 7}) == k   # the threads the tasks run with count, not the process's
    monkeypatch.setattr(torch, "__version__", "2.99.0+cpu")
    assert key() != k


def test_engineDigest_followsEveryEngineSource_succeeds(tmp_path, monkeypatch):
    (tmp_path / "portable").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "portable" / "ops.py").write_text("y = 2\n")
    monkeypatch.setattr(doctor, "ENGINE_DIR", tmp_path)
    d0 = doctor.engine_digest()
    (tmp_path / "portable" / "ops.py").write_text("y = 3\n")
    d1 = doctor.engine_digest()
    (tmp_path / "notes.txt").write_text("not source")
    assert d0 != d1 == doctor.engine_digest()
    (tmp_path / "b.py").write_text("")
    assert doctor.engine_digest() != d1


def test_engineDigest_realEngine_coversPortableOps_succeeds():
    files = {p.relative_to(doctor.ENGINE_DIR).as_posix() for p in doctor.ENGINE_DIR.rglob("*.py")}
    assert {"runner.py", "determinism.py", "reference.py"} <= files and any(f.startswith("portable/") for f in files)


def test_resultCache_roundTripAndConcurrentWriters_succeeds(tmp_path):
    cache = ResultCache(tmp_path / "c")
    check = ProfileCheck("portable-f32", True, {a: TaskCheck(r, True, 2.0) for a, r in ROOTS.items()})
    assert cache.get("k") is None
    writers = [threading.Thread(target=cache.put, args=("k", check.to_json())) for _ in range(8)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    back = ProfileCheck.from_json("portable-f32", cache.get("k"), cached=True)
    assert back.ok and back.cached and back.tasks == check.tasks
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["k.json"]   # no tmp file left behind
    cache.path("k").write_text("{torn")
    assert cache.get("k") is None                                        # unreadable: recomputed, not trusted


def test_cacheDir_followsXdgCacheHome_succeeds(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert doctor.cache_dir() == tmp_path / "verity" / "doctor"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert doctor.cache_dir() == Path.home() / ".cache" / "verity" / "doctor"


# ---------------------------------------------------------------- checks that run no task
def test_checkProfile_refusedEnvironment_notOkAndNoTask_fails(tmp_path, monkeypatch):
    from verity.engine import determinism

    monkeypatch.setattr(determinism.torch.cuda, "is_available", lambda: False)  # a machine without a GPU, anywhere
    c = check_profile("cuda-f32-strict", DEFAULT_VECTORS, cache=ResultCache(tmp_path))
    assert not c.ok and c.tasks == {} and "CUDA" in c.reason
    assert not any(tmp_path.iterdir())                                   # nothing computed, nothing cached


def test_checkProfile_noVectorFile_notOk_fails(tmp_path):
    (tmp_path / "v").mkdir()
    c = check_profile("portable-f32", tmp_path / "v")
    assert not c.ok and c.tasks == {} and "no reference vectors" in c.reason and str(tmp_path / "v") in c.reason


def test_checkProfile_stalePins_notOk_fails(tmp_path):
    doc = _vectors()
    doc["pins"]["torch"] = "2.12.0"
    _write(tmp_path, doc)
    c = check_profile("portable-f32", tmp_path)
    assert not c.ok and c.tasks == {} and "torch" in c.reason


def test_checkProfile_corruptVectorFile_raises_fails(tmp_path):
    _write(tmp_path, "{")
    with pytest.raises(VectorsInvalid):
        check_profile("portable-f32", tmp_path)


def test_checkProfile_cachedResult_reusedWithoutRunning_succeeds(tmp_path):
    path = DEFAULT_VECTORS / "portable-f32.json"
    key = cache_key("portable-f32", 1, hashlib.sha256(path.read_bytes()).hexdigest())
    cache = ResultCache(tmp_path)
    cache.put(key, ProfileCheck("portable-f32", True, {a: TaskCheck(r, True, 123.0) for a, r in ROOTS.items()}).to_json())
    c = check_profile("portable-f32", DEFAULT_VECTORS, threads=1, cache=cache)
    assert c.cached and c.ok and c.tasks["mlp"].ms_per_step == 123.0   # the stored result, not a new run


def test_runDoctor_badInput_raisesBeforeRunning_fails(tmp_path):
    with pytest.raises(UnknownProfile, match="known: cpu-f32-strict"):
        run_doctor(["portable-f32", "fp8-loose"], DEFAULT_VECTORS)
    with pytest.raises(VectorsNotFound, match="--vectors"):
        run_doctor(["portable-f32"], tmp_path / "absent")


def test_exitCodeAndMask_followTheVerdicts_succeeds():
    ok, bad = ProfileCheck("portable-f32", True), ProfileCheck("cpu-f32-strict", False, reason="x")
    checks = {"cpu-f32-strict": bad, "portable-f32": ok}
    assert exit_code(checks, asked=False) == 0 and exit_code(checks, asked=True) == 1
    assert exit_code({"portable-f32": ok}, asked=True) == 0 and exit_code({"cpu-f32-strict": bad}, asked=False) == 1
    assert profile_mask(checks) == PROFILE_PORTABLE_F32
    assert profile_mask({n: ProfileCheck(n, True) for n in PROFILES}) == sum(PROFILE_BITS.values())


def test_servedProfiles_nonePasses_refusesNamingTheDoctor_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor, "run_doctor", lambda *a, **k: {"portable-f32": ProfileCheck("portable-f32", False,
                                                                                            reason="roots differ")})
    with pytest.raises(NoProfileServed, match="verity node doctor") as e:
        doctor.served_profiles(tmp_path, ResultCache(tmp_path))
    assert "roots differ" in str(e.value)


# ---------------------------------------------------------------- nodes serve only what they pass
class _Ctx:
    """What the verifier and auditor read before they decide to decline: tasks and jobs."""
    me = "0x" + "ab" * 20

    def __init__(self, job_bits: dict[int, int]):
        self.jobs = {j: SimpleNamespace(profileBit=b) for j, b in job_bits.items()}
        self.tasks = {7: SimpleNamespace(status=TaskStatus.REVEALED, epoch=0, jobId=1),
                      8: SimpleNamespace(status=TaskStatus.REVEALED, epoch=0, jobId=2)}
        self.job_reads = 0

    def task(self, tid):
        return self.tasks[tid]

    def job(self, jid):
        self.job_reads += 1
        return self.jobs[jid]


def _window(role, snap, tid):
    role.on_event(snap, SimpleNamespace(name="ChallengeWindowOpened", contract="JobRegistry", args={"taskId": tid}))


def test_verifier_jobOfAnotherProfile_declinedBeforeAnyWork_fails():
    ctx = _Ctx({1: PROFILE_CPU_F32_STRICT, 2: PROFILE_PORTABLE_F32})
    role, snap = VerifierRole(ctx, profiles=PROFILE_PORTABLE_F32), Snapshot()
    _window(role, snap, 7)
    _window(role, snap, 8)
    declined, taken = snap.items[watch_key(7, 0)], snap.items[watch_key(8, 0)]
    assert declined.phase == Phase.DONE and "cpu-f32-strict not served" in declined.data["verdict"]
    assert taken.phase == Phase.WATCHING
    assert VerifierRole(ctx).unserved_profile(1) is None                 # unchecked node (profiles None): all


def test_auditor_jobOfAnotherProfile_noItem_fails():
    ctx = _Ctx({1: PROFILE_CPU_F32_STRICT})
    snap = Snapshot()
    AuditorRole(ctx, profiles=PROFILE_PORTABLE_F32).on_event(
        snap, SimpleNamespace(name="TaskCreated", contract="JobRegistry", args={"taskId": 7, "jobId": 1}))
    assert snap.items == {} and ctx.job_reads == 1                       # declined before any chain read of fees


def test_servingContext_manifestOfUnservedProfile_refused_fails(tmp_path):
    class Storage:
        def get_bytes(self, *a, **k):
            raise LookupError("fetched")

    ctx = ServingContext(chain=None, storage=Storage(), state_dir=tmp_path, profiles=PROFILE_PORTABLE_F32)
    jobs = {1: SimpleNamespace(profileBit=PROFILE_CPU_F32_STRICT, manifestCid=b"\x12" * 32),
            2: SimpleNamespace(profileBit=PROFILE_PORTABLE_F32, manifestCid=b"\x12" * 32)}
    ctx.job = jobs.__getitem__
    with pytest.raises(ProfileUnsupported, match="cpu-f32-strict.*verity node doctor"):
        ctx.manifest(1)                                                  # never fetched, trained or replayed
    with pytest.raises(LookupError, match="fetched"):
        ctx.manifest(2)                                                  # a served profile goes on to the fetch


# ---------------------------------------------------------------- timing
@pytest.mark.parametrize("profile, expected", [("portable-f32", ["compile", "train"]), ("cpu-f32-strict", ["train"])])
def test_runReference_portableFirstRun_compilesTheCKernelsBeforeTheTimedSteps_succeeds(monkeypatch, tmp_path,
                                                                                        profile, expected):
    # a fresh machine's first doctor run once timed the C kernels' compile as the MLP's steps (148 ms/step for 3.8),
    # and the cached figure feeds the node's feasibility estimates
    from verity.engine import reference
    from verity.engine.portable import ckernels
    calls = []
    monkeypatch.setattr(ckernels, "_tried", False)
    monkeypatch.setattr(ckernels, "enabled", True)
    monkeypatch.setattr(ckernels, "_load", lambda: calls.append("compile"))
    monkeypatch.setattr(reference, "run_task", lambda *a, **k: calls.append("train")
                        or SimpleNamespace(root=bytes(32), timings={"train": 1.0}))
    root, ms = reference.run_reference(profile, "mlp", tmp_path)
    assert calls == expected and root == "00" * 32 and ms > 0


def test_makeVectors_onlyMissing_keepsRecordedRootsAndAddsTheFamilyItLacks_succeeds(tmp_path):
    """How a native class's file gains a family recorded after it (decoder, resnet for cpu-f32-strict): only the
    missing family runs, every recorded root is kept as it was (here a made-up one, which a re-run would replace)."""
    import subprocess
    import sys

    doc = _vectors()
    del doc["tasks"]["resnet"]
    doc["tasks"]["mlp"]["root"] = "ab" * 32
    path = _write(tmp_path, doc)
    script = Path(__file__).resolve().parents[2] / "scripts" / "make_vectors.py"
    proc = subprocess.run([sys.executable, str(script), "--profile", "portable-f32", "--out", str(tmp_path),
                           "--only-missing"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = read_vectors(path, "portable-f32")["tasks"]
    recorded = read_vectors(DEFAULT_VECTORS / "portable-f32.json", "portable-f32")["tasks"]
    assert after["mlp"]["root"] == "ab" * 32                           # kept, not re-run
    assert after["resnet"] == recorded["resnet"]                        # the missing family, run here
    assert {a: after[a] for a in ("cnn", "gpt", "decoder")} == {a: doc["tasks"][a] for a in ("cnn", "gpt", "decoder")}
