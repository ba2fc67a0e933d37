"""Bench: Bradley–Terry + 1000 bootstrap rounds, batched Newton vs the Chatbot Arena way.

Run: python bench/ranking.py [--models 15] [--battles 100000] [--rounds 1000] [--seed 0]

Baseline (written here, faithful to FastChat's `compute_bootstrap_bt` / `fit_bt`): aggregate the
battles to unique (model_a, model_b, outcome) rows with counts, draw all rounds' counts with one
multinomial, then one `scipy.optimize.minimize(method="L-BFGS-B", jac=True)` per round on the
weighted logistic loss (ties as outcome 0.5), maxiter 100, gtol 1e-6 as in FastChat. Both
methods fit the *same* resampled counts, so the comparison measures the solvers, not Monte
Carlo noise.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from memearena.stats import PairCounts, bradley_terry, resample


def simulate(n_models: int, n_battles: int, seed: int) -> tuple[PairCounts, np.ndarray]:
    """Battles between uniformly random pairs; Davidson-style ties (about 20%)."""
    rng = np.random.default_rng(seed)
    true = np.sort(rng.uniform(600, 1450, n_models))[::-1]
    a = rng.integers(0, n_models, n_battles)
    b = (a + rng.integers(1, n_models, n_battles)) % n_models
    d = (true[a] - true[b]) * math.log(10) / 400
    nu = 0.6
    denom = np.exp(d / 2) + np.exp(-d / 2) + nu
    p_a, p_tie = np.exp(d / 2) / denom, nu / denom
    u = rng.random(n_battles)
    outcome = np.where(u < p_a, 0, np.where(u < p_a + p_tie, 2, 1))
    wins = np.zeros((n_models, n_models))
    ties = np.zeros((n_models, n_models))
    np.add.at(wins, (a[outcome == 0], b[outcome == 0]), 1)
    np.add.at(wins, (b[outcome == 1], a[outcome == 1]), 1)
    np.add.at(ties, (a[outcome == 2], b[outcome == 2]), 1)
    names = [f"model-{k:02d}" for k in range(n_models)]
    return PairCounts.from_arrays(names, wins, ties + ties.T), true


# --- baseline: the Chatbot Arena (FastChat rating_systems.py) approach ---------------------------


def bt_loss_and_grad(ratings, matchups, outcomes, weights, alpha=1.0):  # type: ignore[no-untyped-def]
    matchup_ratings = ratings[matchups]
    logits = alpha * (matchup_ratings[:, 0] - matchup_ratings[:, 1])
    probs = expit(logits)
    loss = -((np.log(probs) * outcomes + np.log(1.0 - probs) * (1.0 - outcomes)) * weights).sum()
    matchups_grads = -alpha * (outcomes - probs) * weights
    model_grad = np.zeros_like(ratings)
    np.add.at(model_grad, matchups[:, [0, 1]], matchups_grads[:, None] * np.array([1.0, -1.0]))
    return loss, model_grad


def fit_bt(matchups, outcomes, weights, n_models, alpha, tol=1e-6):  # type: ignore[no-untyped-def]
    result = minimize(
        fun=bt_loss_and_grad,
        x0=np.zeros(n_models),
        args=(matchups, outcomes, weights, alpha),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 100, "gtol": tol},  # FastChat also passes disp=False (deprecated)
    )
    return result["x"]


def baseline(counts: PairCounts, draws: np.ndarray, scale: float = 400.0) -> tuple[np.ndarray, ...]:
    """Point fit + one L-BFGS-B fit per bootstrap round; mean-anchored Elo-scale ratings."""
    i, j, outcome, cell_counts = counts.cells()
    matchups = np.stack([i, j], axis=1)
    outcomes = np.select([outcome == 0, outcome == 1], [1.0, 0.0], 0.5)
    total = cell_counts.sum()
    alpha = math.log(10.0)
    point = fit_bt(matchups, outcomes, cell_counts / total, counts.n_models, alpha)
    boot = np.array([fit_bt(matchups, outcomes, w / total, counts.n_models, alpha) for w in draws])

    def elo(r: np.ndarray) -> np.ndarray:
        return 1000 + scale * (r - r.mean(axis=-1, keepdims=True))

    low, high = np.percentile(elo(boot), [2.5, 97.5], axis=0)
    return elo(point), low, high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=15)
    parser.add_argument("--battles", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    counts, _ = simulate(args.models, args.battles, args.seed)
    tie_share = np.triu(counts.ties, 1).sum() / counts.total
    print(
        f"{args.models} models, {int(counts.total):,} battles ({tie_share:.0%} ties), "
        f"{args.rounds} bootstrap rounds, seed {args.seed}"
    )
    bradley_terry(counts, bootstrap=10, seed=args.seed)  # warm-up (imports, BLAS threads)

    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        ours = bradley_terry(counts, bootstrap=args.rounds, seed=args.seed)
        runs.append(time.perf_counter() - t0)
    t_ours = min(runs)

    t0 = time.perf_counter()
    draws = resample(counts, args.rounds, args.seed)  # the same draws `bradley_terry` fitted
    point, low, high = baseline(counts, draws)
    t_base = time.perf_counter() - t0

    t0 = time.perf_counter()
    resample(counts, args.rounds, args.seed)
    t_draw = time.perf_counter() - t0

    assert ours.ci_low is not None and ours.ci_high is not None
    print(f"memearena batched Newton, fit + {args.rounds} rounds: {t_ours:.3f} s (best of 3)")
    print(f"baseline: {args.rounds + 1} x scipy L-BFGS-B fits: {t_base:.3f} s")
    print(f"speed-up: {t_base / t_ours:.1f}x")
    print(
        f"  (both include the same multinomial draw, {t_draw:.3f} s; fits alone: "
        f"{(t_base - t_draw) / max(t_ours - t_draw, 1e-9):.1f}x)"
    )
    print(
        "largest difference (Elo points): "
        f"point {np.abs(ours.ratings - point).max():.4f}, "
        f"ci_low {np.abs(ours.ci_low - low).max():.4f}, "
        f"ci_high {np.abs(ours.ci_high - high).max():.4f}"
    )
    print(f"regularised rounds: {ours.regularised_rounds}")


if __name__ == "__main__":
    main()
