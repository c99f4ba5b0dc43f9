"""The README and the user guide (docs/guide.md): the library example runs as written, every
option and every results file is documented, the README says where the command lives."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GUIDE = ROOT / "docs" / "guide.md"
CLI_PAGE = ROOT / "docs" / "reference" / "cli.md"


def test_library_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    example = next(b for b in blocks if "scheduler.select" in b)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(example, str(GUIDE), "exec"), {})
    lines = out.getvalue().splitlines()
    assert [line.split()[1] for line in lines] == ["updates", "none", "none"]
    picks = [re.findall(r"\d+", line.split(" ", 2)[2]) for line in lines]
    assert all(len(p) == 18 and len(set(p)) == 18 for p in picks)
    assert picks[0] == picks[1] == picks[2]  # the kernel holds between refreshes


def test_the_command_line_reference_is_the_apps() -> None:
    from scripts.cli_reference import page

    assert CLI_PAGE.read_text(encoding="utf-8") == page(), "run: python scripts/cli_reference.py"


def test_every_option_of_every_command_is_documented() -> None:
    import click
    import typer

    from adcs.cli import app

    text = CLI_PAGE.read_text(encoding="utf-8")
    root = typer.main.get_command(app)
    assert isinstance(root, click.Group)
    for command in [root, *root.commands.values()]:
        for param in command.params:
            if isinstance(param, click.Option):
                for opt in param.opts:
                    assert f"`{opt}`" in text, opt


def test_the_readme_says_where_the_command_lives() -> None:
    text = README.read_text(encoding="utf-8")
    assert ".venv/bin/adcs" in text and "source .venv/bin/activate" in text


def test_every_file_of_a_results_folder_is_documented(tmp_path) -> None:
    import numpy as np

    from adcs.data import FashionMNIST
    from adcs.experiments.config import config_from_dict
    from adcs.experiments.run.runner import run_experiment

    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(10, dtype=np.uint8), 20)
    images = rng.integers(0, 255, size=(labels.size, 784), dtype=np.uint8)
    data = FashionMNIST(images, labels, images, labels, source="synthetic", is_subset=False)
    doc = {
        "name": "docs", "m": 2, "seeds": [0], "outputs": ["curves", "table1"],
        "data": {"partition": "paper_groups", "n_groups": 2, "clients_per_group": 2},
        "sim": {"rounds": 3, "eval_every": 1, "availability": {"kind": "bernoulli", "p": 0.9}},
        "methods": [{"name": "uniform"}],
    }  # fmt: skip
    run_experiment(config_from_dict(doc), tmp_path / "out", dataset=data)
    text = GUIDE.read_text(encoding="utf-8")
    for path in (tmp_path / "out").iterdir():
        assert f"`{path.name}`" in text, path.name
    selections = np.load(tmp_path / "out" / "selections.npz")
    for key in selections.files:  # selected/<run_id>, returned/…, n_available/seed0, available/…
        assert f"`{key.split('/')[0]}/" in text, key
    with (tmp_path / "out" / "runs.csv").open() as fh:
        header = fh.readline().strip().split(",")
    for column in header:
        if not column.startswith("share_g"):
            assert f"`{column}`" in text, column


def _install_lines() -> list[tuple[str, str]]:
    """Every ``pip install`` command of the README and the docs pages: the lines of their code
    blocks and their inline code, as (file, command)."""
    found = []
    for path in [README, *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        blocks = re.findall(r"```[a-z]*\n(.*?)```", text, re.S)
        lines = [line for block in blocks for line in block.splitlines()]
        inline = re.findall(r"`(pip install [^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
        for line in lines + inline:
            if line.lstrip().startswith("pip install"):
                found.append((path.name, line.strip()))
    return found


def test_every_install_line_can_be_pasted() -> None:
    import shlex
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    extras = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
            "optional-dependencies"
        ]
    )
    lines = _install_lines()
    assert len(lines) >= 12 and any("README" in name for name, _ in lines)
    for name, line in lines:
        words = shlex.split(line, comments=True)  # what the shell passes pip
        targets = [w for w in words[2:] if w != "-e"]
        assert words[:2] == ["pip", "install"] and targets, (name, line)
        for target in targets:
            match = re.fullmatch(r"(\.|adcs)(?:\[([\w,-]+)\])?", target)
            assert match, f"{name}: {line!r}: {target!r} is no package pip can install"
            unknown = set((match.group(2) or "").split(",")) - extras - {""}
            assert not unknown, f"{name}: {line!r} names no extra {sorted(unknown)}"
