"""The leaderboard's summary files: tables, ``report.md`` in plain words, and figures.

Everything here is computed from the workloads' results folders (read back from disk, so a
resumed or remote run gives the same bytes), never hard-coded: which entry wins where, by how
much, and whom a scheduler's reference entry loses to are all found in the numbers
(`adcs.leaderboard.ranking` defines the scores, ranks and the tie test; the sections on
each scheduler's declared variants are `adcs.leaderboard.variants`'s). No
wall-clock time is written to these files; the leaderboard's ``manifest.json`` holds those.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adcs.experiments.analysis.figures import pyplot
from adcs.experiments.analysis.records import RunRecord
from adcs.experiments.analysis.report import pct
from adcs.experiments.analysis.stats import CONFIDENCE, FINAL_FRACTION
from adcs.experiments.analysis.timing import TARGET_FRACTION
from adcs.experiments.run.folder import MANIFEST
from adcs.experiments.run.resultfiles import read_manifest
from adcs.experiments.run.results import write_csv, write_json
from adcs.leaderboard.optimizers import (
    Agreement,
    Counterpart,
    agreement,
    configs_of,
    counterparts,
    gains,
    optimiser_section,
)
from adcs.leaderboard.ranking import (
    AUC,
    METRIC_NAMES,
    METRICS,
    Placing,
    RankRow,
    Score,
    baseline_label,
    check_metrics,
    entry_labels,
    placed,
    places,
    rank_table,
    scores_of,
    workload_scores,
)
from adcs.leaderboard.variants import (
    Family,
    families,
    lever_doc,
    lever_section,
    verdict_section,
)
from adcs.leaderboard.wording import join_words, plus_minus, rank_text, rounds_text
from adcs.schedulers import SCHEDULERS

__all__ = ["NO_CHOICE_SHARE", "same_selections", "write_summary"]

logger = logging.getLogger(__name__)

FIGURE_SUFFIX = ".png"
SUMMARY_FIGURE = "summary.png"


# ---------------------------------------------------------------------------------------------
# the summary


def _context(folder: Path, name: str) -> dict[str, Any]:
    """What the report says of a workload's setting, from its manifest."""
    doc = read_manifest(folder / name / MANIFEST)
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


NO_CHOICE_SHARE = 0.5
"""The share of rounds with at most ``m`` clients available (every scheduler then selects every
one of them) from which a workload is warned of: from half the rounds on, its entries differ in
fewer rounds than they agree."""


def same_selections(folder: Path) -> str | None:
    """Why the entries of one workload's results ``folder`` are (nearly) one scheduler there,
    read from its ``selections.npz``; None when they are not.

    Said when every variant selected the same clients in every round of every seed, or when in
    at least `NO_CHOICE_SHARE` of the rounds no more than ``m`` clients were available
    (e.g. m = 18 with about 15 available): every scheduler then selects every available client.
    """
    if not (folder / "selections.npz").is_file():
        return None
    with np.load(folder / "selections.npz") as npz:
        chosen = {
            k.removeprefix("selected/"): npz[k] for k in npz.files if k.startswith("selected/")
        }
        available = [np.asarray(npz[k]) for k in npz.files if k.startswith("n_available/")]
    if not chosen:
        return None
    by_seed: dict[str, list[np.ndarray]] = {}
    for run_id, selected in chosen.items():  # a run id is its variant, then -seed=<seed>
        by_seed.setdefault(run_id.rsplit("-seed=", 1)[-1], []).append(np.sort(selected, axis=1))
    identical = len(chosen) > len(by_seed) and all(
        all(np.array_equal(runs[0], r) for r in runs[1:]) for runs in by_seed.values()
    )
    m = next(iter(chosen.values())).shape[1]
    counts = np.concatenate(available) if available else np.empty(0)
    share = float(np.mean(counts <= m)) if counts.size else 0.0
    offered = f"no more than m = {m} clients were available" + (
        f" ({counts.mean():.1f} on average)" if counts.size else ""
    )
    if identical:
        why = "every entry selected the same clients in every round of every seed"
        if share == 1.0:
            why += f": in every round {offered}, so every scheduler selects every available client"
        return why
    if share >= NO_CHOICE_SHARE:
        return (
            f"in {100 * share:.0f}% of the rounds {offered}: every scheduler then selects every "
            "available client, so the entries can differ only in the other rounds"
        )
    return None


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
    folder: Path,
    names: Sequence[str],
    *,
    quick: bool = False,
    metrics: Sequence[str] = (),
    kind: str = "leaderboard",
) -> tuple[list[RankRow], dict[str, list[Score]]]:
    """Write the leaderboard's tables, report and figures into ``folder`` from its workloads.

    ``kind`` is what ran them: ``"leaderboard"`` (every row of the name table) or ``"sweep"``
    (a configuration's methods), as the report describes the entries. A workload whose entries
    all selected the same clients (e.g. m at least the clients available) is warned of, in the
    log and the report (`same_selections`).

    ``metrics`` are columns ranked beside `METRICS` (`check_metrics`): they join
    ``leaderboard.csv``, ``ranks.csv`` and ``summary.json``. Returns the overall rank table on
    the final worst accuracy and every workload's scores.
    """
    ranked = (*METRICS, *(m for m in check_metrics(metrics) if m not in METRICS))
    scores, targets, contexts = _collect(folder, names)
    same = {w: why for w in names if (why := same_selections(folder / w))}
    for w, why in same.items():
        logger.warning("%s: %s", w, why)
    tables = {}
    placings: dict[str, dict[str, dict[str, Placing]]] = {}
    for metric in ranked:
        values = {w: {s.label: s.ranked(metric) for s in scores[w]} for w in names}
        tables[metric], placings[metric] = rank_table(values)
    fams = families(s.method for w in names for s in scores[w])
    pairs = counterparts(configs_of(folder, names))
    alike = {pair.workload: agreement(folder, pair, scores) for pair in pairs}
    _write_tables(folder, names, scores, targets, tables, placings, fams, pairs, alike)
    figures = [_workload_figure(folder, w, scores[w], placings["worst"][w], fams) for w in names]
    _summary_figure(folder / SUMMARY_FIGURE, names, tables["worst"], placings["worst"])
    report = _report(
        names,
        scores,
        targets,
        contexts,
        tables,
        placings,
        figures,
        quick,
        fams,
        same,
        kind,
        pairs,
        alike,
    )
    (folder / "report.md").write_text(report, encoding="utf-8")
    return tables["worst"], scores


