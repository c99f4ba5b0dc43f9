"""The leaderboard report's sections on the variants of one scheduler (docs/design.md §8).

A scheduler may declare the points it runs on the leaderboard
(`adcs.schedulers.variants.Variants`, its ``leaderboard_variants``): a lever swept at
fixed hyperparameters, the lever's published value, and extras. For every scheduler that
declares some (a `Family`), the report says where its *reference* entry (the lever at
its published value, no extra) wins and where it loses and to whom, what tuning the lever per
workload would gain, what each extra changes, and gives a table of the best lever value per
workload; ``summary.json`` holds the numbers under ``<method>_<lever>``
(`lever_doc`). Nothing here names a scheduler: everything comes from the declarations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adcs.experiments.analysis.records import method_label
from adcs.experiments.analysis.stats import paired_difference
from adcs.leaderboard.ranking import (
    METRIC_NAMES,
    Placing,
    RankRow,
    Score,
    placed,
    variants_of,
)
from adcs.leaderboard.wording import (
    finite_key,
    join_words,
    plus_minus,
    points,
    rank_text,
)
from adcs.schedulers.variants import Extra, Variants, value_text

__all__ = ["Family", "families", "lever_doc", "lever_section", "verdict_section"]

Placings = Mapping[str, Mapping[str, Mapping[str, Placing]]]
"""metric → workload → entry → its place."""


@dataclass(frozen=True)
class Family:
    """A scheduler that declares leaderboard variants, as the report sees its entries.

    Attributes
    ----------
    method : str
        Its name in the runs (a row of [`adcs.schedulers.SCHEDULERS`][adcs.schedulers.SCHEDULERS]).
    variants : Variants
        Its declaration.
    """

    method: str
    variants: Variants

    @property
    def display(self) -> str:
        return method_label(self.method)

    @property
    def symbol(self) -> str:
        """How the lever is written (θ)."""
        return self.variants.symbol(self.variants.lever)

    @property
    def published(self) -> str:
        return value_text(self.variants.published)

    def ran_values(self, scores: Iterable[Score]) -> list[Any]:
        """The lever's values of its plain entries among ``scores``, in declared order: what
        ran, which a sweep or a partial leaderboard may make fewer than declared."""
        ran = {v for s in scores if (v := self.at(s)) is not None}
        return [v for v in self.variants.values if v in ran]

    def ran_extras(self, scores: Iterable[Score]) -> list[Extra]:
        """Its extras with an entry among ``scores``."""
        scores = list(scores)
        return [e for e in self.variants.extras if self.extra_entry(scores, e) is not None]

    def values_text(self, values: Sequence[Any]) -> str:
        """Lever values, ``{0.6, 0.8, 0.9, 0.95}``."""
        return "{" + ", ".join(value_text(v) for v in values) + "}"

    def fixed_note(self) -> str:
        """`` (R = 20)``, or nothing without fixed hyperparameters."""
        fixed = self.variants.describe_fixed()
        return f" ({fixed})" if fixed else ""

    def describe(self, scores: Iterable[Score]) -> str:
        """Its entries among ``scores`` in words: ``ADCS at θ ∈ {…} (R = 20) and with fresh q at
        θ = 0.8`` (empty when none of its declared points ran)."""
        scores = list(scores)
        values, extras = self.ran_values(scores), self.ran_extras(scores)
        parts = []
        if len(values) > 1:
            parts.append(f"at {self.symbol} ∈ {self.values_text(values)}{self.fixed_note()}")
        elif values:
            parts.append(f"at {self.symbol} = {value_text(values[0])}{self.fixed_note()}")
        lever = self.variants.lever
        for extra in extras:  # at the lever value it ran with
            found = self.extra_entry(scores, extra)
            at = value_text(found.params.get(lever)) if found is not None else self.published
            parts.append(f"with {extra.label} at {self.symbol} = {at}")
        return f"{self.display} {' and '.join(parts)}" if parts else ""

    def at(self, score: Score) -> Any | None:
        """The lever's value of one of its plain entries (fixed hyperparameters, no extra)."""
        return self.variants.lever_at(score.params) if score.method == self.method else None

    def is_reference(self, score: Score) -> bool:
        return score.method == self.method and self.variants.is_reference(score.params)

    def is_extra(self, score: Score, extra: Extra) -> bool:
        return score.method == self.method and extra.matches(score.params)

    def extra_entry(self, scores: Iterable[Score], extra: Extra) -> Score | None:
        """Its first entry at ``extra``'s point, else None."""
        return next((s for s in scores if self.is_extra(s, extra)), None)

    def at_value(self, scores: Iterable[Score], value: Any) -> Score | None:
        """Its first plain entry at the lever value ``value``, else None."""
        return next((s for s in scores if self.at(s) == value), None)

    def plain(self, scores: Iterable[Score]) -> dict[Any, Score]:
        """Its plain entries by lever value."""
        return {v: s for s in scores if (v := self.at(s)) is not None}


