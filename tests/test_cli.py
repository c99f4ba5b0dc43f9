"""The command line end to end (typer's CliRunner), and its refusals of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adcs import cli
from adcs.experiments.config import packaged_config_path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data" / "fashion-mnist"

runner = CliRunner()


def data_args() -> list[str]:
    """The full data set when this workplace has it; otherwise the lookup (offline: the subset)."""
    return ["--data", str(SHARED_DATA)] if SHARED_DATA.is_dir() else []


def test_reproduce_fig1_quick_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "fig1"
    args = ["reproduce", "fig1", "--quick", "--rounds", "20", "--seeds", "1", "--out", str(out)]
    result = runner.invoke(cli.app, args + data_args())
    assert result.exit_code == 0, result.output
    for name in ("fig1.png", "report.md", "summary.json", "manifest.json", "metrics.csv"):
        assert (out / name).is_file(), name
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(r["method"] for r in summary["runs"]) == sorted(
        ["uniform", "powerofchoice", "ocs", "divfl", "staticdpp", "adcs"]
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["quick"] is True
    assert manifest["config"]["sim"]["rounds"] == 20
    assert manifest["seeds"] == [0]
    assert "indicative only" in (out / "report.md").read_text()
    assert str(out / "report.md") in result.output.replace("\n", "")
    assert "rounds/s" in result.output


def test_run_a_config_file(tmp_path: Path) -> None:
    config = tmp_path / "mine.toml"
    text = packaged_config_path("quick").read_text()
    head = text[: text.index("[[methods]]")].replace('name = "quick"', 'name = "mine"')
    head = head.replace('outputs = ["fig1", "table1"]', 'outputs = ["curves"]')
    config.write_text(head + '[[methods]]\nname = "uniform"\n\n[[methods]]\nname = "adcs"\n')
    out = tmp_path / "out"
    args = ["run", str(config), "--rounds", "10", "--seeds", "1", "--out", str(out)]
    result = runner.invoke(cli.app, args + data_args())
    assert result.exit_code == 0, result.output
    assert (out / "curves.png").is_file()
    runs = json.loads((out / "summary.json").read_text())["runs"]
    assert [r["method"] for r in runs] == ["uniform", "adcs"]
    assert runs[1]["theta"] == 0.8 and runs[1]["refresh_every"] == 20


def test_run_refuses_a_bad_config_before_writing_anything(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        packaged_config_path("quick").read_text().replace("eval_every = 50", "eval_evry = 50")
    )
    out = tmp_path / "results" / "x"
    result = runner.invoke(cli.app, ["run", str(bad), "--out", str(out)])
    assert result.exit_code == 2
    assert "sim.eval_evry" in result.output
    assert not (tmp_path / "results").exists()


def test_errors_naming_a_table_print_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        packaged_config_path("quick").read_text()
        + '\n[[methods]]\nname = "adcs"\ncomm_score = "speed"\n'
    )
    result = runner.invoke(cli.app, ["run", str(bad), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "add a [sim.system] table" in " ".join(result.output.split())


@pytest.mark.parametrize(
    "args",
    [
        ["reproduce", "fig9"],
        ["reproduce", "fig1", "--seeds", "0"],
        ["reproduce", "fig1", "--rounds", "-3"],
        ["run", "does-not-exist.toml"],
        ["bench", "gpu"],
    ],
)
def test_bad_arguments_exit_non_zero(args: list[str], tmp_path: Path) -> None:
    """Each refused with exit status 2 and nothing written."""
    result = runner.invoke(cli.app, [*args, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert not (tmp_path / "o").exists()


def test_a_non_empty_out_folder_needs_force(tmp_path: Path) -> None:
    out = tmp_path / "taken"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    result = runner.invoke(cli.app, ["reproduce", "fig1", "--quick", "--out", str(out)])
    assert result.exit_code == 2
    assert "--force" in result.output
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


def test_reproduce_theory_quick(tmp_path: Path) -> None:
    out = tmp_path / "theory"
    result = runner.invoke(cli.app, ["reproduce", "theory", "--quick", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "report.md").is_file()


def test_bench_delegates_to_the_script_and_passes_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "bench_map.py"
    record = tmp_path / "argv.json"
    script.write_text(
        "from __future__ import annotations\n"
        "import json\n"
        "from dataclasses import dataclass\n"
        "@dataclass(frozen=True)\n"  # needs its module in sys.modules while loading
        "class Row:\n"
        "    n: int\n"
        "def main(argv):\n"
        f"    open({str(record)!r}, 'w').write(json.dumps(list(argv)))\n"
        "    return 3\n"
    )
    monkeypatch.setattr(cli, "_bench_candidates", lambda name: [tmp_path / f"bench_{name}.py"])
    result = runner.invoke(cli.app, ["bench", "map", "--sizes", "30,100", "-q"])
    assert result.exit_code == 3, result.output
    assert json.loads(record.read_text()) == ["--sizes", "30,100", "-q"]


def test_bench_without_its_script_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli, "_bench_candidates", lambda name: [tmp_path / f"bench_{name}.py"])
    result = runner.invoke(cli.app, ["bench", "flower"])
    assert result.exit_code == 1
    assert "bench_flower.py not found" in result.output
    assert str(tmp_path) in result.output.replace("\n", "")


def test_bench_map_runs_its_measurements_through_the_cli():
    # the real script, loaded by path: its measuring child processes must work from there too
    result = runner.invoke(cli.app, ["bench", "map", "--sizes", "200", "--ms", "5", "--ks", "8"])
    assert result.exit_code == 0, result.output
    assert "failed" not in result.output
    assert result.output.count("200 │") >= 3  # features, dense and naive rows were measured
