"""Equal tuning budgets (issue 35, item 4): every tuned method gets the same points and dev seeds.

The protocol, for each of the six leaderboard workloads (``experiments/leaderboard/W.toml``, its
own T and settings):

1. **Development.** ``configs OUT`` writes ``OUT/dev/W.toml``: development seeds
   `DEV_SEEDS` (disjoint from the test seeds 0–4) and three methods, each swept over `POINTS`
   points (a ``[methods.sweep]`` table; the grid is the Cartesian product):

   - PowerOfChoice's d (``candidates``): `POINTS` values evenly spaced from m to N, rounded
     (d = m probes m clients drawn by data size and keeps them all: random selection; d = N
     probes every client, the selection of the default ``candidates = None``);
   - ADCS's θ × R: θ ∈ `ADCS_THETAS` × R ∈ `ADCS_REFRESH`;
   - ADCS-2's θ: `ADCS2_THETAS`.

   Each method: `POINTS` points × 3 seeds × 6 workloads = 144 development runs.
2. ``adcs run OUT/dev/W.toml --out DEV/W --workers 1`` for each workload.
3. **Choice.** ``choose DEV OUT`` reads the development runs and, per workload and method, keeps
   the point of highest final worst-client accuracy (the leaderboard's ranking metric) averaged
   over the development seeds — ties to the point listed first in the sweep's order — and
   prints every point's mean as a Markdown table. It writes ``OUT/eval/W.toml``: the same
   workload on the test seeds 0–4 with the chosen point of each method, run once. A point
   missing a development seed is refused (every point must have had the same budget).
4. ``adcs run OUT/eval/W.toml --out EVAL/W --workers 1``; nothing is tuned after this.
5. **Report.** ``report EVAL`` compares the three tuned methods on every workload, final
   worst-client accuracy on the test seeds: each pair by its paired difference
   (`adcs.experiments.analysis.stats.paired_difference`) and two-sided paired t-test
   (`paired_p_value`), the three p-values of a workload Holm-adjusted together (`holm`); a pair
   is "ahead"/"behind" where the adjusted p is below 5 %, "tied" otherwise.

Cost (estimated, not run): the 150-round smoke of m6's development config (72 runs) took 37 s of
simulation on a loaded two-core machine, × 4 000/150 = 16 min at T = 4 000. Scaled by the
workloads' ADCS-2 walls per run (its earlier three-seed runs, since retired into the leaderboard:
paper 50 s, m6 28 s, clients100 106 s, bernoulli 6 s, dirichlet 45 s, soft_skew 98 s; sum 333 s
= 12 × m6's), the six development configs take about 3.2 h on one worker. The evaluation (15
runs a workload, 90 in all): m6's 150-round smoke took 8 s, × 4 000/150 × 12 = about 40 min.

Usage::

    python scripts/tuning_protocol.py configs experiments/successor/tuning
    python scripts/tuning_protocol.py choose results/successor/tuning/dev \\
        experiments/successor/tuning > results/successor/tuning/choice.md
    python scripts/tuning_protocol.py report results/successor/tuning/eval \\
        > results/successor/tuning/report.md
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adcs.experiments.analysis import stats
from adcs.leaderboard.suite import load_workload, workload_paths

WORKLOADS = ("paper", "bernoulli", "clients100", "dirichlet", "m6", "soft_skew")
DEV_SEEDS = (100, 101, 102)
TEST_SEEDS = (0, 1, 2, 3, 4)
POINTS = 8
ADCS_THETAS = (0.6, 0.8, 0.9, 0.95)
"""The leaderboard's θ of ADCS (issue 11)."""
ADCS_REFRESH = (5, 20)
"""The paper's R = 20 and a four times fresher kernel (Fig. 3's R = 5)."""
ADCS2_THETAS = (0.3, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95)
SWEPT = {"powerofchoice": ("candidates",), "adcs": ("theta", "refresh_every"), "adcs2": ("theta",)}
"""The tuned methods and the parameters each is tuned over."""


class ProtocolError(ValueError):
    """The development runs cannot be read as the protocol's (the message says why)."""


def d_grid(m: int, n_clients: int, points: int = POINTS) -> list[int]:
    """`points` values of PowerOfChoice's d, evenly spaced from m to N and rounded, distinct."""
    grid = sorted({round(float(x)) for x in np.linspace(m, n_clients, points)})
    if len(grid) != points:
        raise ProtocolError(f"only {len(grid)} distinct d in [{m}, {n_clients}]")
    return grid


