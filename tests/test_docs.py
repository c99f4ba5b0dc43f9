"""The documentation site: generated reference pages are current, every key is documented, every
page of the navigation exists, and the site builds strictly (mkdocs.yml) with the API, the results
and their figures.

The full build is ``make docs`` (``make test`` runs it before pytest); here it is a slow test, since
it takes 6 s of CPU and, on a busy machine, over 20 s.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def test_the_cli_page_is_the_apps() -> None:
    from scripts.cli_reference import PAGE, page

    assert PAGE.read_text(encoding="utf-8") == page(), "run: python scripts/cli_reference.py"


def test_the_configuration_page_is_the_codes() -> None:
    from scripts.config_reference import PAGE, reference_markdown

    assert PAGE.read_text(encoding="utf-8") == reference_markdown(), (
        "run: python scripts/config_reference.py"
    )


def test_every_configuration_key_is_on_the_page() -> None:
    from adcs.experiments import config as cfg
    from adcs.experiments.config import data as data_config
    from adcs.experiments.config.adversary import ATTACK_TABLE, DEFENCE_TABLE
    from adcs.schedulers import SCHEDULERS
    from scripts.config_reference import reference_markdown

    text = reference_markdown()
    keys = set(cfg._TOP_KEYS) | set(cfg.SIM_KEYS) | set(data_config._FLAT_KEYS)
    keys |= set(data_config._TABLE_KEYS) - {"seed"}  # [data.partition] seed: named in the prose
    tables = (
        cfg.AVAILABILITY_TABLE,
        cfg.SYSTEM_TABLE,
        cfg.MODEL_TABLE,
        ATTACK_TABLE,
        DEFENCE_TABLE,
    )
    for table in tables:
        keys |= {"kind"}.union(*(table.keys(cls) for cls in table.registry.values()))
    for name in SCHEDULERS:
        assert f"### `{name}`" in text, name
        keys |= set(cfg._hyperparameters(SCHEDULERS[name]))
    missing = sorted(k for k in keys if f"`{k}`" not in text)
    assert not missing, missing


class _Shared:
    """Attributes
    ----------
    period : int, duty : float in (0, 1], phase : {"group", "client", "none"}
        For "cyclic": available while ((t + phase) mod period) < duty · period.
    local_lr, server_lr : float
        The learning rates.
    """


def test_the_docstring_parser_splits_shared_entries() -> None:
    from scripts.config_reference import docstring_entries

    entries = docstring_entries(_Shared)
    assert entries["duty"][0] == "float in (0, 1]"
    assert entries["phase"][0] == '{"group", "client", "none"}'
    assert entries["period"][1] == entries["duty"][1] and "cyclic" in entries["period"][1]
    assert entries["local_lr"] == entries["server_lr"] == ("float", "The learning rates.")


def _nav() -> object:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]


def test_every_page_of_the_navigation_exists() -> None:
    pytest.importorskip("mkdocs")
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    pages = list(hooks._nav_paths(_nav()))
    assert len(pages) > 20
    for page in pages:
        where = ROOT if page.startswith("results/") else DOCS
        assert (where / page).is_file(), page
    # every results folder the repository commits (.gitignore's exceptions) has its pages
    gitignore = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    committed = {line.split("/")[2] for line in gitignore if line.startswith("!/results/")}
    assert {p.name for p in hooks.results_folders(_nav())} == committed


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="needs the docs extra")
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    api = (site / "reference" / "api" / "dpp" / "index.html").read_text(encoding="utf-8")
    assert "adcs.dpp.greedy_map" in api
    tutorial = (site / "tutorial" / "tutorial" / "index.html").read_text(encoding="utf-8")
    assert "LossThenSpread" in tutorial and "data:image/png;base64" in tutorial  # with outputs
    assert not re.search(r":(class|func|meth|attr):`", api)  # the roles are rendered
    board = (site / "results" / "leaderboard" / "report" / "index.html").read_text("utf-8")
    assert 'src="../paper.png"' in board
    assert (site / "results" / "leaderboard" / "paper.png").read_bytes() == (
        ROOT / "results" / "leaderboard" / "paper.png"
    ).read_bytes()
    assert (site / "results" / "paper" / "fig1.png").is_file()
    config = (site / "reference" / "configuration" / "index.html").read_text("utf-8")
    assert "refresh_every" in config
    assert not (site / "hooks.py").exists()


def _python_blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(encoding="utf-8"), re.S)


def test_the_round_example_runs() -> None:
    from adcs import ProbeKind

    scope: dict[str, object] = {}
    exec(compile(_python_blocks("concepts/round.md")[0], "round.md", "exec"), scope)
    assert scope["probe"].kind is ProbeKind.UPDATES  # type: ignore[attr-defined]


def test_the_own_scheduler_example_selects() -> None:
    import numpy as np

    from adcs import ClientStats
    from adcs.round.contract import check_selection

    scope: dict[str, object] = {}
    exec(compile(_python_blocks("how-to/own-scheduler.md")[0], "own-scheduler.md", "exec"), scope)
    scheduler = scope["LowestIndex"](m=3, offset=1)  # type: ignore[operator]
    available = np.array([False, True, True, True, False, True])
    state = scheduler.init(6)
    selection, _ = scheduler.select(
        state, 0, ClientStats.blind(available), np.random.default_rng(0)
    )
    assert selection.clients.tolist() == [2, 3, 5]
    check_selection(selection.clients, available, 3)


def test_the_own_schedulers_leaderboard_variants_example_names_its_entries() -> None:
    blocks = _python_blocks("how-to/own-scheduler.md")
    variants = next(b for b in blocks if "leaderboard_variants" in b)
    scope: dict[str, object] = {}
    exec(
        compile("from dataclasses import dataclass\n" + blocks[0], "own-scheduler.md", "exec"),
        scope,
    )
    exec(compile(variants, "own-scheduler.md", "exec"), scope)
    declared = scope["Shifted"].leaderboard_variants  # type: ignore[attr-defined]
    assert declared.label("Shifted", {"offset": 2, "reverse": True}) == "Shifted k=2, reversed"
    assert declared.is_reference({"offset": 2, "reverse": False})


def test_the_guides_partition_table_names_each_partition_and_which_take_sizes() -> None:
    from adcs.data.partition_table import PARTITIONS

    text = (DOCS / "guide.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([a-z_]+)` \|", text, re.MULTILINE))
    assert set(PARTITIONS) <= rows  # dirichlet_per_class had no row
    sizes = {"train_per_client", "test_per_client"}
    sized = sorted(name for name in PARTITIONS if sizes <= PARTITIONS[name].keys)
    claim = re.search(r"^(.*) also take `train_per_client`", text, re.MULTILINE)
    assert claim is not None  # was: "Every partition also takes ...", refused by four of them
    assert sorted(re.findall(r"`(\w+)`", claim.group(1))) == sized


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_the_install_lines_name_every_extra(page: str) -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    text = (ROOT / page).read_text(encoding="utf-8")
    block = text[text.index("## Installing") :].split("```")[1]
    named = set(re.findall(r'"\.\[([a-z]+)\]"', block))
    assert named == set(extras)  # sklearn (digits) and others were missing


SPHINX_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const|ref):`[^`]+`")


def _docstrings(tree: ast.Module) -> list[tuple[int, str]]:
    """Every string statement of a module (its docstrings and its attributes' docstrings, the
    strings mkdocstrings renders), with its line."""
    return [
        (node.lineno, node.value.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ]


def test_no_docstring_holds_a_sphinx_role() -> None:
    """The API reference renders Markdown (mkdocstrings, numpy style): a cross-reference is
    ``[`Name`][adcs.module.Name]``, a name otherwise plain code; a Sphinx role shows as text."""
    found = []
    files = sorted((ROOT / "src" / "adcs").rglob("*.py"))
    assert len(files) > 100
    for path in files:
        for line, text in _docstrings(ast.parse(path.read_text(encoding="utf-8"))):
            found += [f"{path.relative_to(ROOT)}:{line}: {m}" for m in SPHINX_ROLE.findall(text)]
    assert not found, "\n".join(found[:20])


def test_the_role_check_finds_a_role() -> None:
    tree = ast.parse('"""See :class:`Table`."""\nx = 1\n"""Or :meth:`~a.B.c`."""\n')
    assert [SPHINX_ROLE.findall(t) for _, t in _docstrings(tree)] == [
        [":class:`Table`"],
        [":meth:`~a.B.c`"],
    ]
