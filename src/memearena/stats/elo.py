"""Online Elo, as in the Chatbot Arena notebook: one sequential pass over the battles."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from memearena.stats.battles import Battle
from memearena.stats.errors import StatsError


def _one_pass(
    order: Sequence[tuple[str, str, float]],
    ratings: dict[str, float],
    k: float,
    scale: float,
    base: float,
) -> None:
    for model_a, model_b, score_a in order:
        ra, rb = ratings[model_a], ratings[model_b]
        expected_a = 1.0 / (1.0 + base ** ((rb - ra) / scale))
        delta = k * (score_a - expected_a)
        ratings[model_a] = ra + delta
        ratings[model_b] = rb - delta


def online_elo(
    battles: Iterable[Battle],
    *,
    k: float = 4.0,
    scale: float = 400.0,
    base: float = 10.0,
    init: float = 1000.0,
    shuffles: int = 0,
    seed: int = 0,
) -> dict[str, float]:
    """Online Elo ratings (ties count half to each side).

    With `shuffles=0` the battles are replayed in the given (chronological) order; with
    `shuffles=n` the ratings are averaged over n seeded random orders, which removes the
    dependence on order that online Elo otherwise has.
    """
    rows = [(b.model_a, b.model_b, b.score_a) for b in battles]
    if not rows:
        raise StatsError("no battles to rate")
    names = sorted({r[0] for r in rows} | {r[1] for r in rows})
    if shuffles <= 0:
        ratings = dict.fromkeys(names, init)
        _one_pass(rows, ratings, k, scale, base)
        return ratings
    rng = np.random.default_rng(seed)
    total = dict.fromkeys(names, 0.0)
    for _ in range(shuffles):
        ratings = dict.fromkeys(names, init)
        _one_pass([rows[p] for p in rng.permutation(len(rows))], ratings, k, scale, base)
        for name, value in ratings.items():
            total[name] += value
    return {name: value / shuffles for name, value in total.items()}