def families(methods: Iterable[str]) -> list[Family]:
    """The schedulers among ``methods`` that declare leaderboard variants, in first order."""
    out = []
    for method in dict.fromkeys(methods):
        variants = variants_of(method)
        if variants is not None:
            out.append(Family(method, variants))
    return out


def _find(scores: Sequence[Score], pick: Callable[[Score], bool]) -> Score | None:
    return next((s for s in scores if pick(s)), None)


# ---------------------------------------------------------------------------------------------
# summary.json


def lever_doc(family: Family, scores: Sequence[Score]) -> dict[str, Any] | None:
    """The best lever value of a workload beside the published one, with their paired
    difference, and each extra's worst accuracy (None when the family has no plain entry).

    Keys: ``best_<lever>``, ``best_worst``; with the published entry ``paper_worst`` (the
    published value's, its paper's), ``difference`` and ``difference_half`` (best − published,
    paired by seed); ``<extra key>_worst`` for each extra that ran.
    """
    by_value = family.plain(scores)
    if not by_value:
        return None
    published = family.variants.published
    # the highest mean; on equal means the published value
    best = max(
        by_value.items(), key=lambda kv: (finite_key(kv[1].mean("worst")[0]), kv[0] == published)
    )[1]
    lever = family.variants.lever
    doc: dict[str, Any] = {f"best_{lever}": family.at(best), "best_worst": best.mean("worst")[0]}
    reference = by_value.get(published)
    if reference is not None:
        mean, half, _ = paired_difference(best.worst, reference.worst)
        doc.update(paper_worst=reference.mean("worst")[0], difference=mean, difference_half=half)
    for extra in family.variants.extras:
        found = family.extra_entry(scores, extra)
        if found is not None:
            doc[f"{extra.key}_worst"] = found.mean("worst")[0]
    return doc


# ---------------------------------------------------------------------------------------------
# where the reference entry wins and loses


def verdict_section(
    family: Family,
    names: Sequence[str],
    scores: Mapping[str, list[Score]],
    tables: Mapping[str, list[RankRow]],
    placings: Placings,
) -> list[str]:
    """``## Where <scheduler> wins and where it loses``: its reference entry on each workload."""
    out = [f"## Where {family.display} wins and where it loses", ""]
    worst = placings["worst"]
    reference = {w: _find(scores[w], family.is_reference) for w in names}
    ran = [w for w in names if reference[w] is not None]
    if not ran:
        return [
            *out,
            f"No workload ran {family.display} at its published {family.symbol} = "
            f"{family.published}.",
            "",
        ]
    label = next(s.label for s in reference.values() if s is not None)
    fixed = family.variants.describe_fixed()
    setting = f"{fixed}, " if fixed else ""
    out.append(
        f"On worst-client accuracy (the fairness measure), {label} ({setting}{family.display}'s "
        f"published setting) ran on {len(ran)} workload(s)."
    )
    out += _places(ran, worst, label)
    out += _losses(ran, scores, worst, reference)
    out += _tuned_verdict(family, ran, scores, worst)
    for extra in family.variants.extras:
        out += _extra_verdict(family, extra, ran, scores, worst, label)
    out += _other_metrics(ran, placings, label)
    out += _overall_verdict(tables["worst"], label)
    return [*out, ""]


