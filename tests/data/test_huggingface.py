"""Hugging Face data sets (saved locally, offline) and Flower Datasets' partitioners."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

pytest.importorskip("datasets", reason="the huggingface extra is not installed")
pytest.importorskip("flwr_datasets", reason="the huggingface extra is not installed")

import datasets
from flwr_datasets.partitioner import DirichletPartitioner

from adcs import cli
from adcs.data import DataError, load_dataset, partition_data
from adcs.data.partition import class_counts
from adcs.experiments.config import ConfigError, config_from_dict
from tests.test_cli import one_error

runner = CliRunner()


def _split(rng: np.random.Generator, n: int) -> datasets.Dataset:
    labels = rng.integers(0, 4, n)
    pixels = (rng.random((n, 5, 5)) * 60 + labels[:, None, None] * 60).astype(np.uint8)
    return datasets.Dataset.from_dict({"pixels": list(pixels), "target": labels})


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("hf") / "saved"
    datasets.DatasetDict({"train": _split(rng, 600), "test": _split(rng, 200)}).save_to_disk(
        str(path)
    )
    return path


def test_a_saved_data_set_loads_offline_with_its_columns(saved: Path) -> None:
    data = load_dataset("huggingface", path=str(saved), features="pixels", label="target")
    original = datasets.load_from_disk(str(saved))
    assert data.train_images.shape == (600, 5, 5) and data.train_images.dtype == np.uint8
    np.testing.assert_array_equal(data.train_images[7], np.asarray(original["train"][7]["pixels"]))
    np.testing.assert_array_equal(data.test_labels, np.asarray(original["test"]["target"]))
    assert data.n_classes == 4 and data.checksums  # the splits' fingerprints, for resume
    with pytest.raises(DataError, match="no column 'label'"):
        load_dataset("huggingface", path=str(saved), features="pixels")
    with pytest.raises(DataError, match="no split 'validation'"):
        load_dataset("huggingface", path=str(saved), features="pixels", label="target",
                     test_split="validation")  # fmt: skip
    with pytest.raises(FileNotFoundError, match="no data set saved"):
        load_dataset("huggingface", path=str(saved.parent / "nothing"))


def test_integer_inputs_are_pixels_only_when_both_splits_are(tmp_path: Path) -> None:
    def split(step: int) -> datasets.Dataset:  # values up to 35 × step
        values = np.arange(12 * 3).reshape(12, 3) * step
        return datasets.Dataset.from_dict({"image": list(values), "label": np.arange(12) % 2})

    path = tmp_path / "ints"
    datasets.DatasetDict({"train": split(10), "test": split(1)}).save_to_disk(str(path))
    data = load_dataset("huggingface", path=str(path))  # was: test uint8, train float32
    assert data.train_images.dtype == data.test_images.dtype == np.float32
    np.testing.assert_array_equal(data.test_images[1], [3, 4, 5])  # used as they are


def test_a_hub_name_reaches_the_hub_without_its_retry_lines(
    saved: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    asked = []

    def hub(name: str) -> datasets.DatasetDict:  # the Hub, as it answers after a retry
        asked.append(name)
        logging.getLogger("huggingface_hub.utils._http").warning("Retrying in 1s [Retry 1/5].")
        return datasets.load_from_disk(str(saved))

    monkeypatch.setattr(datasets, "load_dataset", hub)
    with caplog.at_level(logging.WARNING):  # was: a TypeError, name given twice
        data = load_dataset("huggingface", name="owner/set", features="pixels", label="target")
    assert asked == ["owner/set"] and data.n_train == 600
    assert "Retrying" not in caplog.text  # offline: one error line, not one per retry


def test_a_flwr_partitioner_splits_like_flower_and_tests_follow_each_client(saved: Path) -> None:
    data = load_dataset("huggingface", path=str(saved), features="pixels", label="target")
    rng = np.random.default_rng(5)
    part = partition_data("flwr:DirichletPartitioner", data, rng, n_clients=6, alpha=0.5, seed=11)
    # Flower's own partitioner, on the same labels with the same seed, gives the same clients
    table = datasets.Dataset.from_dict({"label": data.train_labels, "row": np.arange(600)})
    flower = DirichletPartitioner(num_partitions=6, partition_by="label", alpha=0.5, seed=11)
    flower.dataset = table
    for i in range(6):
        np.testing.assert_array_equal(
            part.train_indices[i], np.sort(flower.load_partition(i)["row"])
        )
    assert sum(len(ix) for ix in part.train_indices) == 600  # every sample, once
    train_counts = class_counts(part.train_indices, data.train_labels, 4)
    test_counts = class_counts(part.test_indices, data.test_labels, 4)
    # each class's test samples are shared among the clients as its training samples are
    per_class = train_counts * (np.bincount(data.test_labels) / np.bincount(data.train_labels))
    assert np.abs(test_counts - per_class).max() <= 1.0
    assert test_counts.sum() == 200
    np.testing.assert_array_equal(part.groups, train_counts.argmax(axis=1))


def test_the_configuration_checks_flwr_partitions_and_names_the_key(saved: Path) -> None:
    doc = {
        "name": "hf", "m": 2, "seeds": [0], "methods": [{"name": "uniform"}],
        "data": {"dataset": "huggingface", "path": str(saved), "features": "pixels",
                 "label": "target",
                 "partition": {"kind": "flwr:DirichletPartitioner", "n_clients": 6, "alpha": 0.3}},
    }  # fmt: skip
    config = config_from_dict(doc)
    assert config.data.total_clients == 6
    bad = json.loads(json.dumps(doc))
    bad["data"]["partition"]["kind"] = "flwr:Nope"
    with pytest.raises(ConfigError, match=r"has no partitioner 'Nope'; known: .*IidPartitioner"):
        config_from_dict(bad)
    bad["data"]["partition"] = {"kind": "flwr:IidPartitioner", "n_clients": 4, "alpha": 0.3}
    with pytest.raises(ConfigError, match=r"unknown key\(s\) data.partition.alpha"):
        config_from_dict(bad)


def test_a_run_on_a_saved_data_set_with_a_flwr_partition(saved: Path, tmp_path: Path) -> None:
    config = tmp_path / "hf.toml"
    config.write_text(
        f"""name = "hf"
m = 2
seeds = [0]
[data]
dataset = "huggingface"
path = "{saved}"
features = "pixels"
label = "target"
[data.partition]
kind = "flwr:DirichletPartitioner"
n_clients = 6
alpha = 0.5
[sim]
rounds = 6
eval_every = 3
[[methods]]
name = "adcs"
refresh_every = 3
"""
    )
    out = tmp_path / "out"
    result = runner.invoke(cli.app, ["run", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["data"]["partition"]["kind"] == "flwr:DirichletPartitioner"
    result = runner.invoke(cli.app, ["run", str(config), "--set", "data.label=y", "--out", "x"])
    assert result.exit_code == 1 and "has no column 'y'" in one_error(result)
