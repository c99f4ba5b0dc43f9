"""Packaging: one source for the version, the metadata, the citation, the changelog."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest
from typer.testing import CliRunner

import adcs
from adcs import cli

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]


def test_the_version_has_one_source_and_the_cli_prints_it() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "adcs.__version__"}
    assert metadata.version("adcs") == adcs.__version__  # what the installed metadata says
    result = CliRunner().invoke(cli.app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"adcs {adcs.__version__}"


def test_metadata_citation_and_changelog_name_this_version() -> None:
    meta = metadata.metadata("adcs")
    assert meta["Author"] or meta["Author-email"]
    assert "federated learning" in (meta["Keywords"] or "")
    assert any(c.startswith("Topic :: Scientific") for c in meta.get_all("Classifier") or [])
    citation = (REPO / "CITATION.cff").read_text()
    assert f'version: "{adcs.__version__}"' in citation
    assert "Adaptive Determinantal Client Scheduling in Federated Learning" in citation
    assert f"## {adcs.__version__}" in (REPO / "CHANGELOG.md").read_text()


def test_the_benchmarks_ship_with_the_package() -> None:
    shipped = Path(cli.__file__).resolve().parent / "_benchmarks"
    names = sorted(p.name for p in shipped.glob("bench_*.py"))
    assert names == sorted(p.name for p in (REPO / "benchmarks").glob("bench_*.py"))
    assert all(str(shipped / f"bench_{b.value}.py") in map(str, cli._bench_candidates(b.value))
               for b in cli.Bench)  # fmt: skip


def _authors(node: object) -> list[object]:
    """Every ``authors`` entry anywhere in a CFF document (the root's, a reference's, ...)."""
    if isinstance(node, dict):
        found = list(node.get("authors", []))
        return found + [a for k, v in node.items() if k != "authors" for a in _authors(v)]
    if isinstance(node, list):
        return [a for item in node for a in _authors(item)]
    return []


def test_the_citation_is_cff_1_2_naming_only_the_projects_authors() -> None:
    yaml = pytest.importorskip("yaml")
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0"
    assert {"cff-version", "message", "title", "authors"} <= set(citation)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert citation["authors"] == [{"name": a["name"]} for a in project["authors"]]
    # no placeholder such as "the authors of the paper": every author anywhere is the project's
    assert all(a in citation["authors"] for a in _authors(citation)), _authors(citation)


def test_importing_the_library_or_its_flower_strategies_loads_no_scipy_or_torch() -> None:
    # every Flower ClientApp message starts a Python process that imports adcs (and so does every
    # CLI call): scipy.special and scipy.cluster alone took twice as long to import as the rest
    # of adcs, so the few functions that need scipy import it where they run
    import importlib.util
    import subprocess

    flower = ", adcs.flower" if importlib.util.find_spec("flwr") else ""
    code = (
        f"import sys, adcs, adcs.schedulers{flower}; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'torch'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
