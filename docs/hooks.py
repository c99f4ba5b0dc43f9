"""mkdocs hook: the committed results folders become pages of the site at build time.

Each folder of ``results/`` that the navigation names (``results/paper/report.md`` names
``results/paper``) is added to the build whole — every ``.md`` and ``.png`` under it, as
``results/<folder>/…`` — so the site shows the reports, findings and figures without copies under
``docs/``, and the reports' relative links (``fig1.png``, ``paper/report.md``) resolve as they do on
GitHub. Folders the navigation does not name (your own runs under ``results/``) are left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = (".md", ".png")


def _nav_paths(nav: Any) -> Iterator[str]:
    """Every page path in a ``nav`` configuration (nested lists and one-key mappings)."""
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from _nav_paths(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from _nav_paths(value)


def results_folders(nav: Any) -> list[Path]:
    """The folders ``results/<name>`` that the navigation's pages lie in."""
    names = {
        p.split("/")[1] for p in _nav_paths(nav) if p.startswith("results/") and p.count("/") > 1
    }
    return [ROOT / "results" / name for name in sorted(names)]


def on_files(files: Files, config: Any) -> Files:
    """Add the ``.md`` and ``.png`` files of the results folders the navigation names."""
    for folder in results_folders(config["nav"]):
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES:
                uri = path.relative_to(ROOT).as_posix()
                files.append(File(uri, str(ROOT), config["site_dir"], config["use_directory_urls"]))
    return files
