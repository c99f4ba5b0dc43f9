"""Rewrite an attack suite's ``report.md`` from its files (``adcs bench attacks --report``).

The report of ``adcs bench attacks`` is a function of the folder's ``runs.csv``,
``selections.npz`` and ``manifest.json`` (its suite, rounds and seeds; the experiment's
configuration by ``config_source``); this script is how the claims check regenerates it.

    python scripts/attack_suite_report.py results/attacks
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import bench_attacks


def main(argv: list[str] | None = None) -> int:
    return bench_attacks.main(["--report", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
