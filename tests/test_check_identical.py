"""The byte-identity check's comparison (scripts/check_identical.py), on two small folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from scripts.check_identical import compare, table


def _results(folder: Path, loss: float, wall: float) -> Path:
    (folder / "sub").mkdir(parents=True)
    (folder / "metrics.csv").write_text(f"run_id,round,test_loss\na,0,{loss!r}\n")
    np.savez(folder / "sub" / "selections.npz", a=np.arange(6).reshape(2, 3))
    manifest = {"config": {"rounds": 5}, "wall_s": wall, "started_at": f"t{wall}"}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "report.md").write_text(f"took {wall} s\n")  # not a data file
    return folder


def test_identical_folders_are_identical_whatever_their_times(tmp_path: Path) -> None:
    old = _results(tmp_path / "old", 0.5, wall=1.0)
    new = _results(tmp_path / "new", 0.5, wall=2.0)

    rows = compare(old, new)

    assert rows == [
        ("manifest.json", "identical"),
        ("metrics.csv", "identical"),
        ("sub/selections.npz", "identical"),
    ]


def test_a_changed_number_a_missing_file_and_a_changed_manifest_are_differences(
    tmp_path: Path,
) -> None:
    old = _results(tmp_path / "old", 0.5, wall=1.0)
    new = _results(tmp_path / "new", 0.5000000000000001, wall=1.0)
    (new / "sub" / "selections.npz").unlink()
    (old / "clock.npz").write_bytes(b"x")
    (new / "manifest.json").write_text(json.dumps({"config": {"rounds": 6}, "wall_s": 1.0}))

    verdicts = dict(compare(old, new))

    assert verdicts == {
        "clock.npz": "missing on new",
        "manifest.json": "DIFFERENT",
        "metrics.csv": "DIFFERENT",
        "sub/selections.npz": "missing on new",
    }
    assert "run x: metrics.csv  DIFFERENT" in table([("run x", "metrics.csv", "DIFFERENT")])
