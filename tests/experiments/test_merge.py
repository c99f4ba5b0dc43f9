"""`adcs.experiments.run.merge`: runs split over folders join into the folder one run writes."""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from adcs.cli import app
from adcs.data import FashionMNIST
from adcs.experiments.config import ConfigError, config_from_dict
from adcs.experiments.run.merge import SPLIT_SEED_NOTE, merge_results
from adcs.experiments.run.runner import run_experiment

DATA_FILES = ("runs.csv", "metrics.csv", "group_share.csv", "summary.json", "client_acc.npz",
              "selections.npz")  # fmt: skip
"""What a run writes from its numbers alone (no wall time, no path): equal to the byte."""

DOC: dict[str, Any] = {
    "name": "tiny",
    "m": 3,
    "seeds": [0, 1, 2],
    "outputs": ["curves"],
    "data": {
        "partition": "paper_groups",
        "n_groups": 3,
        "clients_per_group": 2,
        "train_per_client": 40,
        "test_per_client": 10,
    },
    "sim": {
        "rounds": 6,
        "eval_every": 2,
        "batch_size": 4,
        "local_lr": 0.002,
        "availability": {"kind": "bernoulli", "p": 0.7},
    },
    "methods": [
        {"name": "uniform"},
        {"name": "powerofchoice"},
        {"name": "adcs", "theta": 0.8, "refresh_every": 2},
    ],
}


