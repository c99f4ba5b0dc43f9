"""The tutorial notebook (docs/tutorial/tutorial.ipynb): the site shows its stored outputs, so the
test executes it again and checks that the outputs are those the current code gives (every table
with the same rows, columns and counts; its accuracies may differ in their last digits between
numerical libraries, so those are checked through what the page shows them for) and that what it
shows holds: no method at 0 % worst-client accuracy, methods that differ from each other, and a
sweep whose two points differ.

Its numbers are computed on the full Fashion-MNIST (scripts/run_tutorial.py stores them); without
it the test is skipped.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from scripts.run_tutorial import NOTEBOOK, execute
from tests.paths import full_data_dir, has_full_data

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("pandas")

pytestmark = pytest.mark.skipif(
    not has_full_data(), reason=f"the full Fashion-MNIST is not at {full_data_dir()}"
)

# Run after the notebook's cells, in its kernel: what its tables hold, for the checks below.
FACTS = """
import json as _json
print(_json.dumps({
    "runs": res.runs[["variant", "seed", "final_worst_acc"]].to_dict("records"),
    "own": own.runs[["variant", "seed", "final_worst_acc"]].to_dict("records"),
    "own_picks": {v: sorted(map(int, g.client)) for v, g in chosen.groupby("variant")},
    "sweep": sweep.runs[["variant", "data.dominance", "seed", "final_worst_acc"]].to_dict("records"),
}))
"""
_FLOAT = re.compile(r"-?\d+\.\d+")


def _shown(cell: Any) -> list[tuple[str, str]]:
    """A code cell's outputs as (kind, text), numbers with a decimal point masked."""
    out = []
    for output in cell.outputs:
        data = output.get("data", {})
        if output.output_type == "stream" and output.name == "stderr":
            continue  # warnings and progress
        kind = "image" if "image/png" in data else output.output_type
        text = "" if kind == "image" else str(data.get("text/plain", output.get("text", "")))
        out.append((kind, _FLOAT.sub("#", text)))
    return out


@pytest.fixture(scope="module")
def executed() -> tuple[Any, Any, dict[str, Any]]:
    """The stored notebook, a freshly executed copy, and the facts its kernel reports."""
    stored = nbformat.read(NOTEBOOK, as_version=4)
    fresh = copy.deepcopy(stored)
    for cell in fresh.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    fresh.cells.append(nbformat.v4.new_code_cell(FACTS))
    execute(fresh, full_data_dir().resolve())
    facts = json.loads(fresh.cells.pop().outputs[-1]["text"])
    return stored, fresh, facts


def test_the_stored_outputs_are_what_the_code_gives(executed: tuple[Any, Any, Any]) -> None:
    stored, fresh, _ = executed
    code = [(s, f) for s, f in zip(stored.cells, fresh.cells, strict=True) if s.cell_type == "code"]
    assert len(code) >= 8
    for s, f in code:
        assert not [o for o in f.outputs if o.output_type == "error"], f.source
        assert _shown(s) == _shown(f), "stale outputs: run scripts/run_tutorial.py"
    kinds = [kind for _, f in code for kind, _ in _shown(f)]
    assert "image" in kinds and kinds.count("execute_result") >= 6


def _mean(rows: list[dict[str, Any]], **match: Any) -> float:
    values = [r["final_worst_acc"] for r in rows if all(r[k] == v for k, v in match.items())]
    assert values, match
    return sum(values) / len(values)


def test_what_the_tutorial_shows_holds(executed: tuple[Any, Any, dict[str, Any]]) -> None:
    _, _, facts = executed
    runs, own, sweep = facts["runs"], facts["own"], facts["sweep"]
    variants = {r["variant"] for r in runs}
    assert len(variants) == 6 and {r["seed"] for r in runs} == {0, 1}
    assert all(r["final_worst_acc"] > 0 for r in runs + own + sweep)  # every method learns
    adcs_variant = next(v for v in variants if v.startswith("adcs"))
    means = {v: _mean(runs, variant=v) for v in variants}
    assert means[adcs_variant] != means["uniform"]
    assert len(set(means.values())) == len(means)  # six methods, six different accuracies
    # the user's scheduler is not PowerOfChoice under another name: it chooses differently
    mine = next(v for v in facts["own_picks"] if "LossThenSpread" in v)
    assert facts["own_picks"][mine] != facts["own_picks"]["powerofchoice"]
    assert _mean(own, variant=mine) != _mean(own, variant="powerofchoice")
    # the sweep: both points ran, and the skew changes each method's worst-client accuracy
    for variant in {r["variant"] for r in sweep}:
        points = {d: _mean(sweep, variant=variant, **{"data.dominance": d}) for d in (0.6, 1.0)}
        assert points[0.6] != points[1.0]
