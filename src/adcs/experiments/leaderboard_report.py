"""The leaderboard's summary files: tables, ``report.md`` in plain words, and figures.

Everything here is computed from the workloads' results folders (read back from disk, so a
resumed or remote run gives the same bytes), never hard-coded: which entry wins where, by how
much, and whom ADCS loses to are all found in the numbers (:mod:`adcs.experiments.leaderboard`
defines the scores, ranks and the tie test). No wall-clock time is written to these files; the
leaderboard's ``manifest.json`` holds those.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adcs.experiments.figures import pyplot
from adcs.experiments.folder import MANIFEST
from adcs.experiments.ranking import (
    METRIC_NAMES,
    METRICS,
    PAPER_THETA,
    REFRESH_EVERY,
    THETAS,
    Placing,
    RankRow,
    Score,
    check_metrics,
    entry_labels,
    rank_table,
    scores_of,
    workload_scores,
)
from adcs.experiments.records import RunRecord
from adcs.experiments.results import _write_csv, _write_json
from adcs.experiments.stats import CONFIDENCE, FINAL_FRACTION, paired_difference
from adcs.experiments.timing import TARGET_FRACTION, Estimate
from adcs.schedulers import SCHEDULERS

__all__ = ["paper_adcs", "write_summary"]

FIGURE_SUFFIX = ".png"
SUMMARY_FIGURE = "summary.png"


def paper_adcs(score: Score) -> bool:
    """ADCS as the paper runs it: θ = 0.8, R = 20, quality frozen between refreshes."""
    return _adcs_at(score) == PAPER_THETA


def _adcs_at(score: Score) -> float | None:
    """θ of a plain ADCS entry (R = 20, no fresh quality), else None."""
    p = score.params
    if score.method != "adcs" or p.get("fresh_quality") or p.get("refresh_every") != REFRESH_EVERY:
        return None
    return float(p["theta"])


def _fresh(score: Score) -> bool:
    return score.method == "adcs" and bool(score.params.get("fresh_quality"))


# ---------------------------------------------------------------------------------------------
# numbers


def _pct(x: float) -> str:
    return "—" if not math.isfinite(x) else f"{100 * x:.2f}"


def _pm(mean: float, half: float) -> str:
    return _pct(mean) + ("" if not math.isfinite(half) else f" ± {100 * half:.2f}")


def _points(mean: float, half: float) -> str:
    """A difference in accuracy points, with its interval."""
    sign = "+" if mean >= 0 else "−"
    text = f"{sign}{abs(100 * mean):.2f}"
    return text + ("" if not math.isfinite(half) else f" ± {100 * half:.2f}")


def _rounds(e: Estimate) -> str:
    if e.complete:
        return f"{e.mean:,.0f}" + ("" if not math.isfinite(e.half) else f" ± {e.half:,.0f}")
    return "never" if e.n == 0 else f"{e.n} of {e.of} seeds"


def _list(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def _rank(r: float) -> str:
    return f"{r:g}"


# ---------------------------------------------------------------------------------------------
# the summary


def _context(folder: Path, name: str) -> dict[str, Any]:
    """What the report says of a workload's setting, from its manifest."""
    doc = json.loads((folder / name / MANIFEST).read_text(encoding="utf-8"))
    config = doc.get("config", {})
    sim = config.get("sim", {})
    data = doc.get("data", {})
    return {
        "description": doc.get("description") or config.get("description", ""),
        "m": config.get("m"),
        "n_clients": data.get("n_clients"),
        "rounds": sim.get("rounds"),
        "eval_every": sim.get("eval_every"),
        "seeds": doc.get("seeds", []),
        "availability": doc.get("availability", ""),
        "is_subset": bool(data.get("is_subset")),
        "source": data.get("source", ""),
    }


def _collect(
    folder: Path, names: Sequence[str]
) -> tuple[dict[str, list[Score]], dict[str, float], dict[str, dict[str, Any]]]:
    records: dict[str, list[RunRecord]] = {}
    accs = {}
    for name in names:
        records[name], accs[name] = workload_scores(folder, name)
    labels = entry_labels([r for rs in records.values() for r in rs])
    scores, targets = {}, {}
    for name in names:
        scores[name], targets[name] = scores_of(name, records[name], accs[name], labels)
    return scores, targets, {n: _context(folder, n) for n in names}


