"""Rewrite the command-line reference in ``README.md`` from the ``adcs`` app itself.

The reference sits between the ``<!-- cli-reference:start -->`` and ``<!-- cli-reference:end -->``
markers; :func:`adcs.cli.reference_markdown` generates it, and ``tests/test_readme.py`` fails when
the README holds another text.

Usage::

    python scripts/cli_reference.py [--check]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from adcs.cli import reference_markdown

README = Path(__file__).resolve().parents[1] / "README.md"
START, END = "<!-- cli-reference:start -->\n", "<!-- cli-reference:end -->"


def rewrite(text: str) -> str:
    """``text`` with the reference between the markers replaced by the generated one."""
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return head + START + reference_markdown() + END + tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the README is out of date")
    args = parser.parse_args(argv)
    text = README.read_text(encoding="utf-8")
    new = rewrite(text)
    if args.check:
        if new != text:
            print("README.md: the command-line reference is out of date", file=sys.stderr)
            return 1
        return 0
    README.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
