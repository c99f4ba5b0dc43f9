"""Theory check: the paper's bias bounds (Sec. 5.1) against measured selection bias.

Over a grid of synthetic cluster structures (K, m, cluster sizes, inter-cluster cosine μ, radius r,
quality spread) the client updates are generated with known centres, and four choices of m clients
are compared: ADCS's greedy MAP (eq. 9) on the normalised updates with log-weights 2αq, the exact
MAP (eq. 8, N ≤ 16), Uniform (its expected bias) and quality only (top m by q). Each measured
‖ḡ_S − ḡ_N‖ is set against Theorem 1 (eq. 14) and the general bound (eq. 15), and the cases where
Assumption 1 holds are counted, with how often each method then takes m distinct clusters.

Optionally the same is reported for real Fashion-MNIST client updates (paper's setting, groups as
clusters); `fashion_mnist_probe` computes them.

Outputs (written to a temporary folder, moved into place only when complete): ``report.md``,
``grid.csv`` (one row per synthetic case), ``summary.json``, and PNG figures.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from adcs import theory
from adcs.data import load_fashion_mnist, paper_groups
from adcs.experiments.run.folder import (
    MANIFEST,
    ResultsFolder,
    locked,
)
from adcs.experiments.run.provenance import provenance, source_checkout
from adcs.sim.model import LogisticRegression, local_update, to_unit_float
from adcs.theory.grid import (
    EXACT_MAX_N,
    METHODS,
    THETA,
    CaseSpec,
    clustered_updates,
    equicorrelated_centers,
    evaluate_selection,
    run_case,
    synthetic_grid,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "EXACT_MAX_N",
    "THETA",
    "CaseSpec",
    "RealProbe",
    "clustered_updates",
    "equicorrelated_centers",
    "evaluate_selection",
    "fashion_mnist_probe",
    "fashion_mnist_updates",
    "run_theory_check",
    "synthetic_grid",
    "write_theory_check",
]

logger = logging.getLogger(__name__)

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]


# ---------------------------------------------------------------------------------------------
# real Fashion-MNIST updates
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class RealProbe:
    """Every client's update at a trained model (Fashion-MNIST, the paper's setting).

    Attributes
    ----------
    updates : ndarray of shape (n_clients, 7850)
        Δ_n = w_n^{(t,1)} − w⁽ᵗ⁾ (one local step), flattened (785 × 10, bias row last), float64.
    groups : ndarray of int, shape (n_clients,)
        The client's group (the paper's 10 virtual groups of 3).
    losses : ndarray of shape (n_clients,)
        Loss at w⁽ᵗ⁾ on the batch the update was computed on (ADCS's quality, free).
    """

    updates: FloatArray
    groups: IntArray
    losses: FloatArray


def _batches(
    index_sets: Sequence[IntArray], batch_size: int | None, rng: np.random.Generator
) -> IntArray:
    """One minibatch per client (without replacement inside the batch), shape (C, B)."""
    if batch_size is None:
        size = min(len(ix) for ix in index_sets)
        return np.stack([ix[:size] for ix in index_sets]).astype(np.intp)
    return np.stack([rng.choice(ix, size=batch_size, replace=False) for ix in index_sets]).astype(
        np.intp
    )


def fashion_mnist_probe(
    rounds_trained: int,
    seed: int,
    *,
    data_path: str | Path | None = None,
    batch_size: int | None = 16,
    local_lr: float = 1e-3,
) -> RealProbe:
    """Train the paper's model for a few rounds, then probe every client's update.

    The paper's setting (Sec. 6): Fashion-MNIST, N = 30 clients in 10 groups of 3
    (`adcs.data.paper_groups`), multinomial logistic regression (784 → 10 with bias, zero
    initialisation), one local SGD step of batch 16 with η_ℓ = 10⁻³, server step η_s = 1. Training
    uses full participation (every client, uniform average) for ``rounds_trained`` rounds; then
    every client computes one more update at the resulting model.

    The model and local step are `adcs.sim.model`'s (float32).

    Parameters
    ----------
    rounds_trained : int
        Rounds before the probe, ≥ 0.
    seed : int
        Seeds the partition and the minibatches.
    data_path : str or Path, optional
        Folder with the official files (default: `adcs.data.load_fashion_mnist`'s lookup).
    batch_size : int or None
        Minibatch size of every local step (16 in the paper); ``None`` uses each client's whole
        training set (full-batch gradients; clients then differ only by their data sample).
    local_lr : float
        η_ℓ > 0.
    """
    if (
        isinstance(rounds_trained, bool)
        or not isinstance(rounds_trained, int)
        or rounds_trained < 0
    ):
        raise ValueError(f"rounds_trained must be an integer >= 0, got {rounds_trained!r}")
    if batch_size is not None and (
        isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
    ):
        raise ValueError(f"batch_size must be an integer >= 1 or None, got {batch_size!r}")
    if not (math.isfinite(local_lr) and local_lr > 0):
        raise ValueError(f"local_lr must be finite and > 0, got {local_lr!r}")
    rng = np.random.default_rng(seed)
    data = load_fashion_mnist(data_path)
    if data.is_subset:  # the loader has warned already; once is enough
        logger.info("the theory probe uses the shipped Fashion-MNIST subset (%s)", data.source)
    part = paper_groups(data.train_labels, data.test_labels, rng)
    model = LogisticRegression()
    images = to_unit_float(data.train_images)
    labels = data.train_labels.astype(np.intp)
    n_clients = len(part.train_indices)
    params = model.init_params(1)
    fixed = None if batch_size is not None else _batches(part.train_indices, None, rng)

    def step(params: NDArray[np.float32]) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        idx = fixed if fixed is not None else _batches(part.train_indices, batch_size, rng)
        stacked = np.broadcast_to(params, (n_clients, *params.shape[1:]))
        return local_update(model, stacked, images[idx][:, None], labels[idx][:, None], local_lr)

    for _ in range(rounds_trained):
        update, _ = step(params)
        params = params + update.mean(axis=0, keepdims=True)  # server step η_s = 1, uniform p
    update, loss = step(params)
    return RealProbe(
        updates=update.reshape(n_clients, -1).astype(np.float64),
        groups=part.groups.astype(np.intp),
        losses=loss.astype(np.float64),
    )


def fashion_mnist_updates(rounds_trained: int, seed: int) -> tuple[FloatArray, IntArray]:
    """``(updates, groups)`` of `fashion_mnist_probe` with the paper's settings."""
    probe = fashion_mnist_probe(rounds_trained, seed)
    return probe.updates, probe.groups


def _real_section(
    updates: ArrayLike, groups: ArrayLike, quality: ArrayLike | None, rng: np.random.Generator
) -> list[dict[str, Any]]:
    """Geometry and measured bias on real updates for the paper's m = 18 and a few m ≤ K."""
    g = np.asarray(updates, dtype=np.float64)
    z = np.asarray(groups)
    if g.ndim != 2 or z.shape != (g.shape[0],):
        raise ValueError(
            f"real_updates must be (n_clients, dim) and real_groups (n_clients,); got {g.shape} "
            f"and {z.shape}"
        )
    q = np.zeros(g.shape[0]) if quality is None else np.asarray(quality, dtype=np.float64)
    theta = THETA if quality is not None else 0.0
    k = int(np.max(z)) + 1
    ms = sorted({m for m in (2, 3, 5, k // 2, k, 18) if 1 <= m <= g.shape[0]})
    rows = []
    for m in ms:
        rec = evaluate_selection(g, z.astype(np.intp), q, m, theta=theta, rng=rng)
        rec["theta"] = theta
        rows.append(rec)
    return rows


# ---------------------------------------------------------------------------------------------
# summary, figures, report
# ---------------------------------------------------------------------------------------------


def _summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    tol = 1e-9

    def count(pred: Callable[[dict[str, Any]], bool]) -> int:
        return sum(1 for r in rows if pred(r))

    holds = [r for r in rows if r["assumption"]]
    exact_holds = [r for r in holds if r["exact_distinct"] >= 0]
    fails = [r for r in rows if not r["assumption"]]
    gcond = [r for r in rows if r["greedy_condition"]]

    def frac_distinct(sub: list[dict[str, Any]], method: str) -> dict[str, int]:
        usable = [r for r in sub if r[f"{method}_distinct"] >= 0]
        return {
            "cases": len(usable),
            "distinct": sum(1 for r in usable if r[f"{method}_distinct"] == r["m"]),
        }

    def violations(sub: list[dict[str, Any]], method: str, bound: str) -> int:
        return sum(
            1
            for r in sub
            if math.isfinite(r[f"{method}_bias"])
            and r[f"{method}_bias"] > r[bound] * (1 + tol) + tol
        )

    def ratio(sub: list[dict[str, Any]], method: str, bound: str) -> float | None:
        key = method if method.startswith("uniform") else f"{method}_bias"
        vals = [r[key] / r[bound] for r in sub if math.isfinite(r[key]) and r[bound] > 0]
        return float(np.median(vals)) if vals else None

    return {
        "cases": len(rows),
        "assumption_holds": len(holds),
        "assumption_holds_with_exact": len(exact_holds),
        "greedy_condition_holds": len(gcond),
        "greedy_condition_not_assumption": count(
            lambda r: r["greedy_condition"] and not r["assumption"]
        ),
        "when_assumption_holds": {m: frac_distinct(holds, m) for m in METHODS},
        "when_greedy_condition_holds": {"greedy": frac_distinct(gcond, "greedy")},
        "when_assumption_fails": {m: frac_distinct(fails, m) for m in METHODS},
        "eq14_violations_when_assumption_holds": {
            m: violations(holds, m, f"{m}_eq14") for m in ("greedy", "exact")
        },
        "eq14_violations_any_case": {m: violations(rows, m, f"{m}_eq14") for m in METHODS},
        "eq15_violations": {
            **{m: violations(rows, m, "eq15") for m in METHODS},
            "uniform": count(lambda r: r["uniform_mean"] > r["eq15"] * (1 + tol) + tol),
        },
        "median_bias_over_eq15": {
            **{m: ratio(rows, m, "eq15") for m in METHODS},
            "uniform": ratio(rows, "uniform_mean", "eq15"),
        },
        "median_bias_over_eq14_when_assumption_holds": {
            m: ratio(holds, m, f"{m}_eq14") for m in ("greedy", "exact")
        },
    }


def _distinct_by_ratio(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per r/r_ref value: share of cases with Assumption 1, and with m distinct clusters."""
    out = []
    for ratio in sorted({r["r_ratio"] for r in rows}):
        sub = [r for r in rows if r["r_ratio"] == ratio]
        entry: dict[str, Any] = {
            "r_ratio": ratio,
            "cases": len(sub),
            "assumption": sum(r["assumption"] for r in sub) / len(sub),
        }
        for m in METHODS:
            usable = [r for r in sub if r[f"{m}_distinct"] >= 0]
            entry[m] = (
                sum(r[f"{m}_distinct"] == r["m"] for r in usable) / len(usable)
                if usable
                else math.nan
            )
        out.append(entry)
    return out


_STYLE = {
    "greedy": ("tab:blue", "o", "greedy MAP (ADCS)"),
    "exact": ("tab:green", "s", "exact MAP"),
    "quality": ("tab:orange", "^", "quality only (top m by q)"),
    "uniform": ("tab:gray", "x", "Uniform (expected)"),
}


def _save(fig: Figure, folder: Path, name: str) -> str:
    """Lay out and write ``fig`` as ``folder / name`` (120 dpi); return ``name``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    fig.tight_layout()
    fig.savefig(folder / name, dpi=120)
    return name


def _diagonal(ax: Axes, xs: list[float], label: str) -> None:
    """The line y = x over the range of ``xs``, on log-log axes."""
    lo, hi = min(xs), max(xs)
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")


def _scatter_eq15(ax: Axes, rows: list[dict[str, Any]]) -> None:
    """Every case's measured bias against the general bound (eq. 15), one colour per method."""
    all_x: list[float] = []
    for m in (*METHODS, "uniform"):
        color, marker, label = _STYLE[m]
        key = "uniform_mean" if m == "uniform" else f"{m}_bias"
        pts = [(r["eq15"], r[key]) for r in rows if r[key] > 1e-9 * r["eq15"]]
        if pts:
            x, y = zip(*pts, strict=True)
            all_x += x
            ax.scatter(x, y, s=8, c=color, marker=marker, label=label, alpha=0.5)
    _diagonal(ax, all_x, "bias = eq. 15")
    ax.set(xlabel="eq. 15 bound √(λ_max(L)(1/m − 1/N))", ylabel="measured ‖ḡ_S − ḡ_N‖")
    ax.set_title("every case vs the general bound (biases ≈ 0 not shown)", fontsize=10)
    ax.legend(fontsize=8)


def _scatter_eq14(ax: Axes, rows: list[dict[str, Any]]) -> None:
    """The MAP sets' measured bias against Theorem 1 (eq. 14), filled where Assumption 1 holds."""
    all_x: list[float] = []
    for m in ("greedy", "exact"):
        color, marker, label = _STYLE[m]
        for holds, fill in ((False, "none"), (True, color)):
            pts = [
                (r[f"{m}_eq14"], r[f"{m}_bias"])
                for r in rows
                if r["assumption"] == holds and r[f"{m}_bias"] > 1e-9 * r[f"{m}_eq14"]
            ]
            if pts:
                x, y = zip(*pts, strict=True)
                all_x += x
                ax.scatter(
                    x,
                    y,
                    s=12,
                    marker=marker,
                    facecolors=fill,
                    edgecolors=color,
                    label=f"{label}, Assumption 1 {'holds' if holds else 'fails'}",
                    alpha=0.6,
                )
    _diagonal(ax, all_x, "bias = eq. 14")
    ax.set(xlabel="eq. 14 bound for the chosen set", ylabel="measured ‖ḡ_S − ḡ_N‖")
    ax.set_title("Theorem 1 (counts form where clusters repeat)", fontsize=10)
    ax.legend(fontsize=7)


def _plot_bias_vs_bounds(rows: list[dict[str, Any]], folder: Path) -> str:
    """``bias_vs_bounds.png``: measured bias against eq. 15 (left) and eq. 14 (right)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.5))
    ax1, ax2 = fig.subplots(1, 2)
    _scatter_eq15(ax1, rows)
    _scatter_eq14(ax2, rows)
    return _save(fig, folder, "bias_vs_bounds.png")


def _plot_distinct_vs_radius(by_ratio: list[dict[str, Any]], folder: Path) -> str:
    """``distinct_vs_radius.png``: share of cases with m distinct clusters, by radius."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.5))
    ax = fig.subplots()
    xs = np.arange(len(by_ratio))
    ax.plot(xs, [b["assumption"] for b in by_ratio], "k--", label="Assumption 1 holds")
    for m, ls, size in (("greedy", "-", 6), ("exact", ":", 11), ("quality", "-", 6)):
        color, marker, label = _STYLE[m]
        ax.plot(
            xs,
            [b[m] for b in by_ratio],
            ls=ls,
            marker=marker,
            ms=size,
            mfc="none",
            color=color,
            label=label,
        )
    ax.set_xticks(xs, [f"{b['r_ratio']:g}" for b in by_ratio])
    ax.set(xlabel="cluster radius r / r_⋆", ylabel="share of cases", ylim=(-0.03, 1.03))
    ax.set_title("m distinct clusters taken, by radius")
    ax.legend(fontsize=8)
    return _save(fig, folder, "distinct_vs_radius.png")


def _plot_real(real_rows: list[dict[str, Any]], real_description: str, folder: Path) -> str:
    """``real_updates.png``: the real updates' biases and bounds, by m."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    xs = np.arange(len(real_rows))
    width = 0.25
    for j, m in enumerate(("greedy", "quality", "uniform")):
        color, _, label = _STYLE[m]
        key = "uniform_mean" if m == "uniform" else f"{m}_bias"
        ax.bar(xs + (j - 1) * width, [r[key] for r in real_rows], width, color=color, label=label)
    ax.plot(xs, [r["eq15"] for r in real_rows], "k_", ms=30, mew=2, label="eq. 15 bound")
    ax.plot(
        xs,
        [r["greedy_eq14"] for r in real_rows],
        "b_",
        ms=30,
        mew=2,
        label="eq. 14 (greedy set; counts form if groups repeat)",
    )
    ax.set_xticks(xs, [str(r["m"]) for r in real_rows])
    ax.set(xlabel="m", ylabel="‖ḡ_S − ḡ_N‖")
    ax.set_title(f"{real_description} (groups as clusters)", fontsize=10)
    ax.legend(fontsize=8)
    return _save(fig, folder, "real_updates.png")


def _plot(
    rows: list[dict[str, Any]],
    by_ratio: list[dict[str, Any]],
    real_rows: list[dict[str, Any]] | None,
    real_description: str,
    folder: Path,
) -> list[str]:
    """Write the PNG figures into ``folder``; return their file names."""
    names = [_plot_bias_vs_bounds(rows, folder), _plot_distinct_vs_radius(by_ratio, folder)]
    if real_rows:
        names.append(_plot_real(real_rows, real_description, folder))
    return names


def _fmt(x: Any) -> str:
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:.4g}"
    return str(x)


def _report_setup(s: dict[str, Any], quick: bool, seed: int) -> list[str]:
    """The report's title and the grid's description."""
    return [
        "# Theory check: selection bias against the paper's bounds (Sec. 5.1)",
        "",
        f"Grid: {'quick' if quick else 'full'}, seed {seed}, θ = {THETA} (α = "
        f"{theory.alpha_from_theta(THETA):g}), {s['cases']} synthetic cases; centres with equal "
        f"pairwise cosine μ and κ = 1, radius r set relative to r_⋆ of the noiseless structure. "
        f"Exact MAP only for N ≤ {EXACT_MAX_N}. Uniform: exact E‖ḡ_S − ḡ_N‖ over all subsets "
        "when C(N, m) ≤ 20 000, else a 2 000-draw Monte Carlo mean.",
        "",
    ]


def _report_assumption(s: dict[str, Any], by_ratio: list[dict[str, Any]]) -> list[str]:
    """Section: how often Assumption 1 holds and the methods take m distinct clusters."""
    holds = s["when_assumption_holds"]
    return [
        "## Assumption 1 and distinct clusters",
        "",
        f"- Assumption 1 holds in {s['assumption_holds']} of {s['cases']} cases "
        f"({s['assumption_holds_with_exact']} of them small enough for the exact MAP).",
        f"- There, greedy MAP took m distinct clusters in {holds['greedy']['distinct']} of "
        f"{holds['greedy']['cases']}; exact MAP in {holds['exact']['distinct']} of "
        f"{holds['exact']['cases']}; quality only in {holds['quality']['distinct']} of "
        f"{holds['quality']['cases']}.",
        f"- Eq. 14 exceeded when Assumption 1 holds: greedy "
        f"{s['eq14_violations_when_assumption_holds']['greedy']}, exact "
        f"{s['eq14_violations_when_assumption_holds']['exact']} times.",
        f"- Greedy sufficient condition (derived here, weaker than Assumption 1; see "
        f"`adcs.theory.cluster_geometry`): holds in {s['greedy_condition_holds']} cases "
        f"({s['greedy_condition_not_assumption']} where Assumption 1 fails); greedy took m "
        f"distinct clusters in {s['when_greedy_condition_holds']['greedy']['distinct']} of "
        f"{s['when_greedy_condition_holds']['greedy']['cases']}.",
        f"- Where Assumption 1 fails, greedy still took m distinct clusters in "
        f"{s['when_assumption_fails']['greedy']['distinct']} of "
        f"{s['when_assumption_fails']['greedy']['cases']} cases (the assumption is sufficient, "
        "far from necessary).",
        "",
        "Share of cases by radius (r in units of r_⋆; 0.05 κ where eq. 12 fails):",
        "",
        "| r / r_⋆ | cases | Assumption 1 | greedy distinct | exact distinct | quality distinct |",
        "|---|---|---|---|---|---|",
        *(
            f"| {b['r_ratio']:g} | {b['cases']} | {b['assumption']:.2f} | {b['greedy']:.2f} | "
            f"{b['exact']:.2f} | {b['quality']:.2f} |"
            for b in by_ratio
        ),
        "",
    ]


def _report_bounds(s: dict[str, Any]) -> list[str]:
    """Section: how often the bounds are exceeded, and how tight they are."""
    return [
        "## Bounds",
        "",
        "- Eq. 15 exceeded (it holds for every subset; any count > 0 is a bug): "
        + ", ".join(f"{k} {v}" for k, v in s["eq15_violations"].items())
        + ".",
        "- Eq. 14, counts form (valid for any set), exceeded: "
        + ", ".join(f"{k} {v}" for k, v in s["eq14_violations_any_case"].items())
        + ".",
        "- Median measured bias / eq. 15: "
        + ", ".join(f"{k} {_fmt(v)}" for k, v in s["median_bias_over_eq15"].items())
        + ".",
        "- Median measured bias / eq. 14 where Assumption 1 holds: "
        + ", ".join(
            f"{k} {_fmt(v)}" for k, v in s["median_bias_over_eq14_when_assumption_holds"].items()
        )
        + ".",
        "",
    ]


def _report_real(real_rows: list[dict[str, Any]], real_description: str) -> list[str]:
    """Section: the real client updates' geometry, biases and bounds, one row per m."""
    r0 = real_rows[0]
    return [
        "## Real client updates",
        "",
        f"{real_description}. N = {r0['n_clients']}, K = {r0['n_clusters']} groups (centroids as c_k), θ = "
        f"{r0['theta']:g}{' (no qualities given: pure diversity)' if r0['theta'] == 0 else ''}."
        f" r = {r0['r']:.4g}, μ = {r0['mu']:.4g}, κ = {r0['kappa']:.4g} (r/κ = "
        f"{r0['r'] / r0['kappa']:.3g}).",
        "",
        "| m | eq. 12 | r_⋆ | Assumption 1 | greedy cond. | greedy bias | greedy distinct "
        "| quality bias | Uniform E | eq. 14 (greedy) | eq. 15 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {r['m']} | {_fmt(r['eq12'])} | {_fmt(r['r_star'])} | {_fmt(r['assumption'])} "
            f"| {_fmt(r['greedy_condition'])} | {_fmt(r['greedy_bias'])} | "
            f"{r['greedy_distinct']} | {_fmt(r['quality_bias'])} | {_fmt(r['uniform_mean'])} "
            f"| {_fmt(r['greedy_eq14'])} | {_fmt(r['eq15'])} |"
            for r in real_rows
        ),
        "",
        "Eq. 14 is Theorem 1's literal bound only where the greedy set has m distinct groups "
        "(and m ≤ K); otherwise it is the counts form, still an upper bound.",
        "",
    ]


def _report(
    summary: dict[str, Any],
    by_ratio: list[dict[str, Any]],
    real_rows: list[dict[str, Any]] | None,
    real_description: str,
    figures: list[str],
    quick: bool,
    seed: int,
) -> str:
    """The text of ``report.md``: setup, Assumption 1, bounds, real updates (if any), files."""
    lines = [
        *_report_setup(summary, quick, seed),
        *_report_assumption(summary, by_ratio),
        *_report_bounds(summary),
    ]
    if real_rows:
        lines += _report_real(real_rows, real_description)
    lines += ["## Files", "", *(f"- ![{f}]({f})" for f in figures)]
    lines += ["- `grid.csv`: one row per synthetic case", "- `summary.json`: the counts above", ""]
    return "\n".join(lines)


def _write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    return x


def _check_real(
    real_updates: np.ndarray | None,
    real_groups: np.ndarray | None,
    real_quality: np.ndarray | None,
) -> None:
    if (real_updates is None) != (real_groups is None):
        raise ValueError("give real_updates and real_groups together")
    if real_quality is not None and real_updates is None:
        raise ValueError("real_quality needs real_updates and real_groups")
    if real_updates is not None and real_groups is not None:
        theory.cluster_radius(real_updates, real_groups)  # validates shapes, labels, NaN early
        n_real = np.asarray(real_updates).shape[0]
        if real_quality is not None and (
            np.shape(real_quality) != (n_real,) or not np.isfinite(real_quality).all()
        ):
            raise ValueError(f"real_quality must be finite with shape ({n_real},)")


def write_theory_check(
    folder: Path,
    *,
    quick: bool,
    seed: int,
    real_updates: np.ndarray | None = None,
    real_groups: np.ndarray | None = None,
    real_quality: np.ndarray | None = None,
    real_description: str = "real client updates",
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Write the theory check's files — report, figures, tables, manifest — into ``folder``.

    ``folder`` is created if absent; nothing about atomicity is done here (see
    `run_theory_check`). Parameters as there. Returns the path of ``report.md``.
    """
    _check_real(real_updates, real_groups, real_quality)
    started = time.perf_counter()
    started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    folder.mkdir(parents=True, exist_ok=True)
    specs = synthetic_grid(quick)
    rows = []
    for i, spec in enumerate(specs):
        rows.append(run_case(spec, seed, i))
        if progress is not None:
            progress(i + 1, len(specs))
    logger.info("theory check: %d synthetic cases done", len(rows))
    real_rows = None
    if real_updates is not None and real_groups is not None:
        real_rng = np.random.default_rng(np.random.SeedSequence([seed, len(specs)]))
        real_rows = _real_section(real_updates, real_groups, real_quality, real_rng)
    summary = _summarise(rows)
    by_ratio = _distinct_by_ratio(rows)
    figures = _plot(rows, by_ratio, real_rows, real_description, folder)
    _write_csv(rows, folder / "grid.csv")
    payload = {
        "quick": quick,
        "seed": seed,
        "theta": THETA,
        "summary": summary,
        "by_radius": by_ratio,
        "real": real_rows,
    }
    (folder / "summary.json").write_text(json.dumps(_jsonable(payload), indent=2) + "\n")
    (folder / "report.md").write_text(
        _report(summary, by_ratio, real_rows, real_description, figures, quick, seed)
    )
    manifest = {
        "experiment": "theory",
        "quick": quick,
        "seed": seed,
        "theta": THETA,
        "synthetic_cases": len(specs),
        "real_updates": None if real_updates is None else real_description,
        **provenance(),
        "argv": list(sys.argv),
        "started_at": started_at,
        "wall_s": time.perf_counter() - started,
    }
    (folder / MANIFEST).write_text(json.dumps(_jsonable(manifest), indent=2) + "\n")
    return folder / "report.md"


def run_theory_check(
    out_dir: Path,
    *,
    quick: bool,
    seed: int,
    real_updates: np.ndarray | None = None,
    real_groups: np.ndarray | None = None,
    real_quality: np.ndarray | None = None,
    real_description: str = "real client updates",
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
    command: str = "",
) -> Path:
    """Run the theory check and write its results folder; return the path of ``report.md``.

    Parameters
    ----------
    out_dir : Path
        Folder to create: new, empty, or (with ``overwrite``) an earlier adcs results folder.
        It is locked while written, and written as a partial sibling first, moved into place
        only when complete (`ResultsFolder`).
    quick : bool
        Small grid (seconds) instead of the full one (minutes).
    seed : int
        Seeds every synthetic case (each case's stream is SeedSequence([seed, case index])).
    real_updates : ndarray of shape (n_clients, dim), optional
        Real client updates, e.g. from `fashion_mnist_probe`.
    real_groups : ndarray of int, shape (n_clients,), optional
        Their groups, used as the clusters; required with ``real_updates``.
    real_quality : ndarray of shape (n_clients,), optional
        Their quality scores (losses); without them ADCS is evaluated with θ = 0.
    real_description : str
        What the real updates are (e.g. "Fashion-MNIST, 200 rounds, batch 16"), for the report.
    overwrite : bool
        Replace an existing adcs results folder, and remove stale partial folders on ``out_dir``.
    progress : callable, optional
        ``progress(done, total)`` after each synthetic case.
    command : str
        Named in the lock file while the folder is written.

    Raises
    ------
    ValueError
        Bad real input (before anything is written).
    RunError
        The folder is unusable or busy (before anything is written).
    """
    _check_real(real_updates, real_groups, real_quality)
    folder = ResultsFolder(out_dir, keep=source_checkout())
    folder.check(force=overwrite)
    with locked(folder, command):
        folder.prepare(force=overwrite, command=command)
        try:
            write_theory_check(
                folder.partial, quick=quick, seed=seed, real_updates=real_updates,
                real_groups=real_groups, real_quality=real_quality,
                real_description=real_description, progress=progress,
            )  # fmt: skip
            folder.finish()
        except BaseException:
            folder.discard(keep_checkpoint=False)
            raise
    return folder.out / "report.md"
