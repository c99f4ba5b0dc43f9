"""Compare new entries with a committed leaderboard, workload by workload (issue 23, part 3).

For each workload, the new folder's runs of ``--entry`` methods join the committed leaderboard's
entries (same workload configuration and seeds; runs the leaderboard holds already, an entry
joined to it, are not added twice, so ``--new`` may be the leaderboard itself) and are ranked
with the leaderboard's own rules (:func:`adcs.leaderboard.suite.rank_workload`: the paired t-test at 5 % for ties).
Every run the committed folder also holds is checked against it: selections in every round,
worst and average accuracy at every evaluation, client computations. Writes Markdown to stdout.

Usage::

    python scripts/successor_compare.py --committed results --new results/successor \\
        --workloads paper:paper20k --entry adcs2
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from adcs.experiments.analysis.report import RunRecord
from adcs.leaderboard import ranking as lb

WORKLOADS = ("paper", "bernoulli", "clients100", "dirichlet", "m6", "soft_skew")


def reproduced(
    new_folder: Path, new: list[RunRecord], old_folder: Path, old: list[RunRecord]
) -> str:
    """How the runs both folders hold compare: selections, worst and average accuracy, cost."""
    by_id = {r.run_id: r for r in old}
    shared = [r for r in new if r.run_id in by_id]
    if not shared:
        return ""
    with np.load(new_folder / "selections.npz") as a, np.load(old_folder / "selections.npz") as b:
        same_sel = sum(np.array_equal(a[f"selected/{r.run_id}"], b[f"selected/{r.run_id}"])
                       for r in shared)  # fmt: skip
    same_worst = sum(np.array_equal(r.worst_acc, by_id[r.run_id].worst_acc) for r in shared)
    same_avg = sum(np.array_equal(r.avg_acc, by_id[r.run_id].avg_acc) for r in shared)
    gap = max(float(np.abs(r.avg_acc - by_id[r.run_id].avg_acc).max()) for r in shared)
    cost = sum(
        (r.client_updates, r.loss_evals)
        == (by_id[r.run_id].client_updates, by_id[r.run_id].loss_evals)
        for r in shared
    )
    return (
        f"Reproduction check ({len(shared)} run(s) also in the committed folder): selections "
        f"identical in every round in {same_sel}, worst accuracy identical at every evaluation in "
        f"{same_worst}, average accuracy in {same_avg} (largest difference {100 * gap:.2f} "
        f"points), client computations equal in {cost}."
    )


def _pm(score: lb.Score, metric: str) -> str:
    mean, half = score.mean(metric)
    return f"{100 * mean:.2f} ± {100 * half:.2f}"


def placing_verdict(placing: dict[str, lb.Placing], label: str) -> tuple[str, float]:
    """``label``'s verdict on one workload under the leaderboard's Holm-adjusted rule, with the
    p-value that decides it.

    - "significantly best": the highest mean, and every other entry behind it (Holm p < 5 %);
      the p-value is the largest of the others' (the closest one's);
    - "best, tied with k": the highest mean, k entries not told apart from it; the largest p;
    - "tied": not told apart from the best; its own Holm p against the best;
    - "behind": behind the best; its own Holm p.
    """
    mine = placing[label]
    if not mine.best:
        return ("tied" if mine.tied else "behind"), mine.p_value
    others = [p for entry, p in placing.items() if entry != label]
    closest = max((p.p_value for p in others), default=float("nan"))
    tied = sum(p.tied for p in others)
    return ("significantly best" if not tied else f"best, tied with {tied}"), closest


def workload_rows(committed: Path, new: Path, name: str, entries: list[str]) -> dict[str, Any]:
    """Scores and placings of one workload; ``name`` is a folder of both, or ``OLD:NEW``."""
    old_name, _, new_name = name.partition(":")
    new_name = new_name or old_name
    old_records, old_acc = lb.workload_scores(committed, old_name)
    new_records, new_acc = lb.workload_scores(new, new_name)
    same = (new / new_name).resolve() == (committed / old_name).resolve()
    check = (
        "" if same else reproduced(new / new_name, new_records, committed / old_name, old_records)
    )
    known = {r.run_id for r in old_records}  # an entry joined to the leaderboard is there already
    added = [r for r in new_records if r.method in entries and r.run_id not in known]
    records = old_records + added
    scores, _ = lb.scores_of(name, records, {**old_acc, **new_acc})
    by_label = {s.label: s for s in scores}
    out: dict[str, Any] = {"reproduced": check, "scores": by_label}
    for metric in lb.METRICS:
        values = {s.label: s.values(metric) for s in scores}
        out[metric] = lb.rank_workload(values)
    out["new_labels"] = [s.label for s in scores if s.method in entries]
    return out


def overall(rows: dict[str, dict[str, Any]], top: int = 5) -> list[str]:
    """The overall rank table of every metric (the leaderboard's rules), its first ``top`` rows."""
    lines = ["### Overall (mean rank over the workloads; best; best or tied)", ""]
    for metric in lb.METRICS:
        values = {w: {label: s.values(metric) for label, s in r["scores"].items()}
                  for w, r in rows.items()}  # fmt: skip
        table, _ = lb.rank_table(values)
        lines += [f"{metric}:", ""]
        lines += [f"- {t.entry}: {t.mean_rank:.2f}; best on {t.best}; best or tied on {t.tied}"
                  for t in table[:top]]  # fmt: skip
        lines.append("")
    return lines


def report(committed: Path, new: Path, entries: list[str], workloads: list[str]) -> list[str]:
    lines = []
    rows = {w: workload_rows(committed, new, w, entries) for w in workloads}
    for w, r in rows.items():
        n = len(r["scores"])
        lines += [f"### {w}", ""]
        if r["reproduced"]:
            lines += [r["reproduced"], ""]
        lines += ["| entry | metric | mean ± 95% | rank | best entry (its mean) | verdict | "
                  "Holm p |", "|---|---|---|---|---|---|---|"]  # fmt: skip
        for label in r["new_labels"]:
            s = r["scores"][label]
            for metric in lb.METRICS:
                placing = r[metric]
                best = next(entry for entry, p in placing.items() if p.best)
                verdict, p_value = placing_verdict(placing, label)
                lines.append(
                    f"| {label} | {metric} | {_pm(s, metric)} | {placing[label].rank:g} of {n} | "
                    f"{best} ({_pm(r['scores'][best], metric)}) | {verdict} | {p_value:.3g} |"
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
    return lines + overall(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--committed", type=Path, default=Path("results/leaderboard"))
    parser.add_argument("--new", type=Path, required=True)
    parser.add_argument("--entry", action="append", required=True, help="method name(s) to add")
    parser.add_argument(
        "--workloads",
        default=",".join(WORKLOADS),
        help="folder names in both, or OLD:NEW pairs (e.g. paper:paper20k)",
    )
    args = parser.parse_args()
    print("\n".join(report(args.committed, args.new, args.entry, args.workloads.split(","))))


if __name__ == "__main__":
    main()
