"""One table of the attack families from per-method results folders, and the cap checked in them.

``adcs bench attacks --blocks families --methods M --out DIR/M`` writes one folder per method
(so that each finishes on its own on a busy machine); this script reads their ``runs.csv`` and
``selections.npz`` and writes ``DIR/report.md``: per family, k and defence, each method's largest
attacker share and coalition share (over its fair share) and the honest 10th-percentile /
average accuracy; the no-attack runs; and, for every run with the bounds, the most selections
any client and the coalition held in any ``--window`` consecutive rounds.

    python scripts/attack_families_summary.py results/attacks/families --window 100
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

ORDER = ("adcs", "divfl", "powerofchoice", "ocs", "uniform")


def _num(x: str) -> float:
    try:
        return float(x)
    except ValueError:
        return math.nan


def _method(variant: str) -> str:
    return variant.split("-")[0]


def read(folder: Path) -> list[dict[str, str]]:
    """Every row of the ``runs.csv`` of the folders below ``folder`` (seed folders included)."""
    rows: list[dict[str, str]] = []
    for path in sorted(folder.rglob("runs.csv")):
        rows += list(csv.DictReader(path.open()))
    return rows


def family_table(rows: list[dict[str, str]]) -> list[str]:
    """Markdown: per family, k and defence, each method's shares and honest accuracy."""
    cells: dict[tuple[str, int, str, str], list[dict[str, str]]] = defaultdict(list)
    keys: list[tuple[str, int, str]] = []
    for r in rows:
        if r["block"] != "families":
            continue
        mode = "none" if r["defence"] == "off" else (
            "bounds, adaptive" if r["adaptive"] == "True" else "bounds, naive"
        )  # fmt: skip
        key = (r["attack"], int(r["k"]), mode)
        if key not in keys:
            keys.append(key)
        cells[(*key, _method(r["method"]))].append(r)
    methods = [m for m in ORDER if any(k[3] == m for k in cells)]
    lines = [
        "| family | k | defence | " + " | ".join(methods) + " |",
        "|---|---|---|" + "---|" * len(methods),
    ]
    for key in keys:
        vals = []
        for m in methods:
            got = cells.get((*key, m), [])
            if not got:
                vals.append("–")
                continue
            single = max(_num(g["attacker_share"]) for g in got)
            coalition = max(_num(g["coalition_share"]) for g in got)
            p10 = 100 * float(np.mean([_num(g["honest_p10"]) for g in got]))
            avg = 100 * float(np.mean([_num(g["honest_average"]) for g in got]))
            vals.append(f"{single:.2f} · {coalition:.2f} · {p10:.0f} / {avg:.0f}")
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(vals) + " |")
    return lines


def clean_table(rows: list[dict[str, str]]) -> list[str]:
    """Markdown: the no-attack runs, without and with the bounds (mean over seeds)."""
    by: dict[tuple[str, str], list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        if r["block"] == "clean":
            by[(_method(r["method"]), r["defence"])].append(r)
    lines = ["| method | defence | worst | p10 | average | seeds |", "|---|---|---|---|---|---|"]
    for (m, d), got in sorted(by.items(), key=lambda kv: (ORDER.index(kv[0][0]), kv[0][1])):
        w, p, a = (100 * float(np.mean([_num(g[f"honest_{x}"]) for g in got]))
                   for x in ("worst", "p10", "average"))  # fmt: skip
        lines.append(f"| {m} | {d} | {w:.1f} | {p:.1f} | {a:.1f} | {len(got)} |")
    return lines


def window_check(folder: Path, window: int, n: int) -> list[str]:
    """Markdown: the most selections of any client / of the coalition in any ``window`` rounds."""
    most_any, most_coalition, runs = 0, 0.0, 0
    where = ""
    for path in sorted(folder.rglob("selections.npz")):
        rows = {r["run_id"]: r for r in csv.DictReader((path.parent / "runs.csv").open())}
        with np.load(path) as selections:
            for key in selections.files:
                run = key.split("/", 1)[1]
                if "/bound/" not in run:
                    continue
                sel = selections[key]
                hits = np.zeros((sel.shape[0], n), dtype=np.int64)
                for t, row in enumerate(sel):
                    hits[t, row[row >= 0]] = 1
                csum = np.vstack([np.zeros(n, dtype=np.int64), np.cumsum(hits, axis=0)])
                counts = csum[window:] - csum[:-window]
                runs += 1
                if int(counts.max()) > most_any:
                    most_any, where = int(counts.max()), run
                mal = json.loads(rows[run]["malicious"])
                if mal:
                    most_coalition = max(
                        most_coalition, counts[:, mal].sum(axis=1).max() / len(mal)
                    )
    return [
        f"Over the {runs} runs with the bounds, the most selections any client held in any "
        f"{window} consecutive rounds: **{most_any}** ({where}); the most a coalition held, per "
        f"member: **{most_coalition:.0f}**.",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--n-clients", type=int, default=30, help="N of the suite (the paper's)")
    args = parser.parse_args()
    rows = read(args.folder)
    text = [
        "# Attackers that send what they report, against the bounds",
        "",
        "Written by `python scripts/attack_families_summary.py "
        f"{args.folder.as_posix()} --window {args.window}` from the folders below this one "
        "(one per method and seed, each written by `adcs bench attacks --blocks families`; "
        "their commands are in FINDINGS.md and in each folder's manifest.json).",
        "",
        "Each cell: the largest attacker's selection rate ÷ its fair share m/N · the "
        "coalition's total ÷ k × the fair share (max over seeds; a sleeper's rates count the "
        "rounds from its start) · the honest clients' 10th-percentile / average accuracy "
        "(%, mean over seeds).",
        "",
        *family_table(rows),
        "",
        "## The cap, checked in every run",
        "",
        *window_check(args.folder, args.window, args.n_clients),
        "",
        "## No attack: honest accuracy without and with the bounds",
        "",
        *clean_table(rows),
        "",
    ]
    (args.folder / "report.md").write_text("\n".join(text))


if __name__ == "__main__":
    main()
