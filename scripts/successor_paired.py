"""Paired comparison of two entries over seeds gathered from several results folders (issue 23).

Each folder holds runs of one workload (e.g. seeds 0–2 in one, 3–4 in another); the final worst,
10th-percentile and average accuracy of two entries are paired by seed and tested with the
leaderboard's rule (:func:`adcs.leaderboard.suite.tied`: two-sided paired t-test, 5 %, one planned
comparison: no adjustment), with the test's p-value.
Writes Markdown to stdout.

Usage::

    python scripts/successor_paired.py --a adcs2 --b powerofchoice \\
        results/cnn results/successor/cnn results/successor/seeds34/cnn
"""

from __future__ import annotations

import argparse
from pathlib import Path

from adcs.experiments.analysis import stats
from adcs.leaderboard import ranking as lb


def seed_values(folders: list[Path], method: str) -> dict[str, dict[int, float]]:
    """Per metric, the entry's value on each seed found in ``folders`` (the first folder wins)."""
    out: dict[str, dict[int, float]] = {metric: {} for metric in lb.METRICS}
    for folder in folders:
        records, acc = lb.workload_scores(folder.parent, folder.name)
        for score in lb.scores_of(folder.name, records, acc)[0]:
            if score.method != method:
                continue
            for metric in lb.METRICS:
                for seed, value in score.values(metric).items():
                    out[metric].setdefault(seed, value)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", required=True, help="method name of the first entry")
    parser.add_argument("--b", required=True, help="method name of the second entry")
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args()
    a, b = seed_values(args.folders, args.a), seed_values(args.folders, args.b)
    print(f"| metric | seeds | {args.a} | {args.b} | mean difference ± 95% | p | tied (5 %) |")
    print("|---|---|---|---|---|---|---|")
    for metric in lb.METRICS:
        seeds = sorted(set(a[metric]) & set(b[metric]))
        va = {s: a[metric][s] for s in seeds}
        vb = {s: b[metric][s] for s in seeds}
        mean, half, _ = stats.paired_difference(va, vb)
        per_a = ", ".join(f"{100 * va[s]:.1f}" for s in seeds)
        per_b = ", ".join(f"{100 * vb[s]:.1f}" for s in seeds)
        print(
            f"| {metric} | {seeds} | {per_a} | {per_b} | {100 * mean:+.2f} ± {100 * half:.2f} "
            f"| {stats.paired_p_value(va, vb):.3g} | {'yes' if stats.tied(va, vb) else 'no'} |"
        )


if __name__ == "__main__":
    main()
