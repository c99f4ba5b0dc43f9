"""Where selection still helps under another federated optimiser (docs/design.md §7).

Client selection is one part of a federated stack; the leaderboard's workloads may change another
part: the server's step (``[sim] server_optimizer``: FedAdam, FedYogi, …, `adcs.optimizers`) or
the clients' local objective (``[sim] prox_mu``: FedProx's proximal term). A workload's
*counterpart* is the workload of the same leaderboard whose configuration is the same but for
those two keys, at plain FedAvg (no server optimizer, μ = 0); the pairs are found in the
workloads' manifests, never named.

For each pair, every entry is compared with random selection (the scheduler that declares itself
so, `adcs.leaderboard.ranking.is_random_baseline`: Uniform) on both workloads, on the final worst
client accuracy: the paired difference entry − Uniform over the seeds both ran (mean ± 95 %
t-interval, `adcs.experiments.analysis.stats.paired_difference`) and a verdict, *ahead*, *tied* or
*behind*, from the two-sided paired t-test with Holm's adjustment over that workload's comparisons
with Uniform (`adcs.experiments.analysis.stats.holm`, at 5 %). An entry *still helps* where it is ahead on
both workloads; its gain *does not survive* the change where it is ahead only on the
counterpart.

How far apart a pair runs is measured, not assumed (`agreement`): for every entry and seed both
ran, the share of the rounds in which the entry selected the same clients on both workloads
(from the ``selections.npz`` files) and the difference in final worst accuracy. For FedProx the
section also states the proximal term's size from the configuration (`prox_scale`): after k local
steps a client has drifted about k η_ℓ ‖g‖ from the server's weights, so μ (w − w⁽ᵗ⁾) is about
μ k η_ℓ of the loss gradient.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from adcs.defaults import LOCAL_LR, LOCAL_STEPS
from adcs.experiments.analysis.stats import CONFIDENCE, holm, paired_difference, paired_p_value
from adcs.experiments.run.folder import MANIFEST
from adcs.experiments.run.resultfiles import read_arrays, read_manifest
from adcs.leaderboard.ranking import Score, baseline_label, is_random_baseline
from adcs.leaderboard.wording import join_words, plus_minus, points
from adcs.optimizers import SERVER_OPTIMIZERS

__all__ = [
    "OPTIMISER_KEYS",
    "Agreement",
    "Counterpart",
    "agreement",
    "counterparts",
    "gains",
    "optimiser_section",
    "prox_scale",
]

OPTIMISER_KEYS = ("server_optimizer", "prox_mu")
"""The ``[sim]`` keys in which a workload and its counterpart differ."""
_IGNORED = ("name", "description", "methods", "outputs")
"""What two workloads may differ in besides the optimiser: names, and the entries (a row added
to the name table after one of them ran)."""
_SYMBOLS = {"eta": "η", "beta_1": "β₁", "beta_2": "β₂", "tau": "τ", "momentum": "μ"}


@dataclass(frozen=True)
class Counterpart:
    """A workload with another optimiser and its plain-FedAvg counterpart.

    Attributes
    ----------
    workload, base : str
        The workload with the optimiser, and its counterpart.
    change : str
        The optimiser in words, e.g. ``FedAdam (η = 0.03, β₁ = 0.9, β₂ = 0.99, τ = 0.0001)``.
    inert : str
        Why the change cannot act on the updates, in words (empty when it can): FedProx alone with
        one local step, whose proximal gradient μ (w − w⁽ᵗ⁾) is zero at that step.
    scale : str
        How large FedProx's proximal term is against the loss gradient, in words (`prox_scale`;
        empty without FedProx or where it is inert).
    """

    workload: str
    base: str
    change: str
    inert: str = ""
    scale: str = ""


def _sim(config: Mapping[str, Any]) -> Mapping[str, Any]:
    sim = config.get("sim", {})
    return sim if isinstance(sim, Mapping) else {}


def _is_plain(config: Mapping[str, Any]) -> bool:
    """No server optimizer and no proximal term: plain FedAvg."""
    sim = _sim(config)
    return sim.get("server_optimizer") is None and not sim.get("prox_mu")


def _rest(config: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration without the optimiser, the names and the entries."""
    rest = {k: v for k, v in config.items() if k not in _IGNORED}
    rest["sim"] = {k: v for k, v in _sim(config).items() if k not in OPTIMISER_KEYS}
    return rest


