"""Intervals for a proportion that stay honest at 0%, 100% and small n."""

from __future__ import annotations

import math

__all__ = ["MIN_CELL", "widened_interval", "wilson_interval"]

MIN_CELL = 5
"""Fewer independent units than this in a cell: the cell is marked too few to read."""


def wilson_interval(successes: float, n: float, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` out of ``n`` (95% by default). Unlike the
    normal or percentile-bootstrap interval it never collapses to zero width at 0% or 100%:
    0 of 1 is [0, 0.79], 0 of 20 is [0, 0.16]. ``successes`` may be fractional (a proportion
    times an effective sample size). ``n`` must be positive."""
    if n <= 0:
        raise ValueError("wilson_interval: n must be positive")
    if not 0 <= successes <= n:
        raise ValueError("wilson_interval: successes must lie between 0 and n")
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # Rounding must not push an edge past the proportion itself (44 of 44 has upper bound 1).
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


def widened_interval(
    rate: float | None, units: int, low: float | None, high: float | None
) -> tuple[float | None, float | None]:
    """The interval every reported proportion gets: the Wilson interval of ``rate`` over its
    ``units`` independent units, widened to ``(low, high)`` (a bootstrap's) where that is
    wider, so that 0% or 100% never reads as certain. Without a finite rate or any unit, the
    given bounds are returned as they are."""
    if rate is None or not math.isfinite(rate) or units <= 0:
        return low, high
    lo, hi = wilson_interval(min(max(rate, 0.0), 1.0) * units, units)
    return (lo if low is None else min(lo, low), hi if high is None else max(hi, high))
