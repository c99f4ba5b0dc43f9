"""How far two results folders are apart in numbers: selections and accuracies, not bytes.

Where :mod:`scripts.check_identical` asks whether two versions write the same bytes, this script
measures a change that moves results in the last bits (a different order of float32 sums) or
changes a random stream: for every results folder under OLD that NEW also has (the folder itself
and its sub-folders holding a ``selections.npz``), it prints

- **selections**: the fraction of run-rounds whose selected clients are the same, in the same
  order, and as sets (``selected/<run>`` arrays of ``selections.npz``);
- **metrics**: the largest absolute difference of each accuracy and loss column of
  ``metrics.csv`` over the (run, round) rows both have, and where it is;
- **final**: the same for ``runs.csv``'s ``final_*`` columns (the headline numbers).

Usage::

    python scripts/compare_results.py [--markdown] OLD NEW

Exits 0 (a measurement, not a check); 2 when a folder has no results.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

KEY_COLUMNS = ("run_id", "round")


def result_folders(root: Path) -> list[Path]:
    """``root`` and its sub-folders that hold a ``selections.npz``, relative to ``root``."""
    return sorted(p.parent.relative_to(root) for p in root.rglob("selections.npz"))


def same_selections(old: Path, new: Path) -> tuple[int, int, int]:
    """(run-rounds compared, identical in order, identical as sets) over both files' runs."""
    compared = ordered = as_sets = 0
    with np.load(old) as a, np.load(new) as b:
        for key in sorted(set(a.files) & set(b.files)):
            if not key.startswith("selected/"):
                continue
            x, y = a[key], b[key]
            if x.shape != y.shape:
                continue
            compared += x.shape[0]
            ordered += int((x == y).all(axis=1).sum())
            as_sets += int((np.sort(x, axis=1) == np.sort(y, axis=1)).all(axis=1).sum())
    return compared, ordered, as_sets


def _rows(path: Path, key: Sequence[str]) -> dict[tuple[str, ...], dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return {tuple(row[k] for k in key): row for row in csv.DictReader(f)}


def largest_differences(
    old: Path, new: Path, key: Sequence[str]
) -> dict[str, tuple[float, tuple[str, ...]]]:
    """Per numeric column: the largest |new − old| over the rows both CSV files have, and where."""
    a, b = _rows(old, key), _rows(new, key)
    out: dict[str, tuple[float, tuple[str, ...]]] = {}
    for where in sorted(set(a) & set(b)):
        for col, text in a[where].items():
            if col in key:
                continue
            try:
                x, y = float(text), float(b[where].get(col, "nan"))
            except ValueError:
                continue
            if math.isnan(x) and math.isnan(y):
                continue
            diff = abs(y - x) if not (math.isnan(x) or math.isnan(y)) else math.inf
            if col not in out or diff > out[col][0]:
                out[col] = (diff, where)
    return out


def report(old_root: Path, new_root: Path) -> list[str]:
    lines = []
    for rel in result_folders(old_root):
        old, new = old_root / rel, new_root / rel
        if not (new / "selections.npz").is_file():
            lines.append(f"{rel}: missing in {new_root}")
            continue
        n, ordered, as_sets = same_selections(old / "selections.npz", new / "selections.npz")
        share = f"{ordered / n:.4%} in order, {as_sets / n:.4%} as sets" if n else "no runs"
        lines.append(f"{rel}: selections identical in {share} of {n} run-rounds")
        for name, key in (("metrics.csv", KEY_COLUMNS), ("runs.csv", ("run_id",))):
            if not ((old / name).is_file() and (new / name).is_file()):
                continue
            for col, (diff, where) in largest_differences(old / name, new / name, key).items():
                if name == "runs.csv" and not col.startswith("final_"):
                    continue
                lines.append(
                    f"  {name} {col}: largest |difference| {diff:.3g} at {'/'.join(where)}"
                )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path, help="a results folder")
    parser.add_argument("new", type=Path, help="the results folder to compare with it")
    parser.add_argument(
        "--markdown", action="store_true", help="a Markdown page: a title, the lines fenced"
    )
    args = parser.parse_args(argv)
    if not result_folders(args.old):
        print(f"error: {args.old} holds no selections.npz", file=sys.stderr)
        return 2
    lines = report(args.old, args.new)
    if args.markdown:
        title = f"# How far `{args.new}` is from `{args.old}` (scripts/compare_results.py)"
        lines = [title, "", "```text", *lines, "```"]
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
