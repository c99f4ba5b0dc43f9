"""The cases of ``scripts/bad_input_sweep.py`` added with the second sweep's families: reading
results back, export, interrupted sweeps, a user's plug-ins, settings that do nothing, scale.
"""

from __future__ import annotations

from scripts.bad_input_cases import Case


def cases() -> list[Case]:
    """The table of these families' cases."""
    c: list[Case] = []
    return c
