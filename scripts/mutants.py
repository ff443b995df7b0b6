"""Mutation check: do the tests catch seeded bugs?

    python scripts/mutants.py                       # every mutant, report in .build/mutants.json
    python scripts/mutants.py --list                # the mutants and their targets (checks each edit applies)
    python scripts/mutants.py --only c-bisect-flip,p-step-seed --keep
    python scripts/mutants.py --sanity              # first run each distinct test command unmutated: must be green

The mutants (scripts/mutants_list.py) are a fixed list applied in a fixed order: nothing is random. Each is one
exact-text edit of a contract or client source that must occur exactly once in its file, and names the tests that
should fail because of it.

The caller's working tree is never touched. Its files (`git ls-files`, untracked files git does not ignore included)
are copied once into a temporary directory, with the build caches that make runs fast (`.build/`, the forge cache
included, and `contracts/.cache`); the installed toolchains (`.venv`, `anvil/node_modules`, `anvil/solc-bin` where
not tracked) are symlinked. Each mutant is written into the copy, its test command runs there (PYTHONPATH=<copy>/clients
ahead of the venv's editable install, PATH as `make` sets it, PYTHONHASHSEED=0, no bytecode written), and the file is
restored.

A mutant is caught when its tests fail as tests: forge, judged like scripts/forge_test.sh, prints its
"Ran N test suites" summary with failed > 0 (a compiler error is "compile error": the mutant itself is broken);
pytest exits 1 (0 = missed; 2-5 = error: interrupted, internal error, usage, nothing collected). A timeout is an error.

Exit status: 0 when the run completed (caught or missed, the report is the result), 1 when it could not run (the copy
does not import its own clients, or the --sanity baseline is red), 2 for usage errors and broken mutants (an `old`
text not found exactly once).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutants_list import MUTANTS, Forge, Mutant, Pytest  # noqa: E402

HEAVY = (".venv", "anvil/node_modules", "anvil/solc-bin")  # symlinked from the repository
CACHES = (".build", "contracts/.cache")  # copied, so forge and ape start from the repository's build
FORGE_SUMMARY = re.compile(r"^Ran \d+ test suites? .*?: (\d+) tests passed, (\d+) failed", re.M)
# scripts/forge_test.sh's rule: forge can exit 0 after the solc-js front failed
FORGE_COMPILER_ERROR = re.compile(
    r"Error: (solc|Compiler run failed|Compilation failed)|Compiler run failed|RuntimeError")
PYTEST_SUMMARY = re.compile(r"^=*\s*((?:\d+ \w+|no tests ran)\b.*? in [\d.]+s\b.*?)\s*=*$", re.M)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
CAUGHT, MISSED, ERROR, COMPILE_ERROR = "caught", "missed", "error", "compile error"
KILL_GRACE = 10  # seconds between SIGTERM and SIGKILL of a timed-out command's process group


@dataclass
class Outcome:
    status: str
    seconds: float
    detail: str
    tail: str = ""  # the command's last lines, kept for errors


@dataclass
class Workspace:
    repo: Path
    copy: Path
    logs: Path
    env: dict[str, str]
    timeout: float


# ---------------------------------------------------------------- the mutants


def broken(mutants: list[Mutant], repo: Path) -> list[str]:
    """Why each mutant cannot be applied: a missing file, an `old` text not found exactly once, a no-op edit."""
    problems = []
    for m in mutants:
        path = repo / m.file
        if not path.is_file():
            problems.append(f"{m.id}: {m.file} does not exist")
            continue
        count = path.read_text().count(m.old)
        if count != 1:
            problems.append(f"{m.id}: its old text occurs {count} times in {m.file} (must be exactly once)")
        if m.old == m.new:
            problems.append(f"{m.id}: old and new text are the same")
    return problems


def select(ids: str | None) -> tuple[list[Mutant], list[str]]:
    """The mutants named in `ids` (all when None), in list order, and the names that are no mutant's id."""
    if ids is None:
        return list(MUTANTS), []
    wanted = {i.strip() for i in ids.split(",") if i.strip()}
    unknown = sorted(wanted - {m.id for m in MUTANTS})
    return [m for m in MUTANTS if m.id in wanted], unknown