def _write_tables(
    folder: Path,
    names: Sequence[str],
    scores: Mapping[str, list[Score]],
    targets: Mapping[str, float],
    tables: Mapping[str, list[RankRow]],
    placings: Mapping[str, Mapping[str, Mapping[str, Placing]]],
    fams: Sequence[Family],
    pairs: Sequence[Counterpart],
    alike: Mapping[str, Mapping[str, Agreement]],
) -> None:
    header = ["workload", "entry", "method", "variant", "seeds"]
    for metric in tables:
        header += [metric, f"{metric}_half", f"rank_{metric}", f"best_{metric}", f"tied_{metric}"]
    header += [f"p_{metric}" for metric in tables]
    header += [AUC, f"{AUC}_half"]
    header += ["target_worst", "rounds_to_target", "rounds_to_target_half", "seeds_reached",
               "client_updates", "loss_evals", "tv_to_uniform"]  # fmt: skip
    rows = []
    for w in names:
        for s in scores[w]:
            row: list[Any] = [w, s.label, s.method, s.variant, s.n_seeds]
            for metric in tables:
                p = placings[metric][w][s.label]
                row += [*s.mean(metric), p.rank, p.best, p.tied]
            row += [placings[metric][w][s.label].p_value for metric in tables]
            row += [*s.mean(AUC)]
            e = s.to_target
            row += [targets[w], e.mean, e.half, e.n, s.client_updates, s.loss_evals, s.tv]
            rows.append(row)
    write_csv(folder / "leaderboard.csv", header, rows)
    write_csv(
        folder / "ranks.csv",
        ["metric", "place", "entry", "mean_rank", "workloads", "best", "best_or_tied",
         *(f"rank_{w}" for w in names)],
        (
            [metric, place, r.entry, r.mean_rank, r.workloads, r.best, r.tied,
             *(r.ranks.get(w) for w in names)]
            for metric in tables
            for place, r in zip(places(tables[metric]), tables[metric], strict=True)
        ),
    )  # fmt: skip
    write_json(
        folder / "summary.json",
        {
            "definitions": _definitions(),
            "workloads": {
                w: {"target_worst": targets[w], "entries": [_entry_doc(s, placings, w)
                                                            for s in scores[w]]}
                for w in names
            },
            "ranks": {m: [_row_doc(r) for r in tables[m]] for m in tables},
            **{f"{f.method}_{f.variants.lever}": {w: lever_doc(f, scores[w]) for w in names}
               for f in fams},
            **({"counterparts": [_pair_doc(pair, scores, alike.get(pair.workload, {}))
                                  for pair in pairs]} if pairs else {}),
        },
    )  # fmt: skip