def sweeps(m: int, n_clients: int) -> dict[str, dict[str, list[Any]]]:
    """Each tuned method's sweep: parameter → values, `POINTS` points in all for each."""
    out: dict[str, dict[str, list[Any]]] = {
        "powerofchoice": {"candidates": d_grid(m, n_clients)},
        "adcs": {"theta": list(ADCS_THETAS), "refresh_every": list(ADCS_REFRESH)},
        "adcs2": {"theta": list(ADCS2_THETAS)},
    }
    for method, sweep in out.items():
        points = math.prod(len(v) for v in sweep.values())
        assert points == POINTS and tuple(sweep) == SWEPT[method]  # the equal budget
    return out


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return repr(value)


def _workload_text(name: str, seeds: Sequence[int], head: list[str]) -> str:
    source = next(p for p in workload_paths([name]))
    lines = [
        f"seeds = {list(seeds)}" if line.startswith("seeds =") else line
        for line in source.read_text(encoding="utf-8").splitlines()
        if not line.startswith("#")
    ]
    return "\n".join(head + lines) + "\n"


def dev_config(name: str) -> str:
    """The development configuration of one workload (TOML text)."""
    config = load_workload(next(p for p in workload_paths([name])))
    head = [
        f"# Equal tuning budgets (issue 35, item 4), development runs on {name}: written by",
        "# scripts/tuning_protocol.py (its docstring is the protocol and the cost). Each method",
        f"# has {POINTS} points x {len(DEV_SEEDS)} dev seeds. Run, then choose:",
        f"#   adcs run experiments/successor/tuning/dev/{name}.toml "
        f"--out results/successor/tuning/dev/{name} --workers 1",
        "#   python scripts/tuning_protocol.py choose results/successor/tuning/dev "
        "experiments/successor/tuning",
    ]
    n_clients = config.data.total_clients
    if n_clients is None:
        raise ProtocolError(f"{name}: N is not fixed by the configuration, so d has no range")
    tables = []
    for method, sweep in sweeps(config.m, n_clients).items():
        body = ", ".join(f"{k} = {_toml_value(v)}" for k, v in sweep.items())
        tables.append(f'[[methods]]\nname = "{method}"\nsweep = {{ {body} }}')
    return _workload_text(name, DEV_SEEDS, head) + "\n" + "\n\n".join(tables) + "\n"


def read_dev(
    folder: Path, swept: Mapping[str, Sequence[str]]
) -> dict[str, list[tuple[dict[str, Any], dict[int, float]]]]:
    """Per method, its points in first-seen order, each with its final worst accuracy per seed."""
    path = folder / "runs.csv"
    if not path.is_file():
        raise ProtocolError(f"{path} is missing: run the workload's development config first")
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    out: dict[str, dict[str, tuple[dict[str, Any], dict[int, float]]]] = {}
    for row in rows:
        method = row["method"]
        if method not in swept:
            continue
        params = json.loads(row["params"])
        point = {k: params[k] for k in swept[method]}
        key = json.dumps(point, sort_keys=True)
        out.setdefault(method, {}).setdefault(key, (point, {}))[1][int(row["seed"])] = float(
            row["final_worst_acc"]
        )
    result = {}
    for method in swept:
        points = list(out.get(method, {}).values())
        if len(points) != POINTS:
            raise ProtocolError(f"{folder.name}: {method} has {len(points)} points, not {POINTS}")
        for point, per_seed in points:
            if sorted(per_seed) != sorted(DEV_SEEDS):
                raise ProtocolError(
                    f"{folder.name}: {method} {point} ran on seeds {sorted(per_seed)}, "
                    f"not the development seeds {list(DEV_SEEDS)}"
                )
        result[method] = points
    return result


def choose(
    points: Sequence[tuple[dict[str, Any], dict[int, float]]],
) -> tuple[dict[str, Any], float]:
    """The point of highest mean over seeds (the first of equal ones) and that mean."""
    means = [float(np.mean(list(per_seed.values()))) for _, per_seed in points]
    best = int(np.argmax(means))  # the first maximum
    return points[best][0], means[best]


def eval_config(name: str, chosen: Mapping[str, dict[str, Any]]) -> str:
    """The test configuration of one workload: the chosen point of each method, seeds 0-4."""
    head = [
        f"# Equal tuning budgets (issue 35, item 4), the one evaluation on {name}: the point each",
        "# method chose on the development seeds (scripts/tuning_protocol.py choose), test seeds.",
    ]
    tables = []
    for method, point in chosen.items():
        lines = ["[[methods]]", f'name = "{method}"']
        lines += [f"{k} = {_toml_value(v)}" for k, v in point.items()]
        tables.append("\n".join(lines))
    return _workload_text(name, TEST_SEEDS, head) + "\n" + "\n\n".join(tables) + "\n"


def write_configs(out: Path, workloads: Sequence[str]) -> list[Path]:
    (out / "dev").mkdir(parents=True, exist_ok=True)
    paths = []
    for name in workloads:
        path = out / "dev" / f"{name}.toml"
        path.write_text(dev_config(name), encoding="utf-8")
        paths.append(path)
    return paths