def write_summary(
    folder: Path, names: Sequence[str], *, quick: bool = False, metrics: Sequence[str] = ()
) -> tuple[list[RankRow], dict[str, list[Score]]]:
    """Write the leaderboard's tables, report and figures into ``folder`` from its workloads.

    ``metrics`` are columns ranked beside :data:`METRICS` (:func:`check_metrics`): they join
    ``leaderboard.csv``, ``ranks.csv`` and ``summary.json``. Returns the overall rank table on
    the final worst accuracy and every workload's scores.
    """
    ranked = (*METRICS, *(m for m in check_metrics(metrics) if m not in METRICS))
    scores, targets, contexts = _collect(folder, names)
    tables = {}
    placings: dict[str, dict[str, dict[str, Placing]]] = {}
    for metric in ranked:
        values = {w: {s.label: s.ranked(metric) for s in scores[w]} for w in names}
        tables[metric], placings[metric] = rank_table(values)
    _write_tables(folder, names, scores, targets, tables, placings)
    figures = [_workload_figure(folder, w, scores[w], placings["worst"][w]) for w in names]
    _summary_figure(folder / SUMMARY_FIGURE, names, tables["worst"], placings["worst"])
    report = _report(names, scores, targets, contexts, tables, placings, figures, quick)
    (folder / "report.md").write_text(report, encoding="utf-8")
    return tables["worst"], scores


def _write_tables(
    folder: Path,
    names: Sequence[str],
    scores: Mapping[str, list[Score]],
    targets: Mapping[str, float],
    tables: Mapping[str, list[RankRow]],
    placings: Mapping[str, Mapping[str, Mapping[str, Placing]]],
) -> None:
    header = ["workload", "entry", "method", "variant", "seeds"]
    for metric in tables:
        header += [metric, f"{metric}_half", f"rank_{metric}", f"best_{metric}", f"tied_{metric}"]
    header += ["target_worst", "rounds_to_target", "rounds_to_target_half", "seeds_reached",
               "client_updates", "loss_evals", "tv_to_uniform"]  # fmt: skip
    rows = []
    for w in names:
        for s in scores[w]:
            row: list[Any] = [w, s.label, s.method, s.variant, s.n_seeds]
            for metric in tables:
                p = placings[metric][w][s.label]
                row += [*s.mean(metric), p.rank, p.best, p.tied]
            e = s.to_target
            row += [targets[w], e.mean, e.half, e.n, s.client_updates, s.loss_evals, s.tv]
            rows.append(row)
    _write_csv(folder / "leaderboard.csv", header, rows)
    _write_csv(
        folder / "ranks.csv",
        ["metric", "place", "entry", "mean_rank", "workloads", "best", "best_or_tied",
         *(f"rank_{w}" for w in names)],
        (
            [metric, i + 1, r.entry, r.mean_rank, r.workloads, r.best, r.tied,
             *(r.ranks.get(w) for w in names)]
            for metric in tables for i, r in enumerate(tables[metric])
        ),
    )  # fmt: skip
    _write_json(
        folder / "summary.json",
        {
            "definitions": _definitions(),
            "workloads": {
                w: {"target_worst": targets[w], "entries": [_entry_doc(s, placings, w)
                                                            for s in scores[w]]}
                for w in names
            },
            "ranks": {m: [_row_doc(r) for r in tables[m]] for m in tables},
            "adcs_theta": {w: _theta_doc(scores[w]) for w in names},
        },
    )  # fmt: skip


def _definitions() -> dict[str, str]:
    return {
        "final": f"mean over each run's last {100 * FINAL_FRACTION:.0f}% of evaluations",
        "interval": f"{100 * CONFIDENCE:.0f}% Student-t interval over seeds",
        "rank": "place by mean over seeds, 1 = highest; equal means share the mean of their "
        "places; a mean that is not finite ranks last",
        "best": "the highest mean over seeds",
        "tied": "best, or not told apart from the best by a two-sided paired t-test over the "
        f"common seeds at the {100 * (1 - CONFIDENCE):.0f}% level: |mean(d)| <= "
        "t(0.975, n-1) sd(d)/sqrt(n), d = best - entry per seed; with one seed only equality",
        "target_worst": f"{100 * TARGET_FRACTION:.0f}% of Uniform's final worst accuracy",
        "rounds_to_target": "first evaluation round whose worst accuracy reaches the target",
    }


