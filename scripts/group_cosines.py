"""How close the update directions of two clients of one group are, against two of different groups.

ADCS-2's ``group_cosine`` switch (issue 35, change 4 off) calls clients whose cached directions
have cosine ≥ τ "one group": the server cannot see the partition's groups. This script measures,
on a leaderboard workload, the cosine between the probed update directions of every pair of
clients at the update probes of a short ADCS-2 run (``refresh_every = R``: every available
client's update every R rounds), split by whether the partition puts the pair in one group, and
prints their quantiles as a Markdown table — the evidence a τ is chosen on.

Usage::

    python scripts/group_cosines.py --workloads paper,m6 --rounds 400 --every 100 [--data DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, ClassVar

import numpy as np

from adcs.dpp import unit_rows
from adcs.experiments.run.runner import sim_settings
from adcs.experiments.run.workload import federate, load_data
from adcs.leaderboard.suite import load_workload, workload_paths
from adcs.schedulers import ADCS2
from adcs.schedulers.adcs2 import ADCS2State
from adcs.schedulers.base import ClientStats, Selection

QUANTILES = (0.1, 0.5, 0.9)


@dataclasses.dataclass(frozen=True)
class RecordingADCS2(ADCS2):
    """ADCS-2 that records the cosine matrix of every update probe of all available clients."""

    log: ClassVar[list[dict[str, Any]]] = []

    def select(
        self, state: ADCS2State, round_idx: int, stats: ClientStats, rng: np.random.Generator
    ) -> tuple[Selection, ADCS2State]:
        if stats.updates is not None and stats.n_probed > 1:
            phi = unit_rows(np.asarray(stats.updates)).astype(np.float64)
            self.log.append(
                {"round": round_idx, "clients": stats.clients.copy(), "cos": phi @ phi.T}
            )
        return super().select(state, round_idx, stats, rng)


def pair_quantiles(cos: np.ndarray, groups: np.ndarray) -> dict[str, list[float]]:
    """Quantiles `QUANTILES` of the off-diagonal cosines, in-group and cross-group pairs."""
    upper = np.triu(np.ones(cos.shape, dtype=bool), k=1)
    same = groups[:, None] == groups[None, :]
    out = {}
    for key, mask in (("in", upper & same), ("cross", upper & ~same)):
        values = cos[mask]
        out[key] = [float(np.quantile(values, q)) for q in QUANTILES] if values.size else []
    return out


def measure(name: str, rounds: int, every: int, data_dir: str | None) -> tuple[list[str], bool]:
    """Table rows for one workload, one per update probe, and whether the data was a subset."""
    config = load_workload(next(p for p in workload_paths([name])))
    if data_dir:
        config = dataclasses.replace(config, data=dataclasses.replace(config.data, path=data_dir))
    source = load_data(config.data)
    data = federate(source, config.data, [0])[None]
    sim = dataclasses.replace(sim_settings(config), rounds=rounds, eval_every=rounds)
    RecordingADCS2.log.clear()
    from adcs.sim.engine import RunSpec, simulate

    simulate([RunSpec(RecordingADCS2(m=config.m, refresh_every=every), 0, "adcs2")], data, sim)
    rows = []
    for rec in RecordingADCS2.log:
        q = pair_quantiles(rec["cos"], np.asarray(data.groups)[rec["clients"]])
        fmt = lambda v: " / ".join(f"{x:.2f}" for x in v) or "—"  # noqa: E731
        rows.append(f"| {name} | {rec['round']} | {fmt(q['in'])} | {fmt(q['cross'])} |")
    return rows, source.is_subset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="paper,m6,clients100,dirichlet,soft_skew")
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--every", type=int, default=100, help="R of the update probe")
    parser.add_argument("--data", default=None, help="Fashion-MNIST folder")
    args = parser.parse_args()
    rows: list[str] = []
    subset = False
    for name in args.workloads.split(","):
        more, is_subset = measure(name, args.rounds, args.every, args.data)
        rows += more
        subset |= is_subset
    lines = [
        f"cosine of two clients' probed update directions, quantiles "
        f"{' / '.join(str(q) for q in QUANTILES)} over pairs (ADCS-2, seed 0, T = {args.rounds}, "
        f"probes every {args.every} rounds, "
        f"{'the shipped subset of' if subset else 'the full'} Fashion-MNIST)",
        "",
        "| workload | round | one group | two groups |",
        "|---|---|---|---|",
        *rows,
    ]
    print("\n".join(lines))


if __name__ == "__main__":
    main()
