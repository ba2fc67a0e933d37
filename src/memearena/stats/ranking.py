"""Comparing rankings: NDCG with linear gains, Kendall's τ-b and Spearman's ρ."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from memearena.stats.errors import StatsError


def _check_unique(names: Sequence[str], what: str) -> None:
    if len(set(names)) != len(names):
        raise StatsError(f"{what} lists a model more than once")


def ndcg(ranking: Sequence[str], reference: Sequence[str]) -> float:
    """NDCG of `ranking` against `reference` (both best-first lists of model names).

    Relevance of a model = K − its 0-based position in `reference` (K = len(reference)), 0 if
    it is not in `reference`; the model at 0-based position i of `ranking` is discounted by
    log2(i + 2); the result is divided by the DCG of `reference` itself (the ideal). A
    reference model missing from `ranking` therefore earns nothing (the ranking is penalised),
    and an extra model in `ranking` takes a place without earning anything.
    """
    _check_unique(ranking, "ranking")
    _check_unique(reference, "reference")
    if not reference:
        raise StatsError("the reference ranking is empty")
    k = len(reference)
    relevance = {name: k - pos for pos, name in enumerate(reference)}
    dcg = sum(relevance.get(name, 0) / math.log2(i + 2) for i, name in enumerate(ranking))
    ideal = sum((k - i) / math.log2(i + 2) for i in range(k))
    return dcg / ideal


def _positions(a: Sequence[str], b: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    _check_unique(a, "ranking")
    _check_unique(b, "reference")
    common = [name for name in a if name in set(b)]
    if len(common) < 2:
        raise StatsError("rank correlation needs at least two models present in both rankings")
    pos_a = {name: i for i, name in enumerate(a)}
    pos_b = {name: i for i, name in enumerate(b)}
    return np.array([pos_a[n] for n in common]), np.array([pos_b[n] for n in common])


def kendall_tau(ranking: Sequence[str], reference: Sequence[str]) -> float:
    """Kendall's τ-b between two best-first rankings, over the models present in both."""
    x, y = _positions(ranking, reference)
    # Positions within a ranking are distinct (no ties), so τ-b is (concordant − discordant)
    # over all pairs.
    n = len(x)
    sign = np.sign(x[:, None] - x[None, :]) * np.sign(y[:, None] - y[None, :])
    return float(sign.sum() / (n * (n - 1)))


def spearman_rho(ranking: Sequence[str], reference: Sequence[str]) -> float:
    """Spearman's ρ between two best-first rankings, over the models present in both."""
    x, y = _positions(ranking, reference)
    # Without ties ρ is 1 − 6 Σ d² / (n (n² − 1)) on the ranks within the common models.
    n = len(x)
    d = np.argsort(np.argsort(x)) - np.argsort(np.argsort(y))
    return float(1 - 6 * (d.astype(float) ** 2).sum() / (n * (n**2 - 1)))


def ndcg_scores(scores: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """NDCG (as `ndcg`) per row: the ranking orders models by `scores` (rounds × K, higher is
    better), the reference by `reference` (rounds × K, or one row for every round)."""
    scores = np.atleast_2d(scores)
    reference = np.broadcast_to(np.atleast_2d(reference), scores.shape)
    k = scores.shape[1]
    ref_pos = np.argsort(np.argsort(-reference, axis=1, kind="stable"), axis=1, kind="stable")
    relevance = k - ref_pos  # per model
    order = np.argsort(-scores, axis=1, kind="stable")
    discount = 1.0 / np.log2(np.arange(k) + 2.0)
    dcg = (np.take_along_axis(relevance, order, axis=1) * discount).sum(axis=1)
    ideal = ((k - np.arange(k)) * discount).sum()
    return np.asarray(dcg / ideal, dtype=np.float64)


def kendall_tau_scores(scores: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Kendall's τ (as `kendall_tau`, no ties: orders broken as in `ndcg_scores`) per row."""
    scores = np.atleast_2d(scores)
    reference = np.broadcast_to(np.atleast_2d(reference), scores.shape)
    k = scores.shape[1]
    pos_a = np.argsort(np.argsort(-scores, axis=1, kind="stable"), axis=1, kind="stable")
    pos_b = np.argsort(np.argsort(-reference, axis=1, kind="stable"), axis=1, kind="stable")
    sa = np.sign(pos_a[:, :, None] - pos_a[:, None, :])
    sb = np.sign(pos_b[:, :, None] - pos_b[:, None, :])
    return np.asarray((sa * sb).sum(axis=(1, 2)) / (k * (k - 1)), dtype=np.float64)