def _entry_doc(s: Score, placings: Mapping[str, Any], w: str) -> dict[str, Any]:
    doc: dict[str, Any] = {"entry": s.label, "method": s.method, "variant": s.variant,
                           "params": dict(s.params)}  # fmt: skip
    for metric in placings:
        mean, half = s.mean(metric)
        p = placings[metric][w][s.label]
        doc[metric] = {
            "mean": mean,
            "half": half,
            "per_seed": {str(k): v for k, v in s.values(metric).items()},
            "rank": p.rank,
            "best": p.best,
            "tied": p.tied,
        }
    doc["rounds_to_target"] = {str(k): v for k, v in s.rounds_to_target.items()}
    doc.update(client_updates=s.client_updates, loss_evals=s.loss_evals, tv_to_uniform=s.tv)
    return doc


def _row_doc(r: RankRow) -> dict[str, Any]:
    return {"entry": r.entry, "mean_rank": r.mean_rank, "workloads": r.workloads,
            "best": r.best, "best_or_tied": r.tied, "ranks": r.ranks}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# ADCS's θ


def _theta_doc(scores: Sequence[Score]) -> dict[str, Any] | None:
    """The best θ of a workload beside the paper's, with their paired difference."""
    by_theta = {t: s for s in scores if (t := _adcs_at(s)) is not None}
    if not by_theta:
        return None
    # the highest mean; on equal means the paper's θ
    best = max(
        by_theta.items(), key=lambda kv: (_key(kv[1].mean("worst")[0]), kv[0] == PAPER_THETA)
    )[1]
    doc: dict[str, Any] = {"best_theta": _adcs_at(best), "best_worst": best.mean("worst")[0]}
    paper = by_theta.get(PAPER_THETA)
    if paper is not None:
        mean, half, _ = paired_difference(best.worst, paper.worst)
        doc.update(paper_worst=paper.mean("worst")[0], difference=mean, difference_half=half)
    fresh = next((s for s in scores if _fresh(s)), None)
    if fresh is not None:
        doc["fresh_worst"] = fresh.mean("worst")[0]
    return doc


def _key(x: float) -> float:
    return x if math.isfinite(x) else -math.inf


# ---------------------------------------------------------------------------------------------
# report.md


def _report(
    names: Sequence[str],
    scores: Mapping[str, list[Score]],
    targets: Mapping[str, float],
    contexts: Mapping[str, Mapping[str, Any]],
    tables: Mapping[str, list[RankRow]],
    placings: Mapping[str, Mapping[str, Mapping[str, Placing]]],
    figures: Sequence[str],
    quick: bool,
) -> str:
    out = ["# Leaderboard: which scheduler, where", ""]
    out += _preamble(names, scores, contexts, quick)
    out += ["## Where ADCS wins and where it loses", ""]
    out += _verdicts(names, scores, tables, placings)
    out += ["## Overall ranks", ""]
    out += _rank_section(names, tables)
    out += ["## ADCS's θ on each workload", ""]
    out += _theta_section(names, scores)
    for w, fig in zip(names, figures, strict=True):
        out += _workload_section(w, scores[w], targets[w], contexts[w], placings, fig)
    return "\n".join(out).rstrip() + "\n"


