"""Test accuracy of the rivals in their own papers' settings (issue 23, part 4): results/peers/.

PowerOfChoice's paper reports the accuracy of the global model on the whole Fashion-MNIST test
set. adcs records each client's accuracy on its own test set; the clients' test sets of a
``dirichlet_per_class`` partition together are the whole test split, so the global accuracy is
their mean weighted by test-set size (the partition is rebuilt from the configuration to know
them). For each folder and series this prints the global accuracy at the last evaluation,
averaged over the final 10 % of evaluations (the reports' "final") and over every evaluation after
round 0 (speed as well as level), means over seeds, each series' gains over a baseline series
paired by seed, the accuracy curve, and how many of the partition's groups (a client's group:
its partition's own, else its majority label) a round's selection spans, block by block of the
rounds (the selections from ``selections.npz``). Writes Markdown to stdout.

Usage (with ADCS_DATA_DIR set)::

    python scripts/peers_summary.py --baseline md results/peers/poc_a03 results/peers/poc_a2
    python scripts/peers_summary.py --with results/peers/poc_a03 results/peers/clustered_a03
"""

from __future__ import annotations

import argparse
import csv
import functools
import itertools
import json
from pathlib import Path

import numpy as np

from adcs.experiments.config import config_from_dict
from adcs.experiments.run.workload import federate, load_data
from adcs.sim import ClientData


@functools.cache
def _clients(folder: Path) -> ClientData:
    """The folder's clients, from its configuration (its partition rebuilt and checked): once
    per folder, though the accuracy table, the curves and the groups tables all read it."""
    if not (folder / "manifest.json").is_file():
        raise SystemExit(f"error: {folder} is not an adcs results folder (no manifest.json)")
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    config = config_from_dict(manifest["config"])
    (clients,) = federate(load_data(config.data), config.data, config.seeds).values()
    recorded = manifest["data"]["data_sizes"]["None"]
    if list(clients.data_sizes) != recorded:
        raise SystemExit(f"error: {folder}: the rebuilt partition is not the one the runs used")
    return clients


def test_sizes(folder: Path) -> np.ndarray:
    """Each client's test-set size, from the folder's configuration (its partition rebuilt)."""
    return np.asarray(_clients(folder).test_sizes, dtype=np.float64)


