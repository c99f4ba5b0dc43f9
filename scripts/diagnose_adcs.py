"""Diagnose where ADCS loses on the leaderboard, in numbers (issue 23, part 1).

Three measurements, written as Markdown to stdout:

1. **Slots against need** — per workload, each client group's share of the selection slots and
   its final accuracy, for the paper's ADCS (θ = 0.8, R = 20) and PowerOfChoice, read from the
   committed leaderboard folder (T = 4 000, seeds 0–2; no new runs).
2. **Pool survival under Bernoulli availability** — of the clients available at an ADCS refresh
   (its pool), the share still available k rounds later, and the share of the m slots that must
   be topped up at random because fewer than m pool clients are available (availability masks
   only, no training).
3. **Quality against diversity over training** — at each ADCS refresh of a short run (T = 1 000,
   seed 0): the spread of the quality term's log weights, 2α·(max q − min q) over the pool, and
   of the diversity term's log-det gains log d_i² at the m-th greedy pick.

Usage::

    python scripts/diagnose_adcs.py --leaderboard results/leaderboard --data DIR > DIAGNOSIS.md
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
from collections import defaultdict
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from adcs.dpp import alpha_of
from adcs.experiments.run.runner import sim_settings
from adcs.experiments.run.workload import federate, load_data
from adcs.leaderboard.suite import load_workload, workload_paths
from adcs.schedulers import ADCS
from adcs.schedulers.adcs import ADCSState
from adcs.schedulers.base import ClientStats
from adcs.sim.availability import BernoulliAvailability
from adcs.sim.engine import RunSpec, simulate

ADCS_VARIANT = "adcs-theta=0.8-refresh_every=20"
POC_VARIANT = "powerofchoice"


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def group_table(folder: Path, variant: str) -> tuple[np.ndarray, np.ndarray]:
    """Mean share of slots and final accuracy of each group over seeds, each shape (n_groups,)."""
    runs = [r for r in _read(folder / "runs.csv") if r["variant"] == variant]
    n_groups = sum(1 for k in runs[0] if k.startswith("share_g"))
    shares = np.array([[float(r[f"share_g{g}"]) for g in range(n_groups)] for r in runs])
    start = {r["run_id"]: int(r["final_from_round"]) for r in runs}
    acc: dict[str, list[list[float]]] = defaultdict(list)
    for row in _read(folder / "metrics.csv"):
        if row["run_id"] in start and int(row["round"]) >= start[row["run_id"]]:
            acc[row["run_id"]].append([float(row[f"acc_g{g}"]) for g in range(n_groups)])
    final = np.array([np.mean(acc[r["run_id"]], axis=0) for r in runs])
    return shares.mean(axis=0), final.mean(axis=0)


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def part_slots(leaderboard: Path, workloads: list[str]) -> list[str]:
    out = [
        "## 1. Slots against need (committed leaderboard runs: T = 4 000, seeds 0–2)",
        "",
        "Per group: share of slots (%) / final group accuracy (%), mean over seeds. ρ = Spearman "
        "correlation of share with the group's error (1 − accuracy): 1 means slots follow need.",
        "",
    ]
    for name in workloads:
        out += [f"### {name}", "", "| method | " + " | ".join(f"g{g}" for g in range(10))
                + " | ρ(share, error) | worst group's share |", "|" + "---|" * 13]  # fmt: skip
        for label, variant in (("ADCS θ=0.8", ADCS_VARIANT), ("PowerOfChoice", POC_VARIANT)):
            share, acc = group_table(leaderboard / name, variant)
            cells = [f"{100 * s:.1f} / {100 * a:.0f}" for s, a in zip(share, acc, strict=True)]
            worst = int(np.argmin(acc))
            rho = _spearman(share, 1.0 - acc)
            out.append(f"| {label} | " + " | ".join(cells)
                       + f" | {rho:+.2f} | g{worst}: {100 * share[worst]:.1f} |")  # fmt: skip
        out.append("")
    return out


def part_pool(n_clients: int, m: int, p: float, refresh: int, rounds: int, seed: int) -> list[str]:
    avail = BernoulliAvailability(p)
    groups = np.zeros(n_clients, dtype=np.intp)
    masks = np.array([avail.mask(seed, t, groups) for t in range(rounds)])
    lags = [0, 1, 2, 5, 10, 19]
    rows = []
    for k in lags:
        kept, topped = [], []
        for t in range(0, rounds - refresh, refresh):
            pool = masks[t]
            now = masks[t + k]
            inter = int((pool & now).sum())
            kept.append(inter / max(int(pool.sum()), 1))
            topped.append(max(0, min(m, int(now.sum())) - inter) / m)
        rows.append(f"| {k} | {100 * np.mean(kept):.1f} | {100 * np.mean(topped):.1f} |")
    return [
        f"## 2. Pool survival under Bernoulli({p}) availability (N = {n_clients}, m = {m}, "
        f"R = {refresh}; {rounds} rounds of seed {seed}'s masks)",
        "",
        "| rounds since refresh k | pool still available (%) | slots topped up at random (%) |",
        "|---|---|---|",
        *rows,
        "",
    ]


@dataclasses.dataclass(frozen=True)
class RecordingADCS(ADCS):
    """ADCS that records, at each refresh, the spread of its quality and diversity terms."""

    log: ClassVar[list[dict[str, Any]]] = []

    def _refresh(self, state: ADCSState, round_idx: int, stats: ClientStats) -> ADCSState:
        new = super()._refresh(state, round_idx, stats)
        assert new.pool is not None and new.quality is not None and new.pool.kernel is not None
        self.log.append(
            {"round": round_idx, **spreads(new.pool.kernel, new.quality, self.alpha, self.m)}
        )
        return new


def spreads(kernel: np.ndarray, quality: np.ndarray, alpha: float, m: int) -> dict[str, float]:
    """2α·range(q), and the log d_i² of the m-th pure-diversity greedy pick and their range."""
    from adcs.dpp import greedy_map

    order = greedy_map(kernel, m, rtol=1e-5, validate=False)
    chosen = order[: m - 1]
    rest = np.setdiff1d(np.arange(kernel.shape[0]), chosen)
    sub = kernel[np.ix_(chosen, chosen)]
    cross = kernel[np.ix_(rest, chosen)]
    resid = 1.0 - np.einsum("ij,ij->i", cross @ np.linalg.pinv(sub), cross)
    logd = np.log(np.clip(resid, 1e-12, None))
    return {
        "quality_range": 2 * alpha * float(np.ptp(quality)),
        "quality_iqr": 2 * alpha * float(np.subtract(*np.percentile(quality, [75, 25]))),
        "mth_gain": float(logd.max()),
        "gain_range": float(np.ptp(logd)),
    }


def part_spread(names: list[str], rounds: int, data_dir: str | None) -> list[str]:
    out = [
        f"## 3. Quality against diversity at each ADCS refresh (θ = 0.8, α = {alpha_of(0.8):g}, "
        f"R = 20; T = {rounds}, seed 0)",
        "",
        "quality: the spread of the quality term's log weights, 2α·(max q − min q) (and 2α·IQR) "
        "over the pool. diversity: at the m-th greedy pick (θ = 0), the best remaining client's "
        "log-det gain log d² (0 = orthogonal to the m − 1 chosen) and the range of log d² over "
        "the remaining clients.",
        "",
        "| workload | round | quality 2α·range(q) | quality 2α·IQR(q) | m-th pick's log d² "
        "| range of log d² |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        config = load_workload(next(p for p in workload_paths([name])))
        if data_dir:
            config = dataclasses.replace(
                config, data=dataclasses.replace(config.data, path=data_dir)
            )
        data = federate(load_data(config.data), config.data, [0])[None]
        sim = dataclasses.replace(sim_settings(config), rounds=rounds, eval_every=rounds)
        RecordingADCS.log.clear()
        simulate([RunSpec(RecordingADCS(m=config.m), 0, "adcs")], data, sim)
        for rec in RecordingADCS.log:
            if rec["round"] % 200 == 0 or rec["round"] == RecordingADCS.log[-1]["round"]:
                out.append(
                    f"| {name} | {rec['round']} | {rec['quality_range']:.2f} | "
                    f"{rec['quality_iqr']:.2f} | {rec['mth_gain']:.2f} | {rec['gain_range']:.2f} |"
                )
    return [*out, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaderboard", type=Path, default=Path("results/leaderboard"))
    parser.add_argument("--data", default=None, help="Fashion-MNIST folder")
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument(
        "--parts", default="1,2,3",
        help="which parts to write (1 and 2 read committed files only; 3 trains)",
    )  # fmt: skip
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    workloads = ["paper", "bernoulli", "clients100", "dirichlet", "m6", "soft_skew"]
    lines = ["# Diagnosis: where the paper's ADCS loses, in numbers", ""]
    if "1" in parts:
        lines += part_slots(args.leaderboard, workloads)
    if "2" in parts:
        lines += part_pool(30, 10, 0.5, 20, 4000, 0)
    if "3" in parts:
        lines += part_spread(["paper", "m6", "clients100", "dirichlet"], args.rounds, args.data)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