def _definitions() -> dict[str, str]:
    return {
        "final": f"mean over each run's last {100 * FINAL_FRACTION:.0f}% of evaluations",
        "interval": f"{100 * CONFIDENCE:.0f}% Student-t interval over seeds",
        "rank": "place by mean over seeds, 1 = highest; equal means share the mean of their "
        "places; a mean that is not finite ranks last",
        "best": "the highest mean over seeds",
        "tied": "best, or not told apart from the best at the "
        f"{100 * (1 - CONFIDENCE):.0f}% level by a two-sided paired t-test over the common seeds "
        "(d = best - entry per seed; with one seed only equality), its p-value Holm-adjusted "
        "over the workload's comparisons with the best (family-wise error at most "
        f"{100 * (1 - CONFIDENCE):.0f}%)",
        "p": "the entry's Holm-adjusted p-value against the workload's best (empty for the best)",
        AUC: "area under the worst client accuracy over the evaluation rounds (trapezoid rule), "
        "divided by the rounds spanned: the run's mean worst accuracy",
        "target_worst": f"{100 * TARGET_FRACTION:.0f}% of {baseline_label()}'s final worst "
        "accuracy",
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
            "p_holm": p.p_value,
        }
    auc_mean, auc_half = s.mean(AUC)
    doc[AUC] = {"mean": auc_mean, "half": auc_half,
                "per_seed": {str(k): v for k, v in s.values(AUC).items()}}  # fmt: skip
    doc["rounds_to_target"] = {str(k): v for k, v in s.rounds_to_target.items()}
    doc.update(client_updates=s.client_updates, loss_evals=s.loss_evals, tv_to_uniform=s.tv)
    return doc


def _pair_doc(
    pair: Counterpart, scores: Mapping[str, list[Score]], alike: Mapping[str, Agreement]
) -> dict[str, Any]:
    """A workload with another optimiser, its counterpart, each entry against random selection
    on both (`adcs.leaderboard.optimizers.gains`), and how alike each entry's runs are on the two
    (`adcs.leaderboard.optimizers.agreement`)."""
    doc: dict[str, Any] = {"workload": pair.workload, "base": pair.base, "change": pair.change,
                           "inert": pair.inert, "scale": pair.scale}  # fmt: skip
    for key, w in (("gains", pair.workload), ("base_gains", pair.base)):
        doc[key] = {e: {"mean": g.mean, "half": g.half, "p_holm": g.p_value,
                        "verdict": g.verdict} for e, g in gains(scores[w]).items()}  # fmt: skip
    doc["agreement"] = {e: {"rounds_alike": a.alike, "first_round_apart": a.first_apart,
                            "worst_gap": a.gap, "worst_gap_largest": a.largest,
                            "seeds": a.seeds} for e, a in alike.items()}  # fmt: skip
    return doc


def _row_doc(r: RankRow) -> dict[str, Any]:
    return {"entry": r.entry, "mean_rank": r.mean_rank, "workloads": r.workloads,
            "best": r.best, "best_or_tied": r.tied, "ranks": r.ranks}  # fmt: skip


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
    fams: Sequence[Family],
    same: Mapping[str, str],
    kind: str,
    pairs: Sequence[Counterpart] = (),
    alike: Mapping[str, Mapping[str, Agreement]] | None = None,
) -> str:
    out = ["# Leaderboard: which scheduler, where", ""]
    out += _preamble(names, scores, contexts, quick, fams, same, kind)
    for family in fams:
        out += verdict_section(family, names, scores, tables, placings)
    out += optimiser_section(pairs, scores, alike)
    out += ["## Overall ranks", ""]
    out += _rank_section(names, tables)
    for family in fams:
        out += lever_section(family, names, scores)
    for w, fig in zip(names, figures, strict=True):
        out += _workload_section(w, scores[w], targets[w], contexts[w], placings, fig)
    return "\n".join(out).rstrip() + "\n"


