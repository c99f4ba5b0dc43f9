"""Test accuracy of the rivals in their own papers' settings (issue 23, part 4): results/peers/.

PowerOfChoice's paper reports the accuracy of the global model on the whole Fashion-MNIST test
set. adcs records each client's accuracy on its own test set; the clients' test sets of a
``dirichlet_per_class`` partition together are the whole test split, so the global accuracy is
their mean weighted by test-set size (the partition is rebuilt from the configuration to know
them). For each folder and series this prints the global accuracy at the last evaluation and
averaged over the final 10 % of evaluations (the reports' "final"), mean over seeds, and each
series' gain over a baseline series paired by seed. Writes Markdown to stdout.

Usage (with ADCS_DATA_DIR set)::

    python scripts/peers_summary.py --baseline md results/peers/poc_a03 results/peers/poc_a2
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np

from adcs.experiments.config import config_from_dict
from adcs.experiments.workload import federate, load_data


def test_sizes(folder: Path) -> np.ndarray:
    """Each client's test-set size, from the folder's configuration (its partition rebuilt)."""
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    config = config_from_dict(manifest["config"])
    (clients,) = federate(load_data(config.data), config.data, config.seeds).values()
    recorded = manifest["data"]["data_sizes"]["None"]
    if list(clients.data_sizes) != recorded:
        raise SystemExit(f"error: {folder}: the rebuilt partition is not the one the runs used")
    return np.asarray(clients.test_sizes, dtype=np.float64)


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


def table(folder: Path, baseline: str) -> list[str]:
    runs = global_accuracy(folder)
    by_series: dict[str, dict[int, tuple[float, float]]] = {}
    for series, seed, rounds, values in runs.values():
        window = values[rounds >= rounds[-1] - 0.1 * rounds[-1]]
        by_series.setdefault(series, {})[seed] = (float(values[-1]), float(window.mean()))
    base = by_series.get(baseline, {})
    lines = [
        f"### {folder.name}",
        "",
        "| series | seeds | last (%) | final 10 % (%) | gain over "
        f"{baseline}, final (points, per seed) |",
        "|---|---|---|---|---|",
    ]
    for series, seeds in by_series.items():
        last = np.mean([v[0] for v in seeds.values()]) * 100
        final = np.mean([v[1] for v in seeds.values()]) * 100
        gains = [100 * (seeds[s][1] - base[s][1]) for s in sorted(seeds) if s in base]
        gain = (
            f"{np.mean(gains):+.1f} ({', '.join(f'{g:+.1f}' for g in gains)})"
            if gains and series != baseline
            else "—"
        )
        lines.append(f"| {series} | {len(seeds)} | {last:.1f} | {final:.1f} | {gain} |")
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="md", help="series the gains are measured against")
    parser.add_argument("folders", nargs="+", type=Path)
    args = parser.parse_args()
    for folder in args.folders:
        print("\n".join(table(folder, args.baseline)))


if __name__ == "__main__":
    main()
