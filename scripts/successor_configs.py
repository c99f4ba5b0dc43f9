"""Write experiment configs that run chosen entries on the leaderboard's workloads (issue 23).

Each leaderboard workload (``experiments/leaderboard/NAME.toml``, which lists no methods) is
copied with the given seeds and a ``[[methods]]`` table per entry, so ``adcs run`` can run just
those entries with the leaderboard's settings. The simulator's streams are counter-based, so an
entry's numbers do not depend on which other entries share its folder: an entry run here equals
the same entry run inside the leaderboard.

Usage::

    python scripts/successor_configs.py OUT_DIR --seeds 0,1,2 \\
        --method adcs2 --method powerofchoice --method "adcs2 theta=0.5"
"""

from __future__ import annotations

import argparse
from pathlib import Path

WORKLOADS = ("paper", "bernoulli", "clients100", "dirichlet", "m6", "soft_skew")


def _value(text: str) -> str:
    """A TOML literal for ``text``: numbers and booleans as they are, anything else quoted."""
    if text in ("true", "false"):
        return text
    try:
        float(text)
    except ValueError:
        return f'"{text}"'
    return text


def method_table(spec: str) -> str:
    """``"name k=v k=v"`` → a ``[[methods]]`` TOML table."""
    name, *pairs = spec.split()
    lines = ["[[methods]]", f'name = "{name}"']
    for pair in pairs:
        key, value = pair.split("=", 1)
        lines.append(f"{key} = {_value(value)}")
    return "\n".join(lines)


def write_configs(
    out: Path, workloads: list[str], seeds: list[int], methods: list[str], source: Path
) -> list[Path]:
    """One config per workload in ``out``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in workloads:
        text = (source / f"{name}.toml").read_text()
        head = [
            f"# The leaderboard workload {source.name}/{name}.toml with chosen entries, written by",
            "# scripts/successor_configs.py (the workload's own file says why it is shaped so).",
        ]
        lines = head + [
            f"seeds = {seeds}" if line.startswith("seeds =") else line
            for line in text.splitlines()
            if not line.startswith("#")
        ]
        body = "\n".join(lines) + "\n\n" + "\n\n".join(method_table(m) for m in methods) + "\n"
        path = out / f"{name}.toml"
        path.write_text(body)
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--method", action="append", required=True)
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--source", type=Path, default=Path("experiments/leaderboard"))
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    for path in write_configs(args.out, args.workloads.split(","), seeds, args.method, args.source):
        print(path)


if __name__ == "__main__":
    main()
