"""The outputs a configuration may ask for (``outputs = [...]``; docs/design.md §8).

The generic layer provides ``curves`` (every variant on one plot); a module that writes more
(the paper's :mod:`adcs.experiments.paper`: ``fig1``–``fig3``, ``table1``) registers their names
here when it is imported, so the configuration checks them without importing it.
"""

from __future__ import annotations

__all__ = ["OUTPUTS", "register_outputs"]

OUTPUTS: list[str] = ["curves"]
"""The names ``outputs`` accepts, in the order they were registered."""


def register_outputs(*names: str) -> None:
    """Let configurations ask for ``names`` (a name registered twice is kept once)."""
    OUTPUTS.extend(n for n in names if n not in OUTPUTS)
