"""mkdocs hook: the committed results folders become pages of the site at build time.

Every ``report.md``, ``FINDINGS.md`` and figure (``.png``) under ``results/`` is added to the build
as ``results/<folder>/…``, so the site shows them without copies under ``docs/`` and the reports'
relative links (``fig1.png``, ``paper/report.md``) resolve as they do on GitHub.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
SUFFIXES = (".md", ".png")


def on_files(files: Files, config: Any) -> Files:
    """Add ``results/**/*.md`` and ``results/**/*.png`` to ``files``."""
    for path in sorted(RESULTS.rglob("*")):
        if path.is_file() and path.suffix in SUFFIXES:
            uri = path.relative_to(ROOT).as_posix()
            files.append(File(uri, str(ROOT), config["site_dir"], config["use_directory_urls"]))
    return files