def _preamble(
    names: Sequence[str],
    scores: Mapping[str, list[Score]],
    contexts: Mapping[str, Mapping[str, Any]],
    quick: bool,
) -> list[str]:
    entries = list(dict.fromkeys(s.label for w in names for s in scores[w]))
    seeds = sorted({len(c["seeds"]) for c in contexts.values()})
    # a leaderboard runs every row of the table, so a row without runs joined it afterwards
    ran = {s.method for w in names for s in scores[w]}
    missing = [name for name in SCHEDULERS if name not in ran]
    later = f" (except {_list(missing)}, added to the table after this run)" if missing else ""
    out = [
        f"{len(entries)} entries on {len(names)} workloads ({_list(names)}): every scheduler of "
        f"adcs's name table at its defaults{later}, and ADCS at θ ∈ {{"
        + ", ".join(f"{t:g}" for t in THETAS)
        + f"}} (R = {REFRESH_EVERY}) and with fresh quality (θ = {PAPER_THETA:g}). Each workload's "
        "runs are in its own results folder (linked below); the methods of a seed share "
        "minibatches, availability and dropouts.",
        "",
    ]
    caveats = []
    if quick:
        caveats.append("these are the quick settings (few rounds): a smoke run, not a result")
    if any(c["is_subset"] for c in contexts.values()):
        caveats.append("the small Fashion-MNIST subset shipped with the package was used")
    if seeds and seeds[0] < 3:
        caveats.append(f"some workloads ran only {seeds[0]} seed(s)")
    if caveats:
        out += ["**Read with care:** " + "; ".join(caveats) + ".", ""]
    out += [
        "Definitions. *Final* accuracy: the mean over a run's last "
        f"{100 * FINAL_FRACTION:.0f}% of evaluations; over seeds, mean ± {100 * CONFIDENCE:.0f}% "
        "t-interval; accuracies in %. *Rank* on a workload: the place by mean over seeds (1 = "
        "highest; equal means share the mean of their places). *Best*: the highest mean. *Tied "
        "with the best*: a two-sided paired t-test over the seeds both ran, at the 5% level, "
        "does not tell the entry from the best (|mean d| ≤ t(0.975, n−1)·sd(d)/√n, d = best − "
        "entry per seed; with 3 seeds t = 4.30, so only clear differences count). *Rounds to "
        f"target*: the first evaluation at which worst accuracy reaches {100 * TARGET_FRACTION:.0f}% "
        "of Uniform's final worst accuracy (what random selection reaches); a mean only when "
        "every seed got there. Client computations: local updates and loss evaluations apart, "
        "mean per run. TV: the selection shares of the client groups against uniform selection.",
        "",
    ]
    return out


def _find(scores: Sequence[Score], pick: Any) -> Score | None:
    return next((s for s in scores if pick(s)), None)


