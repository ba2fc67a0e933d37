"""Aggregated outcome counts: the sufficient statistic every rating here is fitted on."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from memearena.stats._scipy import connected_components
from memearena.stats.errors import StatsError


class Outcome(Protocol):
    """What counting reads of a battle (``memearena.stats.Battle`` is one)."""

    @property
    def model_a(self) -> str: ...
    @property
    def model_b(self) -> str: ...
    @property
    def winner(self) -> str: ...


FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class PairCounts:
    """Outcome counts between models: `wins[i, j]` decisive wins of i over j, `ties` symmetric."""

    models: tuple[str, ...]
    wins: FloatArray
    ties: FloatArray

    def __post_init__(self) -> None:
        m = len(self.models)
        if len(set(self.models)) != m:
            raise StatsError("duplicate model names in the count table")
        if self.wins.shape != (m, m) or self.ties.shape != (m, m):
            raise StatsError(f"count tables must be {m}x{m}")
        if (self.wins < 0).any() or (self.ties < 0).any():
            raise StatsError("counts must be non-negative")
        if not np.allclose(self.ties, self.ties.T):
            raise StatsError("the tie table must be symmetric")
        if np.diag(self.wins).any() or np.diag(self.ties).any():
            raise StatsError("a model cannot battle itself")

    @classmethod
    def from_battles(
        cls, battles: Iterable[Outcome], models: Sequence[str] | None = None
    ) -> PairCounts:
        """Aggregate battles; `models` fixes the order (default: sorted names seen)."""
        battles = list(battles)
        names = sorted({b.model_a for b in battles} | {b.model_b for b in battles})
        if models is not None:
            missing = [n for n in names if n not in set(models)]
            if missing:
                raise StatsError(f"battles involve models not in the model list: {missing}")
            names = list(models)
        index = {n: i for i, n in enumerate(names)}
        m = len(names)
        a = np.fromiter((index[b.model_a] for b in battles), np.int64, len(battles))
        b_ = np.fromiter((index[b.model_b] for b in battles), np.int64, len(battles))
        kind = np.fromiter(
            (0 if b.winner == "model_a" else 1 if b.winner == "model_b" else 2 for b in battles),
            np.int64,
            len(battles),
        )
        wins = np.zeros((m, m))
        ties = np.zeros((m, m))
        np.add.at(wins, (a[kind == 0], b_[kind == 0]), 1.0)
        np.add.at(wins, (b_[kind == 1], a[kind == 1]), 1.0)
        np.add.at(ties, (a[kind == 2], b_[kind == 2]), 1.0)
        return cls(tuple(names), wins, ties + ties.T)

    @classmethod
    def from_arrays(
        cls, models: Sequence[str], wins: FloatArray, ties: FloatArray | None = None
    ) -> PairCounts:
        """Build from a win table (and optional symmetric tie table)."""
        wins = np.asarray(wins, dtype=np.float64)
        ties = np.zeros_like(wins) if ties is None else np.asarray(ties, dtype=np.float64)
        return cls(tuple(models), wins, ties)

    @property
    def n_models(self) -> int:
        """Number of models."""
        return len(self.models)

    @property
    def total(self) -> float:
        """Number of battles."""
        return float(self.wins.sum() + np.triu(self.ties, 1).sum())

    @property
    def games(self) -> FloatArray:
        """`games[i, j]`: battles between i and j, whatever the outcome."""
        return self.wins + self.wins.T + self.ties

    @property
    def battles_per_model(self) -> FloatArray:
        """Number of battles each model took part in."""
        return self.games.sum(axis=1)

    @property
    def scores(self) -> FloatArray:
        """`scores[i, j]`: points i scored against j, a tie counting half."""
        return self.wins + 0.5 * self.ties

    def cells(self) -> tuple[IntArray, IntArray, IntArray, FloatArray]:
        """The multinomial cells: (i, j, outcome, count) with i < j, count > 0.

        Outcome 0 = i won, 1 = j won, 2 = tie. Resampling these counts multinomially is the
        count-level equivalent of resampling battle rows.
        """
        i, j = np.triu_indices(self.n_models, 1)
        stacked = np.stack([self.wins[i, j], self.wins[j, i], self.ties[i, j]], axis=1)
        rows, outcome = np.nonzero(stacked > 0)
        return i[rows], j[rows], outcome.astype(np.int64), stacked[rows, outcome]

    def components(self) -> list[list[str]]:
        """Connected components of the comparison graph (largest first)."""
        n, labels = connected_components(self.games > 0, directed=False)
        groups = [[self.models[k] for k in np.flatnonzero(labels == c)] for c in range(n)]
        return sorted(groups, key=lambda g: (-len(g), g))

    def subset(self, models: Sequence[str]) -> PairCounts:
        """Counts restricted to `models` (in that order)."""
        idx = [self.models.index(m) for m in models]
        return PairCounts(tuple(models), self.wins[np.ix_(idx, idx)], self.ties[np.ix_(idx, idx)])


def as_counts(
    data: PairCounts | Iterable[Outcome], models: Sequence[str] | None = None
) -> PairCounts:
    """Accept either counts or battles (optionally re-ordered / extended to `models`)."""
    if isinstance(data, PairCounts):
        if models is None or tuple(models) == data.models:
            return data
        unknown = [
            m
            for m in data.models
            if m not in set(models) and data.games[data.models.index(m)].any()
        ]
        if unknown:
            raise StatsError(f"counts involve models not in the model list: {unknown}")
        m = len(models)
        wins, ties = np.zeros((m, m)), np.zeros((m, m))
        pos = [data.models.index(n) if n in data.models else -1 for n in models]
        for a, pa in enumerate(pos):
            for b, pb in enumerate(pos):
                if pa >= 0 and pb >= 0:
                    wins[a, b], ties[a, b] = data.wins[pa, pb], data.ties[pa, pb]
        return PairCounts(tuple(models), wins, ties)
    return PairCounts.from_battles(data, models)
