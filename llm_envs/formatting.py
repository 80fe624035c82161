"""Numbers as records hold them and as people read them (the report's and the families' words)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["finite", "fmt"]


def finite(value: Any) -> float | None:
    """A finite float, or None (bools, strings, NaN and infinities are not values)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def fmt(value: float) -> str:
    """A number as people read it.

    Example:
        >>> fmt(5.0), fmt(-1 / 3), fmt(1e-05), fmt(0.0)
        ('5', '-0.3333', '1e-05', '0')
    """
    if value == 0:
        return "0"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"
