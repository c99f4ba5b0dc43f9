"""The one set of argument checks shared by every module (not part of the public API).

Each raises ``ValueError`` naming the argument and the allowed range, and returns the value in its
plain Python type, so callers can write ``m = check_int("m", m)``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "MAX_CLIENTS",
    "check_bool",
    "check_choice",
    "check_client_count",
    "check_int",
    "check_non_negative",
    "check_number",
    "check_positive",
    "check_string",
    "check_unit_interval",
    "is_int",
]

MAX_CLIENTS = 2**31 - 1
"""Client indices are int32 throughout the simulator and the results files."""


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
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return bool(value)


def check_client_count(name: str, value: Any) -> int:
    """``value`` as a number of clients: an integer in [1, `MAX_CLIENTS`]."""
    if check_int(name, value) > MAX_CLIENTS:
        raise ValueError(
            f"{name} must be at most {MAX_CLIENTS:,} (clients are int32), got {value!r}"
        )
    return int(value)


def check_string(name: str, value: Any) -> str:
    """``value`` if it is a non-empty string."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return value


def check_choice(name: str, value: Any, allowed: Sequence[str]) -> str:
    """``value`` if it is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")
    return str(value)


def check_non_negative(name: str, value: Any) -> float:
    """``value`` as a finite ``float`` >= 0."""
    return check_number(name, value, 0.0)


def check_positive(name: str, value: Any) -> float:
    """``value`` as a finite ``float`` > 0."""
    return check_number(name, value, 0.0, low_open=True)