def _verdicts(
    names: Sequence[str],
    scores: Mapping[str, list[Score]],
    tables: Mapping[str, list[RankRow]],
    placings: Mapping[str, Mapping[str, Mapping[str, Placing]]],
) -> list[str]:
    worst = placings["worst"]
    paper = {w: _find(scores[w], paper_adcs) for w in names}
    ran = [w for w in names if paper[w] is not None]
    if not ran:
        return ["No workload ran ADCS at the paper's θ.", ""]
    label = next(s.label for s in paper.values() if s is not None)
    wins = [w for w in ran if worst[w][label].best and _n_best(worst[w]) == 1]
    shared = [w for w in ran if worst[w][label].best and _n_best(worst[w]) > 1]
    ties = [w for w in ran if worst[w][label].tied and not worst[w][label].best]
    losses = [w for w in ran if not worst[w][label].tied]
    out = [f"On worst-client accuracy (the paper's measure), {label} (R = {REFRESH_EVERY}, the "
           f"paper's ADCS) ran on {len(ran)} workload(s)."]  # fmt: skip
    out.append(f"- **Wins** (the highest mean, alone) on {len(wins)}: {_list(wins) or 'none'}.")
    if shared:
        out.append(
            f"- **Shares the highest mean** on {len(shared)}: "
            + "; ".join(f"{w} (with {_n_best(worst[w]) - 1} other entries)" for w in shared)
            + "."
        )
    if ties:
        out.append(
            f"- **Tied with the best** on {len(ties)}: "
            + "; ".join(f"{w} (best: {_best_label(worst[w])})" for w in ties)
            + "."
        )
    beaters: dict[str, list[str]] = {}
    if losses:
        out.append(f"- **Loses** on {len(losses)}:")
        for w in losses:
            mine = paper[w]
            assert mine is not None
            ahead = _significantly_ahead(scores[w], mine)
            for s, _, _ in ahead:
                beaters.setdefault(s.label, []).append(w)
            shown = ", ".join(f"{s.label} ({_points(d, h)})" for s, d, h in ahead[:4])
            more = f" and {len(ahead) - 4} more" if len(ahead) > 4 else ""
            out.append(
                f"  - {w}: rank {_rank(worst[w][label].rank)} of {len(worst[w])}; "
                f"significantly ahead of it: {shown}{more} (points of worst accuracy, paired "
                "by seed)."
            )
    else:
        out.append("- **Loses** on none: no entry is significantly ahead of it anywhere.")
    if beaters:
        ranked = sorted(beaters.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        out.append(
            "- **To whom**: "
            + "; ".join(f"{b} (on {len(ws)}: {_list(ws)})" for b, ws in ranked[:6])
            + "."
        )
    out += _tuned_verdict(ran, scores, worst)
    out += _fresh_verdict(ran, scores, worst, label)
    out += _other_metrics(ran, placings, label)
    out += _overall_verdict(tables["worst"], label)
    return [*out, ""]


def _n_best(placing: Mapping[str, Placing]) -> int:
    return sum(p.best for p in placing.values())


def _best_label(placing: Mapping[str, Placing]) -> str:
    return next(e for e, p in placing.items() if p.best)


def _significantly_ahead(scores: Sequence[Score], mine: Score) -> list[tuple[Score, float, float]]:
    """Entries ahead of ``mine`` on worst accuracy by a paired difference that excludes 0.

    With one common seed no test is possible: every entry with a higher value is listed.
    """
    out = []
    for s in scores:
        mean, half, n = paired_difference(s.worst, mine.worst)
        if s is mine or not math.isfinite(mean) or mean <= 0 or (n >= 2 and mean <= half):
            continue
        out.append((s, mean, half))
    out.sort(key=lambda t: -t[1])
    return out


def _tuned_verdict(
    ran: Sequence[str], scores: Mapping[str, list[Score]], worst: Mapping[str, Any]
) -> list[str]:
    best_theta = {}
    for w in ran:
        doc = _theta_doc(scores[w])
        if doc is not None:
            best_theta[w] = doc["best_theta"]
    if not best_theta:
        return []
    at_best = []
    for w, theta in best_theta.items():
        s = _find(scores[w], lambda x, t=theta: _adcs_at(x) == t)
        if s is not None and worst[w][s.label].tied:
            at_best.append(w)
    moved = [f"{w} ({best_theta[w]:g})" for w in ran if best_theta.get(w) != PAPER_THETA]
    thetas = ", ".join(f"{t:g}" for t in THETAS)
    return [
        f"- **With θ tuned per workload** (the best of θ ∈ {{{thetas}}} chosen after the fact, "
        "which a user cannot do before running), ADCS is the best or tied with the best on "
        f"{len(at_best)} of {len(best_theta)}: {_list(at_best) or 'none'}. The best θ is not "
        f"{PAPER_THETA:g} on {len(moved)}: {_list(moved) or 'none'}."
    ]


def _fresh_verdict(
    ran: Sequence[str], scores: Mapping[str, list[Score]], worst: Mapping[str, Any], label: str
) -> list[str]:
    pairs = []
    for w in ran:
        fresh = _find(scores[w], _fresh)
        paper = _find(scores[w], paper_adcs)
        if fresh is not None and paper is not None:
            pairs.append((w, fresh, paper))
    if not pairs:
        return []
    fresh_label = pairs[0][1].label
    good = [w for w, f, _ in pairs if worst[w][f.label].tied]
    diffs = [(w, *paired_difference(f.worst, p.worst)[:2]) for w, f, p in pairs]
    better = [w for w, d, h in diffs if math.isfinite(h) and d > h]
    worse = [w for w, d, h in diffs if math.isfinite(h) and -d > h]
    return [
        f"- **{fresh_label}** (quality refreshed every round by a loss probe, kernel every "
        f"{REFRESH_EVERY} rounds) is the best or tied with the best on {len(good)} of "
        f"{len(pairs)}: {_list(good) or 'none'}. Against {label} it is significantly better on "
        f"{_list(better) or 'none'} and significantly worse on {_list(worse) or 'none'}."
    ]


def _other_metrics(
    ran: Sequence[str], placings: Mapping[str, Mapping[str, Mapping[str, Placing]]], label: str
) -> list[str]:
    out = []
    for metric in ("p10", "avg"):
        values = [w for w in ran if label in placings[metric][w]]
        if not values or all(not math.isfinite(placings[metric][w][label].mean) for w in values):
            continue
        good = [w for w in values if placings[metric][w][label].tied]
        out.append(
            f"- On {METRIC_NAMES[metric]} accuracy, {label} is the best or tied with the best on "
            f"{len(good)} of {len(values)}: {_list(good) or 'none'}."
        )
    return out


def _overall_verdict(rows: Sequence[RankRow], label: str) -> list[str]:
    if not rows:
        return []
    top = rows[0]
    mine = next((i for i, r in enumerate(rows) if r.entry == label), None)
    text = (
        f"- **Overall** (worst accuracy), the lowest mean rank is {top.entry}'s "
        f"({top.mean_rank:.2f} over {top.workloads} workloads; best or tied on {top.tied})"
    )
    if mine is not None and rows[mine].entry != top.entry:
        r = rows[mine]
        text += (
            f"; {label}'s is {r.mean_rank:.2f}, place {mine + 1} of {len(rows)} (best or tied on "
            f"{r.tied})"
        )
    most = max(rows, key=lambda r: (r.tied, -r.mean_rank))
    if most.entry != top.entry:
        text += f". Best or tied most often: {most.entry} ({most.tied} of {most.workloads})"
    return [text + "."]


def _rank_section(names: Sequence[str], tables: Mapping[str, list[RankRow]]) -> list[str]:
    worst = tables["worst"]
    other = {m: {r.entry: r for r in tables[m]} for m in METRICS}
    out = [
        "Ranked by final worst accuracy; the rank columns are each workload's place (★ best, "
        "= tied with the best). Mean ranks on the 10th-percentile and average accuracy beside.",
        "",
        "| place | entry | mean rank (worst) | best | best or tied | mean rank (p10) "
        "| mean rank (avg) | " + " | ".join(names) + " |",
        "|---|---|---|---|---|---|---|" + "---|" * len(names),
    ]
    return [*out, *_rank_lines(worst, other, names), ""]


def _rank_lines(
    worst: Sequence[RankRow], other: Mapping[str, Mapping[str, RankRow]], names: Sequence[str]
) -> list[str]:
    lines = []
    for i, r in enumerate(worst):
        p10 = other["p10"].get(r.entry)
        avg = other["avg"].get(r.entry)
        cells = [_rank(r.ranks[w]) if w in r.ranks else "—" for w in names]
        lines.append(
            f"| {i + 1} | {r.entry} | {r.mean_rank:.2f} | {r.best} | {r.tied} "
            f"| {'—' if p10 is None else f'{p10.mean_rank:.2f}'} "
            f"| {'—' if avg is None else f'{avg.mean_rank:.2f}'} | " + " | ".join(cells) + " |"
        )
    return lines


def _theta_section(names: Sequence[str], scores: Mapping[str, list[Score]]) -> list[str]:
    out = [
        f"The best θ of {{{', '.join(f'{t:g}' for t in THETAS)}}} (R = {REFRESH_EVERY}) by final "
        f"worst accuracy, beside the paper's θ = {PAPER_THETA:g}; the difference is paired by "
        "seed (mean ± 95% t-interval, points).",
        "",
        f"| workload | best θ | worst acc. at best θ | at θ = {PAPER_THETA:g} | difference "
        "| with fresh quality |",
        "|---|---|---|---|---|---|",
    ]
    for w in names:
        doc = _theta_doc(scores[w])
        if doc is None:
            continue
        by = {t: s for s in scores[w] if (t := _adcs_at(s)) is not None}
        best, paper = by[doc["best_theta"]], by.get(PAPER_THETA)
        fresh = _find(scores[w], _fresh)
        diff = (
            "—"
            if paper is None or best is paper
            else _points(doc["difference"], doc["difference_half"])
        )
        out.append(
            f"| {w} | {doc['best_theta']:g} | {_pm(*best.mean('worst'))} "
            f"| {'—' if paper is None else _pm(*paper.mean('worst'))} | {diff} "
            f"| {'—' if fresh is None else _pm(*fresh.mean('worst'))} |"
        )
    return [*out, ""]


def _setting(context: Mapping[str, Any]) -> str:
    parts = [
        f"N = {context['n_clients']}", f"m = {context['m']}", f"T = {context['rounds']}",
        f"evaluated every {context['eval_every']} rounds", f"seeds {list(context['seeds'])}",
    ]  # fmt: skip
    availability = context.get("availability") or {}
    if isinstance(availability, Mapping) and availability.get("kind", "always") != "always":
        parts.append(
            "availability " + ", ".join(f"{k} = {v}" for k, v in sorted(availability.items()))
        )
    return ", ".join(parts)


def _workload_section(
    w: str,
    scores: Sequence[Score],
    target: float,
    context: Mapping[str, Any],
    placings: Mapping[str, Mapping[str, Mapping[str, Placing]]],
    figure: str,
) -> list[str]:
    worst = placings["worst"][w]
    ordered = sorted(scores, key=lambda s: (worst[s.label].rank, s.label))
    out = [f"## Workload: {w}", ""]
    if context["description"]:
        out += [f"{context['description']}.", ""]
    out += [
        f"{_setting(context)}. Target worst accuracy {_pct(target)}%. "
        f"Runs, curves and the workload's own report: [{w}/report.md]({w}/report.md).",
        "",
        "| rank | entry | final worst | final p10 | final average | rounds to target "
        "| client updates | loss evals | TV |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in ordered:
        p = worst[s.label]
        mark = " ★" if p.best else (" =" if p.tied else "")
        out.append(
            f"| {_rank(p.rank)}{mark} | {s.label} | {_pm(*s.mean('worst'))} "
            f"| {_pm(*s.mean('p10'))} | {_pm(*s.mean('avg'))} | {_rounds(s.to_target)} "
            f"| {s.client_updates:,.0f} | {s.loss_evals:,.0f} | {s.tv:.4f} |"
        )
    return [*out, "", f"![{w}]({figure})", ""]


# ---------------------------------------------------------------------------------------------
# figures


def _color(score: Score) -> str:
    if paper_adcs(score):
        return "#d62728"
    return "#ff7f0e" if score.method == "adcs" else "#4c72b0"


def _workload_figure(
    folder: Path, w: str, scores: Sequence[Score], placing: Mapping[str, Placing]
) -> str:
    """Final worst and average accuracy of every entry (95 % intervals), best at the top."""
    plt = pyplot()
    ordered = sorted(scores, key=lambda s: (-placing[s.label].rank, s.label))
    y = np.arange(len(ordered))
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.32 * len(ordered) + 1.6), sharey=True)
    for ax, metric in zip(axes, ("worst", "avg"), strict=True):
        means = np.array([s.mean(metric)[0] for s in ordered])
        halves = np.array([s.mean(metric)[1] for s in ordered])
        err = np.where(np.isfinite(halves), halves, 0.0)
        ax.barh(y, 100 * np.nan_to_num(means), xerr=100 * err, color=[_color(s) for s in ordered],
                alpha=0.85, error_kw={"lw": 0.8, "capsize": 2})  # fmt: skip
        ax.set_xlabel(f"final {METRIC_NAMES[metric]} accuracy (%)")
        ax.grid(axis="x", alpha=0.3)
        finite = means[np.isfinite(means)]
        if finite.size:
            low = max(0.0, 100 * float((finite - err[np.isfinite(means)]).min()) - 5)
            ax.set_xlim(low, min(100.0, 100 * float((finite + err[np.isfinite(means)]).max()) + 2))
    ticks = [
        s.label + (" ★" if placing[s.label].best else " =" if placing[s.label].tied else "")
        for s in ordered
    ]
    axes[0].set_yticks(y, ticks, fontsize=8)
    fig.suptitle(f"{w}: final accuracy, mean over seeds ± 95% (★ best, = tied with the best)")
    fig.tight_layout()
    name = f"{w}{FIGURE_SUFFIX}"
    fig.savefig(folder / name, dpi=110)
    plt.close(fig)
    return name


