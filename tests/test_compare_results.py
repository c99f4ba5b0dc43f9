"""The numerical comparison of two results folders (scripts/compare_results.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from scripts.compare_results import main, report


def _results(folder: Path, selected: np.ndarray, acc: float) -> None:
    folder.mkdir(parents=True)
    np.savez(folder / "selections.npz", **{"selected/a": selected, "returned/a": selected > 0})
    (folder / "metrics.csv").write_text(f"run_id,round,worst_acc\na,0,0.5\na,10,{acc!r}\n")
    (folder / "runs.csv").write_text(f"run_id,final_worst_acc,client_updates\na,{acc!r},7\n")


def test_selections_and_accuracies_apart_are_measured(tmp_path: Path) -> None:
    old = np.array([[1, 2], [3, 4], [5, 6], [7, 8]])
    new = old.copy()
    new[1] = [4, 3]  # the same set in another order
    new[3] = [7, 9]
    _results(tmp_path / "old" / "w", old, 0.75)
    _results(tmp_path / "new" / "w", new, 0.70)

    lines = report(tmp_path / "old", tmp_path / "new")

    assert (
        lines[0] == "w: selections identical in 50.0000% in order, 75.0000% as sets of 4 run-rounds"
    )
    assert "  metrics.csv worst_acc: largest |difference| 0.05 at a/10" in lines
    assert "  runs.csv final_worst_acc: largest |difference| 0.05 at a" in lines
    assert not any("client_updates" in line for line in lines)


def test_markdown_fences_the_lines_under_a_title(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sel = np.array([[1, 2], [3, 4]])
    _results(tmp_path / "old", sel, 0.75)
    _results(tmp_path / "new", sel, 0.75)

    assert main(["--markdown", str(tmp_path / "old"), str(tmp_path / "new")]) == 0

    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("# How far `") and out[2] == "```text" and out[-1] == "```"
    assert (
        out[3] == ".: selections identical in 100.0000% in order, 100.0000% as sets of 2 run-rounds"
    )
