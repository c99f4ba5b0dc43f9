"""Workloads from the registries: ``[data]`` and ``[data.partition]`` through to a results folder."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adcs.data import DataError
from adcs.experiments.config import (
    ConfigError,
    config_from_dict,
    config_to_dict,
    load_config,
)
from adcs.experiments.run.runner import load_records, run_experiment
from adcs.experiments.run.workload import load_data
from adcs.sim.metrics import tv_distance

BASE: dict[str, Any] = {
    "name": "w",
    "m": 4,
    "seeds": [0],
    "sim": {"rounds": 6, "eval_every": 3, "batch_size": 4, "local_lr": 0.05},
    "methods": [{"name": "uniform"}, {"name": "adcs", "refresh_every": 2}],
}


def doc(data: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {**BASE, "data": data, **top}


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


# --------------------------------------------------------------------------------------------
# configuration


def test_table_and_flat_forms_are_the_same_configuration() -> None:
    flat = config_from_dict(
        doc({"partition": "dirichlet", "n_clients": 8, "alpha": 0.3, "partition_per_seed": True})
    )
    table = config_from_dict(
        doc(
            {
                "partition": {
                    "kind": "dirichlet",
                    "n_clients": 8,
                    "alpha": 0.3,
                    "resample_per_seed": True,
                }
            }
        )
    )
    assert flat == table and table.data.total_clients == 8
    assert table.data.partition_params == {"n_clients": 8, "alpha": 0.3}
    again = config_from_dict(config_to_dict(table))
    assert again == table


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"partition": {"kind": "iid", "n_clients": 4, "alpha": 1.0}}, r"data\.partition\.alpha"),
        ({"partition": {"kind": "shards"}}, r"data\.partition\.n_clients is required"),
        (
            {"partition": {"kind": "dirichlet", "n_clients": 4, "alpha": 0}},
            r"data\.partition\.alpha",
        ),
        ({"partition": {"kind": "iid", "n_clients": 4}, "n_groups": 3}, r"data\.n_groups"),
        ({"dataset": "synthetic"}, r"data\.n_clients is required"),
        (
            {"dataset": "synthetic", "n_clients": 9, "partition": {"kind": "iid", "n_clients": 9}},
            "only the 'natural' partition",
        ),
        (
            {"dataset": "digits", "partition": "iid", "n_clients": 4, "test_fraction": 2.0},
            r"data\.test_fraction",
        ),
        ({"dataset": "synthetic", "n_clients": 9, "beta": -1.0}, r"data\.beta"),
        ({"dataset": "digits", "path": "x"}, "reads no files"),
        ({"dataset": "arrays"}, r"data\.path is required"),
        ({"dataset": "mnist"}, r"data\.dataset"),
    ],
)
def test_bad_data_tables_are_refused_by_key(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_from_dict(doc(data))


def test_paths_are_checked_for_what_the_dataset_reads(tmp_path: Path) -> None:
    (tmp_path / "mine.npz").write_bytes(b"")
    text = 'name = "a"\nm = 2\nseeds = [0]\n[[methods]]\nname = "uniform"\n[data]\n'
    cfg = tmp_path / "a.toml"
    cfg.write_text(text + 'dataset = "arrays"\npath = "mine.npz"\n[data.partition]\nkind = "iid"\n'
                   "n_clients = 3\n")  # fmt: skip
    assert load_config(cfg).data.path == str(tmp_path / "mine.npz")
    cfg.write_text(text + 'dataset = "arrays"\npath = "."\n[data.partition]\nkind = "iid"\n'
                   "n_clients = 3\n")  # fmt: skip
    with pytest.raises(ConfigError, match="is not a file"):
        load_config(cfg)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "its loader failed: RuntimeError: the data server is down"),
        ({"give": "rows"}, "its loader returned str, not a Dataset"),
    ],
)
def test_a_user_loader_that_fails_is_a_named_data_error(
    options: dict[str, Any], message: str
) -> None:
    config = config_from_dict(
        doc({"dataset": "tests.plugins.my_rows:FAILING", **options,
             "partition": {"kind": "iid", "n_clients": 4}})
    )  # fmt: skip
    with pytest.raises(DataError) as info:  # was: the RuntimeError's traceback
        load_data(config.data)
    assert str(info.value) == f"dataset 'tests.plugins.my_rows:FAILING': {message}"


# --------------------------------------------------------------------------------------------
# whole experiments on other data and partitions


def test_digits_with_a_skewed_dirichlet_split_gives_every_output(tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    config = config_from_dict(
        doc(
            {
                "dataset": "digits",
                "partition": {
                    "kind": "dirichlet",
                    "n_clients": 12,
                    "alpha": 0.5,
                    "size_sigma": 0.5,
                },
            },
            outputs=["fig1", "table1", "curves"],
        )
    )
    out = run_experiment(config, tmp_path / "digits").folder
    manifest = json.loads((out / "manifest.json").read_text())
    sizes = np.array(manifest["data"]["data_sizes"]["None"])
    from adcs.data import load_digits, partition_data

    data = load_digits()
    assert sizes.sum() == data.n_train and len(set(sizes.tolist())) > 1  # all the training data
    assert manifest["data"]["dataset"] == "digits"
    assert "Digits" in (out / "report.md").read_text()
    assert (out / "table1.md").is_file() and (out / "curves.png").is_file()
    # Table 1 is against the groups' real sizes: the majority labels of unequal clients
    part = partition_data(
        "dirichlet", data, np.random.default_rng(0), n_clients=12, alpha=0.5, size_sigma=0.5
    )
    real = np.bincount(part.groups, minlength=10) / 12
    for row in _read(out / "runs.csv"):
        share = np.array([float(row[f"share_g{k}"]) for k in range(10)])
        assert float(row["tv_to_uniform"]) == pytest.approx(tv_distance(share, real))
    records = load_records(out)
    assert all(r.group_acc.shape == (3, 10) and r.p10_acc.shape == (3,) for r in records)


def test_a_generated_population_with_pools_sketches_and_sampled_evaluation(
    tmp_path: Path,
) -> None:
    config = config_from_dict(
        {
            **BASE,
            "m": 10,
            "seeds": [0, 1],
            "data": {
                "dataset": "synthetic",
                "n_clients": 3000,
                "partition": {"kind": "natural", "resample_per_seed": True},
            },
            "sim": {
                "rounds": 8,
                "eval_every": 4,
                "batch_size": 8,
                "local_lr": 0.01,
                "dropout": 0.1,
                "sketch_dim": 16,
                "eval_clients": 100,
                "availability": {"kind": "bernoulli", "p": 0.05},
            },
            "methods": [
                {"name": "uniform"},
                {"name": "powerofchoice", "candidates": 40},
                {"name": "divfl", "candidates": 40},
                {"name": "adcs", "refresh_every": 1, "candidates": 40},
            ],
        }
    )
    out = run_experiment(config, tmp_path / "synthetic").folder
    acc = np.load(out / "client_acc.npz")
    assert acc["eval_clients"].shape == (100,)
    assert all(acc[k].shape == (3, 100) for k in acc.files if k != "eval_clients")
    manifest = json.loads((out / "manifest.json").read_text())
    sizes = manifest["data"]["data_sizes"]
    assert sorted(sizes) == ["0", "1"] and sizes["0"] != sizes["1"]  # one population per seed
    assert manifest["config"]["sim"]["sketch_dim"] == 16
    rows = _read(out / "metrics.csv")
    assert {f"acc_g{k}" for k in range(10)} <= set(rows[0])
    assert "Synthetic" in (out / "report.md").read_text()


def test_the_cross_device_experiment_is_the_issues_setting() -> None:
    config = load_config(Path(__file__).resolve().parents[2] / "experiments" / "cross_device.toml")
    assert config.data.dataset == "synthetic" and config.data.total_clients == 100_000
    assert dict(config.data.options) == {"n_clients": 100_000, "alpha": 1.0, "beta": 1.0}
    sim = config.sim
    assert (sim.rounds, sim.dropout, sim.sketch_dim) == (1000, 0.1, 128)
    assert sim.availability.kind == "bernoulli" and sim.availability.p == 0.05
    assert config.m == 100 and config.seeds == (0, 1, 2)
    pools = {m.name: dict(m.params).get("candidates") for m in config.methods}
    assert pools == {"uniform": None, "powerofchoice": 500, "ocs": 500, "divfl": 500, "adcs": 500}
