"""Leaderboards: the rows of `memearena rank --json`, overall and grouped by any battle field."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from memearena.stats.battles import Battle
from memearena.stats.bt import BTResult, TieModel, bradley_terry
from memearena.stats.cluster import (
    BattleCodes,
    ClusteredCounts,
    ClusteredCountsBuilder,
    ClusterIndex,
    clustered_counts,
)
from memearena.stats.counts import FloatArray, IntArray, PairCounts, as_counts
from memearena.stats.elo import online_elo
from memearena.stats.errors import StatsError
from memearena.stats.winrate import average_win_rate

MISSING_GROUP = "(none)"
"""Group key for battles that lack the group-by field."""


class LeaderboardRow(BaseModel):
    """One model's line in a leaderboard (the `rank --json` contract)."""

    model_config = ConfigDict(frozen=True)

    model: str
    """Model name."""
    rank: int
    """1 = best, by Bradley–Terry rating."""
    rank_ub: int = 1
    """Chatbot Arena's rank upper bound: 1 + models whose `ci_low` exceeds this `ci_high`."""
    elo: float
    """Online Elo rating (battles replayed in file order)."""
    bt: float
    """Bradley–Terry rating on the Elo scale (400 per factor-10 odds), anchored as noted."""
    ci_low: float
    """Lower bound of the 95% bootstrap percentile interval of `bt` (= bt without bootstrap)."""
    ci_high: float
    """Upper bound of the 95% bootstrap percentile interval of `bt` (= bt without bootstrap)."""
    win_rate: float
    """Mean pairwise win rate over the opponents met, ties counting half."""
    battles: int
    """Number of battles involving the model."""
    mle: bool = True
    """False when `bt` is not the plain MLE: a weak prior was used (asked for, or no MLE exists)."""


def rank_upper_bounds(ci_low: FloatArray, ci_high: FloatArray) -> IntArray:
    """Per model: 1 + the number of models whose lower bound exceeds its upper bound."""
    low, high = np.asarray(ci_low, dtype=np.float64), np.asarray(ci_high, dtype=np.float64)
    return np.asarray(1 + (low[None, :] > high[:, None]).sum(axis=1), dtype=np.int64)


def leaderboard_from_fit(
    fit: BTResult,
    battles: Sequence[Battle],
    *,
    elo_k: float = 4.0,
    elo_shuffles: int = 0,
    seed: int = 0,
) -> list[LeaderboardRow]:
    """Assemble rows from a Bradley–Terry fit and the battles it was fitted on."""
    elo = online_elo(battles, k=elo_k, init=fit.init, shuffles=elo_shuffles, seed=seed)
    return leaderboard_rows(fit, PairCounts.from_battles(battles, fit.models), elo)


def leaderboard_rows(
    fit: BTResult, counts: PairCounts, elo: Mapping[str, float]
) -> list[LeaderboardRow]:
    """Rows from a Bradley–Terry fit, the counts it was fitted on and online Elo ratings."""
    counts = as_counts(counts, fit.models)
    win_rate = average_win_rate(counts)
    played = counts.battles_per_model
    low = fit.ci_low if fit.ci_low is not None else fit.ratings
    high = fit.ci_high if fit.ci_high is not None else fit.ratings
    rank_ub = rank_upper_bounds(low, high)
    position = {name: k for k, name in enumerate(fit.models)}
    rows = []
    for rank, name in enumerate(fit.ranking(), start=1):
        k = position[name]
        rows.append(
            LeaderboardRow(
                model=name,
                rank=rank,
                rank_ub=int(rank_ub[k]),
                elo=float(elo[name]),
                bt=float(fit.ratings[k]),
                ci_low=float(low[k]),
                ci_high=float(high[k]),
                win_rate=win_rate[name],
                battles=round(float(played[k])),
                mle=fit.prior == 0,
            )
        )
    return rows


