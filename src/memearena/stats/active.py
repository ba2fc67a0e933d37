"""Active pair sampling: spend the next battles where they settle the ranking fastest.

The rule. Fit Bradley–Terry (with a weak prior, so that it exists from the first battle) and
take the Laplace posterior: mean μ, covariance Σ = (Fisher information + prior)⁻¹. The
current chance that models k and l are in the wrong order is Φ(−|μ_k − μ_l| / s_kl). One
more battle on pair (i, j) adds information p(1 − p) along e_i − e_j, shrinking every s_kl
(Sherman–Morrison) and moving the posterior mean by a normal amount of known variance; the
pair's score is the expected drop in the number of misordered pairs — the expected gain in
Kendall τ — computed by Gauss–Hermite quadrature. Pairs are *sampled* with probability
proportional to that score (as Chatbot Arena samples ∝ expected CI reduction), one at a time,
updating Σ after each pick so a batch spreads over the uncertain pairs.

Unbiasedness. Which pairs are compared depends only on outcomes already observed, never on
the outcome of the battle being chosen, so the design is ignorable for likelihood inference:
the Bradley–Terry MLE on all collected battles remains the right estimate (the weak prior is
used for choosing pairs only).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from scipy.special import expit, ndtr

from memearena.stats.battles import Battle
from memearena.stats.bt import fit_cells
from memearena.stats.counts import FloatArray, PairCounts, as_counts
from memearena.stats.errors import StatsError

SELECTION_PRIOR = 1.0
"""Virtual ties per model against an average opponent, for choosing pairs only."""

_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(12)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


def _posterior(counts: PairCounts, prior: float) -> tuple[FloatArray, FloatArray]:
    """Posterior mean (natural log-odds) and covariance under the weak prior."""
    m = counts.n_models
    if counts.total > 0:
        *_, cell_counts = counts.cells()
        theta = fit_cells(counts, cell_counts[None, :], prior=prior)[0][0]
    else:
        theta = np.zeros(m)
    p = expit(theta[:, None] - theta[None, :])
    info = counts.games * p * (1 - p)
    precision = np.diag(info.sum(axis=1)) - info
    sp = expit(theta)
    precision += np.diag(prior * sp * (1 - sp))
    return theta, np.linalg.inv(precision)


def _scores(
    mu: FloatArray, cov: FloatArray, i: np.ndarray, j: np.ndarray, info: FloatArray
) -> FloatArray:
    """Expected drop in misordered pairs from one more battle on each candidate pair."""
    mean_all = mu[i] - mu[j]
    cb = cov[:, i] - cov[:, j]  # Σ b_c for every candidate c, (m, P)
    var_c = np.maximum(cb[i, np.arange(len(i))] - cb[j, np.arange(len(i))], 1e-300)
    before_all = ndtr(-np.abs(mean_all) / np.sqrt(var_c))
    # Pairs whose order is already certain cannot gain: only score the open ones as targets.
    t = np.flatnonzero(before_all > 1e-9)
    if not len(t):
        return np.zeros(len(i))
    cross = cb[i[t], :] - cb[j[t], :]  # b_t^T Σ b_c, (targets, candidates)
    shrink = info * cross**2 / (1 + info * var_c)  # s_t² − s_t'²
    s_after = np.sqrt(np.maximum(var_c[t, None] - shrink, 1e-300))
    mean_t = mean_all[t, None, None]
    shift = np.sqrt(shrink)[:, :, None] * _NODES
    after = (ndtr(-np.abs(mean_t + shift) / s_after[:, :, None]) * _WEIGHTS).sum(axis=2)
    return np.maximum(before_all[t, None] - after, 0.0).sum(axis=0)


def next_pairs(
    data: PairCounts | Iterable[Battle],
    models: Sequence[str],
    n: int,
    rng: np.random.Generator | int,
    *,
    prior: float = SELECTION_PRIOR,
) -> list[tuple[str, str]]:
    """Choose the next `n` pairs to compare, favouring those that most reduce ranking error.

    `data` is the battles (or counts) so far, `models` every model that may be compared. The
    choice is random (seeded by `rng`) with probability ∝ expected gain in Kendall τ; see the
    module docstring for the rule and why estimates stay unbiased. Each pair is returned in a
    random order, so neither model is always shown first.
    """
    if len(models) < 2:
        raise StatsError("active sampling needs at least two models")
    if n < 0:
        raise StatsError("n must be >= 0")
    rng = np.random.default_rng(rng)
    counts = as_counts(data, models)
    mu, cov = _posterior(counts, prior)
    i, j = np.triu_indices(len(models), 1)
    info = expit(mu[i] - mu[j]) * (1 - expit(mu[i] - mu[j]))
    chosen: list[tuple[str, str]] = []
    for _ in range(n):
        score = _scores(mu, cov, i, j, info)
        total = score.sum()
        prob = score / total if total > 0 and np.isfinite(total) else np.full(len(i), 1 / len(i))
        c = int(rng.choice(len(i), p=prob))
        # Expected information from this battle, before its outcome is known (Σ only).
        b = cov[:, i[c]] - cov[:, j[c]]
        cov = cov - info[c] * np.outer(b, b) / (1 + info[c] * (b[i[c]] - b[j[c]]))
        pair = (models[i[c]], models[j[c]])
        chosen.append(pair if rng.random() < 0.5 else (pair[1], pair[0]))
    return chosen
