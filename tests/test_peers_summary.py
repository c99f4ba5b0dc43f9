"""results/peers/summary.md's groups table (scripts/peers_summary.py, `group_spread`)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from scripts import peers_summary


def test_group_spread_counts_distinct_groups_per_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # six clients in three groups; an unfilled slot (-1) spans no group
    groups = np.array([0, 0, 1, 1, 2, 2])
    monkeypatch.setattr(peers_summary, "_clients", lambda folder: SimpleNamespace(groups=groups))
    selected = {
        # rounds 0-1 span 1 then 3 groups; rounds 2-3 span 2 (one slot unfilled) then 1
        "selected/a-seed=0": [[0, 1, -1], [0, 2, 4], [2, 5, -1], [4, 5, -1]],
        # the same series' second seed: 3, 3, 1, 1 groups
        "selected/a-seed=1": [[0, 3, 5], [1, 2, 4], [2, 3, -1], [-1, -1, -1]],
        "selected/b-seed=0": [[0, 2, 4], [1, 3, 5], [0, 1, -1], [2, 3, -1]],
        "returned/a-seed=0": [[True] * 3] * 4,  # not a selection: ignored
    }
    np.savez(tmp_path / "selections.npz", **{k: np.array(v) for k, v in selected.items()})
    lines = peers_summary.group_spread(tmp_path, blocks=2)
    split = lines.index("", 2)  # the groups-spanned table, then the largest group's
    spanned, largest = (
        [line for line in part if line.startswith("| ")] for part in (lines[:split], lines[split:])
    )
    assert spanned[0] == largest[0] == "| series \\ rounds | 0–1 | 2–3 |"
    # a: seed 0 (1, 3 | 2, 1), seed 1 (3, 3 | 1, 0) -> block means 2.5 and 1.0
    assert spanned[1:] == ["| a | 2.5 | 1.0 |", "| b | 3.0 | 1.0 |"]
    # largest group's clients, a: seed 0 (2, 1 | 1, 2), seed 1 (1, 1 | 2, 0) -> 1.25 and 1.25
    # b: (1, 1 | 2, 2)
    assert largest[1:] == ["| a | 1.2 | 1.2 |", "| b | 1.0 | 2.0 |"]