def _change(config: Mapping[str, Any]) -> str:
    """The optimiser of a configuration, in words."""
    sim = _sim(config)
    parts = []
    optimizer = sim.get("server_optimizer")
    if isinstance(optimizer, Mapping):
        kind = str(optimizer.get("kind", "?"))
        cls = SERVER_OPTIMIZERS.get(kind)
        name = kind if cls is None else cls.__name__
        params = [f"{_SYMBOLS.get(k, k)} = {v:g}" for k, v in optimizer.items()
                  if k != "kind" and isinstance(v, (int, float)) and not isinstance(v, bool)]  # fmt: skip
        parts.append(f"{name} ({', '.join(params)})" if params else name)
    if sim.get("prox_mu"):
        parts.append(f"FedProx μ = {float(sim['prox_mu']):g}")
    return " and ".join(parts)


def _inert(config: Mapping[str, Any]) -> str:
    """Why a configuration's optimiser cannot change the clients' updates ("" when it can)."""
    sim = _sim(config)
    steps = int(sim.get("local_steps", LOCAL_STEPS))
    if sim.get("server_optimizer") is None and sim.get("prox_mu") and steps == 1:
        return (
            "with one local step per round (E = 1) FedProx's proximal gradient μ (w − w⁽ᵗ⁾) is "
            "zero at that step, so every client's update is FedAvg's and the two workloads run "
            "the same algorithm"
        )
    return ""


def prox_scale(config: Mapping[str, Any]) -> tuple[float, float] | None:
    """How large FedProx's proximal gradient is against the loss gradient g.

    After k plain local steps a client has moved about k η_ℓ ‖g‖ from the server's weights w⁽ᵗ⁾,
    so μ (w − w⁽ᵗ⁾) is about μ k η_ℓ ‖g‖: at most μ (E − 1) η_ℓ of the gradient (at the last of
    E steps). Summed over the round the term changes a client's update (about E η_ℓ g) by
    η_ℓ Σₖ μ k η_ℓ g = μ η_ℓ² E (E − 1)/2 g, a fraction μ η_ℓ (E − 1)/2 of it.

    Returns
    -------
    (float, float) or None
        The largest share of the gradient, μ (E − 1) η_ℓ, and the share of the update,
        μ η_ℓ (E − 1)/2; None without FedProx or with one local step (the term is then zero).
    """
    sim = _sim(config)
    mu = float(sim.get("prox_mu") or 0.0)
    steps = int(sim.get("local_steps", LOCAL_STEPS))
    if mu == 0.0 or steps < 2:
        return None
    lr = float(sim.get("local_lr", LOCAL_LR))
    return mu * (steps - 1) * lr, mu * lr * (steps - 1) / 2


def _scale(config: Mapping[str, Any]) -> str:
    """`prox_scale` in words ("" where it does not apply)."""
    sizes = prox_scale(config)
    if sizes is None:
        return ""
    sim = _sim(config)
    mu, lr = float(sim["prox_mu"]), float(sim.get("local_lr", LOCAL_LR))
    steps = int(sim.get("local_steps", LOCAL_STEPS))
    return (
        "after k local steps a client has drifted about k η_ℓ ‖g‖ from the server's weights, so "
        "FedProx's proximal gradient μ (w − w⁽ᵗ⁾) is about μ k η_ℓ of the loss gradient g: at "
        f"most {sizes[0]:.1g} of it here (μ = {mu:g}, η_ℓ = {lr:g}, E = {steps}), and over a "
        f"round it changes a client's update by about μ η_ℓ (E − 1)/2 = {sizes[1]:.1g} of it"
    )