def leaderboard_fit(
    battles: Sequence[Battle],
    *,
    bootstrap: int = 1000,
    seed: int = 0,
    anchor: str | None = None,
    elo_k: float = 4.0,
    elo_shuffles: int = 0,
    prior: float = 0.0,
    ties: TieModel = "half",
    cluster: str | Sequence[str] | None = None,
) -> tuple[list[LeaderboardRow], BTResult]:
    """Like `leaderboard`, also returning the fit (for its anchor note and bootstrap samples)."""
    battles = list(battles)
    if not battles:
        raise StatsError("no battles to rank")
    fit = bradley_terry(
        PairCounts.from_battles(battles) if cluster is None else clustered_counts(battles, cluster),
        anchor=anchor,
        bootstrap=bootstrap,
        seed=seed,
        prior=prior,
        ties=ties,
    )
    rows = leaderboard_from_fit(fit, battles, elo_k=elo_k, elo_shuffles=elo_shuffles, seed=seed)
    return rows, fit


def leaderboard(
    battles: Sequence[Battle],
    *,
    bootstrap: int = 1000,
    seed: int = 0,
    anchor: str | None = None,
    elo_k: float = 4.0,
    elo_shuffles: int = 0,
    prior: float = 0.0,
    ties: TieModel = "half",
    cluster: str | Sequence[str] | None = None,
) -> list[LeaderboardRow]:
    """Rank models by Bradley–Terry rating, with bootstrap CIs, online Elo and win rates.

    `bt`, `ci_low`, `ci_high` come from `bradley_terry` (see it for `anchor`, `prior`, `ties`);
    the bootstrap resamples single battles, or with `cluster` whole clusters of battles that
    share the value of that battle field (or fields), e.g. `item` for memes. `elo` is online
    Elo with factor `elo_k`, in file order or averaged over `elo_shuffles` seeded orders.
    """
    rows, _ = leaderboard_fit(
        battles,
        bootstrap=bootstrap,
        seed=seed,
        anchor=anchor,
        elo_k=elo_k,
        elo_shuffles=elo_shuffles,
        prior=prior,
        ties=ties,
        cluster=cluster,
    )
    return rows


def group_battles(battles: Sequence[Battle], by: str) -> dict[str, list[Battle]]:
    """Split battles by the value of one field (declared or extra); missing → `(none)`."""
    groups: dict[str, list[Battle]] = {}
    for battle in battles:
        value = battle.field(by)
        key = MISSING_GROUP if value is None else str(value)
        groups.setdefault(key, []).append(battle)
    return dict(sorted(groups.items()))


def grouped_leaderboards(
    battles: Sequence[Battle],
    by: str = "criterion",
    *,
    bootstrap: int = 1000,
    seed: int = 0,
    anchor: str | None = None,
    elo_k: float = 4.0,
    elo_shuffles: int = 0,
    prior: float = 0.0,
    ties: TieModel = "half",
    cluster: str | Sequence[str] | None = None,
) -> dict[str, list[LeaderboardRow]]:
    """One leaderboard per value of the battle field `by` (judge, criterion, item, any extra).

    Each group is fitted on its own battles; an error in one group names the group.
    """
    out: dict[str, list[LeaderboardRow]] = {}
    for key, group in group_battles(battles, by).items():
        try:
            out[key] = leaderboard(
                group,
                bootstrap=bootstrap,
                seed=seed,
                anchor=anchor,
                elo_k=elo_k,
                elo_shuffles=elo_shuffles,
                prior=prior,
                ties=ties,
                cluster=cluster,
            )
        except StatsError as exc:
            raise _in_group(exc, by, key) from None
    return out


def _in_group(exc: StatsError, by: str, key: str) -> StatsError:
    """The same error, its message prefixed with the group it happened in."""
    clone = StatsError.__new__(type(exc))
    clone.__dict__.update(exc.__dict__)
    clone.args = (f"{by}={key!r}: {exc}",)
    return clone