def choose_all(dev: Path, out: Path, workloads: Sequence[str]) -> str:
    """Choose on every workload, write the evaluation configs, return the Markdown table."""
    lines = [
        "| workload | method | point | final worst (%), mean over dev seeds | chosen |",
        "|---|---|---|---|---|",
    ]
    (out / "eval").mkdir(parents=True, exist_ok=True)
    for name in workloads:
        per_method = read_dev(dev / name, SWEPT)
        chosen = {}
        for method in SWEPT:
            point, _ = choose(per_method[method])
            chosen[method] = point
            for p, per_seed in per_method[method]:
                label = ", ".join(f"{k}={v}" for k, v in p.items())
                mean = 100 * float(np.mean(list(per_seed.values())))
                lines.append(
                    f"| {name} | {method} | {label} | {mean:.2f} | {'yes' if p == point else ''} |"
                )
        (out / "eval" / f"{name}.toml").write_text(eval_config(name, chosen), encoding="utf-8")
    return "\n".join(lines)


PAIRS = (("adcs2", "powerofchoice"), ("adcs2", "adcs"), ("adcs", "powerofchoice"))
"""The comparisons of one workload (first − second), Holm-adjusted together."""
ALPHA = 0.05


def read_eval(folder: Path) -> dict[str, dict[int, float]]:
    """Per tuned method, its final worst accuracy on each test seed (one point per method)."""
    path = folder / "runs.csv"
    if not path.is_file():
        raise ProtocolError(f"{path} is missing: run the workload's evaluation config first")
    with path.open(newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["method"] in SWEPT]
    out: dict[str, dict[int, float]] = {}
    variants: dict[str, set[str]] = {}
    for row in rows:
        variants.setdefault(row["method"], set()).add(row["variant"])
        out.setdefault(row["method"], {})[int(row["seed"])] = float(row["final_worst_acc"])
    for method in SWEPT:
        if len(variants.get(method, ())) != 1:
            raise ProtocolError(
                f"{folder.name}: {method} has {len(variants.get(method, ()))} points, "
                "not the one it chose"
            )
        if sorted(out[method]) != list(TEST_SEEDS):
            raise ProtocolError(
                f"{folder.name}: {method} ran on seeds {sorted(out[method])}, "
                f"not the test seeds {list(TEST_SEEDS)}"
            )
    return out


def compare_tuned(
    values: Mapping[str, Mapping[int, float]],
) -> list[tuple[str, str, float, float, float, float]]:
    """(a, b, mean a − b, its 95 % half-width, p, Holm p) for each of `PAIRS`."""
    rows = []
    for a, b in PAIRS:
        diff, half, _ = stats.paired_difference(values[a], values[b])
        rows.append((a, b, diff, half, stats.paired_p_value(values[a], values[b])))
    adjusted = stats.holm([r[4] for r in rows])
    return [(*r, q) for r, q in zip(rows, adjusted, strict=True)]


def report(root: Path, workloads: Sequence[str]) -> str:
    """The evaluation's Markdown table: every workload's three comparisons of tuned methods."""
    lines = [
        "| workload | a | b | a (%) | b (%) | a − b ± 95 % | p | Holm p | a is |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in workloads:
        values = read_eval(root / name)
        for a, b, diff, half, p, q in compare_tuned(values):
            mean_a, mean_b = (100 * float(np.mean(list(values[x].values()))) for x in (a, b))
            verdict = "tied" if not q < ALPHA else ("ahead" if diff > 0 else "behind")
            lines.append(
                f"| {name} | {a} | {b} | {mean_a:.2f} | {mean_b:.2f} | "
                f"{100 * diff:+.2f} ± {100 * half:.2f} | {p:.3g} | {q:.3g} | {verdict} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    configs = sub.add_parser("configs", help="write OUT/dev/W.toml")
    configs.add_argument("out", type=Path)
    pick = sub.add_parser("choose", help="choose on DEV's runs, write OUT/eval/W.toml")
    pick.add_argument(
        "dev", type=Path, help="folder of one development results folder per workload"
    )
    pick.add_argument("out", type=Path)
    rep = sub.add_parser("report", help="compare the tuned methods on EVAL's test runs")
    rep.add_argument("eval", type=Path, help="folder of one evaluation results folder per workload")
    for p in (configs, pick, rep):
        p.add_argument("--workloads", default=",".join(WORKLOADS))
    args = parser.parse_args(argv)
    workloads = [w for w in args.workloads.split(",") if w]
    try:
        if args.command == "configs":
            for path in write_configs(args.out, workloads):
                print(path)
        elif args.command == "choose":
            print(choose_all(args.dev, args.out, workloads))
        else:
            print(report(args.eval, workloads))
    except ProtocolError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
