"""Reading a results folder back: each spoiled file (empty, truncated, corrupt, foreign) is one
error naming the file and what is wrong, from the library and from ``adcs export``."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import adcs
from adcs import cli
from adcs.experiments.run.resultfiles import ResultsFileError, read_table
from adcs.experiments.run.results import load_records
from tests.test_cli import TINY, one_error, write_config

pytest.importorskip("pandas")
runner = CliRunner()


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep's folder (a leaderboard.csv and two results folders)."""
    tmp = tmp_path_factory.mktemp("readback")
    config = write_config(tmp, TINY + '[[methods]]\nname = "uniform"\n')
    out = tmp / "sweep"
    result = runner.invoke(cli.app, ["run", str(config), "--sweep", "m=1,2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _truncated(path: Path) -> None:
    raw = path.read_bytes()
    cut = len(raw) // 2
    while raw[cut - 1 : cut] == b"\n":  # cut inside a line
        cut -= 1
    path.write_bytes(raw[:cut])


def _corrupt(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    middle = len(raw) // 2
    raw[middle : middle + 8] = b"\xff\xfe\x00\x81\xff\xfe\x00\x81"
    path.write_bytes(bytes(raw))


def _foreign(path: Path) -> None:
    if path.suffix == ".json":
        path.write_text('{"mine": 1, "sweep": "x"}\n')
    elif path.suffix == ".csv":
        path.write_text("a,b\n1,2\n")
    else:  # an archive of Python objects, which numpy reads only unsafely
        np.savez(path, **{"selected/x": np.array([{"a": 1}], dtype=object)})


SPOILS: dict[str, Callable[[Path], None]] = {
    "empty": _empty,
    "truncated": _truncated,
    "corrupt": _corrupt,
    "foreign": _foreign,
}
FILES = ("manifest.json", "runs.csv", "metrics.csv", "selections.npz", "leaderboard.csv")


def _spoiled(sweep: Path, tmp_path: Path, name: str, spoil: str) -> tuple[Path, Path]:
    folder = tmp_path / "copy"
    shutil.copytree(sweep, folder)
    top = name in ("manifest.json", "leaderboard.csv")
    path = folder / name if top else folder / "00-m=1" / name
    SPOILS[spoil](path)
    return folder, path


@pytest.mark.parametrize("spoil", sorted(SPOILS))
@pytest.mark.parametrize("name", FILES)
def test_load_results_names_the_spoiled_file(
    sweep: Path, tmp_path: Path, name: str, spoil: str
) -> None:
    folder, path = _spoiled(sweep, tmp_path, name, spoil)
    with pytest.raises(ResultsFileError) as info:  # were: JSONDecodeError, EmptyDataError, ...
        results = adcs.load_results(folder)
        results.selections  # noqa: B018 (read on first use)
    assert str(info.value).startswith(f"{path} ") and info.value.path == path


@pytest.mark.parametrize("spoil", sorted(SPOILS))
@pytest.mark.parametrize("name", ["manifest.json", "runs.csv", "metrics.csv"])
def test_export_names_the_spoiled_file_in_one_line(
    sweep: Path, tmp_path: Path, name: str, spoil: str
) -> None:
    pytest.importorskip("tensorboard")
    folder, path = _spoiled(sweep, tmp_path, name, spoil)
    dest = tmp_path / "tb"
    result = runner.invoke(
        cli.app, ["export", str(folder), "--to", "tensorboard", "--dest", str(dest)]
    )
    assert result.exit_code == 2, result.output
    assert one_error(result).startswith(f"error: {path} ")
    assert not dest.exists()  # every file is read before anything is written


def test_load_records_names_a_value_that_does_not_parse(sweep: Path, tmp_path: Path) -> None:
    folder = tmp_path / "one"
    shutil.copytree(sweep / "00-m=1", folder)
    runs = folder / "runs.csv"
    lines = runs.read_text().splitlines(keepends=True)
    header = lines[0].rstrip("\n").split(",")
    cells = lines[1].rstrip("\n").split(",")
    cells[header.index("seed")] = "zero"
    runs.write_text(lines[0] + ",".join(cells) + "\n" + "".join(lines[2:]))
    with pytest.raises(ResultsFileError, match=r"runs\.csv holds a value that cannot be read"):
        load_records(folder)  # was: a bare ValueError naming no file


def test_a_whole_table_reads_back_as_written(sweep: Path) -> None:
    table = read_table(sweep / "00-m=1" / "runs.csv", ("run_id",))
    assert table.rows and all(set(row) == set(table.header) for row in table.rows)


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '"a manifest"',
        '{"versions": "adcs"}',
        '{"versions": {"adcs": "0.2.0"}, "sweep": ["m"]}',
        '{"versions": {"adcs": "0.2.0"}, "sweep": {"points": [1, 2]}}',
        '{"versions": {"adcs": "0.2.0"}, "sweep": {"points": {"00-m=1": 3}}}',
        '{"versions": {"adcs": "0.2.0"}, "run_wall_s": [1.0]}',
    ],
)
def test_a_json_manifest_of_another_shape_is_named(sweep: Path, tmp_path: Path, text: str) -> None:
    folder = tmp_path / "copy"
    shutil.copytree(sweep, folder)
    (folder / "manifest.json").write_text(text)  # were: AttributeError, TypeError
    with pytest.raises(ResultsFileError, match=re.escape(str(folder / "manifest.json"))):
        adcs.load_results(folder)
    result = runner.invoke(cli.app, ["export", str(folder), "--to", "tensorboard"])
    assert result.exit_code == 2
    assert one_error(result).startswith(f"error: {folder / 'manifest.json'} ")