def global_accuracy(folder: Path) -> dict[str, tuple[str, int, np.ndarray, np.ndarray]]:
    """run id → (series, seed, eval rounds, global test accuracy at each evaluation)."""
    sizes = test_sizes(folder)
    acc = np.load(folder / "client_acc.npz")
    rounds: dict[str, list[int]] = {}
    with (folder / "metrics.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            rounds.setdefault(row["run_id"], []).append(int(row["round"]))
    out = {}
    with (folder / "runs.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            run = row["run_id"]
            series = run.rsplit("-seed=", 1)[0]
            out[run] = (
                series,
                int(row["seed"]),
                np.asarray(rounds[run]),
                acc[run] @ sizes / sizes.sum(),
            )
    return out


def runs_with(
    folder: Path, baseline: str, extra: Path | None
) -> dict[str, tuple[str, int, np.ndarray, np.ndarray]]:
    """The folder's runs (:func:`global_accuracy`). Where it has no ``baseline`` runs and
    ``extra`` is given, they come from ``extra``, for the same seeds, cut to this folder's length
    (the same seed and configuration up to there give the same run: common random numbers)."""
    runs = global_accuracy(folder)
    length = max(r[2][-1] for r in runs.values())
    seeds = {r[1] for r in runs.values()}
    if extra is not None and all(r[0] != baseline for r in runs.values()):
        for run, (series, seed, rounds, values) in global_accuracy(extra).items():
            if series == baseline and seed in seeds:
                keep = rounds <= length
                runs[run] = (series, seed, rounds[keep], values[keep])
    return runs


def table(folder: Path, baseline: str, extra: Path | None = None) -> list[str]:
    """The folder's summary table (``extra``: see :func:`runs_with`)."""
    runs = runs_with(folder, baseline, extra)
    by_series: dict[str, dict[int, tuple[float, float, float]]] = {}
    for series, seed, rounds, values in runs.values():
        window = values[rounds >= rounds[-1] - 0.1 * rounds[-1]]
        during = float(values[1:].mean())  # every evaluation after round 0: speed as well as level
        by_series.setdefault(series, {})[seed] = (float(values[-1]), float(window.mean()), during)
    base = by_series.get(baseline, {})
    lines = [
        f"### {folder.name}",
        "",
        "| series | seeds | last (%) | final 10 % (%) | gain over "
        f"{baseline}, final (points, per seed) | mean over training (%) | its gain |",
        "|---|---|---|---|---|---|---|",
    ]
    for series, seeds in by_series.items():
        last = np.mean([v[0] for v in seeds.values()]) * 100
        final = np.mean([v[1] for v in seeds.values()]) * 100
        during = np.mean([v[2] for v in seeds.values()]) * 100
        gains = [100 * (seeds[s][1] - base[s][1]) for s in sorted(seeds) if s in base]
        gain = (
            f"{np.mean(gains):+.1f} ({', '.join(f'{g:+.1f}' for g in gains)})"
            if gains and series != baseline
            else "—"
        )
        speed = [100 * (seeds[s][2] - base[s][2]) for s in sorted(seeds) if s in base]
        speed_gain = f"{np.mean(speed):+.1f}" if speed and series != baseline else "—"
        lines.append(
            f"| {series} | {len(seeds)} | {last:.1f} | {final:.1f} | {gain} | {during:.1f} | "
            f"{speed_gain} |"
        )
    return [*lines, ""]


def curves(folder: Path, every: int, baseline: str, extra: Path | None = None) -> list[str]:
    """Global test accuracy every ``every`` rounds, mean over seeds, one row per series."""
    runs = runs_with(folder, baseline, extra)
    series: dict[str, list[np.ndarray]] = {}
    for name, _, _, values in runs.values():
        series.setdefault(name, []).append(values)
    rounds = next(iter(runs.values()))[2]
    keep = rounds % every == 0
    head = " | ".join(str(int(t)) for t in rounds[keep])
    lines = [f"| series \\ round | {head} |", "|---" * (int(keep.sum()) + 1) + "|"]
    for name, values in series.items():
        mean = np.mean(values, axis=0)[keep] * 100
        lines.append(f"| {name} | " + " | ".join(f"{v:.1f}" for v in mean) + " |")
    return [f"Global test accuracy (%) of {folder.name}, mean over seeds:", "", *lines, ""]


def _block_table(title: str, per_series: dict[str, list[np.ndarray]], blocks: int) -> list[str]:
    """One row per series: the per-round values, mean over seeds and over each block's rounds."""
    rounds = len(next(iter(per_series.values()))[0])
    edges = np.linspace(0, rounds, blocks + 1).round().astype(int)
    head = " | ".join(f"{a}–{b - 1}" for a, b in itertools.pairwise(edges))
    lines = [title, "", f"| series \\ rounds | {head} |", "|---" * (blocks + 1) + "|"]
    for name, runs in per_series.items():
        mean = np.mean(runs, axis=0)
        cells = " | ".join(f"{mean[a:b].mean():.1f}" for a, b in itertools.pairwise(edges))
        lines.append(f"| {name} | {cells} |")
    return [*lines, ""]


def group_spread(folder: Path, blocks: int) -> list[str]:
    """How the selections spread over the partition's groups, block by block of ``blocks`` equal
    blocks of the run, one row per series (mean over seeds and the block's rounds): the distinct
    groups among a round's selected clients, and the selected clients of its largest group."""
    groups = np.asarray(_clients(folder).groups)
    spans: dict[str, list[np.ndarray]] = {}
    largest: dict[str, list[np.ndarray]] = {}
    with np.load(folder / "selections.npz") as sel:
        for key in sorted(k for k in sel.files if k.startswith("selected/")):
            series = key.removeprefix("selected/").rsplit("-seed=", 1)[0]
            chosen = sel[key]  # (T, m), -1 where a slot went unfilled
            labels = np.where(chosen >= 0, groups[np.maximum(chosen, 0)], -1)
            # per round and group: the selected clients of that group (unfilled slots in none)
            counts = (labels[:, :, None] == np.arange(int(groups.max()) + 1)).sum(axis=1)
            spans.setdefault(series, []).append((counts > 0).sum(axis=1))
            largest.setdefault(series, []).append(counts.max(axis=1))
    return _block_table(
        f"Groups spanned by a round's selection in {folder.name} (distinct groups among the "
        "selected clients; mean over seeds and the block's rounds):",
        spans,
        blocks,
    ) + _block_table(
        f"The largest group's part of a round's selection in {folder.name} (selected clients of "
        "the group with the most; mean over seeds and the block's rounds):",
        largest,
        blocks,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="md", help="series the gains are measured against")
    parser.add_argument("--every", type=int, default=30, help="rounds between curve points")
    parser.add_argument(
        "--with",
        dest="extra",
        type=Path,
        help="where a folder has no baseline runs: take them here",
    )
    parser.add_argument(
        "--blocks", type=int, default=10, help="blocks of rounds in the groups-spanned table"
    )
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args()
    for folder in args.folders:
        print(
            "\n".join(
                table(folder, args.baseline, args.extra)
                + curves(folder, args.every, args.baseline, args.extra)
                + group_spread(folder, args.blocks)
            )
        )


if __name__ == "__main__":
    main()
