"""Bench: coverage of 95% Bradley–Terry intervals by bootstrap unit (battle, task, meme).

Run: python bench/coverage.py [--arenas 200] [--memes 50] [--models 10] [--bootstrap 1000]
                              [--meme-sd 0.15] [--task-sd 0.08] [--seed 0]

Each simulated arena is shaped like a MemeArena run: every meme has 3 tasks (contexts); every
pair of models is compared on every task by 4 judges × 5 criteria (20 battles per task and pair).
Battles of one meme are correlated the way real ones are: each model has a per-meme effect
(`--meme-sd`, natural-log units) and a per-task effect (`--task-sd`) on top of its true strength,
shared by every battle on that meme / task; ties follow Davidson (ν = 0.5). Battles are drawn
directly with numpy (not through the pipeline), as per-(meme, task, pair) outcome counts.

The estimand is the population rating: the Bradley–Terry rating that infinitely many memes
would give (the meme and task effects averaged out, computed once from 400,000 draws). For each
arena and each unit, the bootstrap resamples battles (multinomial over the cells), tasks or
memes (`memearena.stats.clustered_counts`-style per-cluster counts), and the bench counts how
often the 95% percentile interval holds the population rating. Coverage is averaged over
models and arenas, with a 95% interval over arenas (arenas are the independent unit here).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from memearena.stats import ClusteredCounts, PairCounts, bradley_terry

JUDGES_X_CRITERIA = 20
TASKS = 3
NU = 0.5


def outcome_probs(d: np.ndarray) -> np.ndarray:
    """Davidson probabilities (i wins, j wins, tie) for log-strength differences d."""
    e_p, e_m = np.exp(d / 2), np.exp(-d / 2)
    denom = e_p + e_m + NU
    return np.stack([e_p / denom, e_m / denom, NU / denom], axis=-1)


def population_ratings(theta: np.ndarray, meme_sd: float, task_sd: float, seed: int) -> np.ndarray:
    """The Bradley–Terry ratings (Elo scale, mean 1000) of the marginal outcome probabilities."""
    rng = np.random.default_rng(seed + 10_000)
    m = len(theta)
    i, j = np.triu_indices(m, 1)
    n_draws = 400_000
    sd = math.sqrt(2 * meme_sd**2 + 2 * task_sd**2)
    noise = rng.normal(0, sd, n_draws)
    wins = np.zeros((m, m))
    ties = np.zeros((m, m))
    for a, b in zip(i, j, strict=True):
        p = outcome_probs(theta[a] - theta[b] + noise).mean(axis=0) * 1e6
        wins[a, b], wins[b, a], ties[a, b] = p[0], p[1], p[2]
    counts = PairCounts.from_arrays([f"m{k}" for k in range(m)], wins, ties + ties.T)
    return bradley_terry(counts).ratings


def simulate(
    theta: np.ndarray, memes: int, meme_sd: float, task_sd: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Counts per (meme, task, pair): arrays meme, task, pair index, counts (…, 3)."""
    m = len(theta)
    i, j = np.triu_indices(m, 1)
    u = rng.normal(0, meme_sd, (memes, 1, m))
    v = rng.normal(0, task_sd, (memes, TASKS, m))
    strength = theta[None, None, :] + u + v  # memes × tasks × models
    d = strength[:, :, i] - strength[:, :, j]  # memes × tasks × pairs
    counts = rng.multinomial(JUDGES_X_CRITERIA, outcome_probs(d))
    g, t, p = np.meshgrid(np.arange(memes), np.arange(TASKS), np.arange(len(i)), indexing="ij")
    return g.ravel(), t.ravel(), p.ravel(), counts.reshape(-1, 3).astype(np.float64)


def clustered(
    names: tuple[str, ...], cluster: np.ndarray, pair: np.ndarray, counts: np.ndarray
) -> ClusteredCounts:
    m = len(names)
    i, j = np.triu_indices(m, 1)
    rows = np.repeat(np.arange(len(pair)), 3)
    outcome = np.tile(np.arange(3), len(pair))
    c = counts.ravel()
    keep = c > 0
    return ClusteredCounts(
        names,
        int(cluster.max()) + 1,
        cluster[rows][keep],
        i[pair[rows]][keep],
        j[pair[rows]][keep],
        outcome[keep],
        c[keep],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arenas", type=int, default=200)
    ap.add_argument("--memes", type=int, default=50)
    ap.add_argument("--models", type=int, default=10)
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--meme-sd", type=float, default=0.15)
    ap.add_argument("--task-sd", type=float, default=0.08)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    m = args.models
    names = tuple(f"m{k}" for k in range(m))
    theta = np.linspace(0.9, -0.9, m)  # natural-log strengths, about 700 Elo top to bottom
    truth = population_ratings(theta, args.meme_sd, args.task_sd, args.seed)
    units = ("battle", "task", "meme")
    covered = {u: np.zeros(args.arenas) for u in units}
    width = {u: np.zeros(args.arenas) for u in units}
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    for a in range(args.arenas):
        g, t, p, counts = simulate(theta, args.memes, args.meme_sd, args.task_sd, rng)
        tables = {
            "task": clustered(names, g * TASKS + t, p, counts),
            "meme": clustered(names, g, p, counts),
        }
        for unit in units:
            data = tables["meme"].total if unit == "battle" else tables[unit]
            fit = bradley_terry(data, bootstrap=args.bootstrap, seed=args.seed + a)
            assert fit.ci_low is not None and fit.ci_high is not None
            inside = (fit.ci_low <= truth) & (truth <= fit.ci_high)
            covered[unit][a] = inside.mean()
            width[unit][a] = np.median((fit.ci_high - fit.ci_low) / 2)
    elapsed = time.perf_counter() - start

    print(
        f"{args.arenas} simulated arenas: {m} models, {args.memes} memes × {TASKS} tasks × "
        f"{m * (m - 1) // 2} pairs × {JUDGES_X_CRITERIA} battles "
        f"({args.memes * TASKS * m * (m - 1) // 2 * JUDGES_X_CRITERIA:,} battles per arena); "
        f"per-meme sd {args.meme_sd}, per-task sd {args.task_sd}; {args.bootstrap} bootstrap "
        f"rounds; {elapsed:.0f} s"
    )
    print(
        f"{'unit':<8} {'coverage of 95% CI':>26} {'median half-width (Elo)':>25} {'vs battle':>10}"
    )
    base = np.median(width["battle"])
    for unit in units:
        c = covered[unit]
        half = 1.96 * c.std(ddof=1) / math.sqrt(len(c)) if len(c) > 1 else float("nan")
        w = np.median(width[unit])
        print(
            f"{unit:<8} {c.mean():>12.1%} [{c.mean() - half:.1%}, {c.mean() + half:.1%}]"
            f" {w:>25.1f} {w / base:>9.2f}x"
        )


if __name__ == "__main__":
    main()