def _preamble(
    names: Sequence[str],
    scores: Mapping[str, list[Score]],
    contexts: Mapping[str, Mapping[str, Any]],
    quick: bool,
    fams: Sequence[Family],
    same: Mapping[str, str],
    kind: str,
) -> list[str]:
    entries = list(dict.fromkeys(s.label for w in names for s in scores[w]))
    seeds = sorted({len(c["seeds"]) for c in contexts.values()})
    every = [s for w in names for s in scores[w]]
    declared = "; ".join(d for f in fams if (d := f.describe(every)))
    if declared:
        who = "it declares" if len(fams) == 1 else "they declare"
        declared = f", and {declared}: the points {who} for the leaderboard"
    if kind == "leaderboard":  # it runs every row of the table: a row without runs came later
        ran = {s.method for s in every}
        missing = [name for name in SCHEDULERS if name not in ran]
        later = f" (except {join_words(missing)}, added to the table after this run)"
        what = f"every scheduler of adcs's name table at its defaults{later if missing else ''}"
        what += declared
        where = {m: [w for w in names if any(s.method == m for s in scores[w])] for m in ran}
        partly = [
            f"{m} only on {join_words(ws)}" for m, ws in where.items() if len(ws) < len(names)
        ]
        if partly:  # added to the table between the workloads' runs
            what += f"; {join_words(sorted(partly))}, added to the table between their runs"
    else:  # a sweep's entries are its configuration's: named as they ran
        what = join_words(entries)
    out = [
        f"{len(entries)} entries on {len(names)} workloads ({join_words(names)}): {what}. Each "
        "workload's runs are in its own results folder (linked below); the methods of a seed "
        "share minibatches, availability and dropouts.",
        "",
    ]
    out += [f"**The schedulers had little to choose:** {w}: {why}." for w, why in same.items()] + (
        [""] if same else []
    )
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
        "with the best*: a two-sided paired t-test over the seeds both ran (d = best − entry per "
        "seed) does not tell the entry from the best at the 5% level once its p-value is "
        "Holm-adjusted over the workload's k comparisons with the best (the smallest p-value is "
        "multiplied by k, the next by k − 1, …, each at least its predecessor's): the chance of "
        "calling any entry *behind* when it is not stays at most 5% per workload and metric. "
        "*Worst AUC*: the area under the worst client accuracy over the rounds divided by the "
        "rounds, the run's mean worst accuracy, which also counts how early it came. *Rounds to "
        f"target*: the first evaluation at which worst accuracy reaches {100 * TARGET_FRACTION:.0f}% "
        f"of {baseline_label()}'s final worst accuracy (what random selection reaches); a mean "
        "only when every seed got there. Client computations: local updates and loss "
        "evaluations apart, mean per run. TV: the selection shares of the client groups against "
        "uniform selection.",
        "",
    ]
    return out


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
    out += [*_rank_lines(worst, other, names), ""]
    unplaced = worst[len(placed(worst)) :]
    if unplaced:
        out += [
            "Listed last, without a place: "
            + join_words([f"{r.entry} (ran on {r.workloads} of {len(names)})" for r in unplaced])
            + ". A mean rank over fewer workloads is not comparable with one over all of them.",
            "",
        ]
    return out


def _rank_lines(
    worst: Sequence[RankRow], other: Mapping[str, Mapping[str, RankRow]], names: Sequence[str]
) -> list[str]:
    lines = []
    for place, r in zip(places(worst), worst, strict=True):
        p10 = other["p10"].get(r.entry)
        avg = other["avg"].get(r.entry)
        cells = [
            f"{rank_text(r.ranks[w])} {r.marks[w]}".rstrip() if w in r.ranks else "—" for w in names
        ]
        lines.append(
            f"| {'—' if place is None else place} | {r.entry} | {r.mean_rank:.2f} | {r.best} | {r.tied} "
            f"| {'—' if p10 is None else f'{p10.mean_rank:.2f}'} "
            f"| {'—' if avg is None else f'{avg.mean_rank:.2f}'} | " + " | ".join(cells) + " |"
        )
    return lines


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
        f"{_setting(context)}. Target worst accuracy {pct(target)}. "
        f"Runs, curves and the workload's own report: [{w}/report.md]({w}/report.md).",
        "",
        "| rank | entry | final worst | worst AUC | final p10 | final average | rounds to target "
        "| client updates | loss evals | TV |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in ordered:
        p = worst[s.label]
        mark = " ★" if p.best else (" =" if p.tied else "")
        out.append(
            f"| {rank_text(p.rank)}{mark} | {s.label} | {plus_minus(*s.mean('worst'))} "
            f"| {plus_minus(*s.mean(AUC))} | {plus_minus(*s.mean('p10'))} | {plus_minus(*s.mean('avg'))} | {rounds_text(s.to_target)} "
            f"| {s.client_updates:,.0f} | {s.loss_evals:,.0f} | {s.tv:.4f} |"
        )
    return [*out, "", f"![{w}]({figure})", ""]


# ---------------------------------------------------------------------------------------------
# figures


def _color(score: Score, fams: Sequence[Family]) -> str:
    """Red: a scheduler's reference entry; orange: its other variants; blue: the rest."""
    if any(f.is_reference(score) for f in fams):
        return "#d62728"
    return "#ff7f0e" if any(score.method == f.method for f in fams) else "#4c72b0"


def _workload_figure(
    folder: Path,
    w: str,
    scores: Sequence[Score],
    placing: Mapping[str, Placing],
    fams: Sequence[Family],
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
        ax.barh(y, 100 * np.nan_to_num(means), xerr=100 * err, color=[_color(s, fams) for s in ordered],
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
