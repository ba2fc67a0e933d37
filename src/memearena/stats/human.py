"""Agreement with human labels, every figure with a cluster bootstrap interval.

Pure computation on integer codes: nothing here reads a label store or a run. Items are
grouped into clusters (the sampled unit, e.g. the meme an item belongs to); a bootstrap round
draws clusters with replacement and every statistic is recomputed from the drawn clusters'
sums, so each figure's interval is over the unit that was sampled.

- ``cohen_kappa_codes``: Cohen's κ and percent agreement of two raters (e.g. a judge and the
  human majority) on k categories;
- ``alpha_codes``: Krippendorff's α (nominal) among raters with missing values;
- ``mean_codes``: a mean (or a proportion, for 0/1 values) over items;
- ``correlation_codes``: Pearson's r of paired values over items (e.g. a human score and a
  scorer's score of the same answer);
- ``bt_ranking`` / ``ranking_agreement``: a Bradley–Terry ranking fitted to pairwise counts,
  and the NDCG and Kendall τ of other rankings against it, per bootstrap round;
- ``plurality``: the majority label of a unit (None when the top is shared);
- ``narrowing``: what one more labelled unit is expected to take off an interval.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from memearena.stats.agreement import alpha_of_coincidences
from memearena.stats.counts import FloatArray
from memearena.stats.errors import StatsError
from memearena.stats.ranking import kendall_tau_scores, ndcg_scores

__all__ = [
    "HumanEstimate",
    "alpha_codes",
    "bt_ranking",
    "cohen_kappa_codes",
    "correlation_codes",
    "mean_codes",
    "narrowing",
    "plurality",
    "ranking_agreement",
]


@dataclass(frozen=True)
class HumanEstimate:
    """A statistic, its percentile bootstrap interval, the items and clusters it rests on."""

    value: float
    ci_low: float
    ci_high: float
    n: int
    """Items (units) the statistic is computed on."""
    clusters: int
    """Clusters the bootstrap resampled."""


def _nan(n: int = 0, clusters: int = 0) -> HumanEstimate:
    nan = float("nan")
    return HumanEstimate(nan, nan, nan, n, clusters)


def _cluster_sums(rows: FloatArray, clusters: Sequence[Hashable]) -> FloatArray:
    """Per-cluster column sums of ``rows`` (one row per item), clusters in first-seen order."""
    index: dict[Hashable, int] = {}
    ids = np.fromiter((index.setdefault(c, len(index)) for c in clusters), np.int64, len(rows))
    out = np.zeros((len(index), rows.shape[1]))
    np.add.at(out, ids, rows)
    return out


def _draws(n_clusters: int, n_boot: int, seed: int) -> FloatArray:
    """Bootstrap weights: how often each cluster is drawn in each round (n_boot × clusters)."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=n_boot).astype(
        float
    )


def _interval(samples: FloatArray, ci: float) -> tuple[float, float]:
    finite = samples[np.isfinite(samples)]
    if not len(finite):
        return float("nan"), float("nan")
    tail = 100 * (1 - ci) / 2
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def _kappa(tables: FloatArray, k: int) -> tuple[FloatArray, FloatArray]:
    t = tables.reshape(-1, k, k)
    n = t.sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        p_o = np.trace(t, axis1=1, axis2=2) / n
        p_e = (t.sum(axis=2) * t.sum(axis=1)).sum(axis=1) / n**2
        return (p_o - p_e) / (1 - p_e), p_o


