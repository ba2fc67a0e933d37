"""Bench: judge agreement statistics with 1000 bootstrap rounds, old vs new resampling.

Run: python bench/agreement.py [--judges 4] [--presentations 7000] [--rounds 1000] [--seed 0]

Data: a panel of judges each judging the same presentations (item, model pair) in both orders,
so `--presentations 7000` gives 14,000 verdicts per judge, the size of a real run. Labels come
from a latent true outcome that each judge reports with noise and a first-position bias, with
response lengths attached, so every statistic has something to measure.

Old: the bootstrap as it was, a `rng.multinomial(n_units, uniform, size=rounds)` weight matrix
over the units, times the unit rows (swapped in for the new draw, everything else shared).
New: the units grouped into their few distinct types (a verdict score, a κ cell, an α
coincidence pattern) and the resample drawn as a multinomial over the types, which has the same
distribution. Both intervals are printed: they differ only by Monte Carlo noise.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from itertools import combinations
from typing import Any

import numpy as np

from memearena.stats import (
    Estimate,
    Verdict,
    agreement,
    cohen_kappa,
    krippendorff_alpha,
    position_consistency,
    prefer_first_rate,
    prefer_longer_rate,
    self_preference,
)

MODELS = ["gpt", "claude", "gemini", "llama", "mistral", "qwen"]


def simulate(n_judges: int, n_presentations: int, seed: int) -> list[Verdict]:
    """Every judge sees every presentation in both orders."""
    rng = np.random.default_rng(seed)
    judges = [f"judge-{k}" for k in range(n_judges)]
    strength = rng.normal(0, 1, len(MODELS))
    verdicts = []
    for p in range(n_presentations):
        a, b = rng.choice(len(MODELS), 2, replace=False)
        d = strength[a] - strength[b]
        truth = rng.choice(
            3,
            p=np.array([np.exp(d / 2), np.exp(-d / 2), 0.5])
            / (np.exp(d / 2) + np.exp(-d / 2) + 0.5),
        )
        lengths = rng.integers(200, 1200, 2)
        for judge in judges:
            for first, second, la, lb in ((a, b, lengths[0], lengths[1]), (b, a, *lengths[::-1])):
                if rng.random() < 0.65:  # agrees with the truth, else first-position biased
                    label = truth if first == a else (1 - truth if truth < 2 else 2)
                else:
                    label = rng.choice(3, p=[0.6, 0.25, 0.15])
                verdicts.append(
                    Verdict(
                        judge=judge,
                        item=f"item-{p}",
                        model_a=MODELS[first],
                        model_b=MODELS[second],
                        winner=("model_a", "model_b", "tie")[label],
                        len_a=int(la),
                        len_b=int(lb),
                    )
                )
    return verdicts


def old_boot_totals(
    types: np.ndarray, counts: np.ndarray, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """The previous bootstrap: one multinomial weight per unit and round, times the units."""
    rows = np.repeat(types, counts, axis=0)
    n = len(rows)
    weights = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(float)
    return weights @ rows


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def first_estimate(result: Any) -> Estimate:
    if isinstance(result, Estimate):
        return result
    first = next(iter(result.values()))
    return first if isinstance(first, Estimate) else first.difference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", type=int, default=4)
    parser.add_argument("--presentations", type=int, default=7000)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    verdicts = simulate(args.judges, args.presentations, args.seed)
    judges = sorted({v.judge for v in verdicts})
    own = {judges[0]: MODELS[0]}
    kw = {"n_boot": args.rounds, "seed": args.seed}
    j1, j2 = next(combinations(judges, 2))
    stats: dict[str, Callable[[], Any]] = {
        "position_consistency": lambda: position_consistency(verdicts, **kw),
        "prefer_first_rate": lambda: prefer_first_rate(verdicts, **kw),
        "prefer_longer_rate": lambda: prefer_longer_rate(verdicts, **kw),
        "self_preference": lambda: self_preference(verdicts, own, **kw),
        "cohen_kappa (1 pair)": lambda: cohen_kappa(verdicts, j1, j2, **kw),
        "krippendorff_alpha": lambda: krippendorff_alpha(verdicts, **kw),
    }
    print(
        f"{args.judges} judges x {len(verdicts) // args.judges} verdicts, {args.rounds} "
        "bootstrap rounds; times are whole calls (all judges), best of 3 for new"
    )
    print(f"  {'statistic':22s} {'old s':>7s} {'new s':>7s} {'old/new':>8s}   interval old | new")
    new_draw = agreement._boot_totals
    total_old = total_new = 0.0
    for name, fn in stats.items():
        agreement._boot_totals = old_boot_totals  # type: ignore[assignment]
        try:
            t_old, r_old = timed(fn, 1)
        finally:
            agreement._boot_totals = new_draw
        t_new, r_new = timed(fn, 3)
        total_old += t_old
        total_new += t_new
        e_old, e_new = first_estimate(r_old), first_estimate(r_new)
        print(
            f"  {name:22s} {t_old:7.3f} {t_new:7.3f} {t_old / t_new:7.0f}x   "
            f"{e_new.value:.3f} [{e_old.ci_low:.3f}, {e_old.ci_high:.3f}] | "
            f"[{e_new.ci_low:.3f}, {e_new.ci_high:.3f}]"
        )
    print(f"  {'total':22s} {total_old:7.3f} {total_new:7.3f} {total_old / total_new:7.0f}x")


if __name__ == "__main__":
    main()
