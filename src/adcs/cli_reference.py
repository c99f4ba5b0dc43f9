"""The command-line reference page, generated from the Typer app of `adcs.cli`.

``python scripts/cli_reference.py`` writes it to ``docs/reference/cli.md``;
``tests/test_readme.py`` fails when they disagree.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import typer

__all__ = ["reference_markdown"]


def reference_markdown(app: typer.Typer) -> str:
    """The command-line reference (every command, argument and option), as markdown.

    ``docs/reference/cli.md`` holds this text; a test checks they agree, and
    ``python scripts/cli_reference.py`` rewrites it.
    """
    import click

    root = typer.main.get_command(app)
    assert isinstance(root, click.Group)
    lines = ["Options of `adcs` itself (before the command):", ""]
    lines += _option_lines(root.params)
    for name, command in root.commands.items():
        usage = " ".join(
            p.human_readable_name if isinstance(p, click.Argument) else "" for p in command.params
        ).split()
        lines += [
            "",
            f"**`adcs {name}{''.join(' ' + u for u in usage)}`** — {_first_line(command.help)}",
            "",
        ]
        helps = _argument_help(app, name)
        for p in command.params:
            if isinstance(p, click.Argument):
                choices = getattr(p.type, "choices", None)
                what = f" (one of {', '.join(f'`{c}`' for c in choices)})" if choices else ""
                default = p.default not in (None, ())
                text = helps.get(p.name or "", "")
                text = text.rstrip(".") + (f" (default `{_plain(p.default)}`)" if default else "")
                lines.append(f"- `{p.human_readable_name}`{what}: {text}.")
        lines += _option_lines([p for p in command.params if isinstance(p, click.Option)])
    return "\n".join(lines).rstrip() + "\n"


def _argument_help(app: typer.Typer, command: str) -> dict[str, str]:
    """The help texts of a command's arguments, from its function's annotations."""
    import typing

    for info in app.registered_commands:
        callback = info.callback
        if callback is None or (info.name or callback.__name__) != command:
            continue
        hints = typing.get_type_hints(callback, include_extras=True)
        out = {}
        for name, hint in hints.items():
            for meta in getattr(hint, "__metadata__", ()):
                if isinstance(meta, typer.models.ArgumentInfo) and meta.help:
                    out[name] = meta.help
        return out
    return {}


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n\n")[0].replace("\n", " ").replace("``", "`")


def _plain(value: Any) -> str:
    return value.value if isinstance(value, enum.Enum) else str(value)


def _help(param: Any) -> str:
    return " ".join(str(getattr(param, "help", "") or "").split())


def _option_lines(params: Sequence[Any]) -> list[str]:
    import click

    out = []
    for p in params:
        if not isinstance(p, click.Option) or p.hidden:
            continue
        names = ", ".join(f"`{o}`" for o in p.opts)
        if not p.is_flag:
            names += f" `{p.metavar or p.type.name.upper()}`"
        default = "" if p.is_flag or p.default is None else f" Default `{_plain(p.default)}`."
        out.append(f"- {names}: {_help(p)}{default}")
    return out