def cohen_kappa_codes(
    x: Sequence[int],
    y: Sequence[int],
    clusters: Sequence[Hashable],
    k: int,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> tuple[HumanEstimate, HumanEstimate]:
    """Cohen's κ and percent agreement of two raters over the same items (codes 0..k-1).

    κ is NaN when chance agreement is 1 (both raters always gave one and the same label)."""
    if not (len(x) == len(y) == len(clusters)):
        raise StatsError("kappa: both raters and the clusters need one entry per item")
    n = len(x)
    if not n:
        return _nan(), _nan()
    cells = np.zeros((n, k * k))
    cells[np.arange(n), np.asarray(x) * k + np.asarray(y)] = 1.0
    sums = _cluster_sums(cells, clusters)
    c = len(sums)
    kappa, agree = _kappa(sums.sum(axis=0)[None, :], k)
    boot_k, boot_a = _kappa(_draws(c, n_boot, seed) @ sums, k) if n_boot else (kappa, agree)
    return (
        HumanEstimate(float(kappa[0]), *_interval(boot_k, ci), n, c),
        HumanEstimate(float(agree[0]), *_interval(boot_a, ci), n, c),
    )


def alpha_codes(
    units: Sequence[Sequence[int | None]],
    clusters: Sequence[Hashable],
    k: int,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> HumanEstimate:
    """Krippendorff's α (nominal) for units × raters (codes 0..k-1, None missing); a unit
    with fewer than two values cannot be paired and is left out. Bootstrap over clusters."""
    if len(units) != len(clusters):
        raise StatsError("alpha: the clusters need one entry per unit")
    counts = np.zeros((len(units), k))
    for u, unit in enumerate(units):
        for v in unit:
            if v is not None:
                counts[u, v] += 1
    m = counts.sum(axis=1)
    keep = m >= 2
    if not keep.any():
        return _nan()
    counts, m = counts[keep], m[keep]
    kept = [c for c, ok in zip(clusters, keep, strict=True) if ok]
    outer = counts[:, :, None] * counts[:, None, :]
    outer[:, np.arange(k), np.arange(k)] -= counts
    rows = (outer / (m - 1)[:, None, None]).reshape(len(counts), k * k)
    sums = _cluster_sums(rows, kept)
    value = float(alpha_of_coincidences(sums.sum(axis=0)[None, :], k)[0])
    if not n_boot:
        return HumanEstimate(value, value, value, len(counts), len(sums))
    boot = alpha_of_coincidences(_draws(len(sums), n_boot, seed) @ sums, k)
    return HumanEstimate(value, *_interval(boot, ci), len(counts), len(sums))


def mean_codes(
    values: Sequence[float],
    clusters: Sequence[Hashable],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> HumanEstimate:
    """The mean of per-item values (a proportion for 0/1 values), bootstrap over clusters."""
    if len(values) != len(clusters):
        raise StatsError("mean: the clusters need one entry per value")
    if not len(values):
        return _nan()
    rows = np.column_stack([np.asarray(values, dtype=float), np.ones(len(values))])
    sums = _cluster_sums(rows, clusters)
    total = sums.sum(axis=0)
    value = float(total[0] / total[1])
    if not n_boot:
        return HumanEstimate(value, value, value, len(values), len(sums))
    boot = _draws(len(sums), n_boot, seed) @ sums
    with np.errstate(invalid="ignore", divide="ignore"):
        low, high = _interval(boot[:, 0] / boot[:, 1], ci)
    return HumanEstimate(value, low, high, len(values), len(sums))


def _pearson(sums: FloatArray) -> FloatArray:
    """Pearson's r from summed columns (x, y, x², y², xy, n), one row per bootstrap round."""
    x, y, xx, yy, xy, n = (sums[..., i] for i in range(6))
    with np.errstate(invalid="ignore", divide="ignore"):
        cov = xy - x * y / n
        var = (xx - x * x / n) * (yy - y * y / n)
        return np.where(var > 0, cov / np.sqrt(np.where(var > 0, var, 1.0)), np.nan)


def correlation_codes(
    x: Sequence[float],
    y: Sequence[float],
    clusters: Sequence[Hashable],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> HumanEstimate:
    """Pearson's r of paired per-item values, bootstrap over clusters (NaN when either side
    is constant: no correlation is defined)."""
    if not len(x) == len(y) == len(clusters):
        raise StatsError("correlation: x, y and the clusters need one entry per item")
    if not len(x):
        return _nan()
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    rows = np.column_stack([a, b, a * a, b * b, a * b, np.ones(len(a))])
    sums = _cluster_sums(rows, clusters)
    value = float(_pearson(sums.sum(axis=0)))
    if not n_boot:
        return HumanEstimate(value, value, value, len(a), len(sums))
    low, high = _interval(_pearson(_draws(len(sums), n_boot, seed) @ sums), ci)
    return HumanEstimate(value, low, high, len(a), len(sums))


def plurality(values: Sequence[Hashable]) -> Hashable | None:
    """The most frequent value, or None when no value is strictly most frequent."""
    counts: dict[Hashable, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    if not counts:
        return None
    top = max(counts.values())
    best = [v for v, c in counts.items() if c == top]
    return best[0] if len(best) == 1 else None


def _bt_scores(wins: FloatArray, prior: float, iterations: int = 200) -> FloatArray:
    """Bradley–Terry strengths (log scale) for stacked win matrices (rounds × m × m, wins[i, j]
    = i's wins over j, ties counted half each way), by the MM algorithm with ``prior`` virtual
    ties against every other model (keeps a model that never lost, or never won, finite)."""
    m = wins.shape[-1]
    w = wins + prior * (1 - np.eye(m))
    games = w + np.swapaxes(w, -1, -2)
    won = w.sum(axis=-1)
    p = np.ones(wins.shape[:-1])
    for _ in range(iterations):
        denom = (games / (p[..., :, None] + p[..., None, :])).sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            new = won / denom
        new /= np.exp(np.log(new).mean(axis=-1, keepdims=True))
        if np.allclose(new, p, rtol=1e-9, atol=1e-12):
            p = new
            break
        p = new
    return np.log(p)


def bt_ranking(
    outcomes: Sequence[tuple[int, int, float]],
    clusters: Sequence[Hashable],
    m: int,
    *,
    prior: float = 0.5,
    n_boot: int = 1000,
    seed: int = 0,
) -> tuple[FloatArray, FloatArray]:
    """Bradley–Terry log-strengths of ``m`` models from (i, j, score of i) outcomes (1 win,
    0.5 tie, 0 loss), and the same fitted on each bootstrap round over clusters
    (n_boot × m)."""
    if len(outcomes) != len(clusters):
        raise StatsError("bt: the clusters need one entry per outcome")
    rows = np.zeros((len(outcomes), m * m))
    for r, (i, j, s) in enumerate(outcomes):
        rows[r, i * m + j] += s
        rows[r, j * m + i] += 1.0 - s
    sums = _cluster_sums(rows, clusters) if len(rows) else np.zeros((1, m * m))
    point = _bt_scores(sums.sum(axis=0).reshape(1, m, m), prior)[0]
    if not n_boot or not len(outcomes):
        return point, np.tile(point, (max(n_boot, 1), 1))
    boot = _draws(len(sums), n_boot, seed) @ sums
    return point, _bt_scores(boot.reshape(-1, m, m), prior)


def ranking_agreement(
    ranking: Sequence[str],
    models: Sequence[str],
    point: FloatArray,
    boot: FloatArray,
    *,
    ci: float = 0.95,
    n: int = 0,
    clusters: int = 0,
) -> tuple[HumanEstimate, HumanEstimate]:
    """NDCG and Kendall τ of ``ranking`` (best first) against the reference scores of
    ``models`` (``point``, higher better) and against each bootstrap round's scores."""
    if not ranking:
        return _nan(n, clusters), _nan(n, clusters)
    pos = {name: i for i, name in enumerate(ranking)}
    # The compared ranking as scores over ``models`` (absent models score below every other).
    scores = np.array([len(ranking) - pos.get(name, len(ranking)) for name in models], float)
    ref = np.vstack([point[None, :], boot])
    nd = ndcg_scores(np.tile(scores, (len(ref), 1)), ref)
    tau = kendall_tau_scores(np.tile(scores, (len(ref), 1)), ref)
    return (
        HumanEstimate(float(nd[0]), *_interval(nd[1:], ci), n, clusters),
        HumanEstimate(float(tau[0]), *_interval(tau[1:], ci), n, clusters),
    )


def narrowing(half_width: float, clusters: int) -> float:
    """The expected shrink of an interval's half-width from one more cluster labelled (a
    bootstrap interval narrows as 1/√clusters): ``h (1 − √(c / (c + 1)))``."""
    if clusters <= 0 or not np.isfinite(half_width):
        return float("nan")
    return float(half_width * (1 - np.sqrt(clusters / (clusters + 1))))