def counterparts(configs: Mapping[str, Mapping[str, Any]]) -> list[Counterpart]:
    """Each workload that differs from a plain-FedAvg workload in the optimiser alone, with it.

    Parameters
    ----------
    configs : mapping of workload to its configuration (its manifest's ``config``)

    Returns
    -------
    list of Counterpart
        In the order of ``configs``; a workload with several plain counterparts is paired with
        the first.
    """
    plain = [w for w, c in configs.items() if _is_plain(c)]
    out = []
    for w, config in configs.items():
        if _is_plain(config):
            continue
        base = next((b for b in plain if _rest(configs[b]) == _rest(config)), None)
        if base is not None:
            inert = _inert(config)
            out.append(
                Counterpart(workload=w, base=base, change=_change(config), inert=inert,
                            scale="" if inert else _scale(config))
            )  # fmt: skip
    return out


@dataclass(frozen=True)
class Gain:
    """An entry against random selection on one workload (final worst accuracy).

    Attributes
    ----------
    mean, half : float
        Paired difference entry − random selection over the common seeds, and its 95 % half-width.
    p_value : float
        Of the paired t-test, Holm-adjusted over the workload's comparisons with random selection.
    verdict : str
        ``ahead``, ``tied`` or ``behind``.
    """

    mean: float
    half: float
    p_value: float
    verdict: str


def gains(scores: Sequence[Score], confidence: float = CONFIDENCE) -> dict[str, Gain]:
    """Every entry of one workload against its random-selection entry, by entry label.

    Empty when the workload ran no random selection.
    """
    baseline = next((s for s in scores if is_random_baseline(s.method)), None)
    if baseline is None:
        return {}
    others = [s for s in scores if s is not baseline]
    raw = [paired_p_value(s.worst, baseline.worst) for s in others]
    out = {}
    for s, p in zip(others, holm(raw), strict=True):
        mean, half, _ = paired_difference(s.worst, baseline.worst)
        apart = p < 1.0 - confidence and math.isfinite(mean) and mean != 0.0
        verdict = "tied" if not apart else ("ahead" if mean > 0 else "behind")
        out[s.label] = Gain(mean=mean, half=half, p_value=p, verdict=verdict)
    return out


@dataclass(frozen=True)
class Agreement:
    """How alike an entry's runs are on a workload and on its counterpart, over the seeds both
    ran.

    Attributes
    ----------
    alike : float
        Share of the rounds in which the entry selected the same clients on both.
    first_apart : int or None
        The earliest round (1-based, over the seeds) whose selections differ; None when none does.
    gap : float
        Mean over the seeds of the absolute difference in final worst accuracy.
    largest : float
        The largest of those differences.
    seeds : int
        How many seeds both ran.
    """

    alike: float
    first_apart: int | None
    gap: float
    largest: float
    seeds: int


def _selected(folder: Path) -> dict[str, np.ndarray]:
    """Each run's selections (rows sorted, so a round's set compares as a set), by run id."""
    path = folder / "selections.npz"
    if not path.is_file():
        return {}
    arrays = read_arrays(path, keep=lambda k: k.startswith("selected/"))
    return {k.removeprefix("selected/"): np.sort(v, axis=1) for k, v in arrays.items()}