class LeaderboardAccumulator:
    """A leaderboard built from a stream of battles: per-cluster counts for the Bradley–Terry
    fit and its cluster bootstrap, and online Elo updated battle by battle (file order).

    Memory grows with the (cluster, pair, outcome) cells met, not with the battles.
    """

    def __init__(
        self,
        models: Sequence[str],
        index: ClusterIndex | None = None,
        *,
        elo_k: float = 4.0,
        init: float = 1000.0,
        scale: float = 400.0,
        base: float = 10.0,
    ) -> None:
        self.models = tuple(models)
        self.builder = ClusteredCountsBuilder(self.models, index)
        self.elo = dict.fromkeys(self.models, init)
        self.elo_k, self.init, self.scale, self.base = elo_k, init, scale, base
        self.n = 0

    def add(self, model_a: str, model_b: str, winner: str, cluster: Hashable) -> None:
        """Count one battle in its cluster and replay it through online Elo."""
        self.builder.add(model_a, model_b, winner, cluster)
        score_a = 1.0 if winner == "model_a" else 0.0 if winner == "model_b" else 0.5
        ra, rb = self.elo[model_a], self.elo[model_b]
        delta = self.elo_k * (score_a - 1.0 / (1.0 + self.base ** ((rb - ra) / self.scale)))
        self.elo[model_a], self.elo[model_b] = ra + delta, rb - delta
        self.n += 1

    @property
    def index(self) -> ClusterIndex:
        """The cluster index of the counts."""
        return self.builder.index

    def add_many(
        self,
        model_a: Sequence[str],
        model_b: Sequence[str],
        winner: Sequence[str],
        clusters: Sequence[Hashable],
    ) -> None:
        """Battles given as columns, as one `add` per row in order would (an invalid row
        raises the same error, after the rows before it are counted)."""
        codes = BattleCodes.encode(self.builder.positions, model_a, model_b, winner)
        index = self.index
        cluster = np.fromiter(
            (index(clusters[r]) for r in range(codes.valid)), np.int64, codes.valid
        )
        self.add_codes(codes.a, codes.b, codes.kind, cluster)
        if codes.error is not None:
            raise codes.error

    def add_codes(self, a: IntArray, b: IntArray, kind: IntArray, cluster: IntArray) -> None:
        """Valid encoded battles (see `BattleCodes`; clusters already indices of `self.index`):
        counted at once, replayed through online Elo one by one in order (Elo is sequential)."""
        self.builder.add_codes(a, b, kind, cluster)
        ratings = [self.elo[m] for m in self.models]
        k, base, scale = self.elo_k, self.base, self.scale
        score = (1.0, 0.0, 0.5)  # points of `a` by outcome code
        for i, j, o in zip(
            np.asarray(a).tolist(), np.asarray(b).tolist(), np.asarray(kind).tolist(), strict=True
        ):
            ra, rb = ratings[i], ratings[j]
            delta = k * (score[o] - 1.0 / (1.0 + base ** ((rb - ra) / scale)))
            ratings[i], ratings[j] = ra + delta, rb - delta
        self.elo = dict(zip(self.models, ratings, strict=True))
        self.n += len(a)

    def counts(self) -> ClusteredCounts:
        """The per-cluster counts so far, restricted to the models that played."""
        return self.builder.build()

    def fit(
        self,
        *,
        bootstrap: int = 1000,
        seed: int = 0,
        anchor: str | None = None,
        prior: float = 0.0,
        ties: TieModel = "half",
    ) -> tuple[list[LeaderboardRow], BTResult]:
        """Rows and fit over the models that played (see `leaderboard`); the bootstrap
        resamples clusters."""
        if not self.n:
            raise StatsError("no battles to rank")
        full = self.counts()
        played = full.total.battles_per_model > 0
        names = [m for m, p in zip(self.models, played, strict=True) if p]
        clustered = full.subset(names)
        fit = bradley_terry(
            clustered, anchor=anchor, bootstrap=bootstrap, seed=seed, prior=prior, ties=ties
        )
        return leaderboard_rows(fit, clustered.total, self.elo), fit
