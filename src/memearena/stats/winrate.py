"""Pairwise win-rate matrix and average win rate (ties count half)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from memearena.stats.battles import Battle
from memearena.stats.counts import FloatArray, PairCounts, as_counts


def win_rate_matrix(
    data: PairCounts | Iterable[Battle], models: Sequence[str] | None = None
) -> tuple[tuple[str, ...], FloatArray]:
    """`(models, W)` with `W[i, j]` the share of i-vs-j battles i won (ties half); NaN if none."""
    counts = as_counts(data, models)
    games = counts.games
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(games > 0, counts.scores / games, np.nan)
    return counts.models, rates


def average_win_rate(
    data: PairCounts | Iterable[Battle], models: Sequence[str] | None = None
) -> dict[str, float]:
    """Each model's mean pairwise win rate over the opponents it met (Chatbot Arena's
    "average win rate against all other models"); NaN for a model without battles."""
    names, rates = win_rate_matrix(data, models)
    met = ~np.isnan(rates)
    sums = np.where(met, rates, 0.0).sum(axis=1)
    n = met.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        avg = np.where(n > 0, sums / np.maximum(n, 1), np.nan)
    return {m: float(v) for m, v in zip(names, avg, strict=True)}