def agreement(
    folder: Path, pair: Counterpart, scores: Mapping[str, Sequence[Score]]
) -> dict[str, Agreement]:
    """Every entry both workloads of ``pair`` ran, compared run by run (entry and seed).

    Parameters
    ----------
    folder : Path
        The leaderboard, holding both workloads' results folders.
    pair : Counterpart
    scores : mapping of workload to its scores

    Returns
    -------
    dict of str to Agreement
        By entry label; empty when a workload has no ``selections.npz``.
    """
    on_w, on_b = _selected(folder / pair.workload), _selected(folder / pair.base)
    there = {s.label: s for s in scores[pair.base]}
    out = {}
    for s in scores[pair.workload]:
        b = there.get(s.label)
        if b is None:
            continue
        alike, firsts, gaps = [], [], []
        for seed in sorted(set(s.worst) & set(b.worst)):
            x, y = on_w.get(f"{s.variant}-seed={seed}"), on_b.get(f"{b.variant}-seed={seed}")
            if x is None or y is None or x.shape != y.shape:
                continue
            same = np.all(x == y, axis=1)
            alike.append(float(same.mean()))
            apart = np.flatnonzero(~same)
            if apart.size:
                firsts.append(int(apart[0]) + 1)
            gaps.append(abs(s.worst[seed] - b.worst[seed]))
        if alike:
            out[s.label] = Agreement(
                alike=float(np.mean(alike)), first_apart=min(firsts) if firsts else None,
                gap=float(np.mean(gaps)), largest=float(np.max(gaps)), seeds=len(alike),
            )  # fmt: skip
    return out


def _share(x: float) -> str:
    """A share in %, rounded down (so 100% means every one)."""
    return f"{math.floor(1000 * x) / 10:g}%"


def _agreement_text(pair: Counterpart, alike: Mapping[str, Agreement]) -> str:
    """How far apart the two workloads ran, in words, from `agreement`."""
    if not alike:
        return ""
    runs = sum(a.seeds for a in alike.values())
    share = sum(a.alike * a.seeds for a in alike.values()) / runs
    gap = sum(a.gap * a.seeds for a in alike.values()) / runs
    largest = max(a.largest for a in alike.values())
    always = [e for e, a in alike.items() if a.first_apart is None]
    text = "**How far apart the two workloads ran:** "
    if pair.scale:
        text += f"{pair.scale[0].upper()}{pair.scale[1:]}. "
    text += (
        f"Over the {runs} runs both ran (entry and seed), {_share(share)} of the rounds select "
        f"the same clients on both, and a run's final worst accuracy differs from its "
        f"counterpart's by {100 * gap:.2f} points on average (at most {100 * largest:.2f})"
    )
    if always:
        text += (
            f"; {join_words(always)} select{'s' if len(always) == 1 else ''} the same clients in "
            "every round of every seed"
        )
    return text + "."


def configs_of(folder: Path, names: Sequence[str]) -> dict[str, Mapping[str, Any]]:
    """The workloads' configurations, from their manifests."""
    return {w: read_manifest(folder / w / MANIFEST).get("config", {}) for w in names}


def optimiser_section(
    pairs: Sequence[Counterpart],
    scores: Mapping[str, Sequence[Score]],
    alike: Mapping[str, Mapping[str, Agreement]] | None = None,
) -> list[str]:
    """``## Under another optimiser``: for each pair, where selection still helps and where not
    (empty without a pair).

    ``alike`` holds each pair's `agreement`, by the pair's workload; a pair with one gets a
    sentence on how far apart the two workloads ran and a column of rounds selecting alike.
    """
    if not pairs:
        return []
    uniform = baseline_label()
    out = [
        "## Under another federated optimiser: where selection still helps",
        "",
        f"Each entry against {uniform} on a workload with another optimiser and on its "
        "plain-FedAvg counterpart (the same configuration but for the server optimizer and "
        "FedProx's μ): the paired difference in final worst accuracy over the seeds (points, mean "
        f"± 95% t-interval) and whether a paired t-test, Holm-adjusted over the workload's "
        f"comparisons with {uniform}, tells it from {uniform} at the 5% level (*ahead*, *tied*, "
        "*behind*). An entry *still helps* where it is ahead on both; each listed entry is "
        "followed by its difference on the counterpart → on the workload. Not ahead is not no "
        "gain: with few seeds an interval that holds 0 can hold a large gain too.",
        "",
    ]
    for pair in pairs:
        out += _pair_section(pair, scores, uniform, (alike or {}).get(pair.workload, {}))
    return out