def _places(
    ran: Sequence[str], worst: Mapping[str, Mapping[str, Placing]], label: str
) -> list[str]:
    """Where the entry wins alone, shares the highest mean, or is tied with the best."""
    wins = [w for w in ran if worst[w][label].best and _n_best(worst[w]) == 1]
    shared = [w for w in ran if worst[w][label].best and _n_best(worst[w]) > 1]
    ties = [w for w in ran if worst[w][label].tied and not worst[w][label].best]
    out = [f"- **Wins** (the highest mean, alone) on {len(wins)}: {join_words(wins) or 'none'}."]
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
    return out


def _losses(
    ran: Sequence[str],
    scores: Mapping[str, list[Score]],
    worst: Mapping[str, Mapping[str, Placing]],
    reference: Mapping[str, Score | None],
) -> list[str]:
    """Where the entry loses, to whom (significantly, paired by seed)."""
    losses = []
    for w in ran:
        mine = reference[w]
        assert mine is not None
        if not worst[w][mine.label].tied:
            losses.append((w, mine))
    if not losses:
        return ["- **Loses** on none: no entry is significantly ahead of it anywhere."]
    out = [f"- **Loses** on {len(losses)}:"]
    beaters: dict[str, list[str]] = {}
    for w, mine in losses:
        ahead = _significantly_ahead(scores[w], mine)
        for s, _, _ in ahead:
            beaters.setdefault(s.label, []).append(w)
        shown = ", ".join(f"{s.label} ({points(d, h)})" for s, d, h in ahead[:4])
        more = f" and {len(ahead) - 4} more" if len(ahead) > 4 else ""
        out.append(
            f"  - {w}: rank {rank_text(worst[w][mine.label].rank)} of {len(worst[w])}; "
            f"significantly ahead of it: {shown}{more} (points of worst accuracy, paired "
            "by seed)."
        )
    if beaters:
        ranked = sorted(beaters.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        out.append(
            "- **To whom**: "
            + "; ".join(f"{b} (on {len(ws)}: {join_words(ws)})" for b, ws in ranked[:6])
            + "."
        )
    return out


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
    family: Family,
    ran: Sequence[str],
    scores: Mapping[str, list[Score]],
    worst: Mapping[str, Mapping[str, Placing]],
) -> list[str]:
    lever = family.variants.lever
    best_value = {}
    for w in ran:
        doc = lever_doc(family, scores[w])
        if doc is not None:
            best_value[w] = doc[f"best_{lever}"]
    if not best_value:
        return []
    at_best = []
    for w, value in best_value.items():
        s = family.at_value(scores[w], value)
        if s is not None and worst[w][s.label].tied:
            at_best.append(w)
    values = family.ran_values(s for w in ran for s in scores[w])
    if len(values) < 2:  # nothing was tuned
        return []
    published = family.variants.published
    moved = [f"{w} ({value_text(best_value[w])})" for w in ran if best_value.get(w) != published]
    sym = family.symbol
    return [
        f"- **With {sym} tuned per workload** (the best of {sym} ∈ {family.values_text(values)} "
        f"chosen after the fact, which a user cannot do before running), {family.display} is "
        f"the best or tied with the best on {len(at_best)} of {len(best_value)}: "
        f"{join_words(at_best) or 'none'}. The best {sym} is not {family.published} on "
        f"{len(moved)}: {join_words(moved) or 'none'}."
    ]


def _extra_verdict(
    family: Family,
    extra: Extra,
    ran: Sequence[str],
    scores: Mapping[str, list[Score]],
    worst: Mapping[str, Mapping[str, Placing]],
    label: str,
) -> list[str]:
    pairs = []
    for w in ran:
        found = family.extra_entry(scores[w], extra)
        reference = _find(scores[w], family.is_reference)
        if found is not None and reference is not None:
            pairs.append((w, found, reference))
    if not pairs:
        return []
    extra_label = pairs[0][1].label
    good = [w for w, f, _ in pairs if worst[w][f.label].tied]
    diffs = [(w, *paired_difference(f.worst, r.worst)[:2]) for w, f, r in pairs]
    better = [w for w, d, h in diffs if math.isfinite(h) and d > h]
    worse = [w for w, d, h in diffs if math.isfinite(h) and -d > h]
    fixed = family.variants.describe_fixed()
    note = extra.description + (f"; {fixed}" if fixed else "")
    return [
        f"- **{extra_label}** ({note}) is the best or tied with the best on "
        f"{len(good)} of {len(pairs)}: {join_words(good) or 'none'}. Against {label} it is "
        f"significantly better on {join_words(better) or 'none'} and significantly worse on "
        f"{join_words(worse) or 'none'}."
    ]


