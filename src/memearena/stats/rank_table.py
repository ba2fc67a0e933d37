"""Leaderboards straight from a `BattleTable`: counts built once, no per-battle objects.

This is what `memearena rank` runs: a file of millions of battles is read into integer
columns, aggregated once into outcome counts (which the Bradley–Terry fit, its bootstrap and
the win rates use) and replayed once for online Elo.
"""

from __future__ import annotations

from dataclasses import dataclass

from memearena.stats.battles import BattleTable
from memearena.stats.bt import FALLBACK_PRIOR, BTResult, TieModel, bradley_terry, check_identifiable
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
) -> TableRanking:
    """Bradley–Terry with bootstrap CIs, online Elo (file order) and win rates for a table.

    With `prior=0`, battles without a finite MLE (a disconnected comparison graph, or models
    that never lost to the rest) are fitted with `FALLBACK_PRIOR` virtual ties per model
    instead of failing; the rows then say `mle=False` and `fallback` says why.
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
    fit = bradley_terry(
        counts, anchor=anchor, bootstrap=bootstrap, seed=seed, prior=prior, ties=ties
    )
    elo = online_elo_codes(
        table.model_a, table.model_b, table.score_a, len(table.models), k=elo_k, init=fit.init
    )
    ratings = {name: float(elo[k]) for k, name in enumerate(table.models)}
    return TableRanking(leaderboard_rows(fit, counts, ratings), fit, fallback)
