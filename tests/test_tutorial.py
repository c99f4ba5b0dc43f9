"""The tutorial notebook (docs/tutorial/tutorial.ipynb) runs from top to bottom."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("pandas")

NOTEBOOK = Path(__file__).resolve().parents[1] / "docs" / "tutorial" / "tutorial.ipynb"


def test_the_tutorial_runs_and_shows_its_tables(tmp_path: Path) -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    shown = "\n".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "HighestLoss" in shown  # the user's scheduler ran and is in the table
    assert "data.dominance" in shown and "0.6" in shown  # the sweep's column
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the plot