def _other_metrics(ran: Sequence[str], placings: Placings, label: str) -> list[str]:
    out = []
    for metric in ("p10", "avg"):
        values = [w for w in ran if label in placings[metric][w]]
        if not values or all(not math.isfinite(placings[metric][w][label].mean) for w in values):
            continue
        good = [w for w in values if placings[metric][w][label].tied]
        out.append(
            f"- On {METRIC_NAMES[metric]} accuracy, {label} is the best or tied with the best on "
            f"{len(good)} of {len(values)}: {join_words(good) or 'none'}."
        )
    return out


def _overall_verdict(rows: Sequence[RankRow], label: str) -> list[str]:
    rows = placed(rows)  # an entry that ran on fewer workloads has no comparable mean rank
    if not rows:
        return []
    top = rows[0]
    mine = next((i for i, r in enumerate(rows) if r.entry == label), None)
    sharing = [r.entry for r in rows if r.mean_rank == top.mean_rank]
    text = (
        f"- **Overall** (worst accuracy), the lowest mean rank is {top.entry}'s "
        f"({top.mean_rank:.2f} over {top.workloads} workloads; best or tied on {top.tied})"
        if len(sharing) == 1
        else f"- **Overall** (worst accuracy), the lowest mean rank, {top.mean_rank:.2f}, is "
        f"shared by {join_words(sharing)}"
    )
    if mine is not None and rows[mine].entry not in sharing:
        r = rows[mine]
        text += (
            f"; {label}'s is {r.mean_rank:.2f}, place {mine + 1} of {len(rows)} (best or tied on "
            f"{r.tied})"
        )
    most = max(rows, key=lambda r: (r.tied, -r.mean_rank))
    if most.entry != top.entry:
        text += f". Best or tied most often: {most.entry} ({most.tied} of {most.workloads})"
    return [text + "."]


# ---------------------------------------------------------------------------------------------
# the lever on each workload


def lever_section(
    family: Family, names: Sequence[str], scores: Mapping[str, list[Score]]
) -> list[str]:
    """``## <scheduler>'s <lever> on each workload``: the best value beside the published one,
    of the values that ran (none without two values or more: there is no best of one)."""
    sym, published = family.symbol, family.published
    every = [s for w in names for s in scores[w]]
    values, extras = family.ran_values(every), family.ran_extras(every)
    if len(values) < 2:
        return []
    out = [
        f"## {family.display}'s {sym} on each workload",
        "",
        f"The best {sym} of {family.values_text(values)}{family.fixed_note()} by final worst "
        "accuracy, "
        f"beside the published {sym} = {published}; the difference is paired by seed (mean ± "
        "95% t-interval, points).",
        "",
        f"| workload | best {sym} | worst acc. at best {sym} | at {sym} = {published} "
        "| difference |" + "".join(f" with {e.label} |" for e in extras),
        "|---|---|---|---|---|" + "---|" * len(extras),
    ]
    lever = family.variants.lever
    for w in names:
        doc = lever_doc(family, scores[w])
        if doc is None:
            continue
        by_value = family.plain(scores[w])
        best = by_value[doc[f"best_{lever}"]]
        reference = by_value.get(family.variants.published)
        diff = (
            "—"
            if reference is None or best is reference
            else points(doc["difference"], doc["difference_half"])
        )
        cells = [
            w,
            value_text(doc[f"best_{lever}"]),
            plus_minus(*best.mean("worst")),
            "—" if reference is None else plus_minus(*reference.mean("worst")),
            diff,
        ]
        for extra in extras:
            found = family.extra_entry(scores[w], extra)
            cells.append("—" if found is None else plus_minus(*found.mean("worst")))
        out.append("| " + " | ".join(cells) + " |")
    return [*out, ""]
