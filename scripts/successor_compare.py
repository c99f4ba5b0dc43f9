"""Compare new entries with a committed leaderboard, workload by workload (issue 23, part 3).

For each workload, the new folder's runs of ``--entry`` methods join the committed leaderboard's
entries (same workload configuration and seeds; the simulator's streams are counter-based, so a
run does not depend on the other runs of its folder) and are ranked with the leaderboard's own
rules (:func:`adcs.experiments.leaderboard.rank_workload`: the paired t-test at 5 % for ties).
Every run of the new folder whose variant the committed folder also holds is first checked to
reproduce it exactly (every evaluation of worst and average accuracy, and the client
computations). Writes Markdown to stdout.

Usage::

    python scripts/successor_compare.py --committed results/leaderboard \\
        --new results/successor/leaderboard --entry adcs2
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from adcs.experiments import leaderboard as lb
from adcs.experiments.report import RunRecord

WORKLOADS = ("paper", "bernoulli", "clients100", "dirichlet", "m6", "soft_skew")


def reproduced(new: list[RunRecord], old: list[RunRecord]) -> tuple[int, list[str]]:
    """How many shared runs reproduce exactly, and the ids of those that do not."""
    by_id = {r.run_id: r for r in old}
    same, differ = 0, []
    for r in new:
        o = by_id.get(r.run_id)
        if o is None:
            continue
        equal = (
            np.array_equal(r.worst_acc, o.worst_acc)
            and np.array_equal(r.avg_acc, o.avg_acc)
            and (r.client_updates, r.loss_evals) == (o.client_updates, o.loss_evals)
        )
        same += equal
        if not equal:
            differ.append(r.run_id)
    return same, differ


def _pm(score: lb.Score, metric: str) -> str:
    mean, half = score.mean(metric)
    return f"{100 * mean:.2f} ± {100 * half:.2f}"


def workload_rows(committed: Path, new: Path, name: str, entries: list[str]) -> dict[str, Any]:
    old_records, old_acc = lb.workload_scores(committed, name)
    new_records, new_acc = lb.workload_scores(new, name)
    same, differ = reproduced(new_records, old_records)
    added = [r for r in new_records if r.method in entries]
    records = old_records + added
    scores, _ = lb.scores_of(name, records, {**old_acc, **new_acc})
    by_label = {s.label: s for s in scores}
    out: dict[str, Any] = {"reproduced": same, "differ": differ, "scores": by_label}
    for metric in lb.METRICS:
        values = {s.label: s.values(metric) for s in scores}
        out[metric] = lb.rank_workload(values)
    out["new_labels"] = [s.label for s in scores if s.method in entries]
    return out


def report(committed: Path, new: Path, entries: list[str], workloads: list[str]) -> list[str]:
    lines = []
    rows = {w: workload_rows(committed, new, w, entries) for w in workloads}
    for w, r in rows.items():
        n = len(r["scores"])
        lines += [f"### {w}", ""]
        if r["reproduced"] or r["differ"]:
            lines.append(
                f"Reproduction check: {r['reproduced']} run(s) shared with the committed folder "
                f"reproduce it exactly; differ: {r['differ'] or 'none'}."
            )
            lines.append("")
        lines += ["| entry | metric | mean ± 95% | rank | best entry (its mean) | tied with best |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for label in r["new_labels"]:
            s = r["scores"][label]
            for metric in lb.METRICS:
                placing = r[metric]
                best = next(entry for entry, p in placing.items() if p.best)
                mine = placing[label]
                verdict = "best" if mine.best else ("yes" if mine.tied else "no")
                lines.append(
                    f"| {label} | {metric} | {_pm(s, metric)} | {mine.rank:g} of {n} | "
                    f"{best} ({_pm(r['scores'][best], metric)}) | {verdict} |"
                )
        lines.append("")
        lines += ["| entry | client updates | loss evaluations | per seed worst (%) |",
                  "|---|---|---|---|"]  # fmt: skip
        for label in [*r["new_labels"], "PowerOfChoice", "ADCS θ=0.8", "ADCS θ=0.8, fresh q"]:
            s = r["scores"].get(label)
            if s is None:
                continue
            per_seed = ", ".join(f"{100 * v:.1f}" for _, v in sorted(s.worst.items()))
            lines.append(
                f"| {label} | {s.client_updates:,.0f} | {s.loss_evals:,.0f} | {per_seed} |"
            )
        lines.append("")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--committed", type=Path, default=Path("results/leaderboard"))
    parser.add_argument("--new", type=Path, required=True)
    parser.add_argument("--entry", action="append", required=True, help="method name(s) to add")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    args = parser.parse_args()
    print("\n".join(report(args.committed, args.new, args.entry, args.workloads.split(","))))


if __name__ == "__main__":
    main()
