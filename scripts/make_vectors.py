"""Record tests/vectors/<profile>.json: the reference roots `verity node doctor` compares with.

    python scripts/make_vectors.py [--profile P ...] [--out DIR] [--only-missing]

Runs the reference tasks of verity.engine.reference under each profile (default: every profile
this process can serve) and writes {"profile", "torch", "pins", "tasks": {arch: {"root"}}}.
Refuses a profile this process cannot serve (check_environment says why), so a vector is only
ever recorded on a machine of its class. portable-f32's roots must not depend on the machine:
recording them again anywhere must give the same file. --only-missing keeps every root the file already
records and runs only the families it lacks: how a native class's file gains a family added after it was
recorded (decoder and resnet for cpu-f32-strict), on a machine of the class, without re-recording the rest.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from verity.engine.determinism import PROFILES, check_environment, deterministic
from verity.engine.reference import ARCHES, read_vectors, run_reference, vector_doc
from verity.node.doctor import stale_pins
from verity.errors import ProfileUnsupported

ROOT = Path(__file__).resolve().parents[1]


def record(profile: str, out: Path, only_missing: bool = False) -> Path:
    check_environment(profile)  # ProfileUnsupported: not written
    path = out / f"{profile}.json"
    kept = {}
    if only_missing and path.exists():
        doc = read_vectors(path, profile)
        if (why := stale_pins(profile, doc)) is not None:
            raise ProfileUnsupported(profile, f"{path}: {why}: record the whole file again")
        kept = {arch: t["root"] for arch, t in doc["tasks"].items()}
    with deterministic(profile), tempfile.TemporaryDirectory(prefix="verity-vectors-") as tmp:
        roots = {**kept, **{arch: run_reference(profile, arch, Path(tmp))[0] for arch in ARCHES if arch not in kept}}
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(vector_doc(profile, roots), indent=1) + "\n")
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="append", choices=list(PROFILES),
                    help="profile to record (repeatable); default: every profile this process can serve")
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "vectors", help="folder to write <profile>.json to")
    ap.add_argument("--only-missing", action="store_true",
                    help="keep the roots the file records; run only the families it lacks")
    args = ap.parse_args()
    failed = 0
    for profile in args.profile or list(PROFILES):
        try:
            path = record(profile, args.out, args.only_missing)
        except ProfileUnsupported as exc:
            print(f"not written: {exc}", file=sys.stderr)
            failed += bool(args.profile)  # asked for by name: an error; by default: skipped
            continue
        roots = json.loads(path.read_text())["tasks"]
        print(f"{path}: " + ", ".join(f"{a} {t['root'][:16]}" for a, t in roots.items()))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