def _summary_figure(
    path: Path,
    names: Sequence[str],
    rows: Sequence[RankRow],
    placings: Mapping[str, Mapping[str, Placing]],
) -> None:
    """Every entry's rank on every workload (worst accuracy) and its mean rank."""
    plt = pyplot()
    ranks = np.array([[r.ranks.get(w, np.nan) for w in names] + [r.mean_rank] for r in rows])
    fig, ax = plt.subplots(figsize=(1.0 * len(names) + 4.5, 0.33 * len(rows) + 1.8))
    image = ax.imshow(ranks, cmap="viridis_r", aspect="auto")
    for i, r in enumerate(rows):
        for j, w in enumerate(names):
            if w not in r.ranks:
                continue
            p = placings[w][r.entry]
            mark = "★" if p.best else "=" if p.tied else ""
            ax.text(j, i, f"{r.ranks[w]:g}{mark}", ha="center", va="center", fontsize=7,
                    color="white" if r.ranks[w] > 0.6 * len(rows) else "black")  # fmt: skip
        ax.text(len(names), i, f"{r.mean_rank:.1f}", ha="center", va="center", fontsize=7,
                fontweight="bold", color="white" if r.mean_rank > 0.6 * len(rows) else "black")  # fmt: skip
    ax.set_xticks(range(len(names) + 1), [*names, "mean"], rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), [r.entry for r in rows], fontsize=8)
    fig.colorbar(image, ax=ax, label="rank (1 = best)", shrink=0.8)
    ax.set_title("Rank by final worst accuracy (★ best, = tied with the best)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
