"""The one set of argument checks shared by every module (not part of the public API).

Each raises ``ValueError`` naming the argument and the allowed range, and returns the value in its
plain Python type, so callers can write ``m = check_int("m", m)``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

__all__ = ["check_bool", "check_int", "check_number", "check_unit_interval", "is_int"]


def is_int(value: object) -> bool:
    """An integer (Python or NumPy), and not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def check_int(name: str, value: Any, minimum: int = 1, maximum: int | None = None) -> int:
    """``value`` as an ``int`` in [minimum, maximum]; ``ValueError`` naming ``name`` otherwise."""
    if not is_int(value) or value < minimum or (maximum is not None and value > maximum):
        upper = "" if maximum is None else f" and <= {maximum}"
        raise ValueError(f"{name} must be an integer >= {minimum}{upper}, got {value!r}")
    return int(value)


def check_number(
    name: str,
    value: Any,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """``value`` as a finite ``float`` in the interval given (open or closed at each end)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
    v = float(value) if ok else math.nan
    ok = ok and math.isfinite(v)
    ok = ok and (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
    if not ok:
        left = "(" if low_open else "["
        right = ")" if high_open else "]"
        if math.isinf(low) and math.isinf(high):
            span = "a finite number"
        elif math.isinf(high):
            span = f"a finite number {'>' if low_open else '>='} {low:g}"
        else:
            span = f"a number in {left}{low:g}, {high:g}{right}"
        raise ValueError(f"{name} must be {span}, got {value!r}")
    return v


def check_unit_interval(name: str, value: Any) -> float:
    """``value`` as a ``float`` in [0, 1]."""
    return check_number(name, value, 0.0, 1.0)


def check_bool(name: str, value: Any) -> bool:
    """``value`` if it is ``True`` or ``False``."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)