def _run(folder: Path, dataset: FashionMNIST, **edit: Any) -> Path:
    doc = copy.deepcopy(DOC)
    doc.update(edit)
    run_experiment(config_from_dict(doc), folder, dataset=dataset)
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, synthetic: FashionMNIST) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("merge")
    return {
        "whole": _run(tmp / "whole", synthetic),
        "seeds01": _run(tmp / "seeds01", synthetic, seeds=[0, 1]),
        "seed2": _run(tmp / "seed2", synthetic, seeds=[2]),
        # two schedulers at every seed; the third, added later, at seeds 0-1 and then seed 2
        "first": _run(tmp / "first", synthetic, methods=DOC["methods"][:2]),
        "later01": _run(tmp / "later01", synthetic, methods=DOC["methods"][2:], seeds=[0, 1]),
        "later2": _run(tmp / "later2", synthetic, methods=DOC["methods"][2:], seeds=[2]),
    }


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_seeds_run_apart_join_into_the_data_files_of_one_run_byte_for_byte(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    out = merge_results([runs["seeds01"], runs["seed2"]], tmp_path / "joined")
    for name in DATA_FILES:
        assert (out / name).read_bytes() == (runs["whole"] / name).read_bytes(), name
    for name in ("report.md", "curves.png"):
        assert (out / name).is_file()
    assert SPLIT_SEED_NOTE not in (out / "report.md").read_text()
    whole = json.loads((runs["whole"] / "manifest.json").read_text())
    joined = json.loads((out / "manifest.json").read_text())
    assert joined["config"] == whole["config"] and joined["runs"] == whole["runs"]
    assert joined["data"]["data_sizes"] == whole["data"]["data_sizes"]
    assert [p["runs"] for p in joined["merged_from"]] == [6, 3] and joined["joined"] == "seeds"
    assert set(joined["run_wall_s"]) == set(whole["run_wall_s"])
    assert not list(tmp_path.glob(".*"))  # no partial folder or lock left behind


def test_a_scheduler_run_later_joins_as_its_part_computed_it_and_the_report_says_so(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    parts = [runs["first"], runs["later01"], runs["later2"]]
    out = merge_results(parts, tmp_path / "joined")
    joined = _by_run(out)
    for part in parts:  # every run, value for value, as its own folder holds it
        for run, values in _by_run(part).items():
            assert {k: joined[run][k] for k in values} == values, run
    with np.load(out / "client_acc.npz") as acc, np.load(out / "selections.npz") as sel:
        for part in parts:
            with np.load(part / "client_acc.npz") as a, np.load(part / "selections.npz") as b:
                assert all(np.array_equal(acc[k], a[k]) for k in a.files)
                assert all(np.array_equal(sel[k], b[k]) for k in b.files)
    whole = json.loads((runs["whole"] / "manifest.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"] == whole["config"] and manifest["runs"] == whole["runs"]
    assert manifest["joined"] == "one seed's runs from several parts"
    assert [p["runs"] for p in manifest["merged_from"]] == [6, 2, 1]
    assert " ".join(SPLIT_SEED_NOTE.split()) in " ".join((out / "report.md").read_text().split())


def _by_run(folder: Path) -> dict[str, dict[str, str]]:
    """Each run's cells of runs.csv and, per round, of metrics.csv (keyed column@round)."""
    out = {r["run_id"]: dict(r) for r in _rows(folder / "runs.csv")}
    for r in _rows(folder / "metrics.csv"):
        out[r["run_id"]].update({f"{k}@{r['round']}": v for k, v in r.items()})
    return out


def test_the_order_of_the_parts_gives_the_configurations_order(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    # the joined methods are listed as the parts list them: the later scheduler first here
    out = merge_results([runs["later01"], runs["later2"], runs["first"]], tmp_path / "joined")
    joined = json.loads((out / "manifest.json").read_text())
    assert [m["name"] for m in joined["config"]["methods"]] == ["adcs", "uniform", "powerofchoice"]
    assert joined["runs"][0].startswith("adcs-") and joined["runs"][-1].startswith("powerof")
    for name in ("selections.npz",):  # keyed by name, so the same bytes in any order
        assert (out / name).read_bytes() == (runs["whole"] / name).read_bytes()


def test_parts_that_do_not_make_one_whole_are_refused(
    runs: dict[str, Path], tmp_path: Path, synthetic: FashionMNIST
) -> None:
    with pytest.raises(ConfigError, match=r"no part holds 1 run.*adcs-theta=0\.8-refresh_every=2"):
        merge_results([runs["first"], runs["later01"]], tmp_path / "a")
    with pytest.raises(ConfigError, match=r"is in .* and in"):
        merge_results([runs["first"], runs["whole"]], tmp_path / "b")
    other = _run(tmp_path / "other", synthetic, methods=DOC["methods"][2:], seeds=[2], m=2)
    with pytest.raises(ConfigError, match=r"ran another configuration.*its m differ"):
        merge_results([runs["first"], runs["later01"], other], tmp_path / "c")
    with pytest.raises(ConfigError, match="two or more"):
        merge_results([runs["first"]], tmp_path / "d")
    with pytest.raises(ConfigError, match="no finished results folder"):
        merge_results([runs["first"], tmp_path / "nothing"], tmp_path / "e")
    assert not any((tmp_path / n).exists() for n in "abcde")


def test_the_command_line_merges_and_says_what_is_wrong_in_one_line(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    parts = [str(runs["seeds01"]), str(runs["seed2"])]
    result = CliRunner().invoke(app, ["merge", *parts, "--out", str(tmp_path / "joined")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "joined" / "runs.csv").read_bytes() == (
        runs["whole"] / "runs.csv"
    ).read_bytes()
    again = CliRunner().invoke(app, ["merge", *parts, "--out", str(tmp_path / "joined")])
    assert again.exit_code != 0 and "Traceback" not in again.output
    assert len(again.output.strip().splitlines()) == 1, again.output
    inside = CliRunner().invoke(app, ["merge", *parts, "--out", parts[0], "--force"])
    assert inside.exit_code != 0 and "is or holds" in inside.output
    assert (runs["first"] / "runs.csv").is_file()  # the part is untouched


def test_a_run_recorded_before_its_scheduler_gained_a_parameter_joins_as_recorded(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    import shutil

    def edited(name: str, edit: Any) -> Path:
        part = tmp_path / name / "later2"
        shutil.copytree(runs["later2"], part)
        rows = _rows(part / "runs.csv")
        params = json.loads(rows[0]["params"])
        edit(params)
        rows[0]["params"] = json.dumps(params, sort_keys=True)
        with (part / "runs.csv").open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        return part

    older = edited("older", lambda p: p.pop("gamma"))  # as if gamma came later, at its default
    out = merge_results([runs["first"], runs["later01"], older], tmp_path / "joined")
    params = {r["run_id"]: json.loads(r["params"]) for r in _rows(out / "runs.csv")}
    assert "gamma" not in params["adcs-theta=0.8-refresh_every=2-seed=2"]
    assert params["adcs-theta=0.8-refresh_every=2-seed=1"]["gamma"] == 0.0
    other = edited("other", lambda p: p.update(theta=0.9))
    with pytest.raises(ConfigError, match="ran with other parameters"):
        merge_results([runs["first"], runs["later01"], other], tmp_path / "refused")
    assert not (tmp_path / "refused").exists()


def test_seeds_partitioned_apart_join_in_the_configurations_seed_order(
    tmp_path: Path, synthetic: FashionMNIST
) -> None:
    data = {**DOC["data"], "resample_per_seed": True}  # a partition per seed, keyed by seed
    whole = _run(tmp_path / "whole", synthetic, seeds=[2, 10], data=data)
    ten = _run(tmp_path / "ten", synthetic, seeds=[10], data=data)
    two = _run(tmp_path / "two", synthetic, seeds=[2], data=data)
    out = merge_results([ten, two], tmp_path / "joined")
    for name in DATA_FILES:
        assert (out / name).read_bytes() == (whole / name).read_bytes(), name
    sizes = [
        json.loads((f / "manifest.json").read_text())["data"]["data_sizes"] for f in (out, whole)
    ]
    assert list(sizes[0].items()) == list(sizes[1].items())