def kind(m: Mutant) -> str:
    return "contract" if isinstance(m.target, Forge) else "client"


def show(target: Forge | Pytest) -> str:
    tool = "forge test" if isinstance(target, Forge) else "pytest"
    return " ".join([tool, *target.args()])


# ---------------------------------------------------------------- the copy


def source_files(repo: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         check=True, capture_output=True).stdout
    return sorted({f for f in out.decode().split("\0") if f})


def copy_entry(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
    else:
        shutil.copy2(src, dst)


def make_copy(repo: Path, copy: Path) -> None:
    for rel in source_files(repo):
        src = repo / rel
        if src.is_symlink() or src.is_file():  # a tracked file deleted in the working tree is skipped
            copy_entry(src, copy / rel)
    for rel in CACHES:
        if (repo / rel).is_dir():
            shutil.copytree(repo / rel, copy / rel, symlinks=True, dirs_exist_ok=True)
    for rel in HEAVY:
        if (repo / rel).exists() and not (copy / rel).exists():
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(repo / rel, copy / rel)


def environment(repo: Path, copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)  # the command line below is the whole test selection
    env["PATH"] = os.pathsep.join([str(repo / ".venv" / "bin"), str(repo / "anvil" / "node_modules" / ".bin"),
                                   env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(copy / "clients"), env.get("PYTHONPATH", "")] if p)
    env["SOLCX_BINARY_PATH"] = str(repo / "anvil" / "solc-bin")
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a mutant's bytecode never outlives it (pyc keys are mtime + size)
    env["NO_COLOR"] = "1"
    return env


def imports_copy(ws: Workspace) -> str | None:
    """None when `import verity` in the test environment loads the copy's clients; else what it loaded."""
    python = ws.repo / ".venv" / "bin" / "python"
    proc = subprocess.run([str(python), "-c", "import verity; print(verity.__file__)"], cwd=ws.copy, env=ws.env,
                          capture_output=True, text=True)
    where = proc.stdout.strip() or proc.stderr.strip()[-500:]
    return None if proc.returncode == 0 and Path(where).resolve().is_relative_to(ws.copy.resolve()) else where


# ---------------------------------------------------------------- running and judging


def command(target: Forge | Pytest, ws: Workspace, basetemp: Path) -> list[str]:
    if isinstance(target, Forge):
        forge = ws.repo / "anvil" / "node_modules" / ".bin" / "forge"
        return [str(forge), "test", "--color", "never", *target.args()]
    python = ws.repo / ".venv" / "bin" / "python"
    return [str(python), "-m", "pytest", "-x", "-q", f"--basetemp={basetemp}", *target.args()]


def execute(argv: list[str], ws: Workspace, log: Path) -> tuple[int | None, str]:
    """Run `argv` in the copy into `log`; returns (exit status or None on timeout, the output)."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, cwd=ws.copy, env=ws.env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout=ws.timeout)
        except subprocess.TimeoutExpired:
            stop_group(proc)
            rc = None
        except BaseException:
            stop_group(proc)
            raise
    return rc, ANSI.sub("", log.read_text(errors="replace"))


def stop_group(proc: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=KILL_GRACE)
            return
        except subprocess.TimeoutExpired:
            continue


def judge_forge(rc: int, text: str) -> tuple[str, str]:
    if FORGE_COMPILER_ERROR.search(text):
        return COMPILE_ERROR, "the Solidity compiler failed"
    summaries = FORGE_SUMMARY.findall(text)
    if not summaries:
        return ERROR, f"forge exited {rc} without a 'Ran N test suites' summary"
    passed, failed = map(int, summaries[-1])
    detail = f"{passed} passed, {failed} failed"
    if failed > 0:
        return CAUGHT, detail
    if rc == 0 and passed > 0:
        return MISSED, detail
    return ERROR, f"forge exited {rc} ({detail})"


def judge_pytest(rc: int, text: str) -> tuple[str, str]:
    found = PYTEST_SUMMARY.findall(text)
    detail = found[-1] if found else f"exit {rc}"
    if rc == 1:
        return CAUGHT, detail
    if rc == 0:
        return MISSED, detail
    return ERROR, f"pytest exit {rc}: {detail}"


def judge(target: Forge | Pytest, rc: int | None, text: str) -> tuple[str, str]:
    if rc is None:
        return ERROR, "timed out"
    return judge_forge(rc, text) if isinstance(target, Forge) else judge_pytest(rc, text)


def run_target(target: Forge | Pytest, ws: Workspace, name: str) -> Outcome:
    log = ws.logs / f"{name}.log"
    start = time.monotonic()
    rc, text = execute(command(target, ws, ws.logs / f"basetemp-{name}"), ws, log)
    status, detail = judge(target, rc, text)
    lines = "\n".join(text.rstrip().splitlines()[-15:]) if status in (ERROR, COMPILE_ERROR) else ""
    return Outcome(status, round(time.monotonic() - start, 1), detail, lines)


@contextmanager
def applied(m: Mutant, copy: Path):
    path = copy / m.file
    original = path.read_text()
    path.write_text(original.replace(m.old, m.new, 1))
    try:
        yield
    finally:
        path.write_text(original)


def run_mutant(m: Mutant, ws: Workspace) -> Outcome:
    with applied(m, ws.copy):
        return run_target(m.target, ws, m.id)


def print_tail(outcome: Outcome) -> None:
    if outcome.tail:
        print("\n".join("      | " + line for line in outcome.tail.splitlines()), flush=True)


# ---------------------------------------------------------------- the sanity baseline


def distinct_targets(mutants: list[Mutant]) -> list[Forge | Pytest]:
    seen: list[Forge | Pytest] = []
    for m in mutants:
        if m.target not in seen:
            seen.append(m.target)
    return seen


def sanity(mutants: list[Mutant], ws: Workspace) -> bool:
    """Each distinct test command once on the unmutated copy: True when every one is green."""
    targets = distinct_targets(mutants)
    print(f"sanity: {len(targets)} distinct test commands on the unmutated copy", flush=True)
    green = True
    for i, target in enumerate(targets, 1):
        outcome = run_target(target, ws, f"sanity-{i:02d}")
        ok = outcome.status == MISSED  # nothing failed and something passed
        green &= ok
        print(f"  [{i:2d}/{len(targets)}] {'green' if ok else 'RED':5s} {outcome.seconds:7.1f} s  {show(target)}"
              f"  ({outcome.detail})", flush=True)
        if not ok:
            print_tail(outcome)
    return green


# ---------------------------------------------------------------- reporting


def print_list(mutants: list[Mutant], problems: list[str]) -> None:
    bad = {p.split(":", 1)[0] for p in problems}
    for m in mutants:
        mark = "BROKEN" if m.id in bad else "ok"
        print(f"{m.id:32s} {kind(m):8s} {mark:6s} {m.file}\n    {m.description}\n    -> {show(m.target)}")
    print(f"{len(mutants)} mutants ({sum(kind(m) == 'contract' for m in mutants)} contract, "
          f"{sum(kind(m) == 'client' for m in mutants)} client)")


def print_table(results: list[tuple[Mutant, Outcome]], seconds: float) -> None:
    print("\n" + f"{'mutant':32s} {'kind':8s} {'result':13s} {'seconds':>8s}  detail")
    for m, o in results:
        print(f"{m.id:32s} {kind(m):8s} {o.status:13s} {o.seconds:8.1f}  {o.detail}")
    caught = [m.id for m, o in results if o.status == CAUGHT]
    missed = [m.id for m, o in results if o.status == MISSED]
    errors = [m.id for m, o in results if o.status in (ERROR, COMPILE_ERROR)]
    print(f"\ncaught {len(caught)} / {len(results)}, missed: {missed}, errors: {errors}; {seconds:.0f} s in all")


def tree_state(repo: Path) -> str:
    """HEAD, with "+changes" when the working tree differs from it: read when the tree is copied, not at the end (a
    commit made during a long run must not be named as the tree that was tested)."""
    git = ["git", "-C", str(repo)]
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run([*git, "status", "--porcelain"], capture_output=True, text=True).stdout.strip()
    return head + ("+changes" if dirty else "")


def report(results: list[tuple[Mutant, Outcome]], repo: Path, seconds: float, head: str) -> dict:
    return {
        "repo": str(repo),
        "commit": head,
        "seconds": round(seconds, 1),
        "summary": {
            "total": len(results),
            "caught": sum(o.status == CAUGHT for _, o in results),
            "missed": [m.id for m, o in results if o.status == MISSED],
            "errors": [m.id for m, o in results if o.status in (ERROR, COMPILE_ERROR)],
        },
        "mutants": [
            {"id": m.id, "kind": kind(m), "description": m.description, "file": m.file, "command": show(m.target),
             "result": o.status, "seconds": o.seconds, "detail": o.detail, **({"tail": o.tail} if o.tail else {})}
            for m, o in results
        ],
    }


# ---------------------------------------------------------------- main


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Apply seeded mutants one at a time and check the tests catch them.")
    p.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1],
                   help="repository to copy and mutate (default: the one holding this script)")
    p.add_argument("--only", metavar="ID[,ID]", help="run only these mutants")
    p.add_argument("--list", action="store_true", help="list the mutants and check that each edit applies")
    p.add_argument("--json", type=Path, metavar="PATH", help="report file (default: <repo>/.build/mutants.json)")
    p.add_argument("--sanity", action="store_true",
                   help="first run each distinct test command on the unmutated copy; stop (exit 1) unless all green")
    p.add_argument("--sanity-only", action="store_true", help="run the --sanity baseline and no mutant")
    p.add_argument("--timeout", type=float, default=600, metavar="SECONDS", help="per test command (default 600)")
    p.add_argument("--keep", action="store_true", help="keep the temporary copy (and its logs)")
    args = p.parse_args(argv)
    if args.timeout <= 0:
        p.error("--timeout must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    repo = args.repo.resolve()
    if not (repo / ".git").exists():
        print(f"mutants.py: {repo} is not a git checkout", file=sys.stderr)
        return 2
    mutants, unknown = select(args.only)
    if unknown or not mutants:
        print(f"mutants.py: no mutant has the id(s) {unknown or args.only!r} (see --list)", file=sys.stderr)
        return 2
    problems = broken(mutants, repo)
    if args.list:
        print_list(mutants, problems)
    for line in problems:
        print(f"mutants.py: broken mutant {line}", file=sys.stderr)
    if problems:
        return 2
    if args.list:
        return 0
    work = Path(tempfile.mkdtemp(prefix="verity-mutants-"))
    try:
        return run(args, repo, mutants, work)
    finally:
        if args.keep:
            print(f"kept the copy and its logs in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, repo: Path, mutants: list[Mutant], work: Path) -> int:
    start = time.monotonic()
    copy, logs = work / "repo", work / "logs"
    logs.mkdir(parents=True)
    head = tree_state(repo)
    make_copy(repo, copy)
    ws = Workspace(repo, copy, logs, environment(repo, copy), args.timeout)
    print(f"copied {repo} to {copy} in {time.monotonic() - start:.0f} s", flush=True)
    if any(isinstance(m.target, Pytest) for m in mutants) and (where := imports_copy(ws)) is not None:
        print(f"mutants.py: the test environment imports verity from {where}, not from the copy", file=sys.stderr)
        return 1
    if (args.sanity or args.sanity_only) and not sanity(mutants, ws):
        print("mutants.py: the unmutated tests are not green; no mutant was run", file=sys.stderr)
        return 1
    if args.sanity_only:
        return 0
    results = []
    for i, m in enumerate(mutants, 1):
        outcome = run_mutant(m, ws)
        results.append((m, outcome))
        print(f"[{i:2d}/{len(mutants)}] {m.id:32s} {outcome.status:13s} {outcome.seconds:7.1f} s  ({outcome.detail})",
              flush=True)
        print_tail(outcome)
    seconds = time.monotonic() - start
    print_table(results, seconds)
    out = args.json or repo / ".build" / "mutants.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report(results, repo, seconds, head), indent=2) + "\n")
    print(f"report: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
