"""Leaderboards straight from a `BattleTable`: counts built once, no per-battle objects.

This is what `memearena rank` runs: a file of millions of battles is read into integer
columns, aggregated once into outcome counts (which the Bradley–Terry fit, its bootstrap and
the win rates use) and replayed once for online Elo.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memearena.stats.battles import BattleTable
from memearena.stats.bt import FALLBACK_PRIOR, BTResult, TieModel, bradley_terry, check_identifiable
from memearena.stats.cluster import ClusteredCounts
from memearena.stats.counts import FloatArray
from memearena.stats.elo import online_elo_codes
from memearena.stats.errors import DisconnectedComparisonError, StatsError, UnboundedRatingsError
from memearena.stats.leaderboard import LeaderboardRow, leaderboard_rows


@dataclass(frozen=True)
class TableRanking:
    """One leaderboard: its rows, the fit behind them and why a prior was used, if it was."""

    rows: list[LeaderboardRow]
    fit: BTResult
    fallback: str | None
    """Why the plain MLE was replaced by the weak prior (None when it was not)."""


def rank_table(
    table: BattleTable,
    *,
    bootstrap: int = 1000,
    seed: int = 0,
    anchor: str | None = None,
    prior: float = 0.0,
    elo_k: float = 4.0,
    ties: TieModel = "half",
    cluster: str | None = None,
) -> TableRanking:
    """Bradley–Terry with bootstrap CIs, online Elo (file order) and win rates for a table.

    With `prior=0`, battles without a finite MLE (a disconnected comparison graph, or models
    that never lost to the rest) are fitted with `FALLBACK_PRIOR` virtual ties per model
    instead of failing; the rows then say `mle=False` and `fallback` says why. With
    `cluster` (a field read into the table) the bootstrap resamples whole clusters of battles
    sharing its value, e.g. `item` for memes.
    """
    if len(table) == 0:
        raise StatsError("no battles to rank")
    counts = table.counts()
    fallback = None
    if prior == 0:
        try:
            check_identifiable(counts)
        except (DisconnectedComparisonError, UnboundedRatingsError) as exc:
            fallback = str(exc).split("; add battles")[0]
            prior = FALLBACK_PRIOR
    data = counts if cluster is None else clustered_counts(table, cluster)
    init = 1000.0
    elo: list[FloatArray] = []

    def replay() -> None:  # online Elo, while the bootstrap is drawn (it needs no GIL)
        elo.append(
            online_elo_codes(
                table.model_a, table.model_b, table.score_a, len(table.models), k=elo_k, init=init
            )
        )

    fit = bradley_terry(
        data,
        anchor=anchor,
        bootstrap=bootstrap,
        seed=seed,
        prior=prior,
        ties=ties,
        init=init,
        meanwhile=replay,
    )
    ratings = {name: float(elo[0][k]) for k, name in enumerate(table.models)}
    return TableRanking(leaderboard_rows(fit, counts, ratings), fit, fallback)


def clustered_counts(table: BattleTable, field: str) -> ClusteredCounts:
    """Outcome counts per cluster, the cluster being the battle's value of `field`.

    A battle without the field is an error naming it: treating it as a cluster of its own
    would shrink the interval.
    """
    column = table.fields[field]
    missing = [k for k, label in enumerate(column.labels) if label is None]
    if missing:
        lacking = np.flatnonzero(np.isin(column.codes, missing))
        if len(lacking):
            first = lacking[0]
            a, b = table.models[table.model_a[first]], table.models[table.model_b[first]]
            raise StatsError(
                f"{len(lacking)} battle(s) have no {field!r} field to cluster by "
                f"(the first: {a} vs {b})"
            )
    m = len(table.models)
    a = table.model_a.astype(np.int64)
    b = table.model_b.astype(np.int64)
    outcome = np.minimum(table.outcome, 2).astype(np.int64)  # both kinds of tie: 2
    flip = a > b
    outcome = np.where(flip & (outcome < 2), 1 - outcome, outcome)
    i, j = np.minimum(a, b), np.maximum(a, b)
    key = ((column.codes.astype(np.int64) * m + i) * m + j) * 3 + outcome
    cells, count = np.unique(key, return_counts=True)
    return ClusteredCounts(
        table.models,
        len(column.labels),
        cells // (3 * m * m),
        cells // (3 * m) % m,
        cells // 3 % m,
        cells % 3,
        count.astype(np.float64),
    )
