"""Check that two versions of adcs compute the same numbers: byte-identical result data files.

A refactoring must not change a single number. This script runs every shipped configuration at a
reduced length with an old version of the code and with a new one, and compares the data files
they write byte for byte:

- every ``experiments/*.toml`` except the attack suites (``attacks*.toml``), through ``adcs run``;
- the leaderboard suite (every file of ``experiments/leaderboard/``, each with all the
  leaderboard's entries), through ``adcs leaderboard --quick`` at 40 rounds, and with
  ``--optional`` its optional workloads (``experiments/leaderboard/optional/``: LeNet-5, 17
  entries, minutes even at 4 rounds) in a second call;
- ``experiments/attacks.toml`` through ``adcs bench attacks``.

The old version is a commit, written out of git into a temporary folder (``git archive``: the
repository and its worktrees are not touched); the new one is the working tree this script is in
(uncommitted changes included) or another commit (``--new``). Each side runs with its own
``src`` first on ``PYTHONPATH`` and its own folder as the working directory (so ``adcs bench``
finds that side's ``benchmarks/``), with the interpreter ``--python`` (default: this one).

The lengths are chosen to exercise what a round can do while keeping each side to minutes on
two cores: 120 rounds (ADCS refreshes every 20 rounds; evaluations at 0, every 50 or 100 rounds,
and at T), two seeds on two forked workers, and a checkpoint every 50 rounds (each checkpoint
stops and restarts the workers, so the snapshot and restore paths run too).

Compared files (:data:`DATA_SUFFIXES`): every ``.csv``, ``.npz`` and ``.json`` a run writes —
``metrics.csv``, ``runs.csv``, ``selections.npz``, ``client_acc.npz``, ``group_share.csv``,
``summary.json``, ``clock.npz``, ``system.csv``, ``table1.csv``, and the leaderboard's
``leaderboard.csv`` and ``ranks.csv`` — byte for byte, with one exception: ``manifest.json``
records when, where and with what a run was made, so it is compared with the keys of
:data:`VOLATILE_MANIFEST_KEYS` removed (times, wall seconds, the command line and output paths,
package versions, the git commit, the platform, the machine's load); every other key — the
configuration, the seeds, the runs, the data checksums — must be equal. Not compared: text
reports (``.md``, which quote wall times) and figures (``.png``). A data file present on one
side only is a difference.

Usage::

    python scripts/check_identical.py --old b5ba008 [--new REV] [--python PY] [--data DIR]

Prints one line per file (``identical``/``DIFFERENT``/``missing on …``) and exits 1 on any
difference, 2 when a run fails, 0 when everything is identical.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

DATA_SUFFIXES = (".csv", ".npz", ".json")
"""Files compared (every other file, reports and figures, is not)."""

VOLATILE_MANIFEST_KEYS = frozenset(
    {
        "argv",  # the command line, with the output path
        "command",
        "leaderboard",  # the leaderboard's output path
        "git",  # the commit and whether the checkout was dirty
        "platform",
        "versions",  # python, adcs and library versions
        "started_at",
        "finished_at",
        "wall_s",
        "simulation_wall_s",
        "run_wall_s",
        "sessions",  # start times, pids and wall seconds of each session
        "load_average",  # the machine's load while the attack bench ran
    }
)
"""Top-level keys of ``manifest.json`` that record how a run was made, not what it computed."""

ROUNDS = 120
SEEDS = 2
CHECKPOINT_EVERY = 50
WORKERS = 2


@dataclasses.dataclass(frozen=True)
class Check:
    """One command, run the same way on both sides.

    ``args`` follow ``python -m adcs``; ``{out}`` stands for the check's output folder.
    """

    name: str
    args: tuple[str, ...]


def shipped_checks(tree: Path, with_optional: bool = False) -> list[Check]:
    """Every shipped configuration of ``tree``, at the reduced length (``with_optional``: and the
    leaderboard's optional workloads)."""
    checks = []
    common = ["--checkpoint-every", str(CHECKPOINT_EVERY), "--workers", str(WORKERS)]
    for path in sorted((tree / "experiments").glob("*.toml")):
        if path.stem.startswith("attacks"):  # attack suites: `adcs bench attacks`
            continue
        rounds, seeds = ROUNDS, SEEDS
        if path.stem == "cnn":  # LeNet-5: a few rounds run the same code paths
            rounds, seeds = 20, 1
        length = ["--rounds", str(rounds), "--seeds", str(seeds)]
        args = ["run", f"experiments/{path.name}", "--out", "{out}", *length, *common]
        checks.append(Check(f"run {path.stem}", tuple(args)))
    board = tree / "experiments" / "leaderboard"
    suite = ",".join(sorted(p.stem for p in board.glob("*.toml")))
    optional = ",".join(sorted(p.stem for p in (board / "optional").glob("*.toml")))
    quick = ["leaderboard", "--quick", "--out", "{out}", "--checkpoint-every", "25"]
    length = ["--rounds", "40", "--seeds", str(SEEDS), "--workers", str(WORKERS)]
    checks.append(Check("leaderboard", (*quick, "--workloads", suite, *length)))
    if optional and with_optional:  # run only when named; LeNet-5 again, so shorter still
        length = ["--rounds", "4", "--seeds", "1", "--workers", "1"]
        checks.append(Check("leaderboard optional", (*quick, "--workloads", optional, *length)))
    attacks = ["bench", "attacks", "--out", "{out}", "--rounds", "60", "--seeds", "0,1"]
    checks.append(Check("bench attacks", (*attacks, "--workers", str(WORKERS))))
    return checks


# ---------------------------------------------------------------------------------------------
# comparison


def data_files(folder: Path) -> set[str]:
    """The compared files under ``folder``, as paths relative to it."""
    return {
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and p.suffix in DATA_SUFFIXES
    }


def _manifest_data(raw: bytes) -> object:
    doc = json.loads(raw)
    if isinstance(doc, dict):
        return {k: v for k, v in doc.items() if k not in VOLATILE_MANIFEST_KEYS}
    return doc


def same_file(old: Path, new: Path) -> bool:
    """Whether two data files hold the same data (byte for byte; manifests on data keys)."""
    a, b = old.read_bytes(), new.read_bytes()
    if a == b:
        return True
    if old.name == "manifest.json":
        try:
            return _manifest_data(a) == _manifest_data(b)
        except json.JSONDecodeError:
            return False
    return False


def compare(old: Path, new: Path) -> list[tuple[str, str]]:
    """(file, verdict) for every data file of either folder, sorted by file.

    Verdicts: ``identical``, ``DIFFERENT``, ``missing on old``, ``missing on new``.
    """
    old_files, new_files = data_files(old), data_files(new)
    rows = []
    for name in sorted(old_files | new_files):
        if name not in new_files:
            verdict = "missing on new"
        elif name not in old_files:
            verdict = "missing on old"
        else:
            verdict = "identical" if same_file(old / name, new / name) else "DIFFERENT"
        rows.append((name, verdict))
    return rows


def table(rows: Iterable[tuple[str, str, str]]) -> str:
    """The report: one line per (check, file, verdict)."""
    rows = list(rows)
    width = max([len(f"{c}: {f}") for c, f, _ in rows] + [4])
    lines = [f"{'file':<{width}}  verdict", "-" * (width + 9)]
    lines += [f"{f'{c}: {f}':<{width}}  {v}" for c, f, v in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# running


def export_commit(repo: Path, rev: str, into: Path) -> Path:
    """Write commit ``rev``'s files into the new folder ``into`` (``git archive``)."""
    into.mkdir(parents=True)
    archive = into.with_suffix(".tar")
    subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", "-o", str(archive), rev], check=True
    )
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()
    return into


def run_check(
    check: Check, tree: Path, out: Path, python: str, data: str | None
) -> tuple[bool, float, str]:
    """Run ``check`` with ``tree``'s code into ``out``; (succeeded, seconds, output tail)."""
    args = [a.replace("{out}", str(out)) for a in check.args]
    env = dict(os.environ, PYTHONPATH=str(tree / "src"))
    if data is not None:  # through the lookup: a dataset that reads no files refuses --data
        env["ADCS_DATA_DIR"] = data
    began = time.perf_counter()
    done = subprocess.run(
        [python, "-m", "adcs", *args], cwd=tree, env=env, capture_output=True, text=True
    )
    tail = (done.stdout + done.stderr)[-2000:]
    return done.returncode == 0, time.perf_counter() - began, tail


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="the commit before the change")
    parser.add_argument("--new", default=None, help="a commit (default: this working tree)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter to run adcs")
    parser.add_argument(
        "--data", default=None, help="Fashion-MNIST folder, as $ADCS_DATA_DIR (default: the lookup)"
    )
    parser.add_argument("--only", default=None, help="comma-separated substrings of check names")
    parser.add_argument(
        "--optional", action="store_true", help="also the leaderboard's optional workloads (slow)"
    )
    parser.add_argument("--keep", default=None, help="work in this new folder and keep it")
    args = parser.parse_args(argv)
    python = shutil.which(args.python)  # each side runs in its own folder: an absolute path
    if python is None:
        parser.error(f"--python {args.python}: no such interpreter")
    args.python = os.path.abspath(python)  # not resolved: a venv's python is a link
    repo = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="adcs-identical-") as scratch:
        work = Path(args.keep) if args.keep else Path(scratch)
        old_tree = export_commit(repo, args.old, work / "old-tree")
        new_tree = repo if args.new is None else export_commit(repo, args.new, work / "new-tree")
        checks = shipped_checks(new_tree, args.optional)
        if args.only:
            wanted = args.only.split(",")
            checks = [c for c in checks if any(w in c.name for w in wanted)]
        rows: list[tuple[str, str, str]] = []
        failed = False
        for i, check in enumerate(checks):
            outs, ran = {}, True
            for side, tree in (("old", old_tree), ("new", new_tree)):
                outs[side] = work / side / f"{i:02d}"
                ok, seconds, tail = run_check(check, tree, outs[side], args.python, args.data)
                verdict = "ok" if ok else "FAILED"
                print(f"{check.name} [{side}]: {verdict} in {seconds:.0f} s", flush=True)
                if not ok:
                    print(tail, file=sys.stderr)
                    ran = False
            failed |= not ran
            if ran:
                rows += [(check.name, f, v) for f, v in compare(outs["old"], outs["new"])]
        print(table(rows))
        different = sum(v != "identical" for _, _, v in rows)
        new = args.new or "the working tree"
        print(f"{len(rows)} files compared, {different} differ; old {args.old}, new {new}")
    if failed:
        return 2
    return 1 if different else 0


if __name__ == "__main__":
    raise SystemExit(main())