def _same_runs(scores: Sequence[Score], base: Sequence[Score]) -> str:
    """How many runs (entry and seed) the two workloads share end at the same final worst
    accuracy to the last bit, in words."""
    there = {s.label: s for s in base}
    pairs = [(s.worst[k], there[s.label].worst[k]) for s in scores if s.label in there
             for k in s.worst if k in there[s.label].worst]  # fmt: skip
    same = sum(a == b for a, b in pairs)
    return (
        f"{same} of the {len(pairs)} runs they share end at the same final worst accuracy to the "
        "last bit, and the others can differ only through floating-point rounding, which a "
        "selection can amplify"
    )


def _pair_section(
    pair: Counterpart,
    scores: Mapping[str, Sequence[Score]],
    uniform: str,
    alike: Mapping[str, Agreement],
) -> list[str]:
    w, b = pair.workload, pair.base
    on_w, on_b = gains(scores[w]), gains(scores[b])
    out = [f"### {w}: {b} with {pair.change}", ""]
    if not on_w or not on_b:
        return [*out, f"{uniform} did not run on both workloads: no comparison.", ""]
    base_w = next(s for s in scores[w] if is_random_baseline(s.method))
    base_b = next(s for s in scores[b] if is_random_baseline(s.method))
    both = [e for e in on_w if e in on_b]
    groups = {
        "still helps (ahead on both)": [e for e in both
                                        if on_w[e].verdict == on_b[e].verdict == "ahead"],
        f"helps on {b} only (its gain does not survive the change)": [
            e for e in both if on_b[e].verdict == "ahead" and on_w[e].verdict != "ahead"],
        f"helps on {w} only": [e for e in both
                               if on_w[e].verdict == "ahead" and on_b[e].verdict != "ahead"],
        f"behind {uniform} on {w}": [e for e in both if on_w[e].verdict == "behind"],
    }  # fmt: skip
    inert = f"{pair.inert}: {_same_runs(scores[w], scores[b])}" if pair.inert else ""
    was = [e for e in both if on_b[e].verdict == "ahead"]
    kept = [e for e in was if on_w[e].verdict == "ahead"]
    text = (
        f"**Answer:** of the {len(was)} entries ahead of {uniform} on {b}, {len(kept)} "
        f"{'is' if len(kept) == 1 else 'are'} still ahead under {pair.change}. "
    )
    text += f"**The change cannot act here:** {inert}. " if inert else ""
    text += (
        f"{uniform}'s final worst accuracy: {plus_minus(*base_w.mean('worst'))}% on {w}, "
        f"{plus_minus(*base_b.mean('worst'))}% on {b}."
    )
    for what, entries in groups.items():
        ordered = sorted(entries, key=lambda e: -on_w[e].mean)
        listed = join_words([f"{e} ({points(on_b[e].mean, on_b[e].half)} → "
                             f"{points(on_w[e].mean, on_w[e].half)})" for e in ordered])  # fmt: skip
        text += f" **{what[0].upper()}{what[1:]}:** {listed if entries else 'none'}."
    rest = [e for e in both if on_w[e].verdict == on_b[e].verdict == "tied"]
    text += f" Tied with {uniform} on both: {len(rest)} of {len(both)} entries."
    only = [e for e in on_w if e not in on_b]
    if only:
        text += f" Ran on {w} only (no counterpart to compare): {join_words(only)}."
    out += [text, ""]
    if alike:
        out += [_agreement_text(pair, alike), ""]
    extra = " rounds selecting alike |" if alike else ""
    out += [
        f"| entry | {b}: − {uniform} | verdict | {w}: − {uniform} | verdict |{extra}",
        "|---|---|---|---|---|" + ("---|" if alike else ""),
    ]
    for e in sorted(on_w, key=lambda e: -on_w[e].mean):
        there = on_b.get(e)
        cells = ("—", "—") if there is None else (points(there.mean, there.half), there.verdict)
        row = (
            f"| {e} | {cells[0]} | {cells[1]} | {points(on_w[e].mean, on_w[e].half)} "
            f"| {on_w[e].verdict} |"
        )
        if alike:
            row += f" {_share(alike[e].alike) if e in alike else '—'} |"
        out.append(row)
    return [*out, ""]
