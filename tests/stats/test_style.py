"""Length-controlled Bradley–Terry recovers a planted length effect."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memearena.stats import LengthObservations, StatsError, length_controlled_bt

SCALE = 400 / math.log(10)


def _simulate(beta: float, seed: int = 0) -> tuple[LengthObservations, dict[str, float]]:
    """Four models; the better ones also write longer answers (quality and length confounded);
    the panel adds `beta` log-odds per doubling of the length ratio."""
    rng = np.random.default_rng(seed)
    models = ["m0", "m1", "m2", "m3"]
    theta = {"m0": 0.6, "m1": 0.2, "m2": -0.2, "m3": -0.6}
    mean_len = {"m0": 900, "m1": 700, "m2": 500, "m3": 350}
    obs = LengthObservations(models)
    for meme in range(150):
        lens = {m: int(mean_len[m] * math.exp(rng.normal(0, 0.4))) for m in models}
        for a in models:
            for b in models:
                if a >= b:
                    continue
                x = math.log2((lens[a] + 1) / (lens[b] + 1))
                p = 1 / (1 + math.exp(-(theta[a] - theta[b] + beta * x)))
                for _ in range(4):
                    winner = "model_a" if rng.random() < p else "model_b"
                    obs.add(a, b, winner, lens[a], lens[b], f"meme{meme}")
    return obs, theta


def test_recovers_a_planted_length_effect_and_the_ratings_beneath_it() -> None:
    obs, theta = _simulate(beta=0.5)
    fit = length_controlled_bt(obs, bootstrap=200, seed=0)
    assert fit.log_odds_per_doubling == pytest.approx(0.5, abs=0.12)
    assert fit.length_ci is not None
    assert fit.length_ci[0] < 0.5 * SCALE < fit.length_ci[1]
    assert fit.ranking() == ["m0", "m1", "m2", "m3"]
    assert fit.ci_low is not None and fit.ci_high is not None
    for k, m in enumerate(fit.models):
        truth = 1000 + SCALE * theta[m]
        assert fit.ci_low[k] - 15 < truth < fit.ci_high[k] + 15


def test_no_length_effect_is_measured_when_none_is_planted() -> None:
    obs, _ = _simulate(beta=0.0, seed=1)
    fit = length_controlled_bt(obs, bootstrap=200, seed=0)
    assert fit.length_ci is not None
    assert fit.length_ci[0] < 0 < fit.length_ci[1]


def test_length_confounded_with_model_identity_is_an_error_not_a_number() -> None:
    data = LengthObservations(["a", "b"])
    for meme in range(2):  # "a" is always three times as long: length and rating coincide
        data.add("a", "b", "model_a", 300, 100, meme)
        data.add("b", "a", "model_b", 100, 300, meme)
    with pytest.raises(StatsError, match="confounded"):
        length_controlled_bt(data, bootstrap=20)


def test_observations_are_summed_exactly_across_buffer_flushes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Through a tiny buffer (many chunks and merges) every (cluster, pair, lengths) cell is
    kept once, with the points and battles of a plain tally, either order of the pair."""
    monkeypatch.setattr(LengthObservations, "_BUFFER", 5)
    rng = np.random.default_rng(2)
    models = ["a", "b", "c"]
    obs = LengthObservations(models)
    tally: dict[tuple[str, int, int, float], list[float]] = {}
    for _ in range(600):
        x, y = (int(k) for k in rng.choice(3, size=2, replace=False))
        la, lb = (int(v) for v in rng.integers(10, 13, size=2))
        w = str(rng.choice(["model_a", "model_b", "tie"]))
        meme = f"m{rng.integers(6)}"
        obs.add(models[x], models[y], w, la, lb, meme)
        score = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5}[w]
        ratio = math.log2((la + 1) / (lb + 1))
        if x > y:
            x, y, ratio, score = y, x, -ratio, 1.0 - score
        cell = tally.setdefault((meme, x, y, ratio), [0.0, 0.0])
        cell[0] += score
        cell[1] += 1.0
    cl, i, j, ratio, points, battles = obs.arrays()
    names = obs.index.keys()
    got = {
        (names[c], int(p), int(q), float(r)): [float(s), float(n)]
        for c, p, q, r, s, n in zip(cl, i, j, ratio, points, battles, strict=True)
    }
    assert got == tally
