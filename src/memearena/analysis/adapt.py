"""The Adapt method's analysis: its step records -> the ``leaderboard.json`` ``"adapt"`` section.

A pure function of the records the pipeline stored (no model, no store handle): average score
and failure rate per target and per (target, category), the conditional loop and the
unconditional control side by side, weakness profiles, scorer agreement. Every interval is a
bootstrap over memes, the unit that was sampled (all records of a meme, across repeated seeds,
move together); the spread across seeds is reported beside it.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Interval", "cluster_interval"]


@dataclass(frozen=True)
class Interval:
    """A point estimate with a 95% bootstrap interval (None when there is no data)."""

    value: float | None
    low: float | None
    high: float | None


def cluster_interval(
    values: Sequence[float] | np.ndarray,
    units: Sequence[Hashable],
    rounds: int = 1000,
    seed: int = 0,
) -> Interval:
    """Mean of ``values`` with a percentile interval from resampling whole ``units`` (memes)
    with replacement: records of one unit are correlated, so they are drawn together."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return Interval(None, None, None)
    point = float(v.mean())
    if rounds <= 0:
        return Interval(point, None, None)
    index: dict[Hashable, int] = {}
    codes = np.array([index.setdefault(u, len(index)) for u in units])
    k = len(index)
    sums = np.bincount(codes, weights=v, minlength=k)
    counts = np.bincount(codes, minlength=k).astype(float)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, k, size=(rounds, k))
    # Multiplicity of each unit per round: resampled totals over resampled record counts.
    mult = np.zeros((rounds, k))
    np.add.at(mult, (np.repeat(np.arange(rounds), k), draws.ravel()), 1.0)
    tot = mult @ sums
    n = mult @ counts
    means = tot[n > 0] / n[n > 0]
    lo, hi = np.quantile(means, [0.025, 0.975])
    return Interval(point, float(lo), float(hi))
