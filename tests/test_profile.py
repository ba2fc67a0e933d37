"""The profile's statistics (``memearena.engine.profile``) on scores whose answer is known:
Spearman's ρ as scipy computes it, ties included; the ranks an interval allows; the agreement
of two methods, resampled over the memes both scored or, when they share none, over models;
where they disagree named by the pairs they order oppositely. (The demo's profiles, in the
console, the viewer, the report and the notebook: ``tests/view/test_profile.py``.)"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memearena.engine.profile import (
    MIN_MODELS,
    ScoreSource,
    agreement,
    rank_range,
    spearman_rows,
)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=3, max_size=12).filter(
        lambda xs: len({a for a, _ in xs}) > 1 and len({b for _, b in xs}) > 1
    )
)
def test_spearman_is_scipys_with_ties(pairs: list[tuple[int, int]]) -> None:
    from scipy.stats import spearmanr

    x = np.array([a for a, _ in pairs], dtype=float)
    y = np.array([b for _, b in pairs], dtype=float)
    assert spearman_rows(x, y)[0] == pytest.approx(spearmanr(x, y).statistic)


def test_spearman_of_a_constant_or_missing_row_is_undefined() -> None:
    x = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0], [1.0, np.nan, 3.0]])
    y = np.array([[3.0, 2.0, 1.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    got = spearman_rows(x, y)
    assert got[0] == pytest.approx(-1.0) and np.isnan(got[1]) and np.isnan(got[2])


def test_rank_range_is_what_the_intervals_allow() -> None:
    rows = [("a", 10.0, 12.0), ("b", 9.0, 11.0), ("c", 1.0, 2.0)]
    assert rank_range(rows) == {"a": (1, 2), "b": (1, 2), "c": (3, 3)}


def _meme_source(
    method: str, scores: dict[str, Sequence[float]], memes: Sequence[str]
) -> ScoreSource:
    """A method whose score per model is its mean over memes (one value per meme)."""
    table = {m: np.asarray(v, dtype=float) for m, v in scores.items()}

    def resample(units: Sequence[str], weights: np.ndarray) -> dict[str, np.ndarray]:
        idx = [list(memes).index(u) for u in units]
        return {m: (weights @ v[idx]) / weights.sum(axis=1) for m, v in table.items()}

    values = {m: float(v.mean()) for m, v in table.items()}
    return ScoreSource(
        method,
        method.title(),
        "target",
        "mean",
        values,
        unit="meme",
        units=tuple(memes),
        resample=resample,
    )


MEMES = [f"m{i}" for i in range(12)]


def test_methods_ordering_models_alike_agree_over_memes() -> None:
    rng = np.random.default_rng(1)
    skill = {"a": 3.0, "b": 2.0, "c": 1.0, "d": 0.0}
    noisy = {m: s + rng.normal(0, 0.3, len(MEMES)) for m, s in skill.items()}
    a = _meme_source("one", noisy, MEMES)
    b = _meme_source("two", {m: 2 * v + 1 for m, v in noisy.items()}, MEMES)
    row = agreement(a, b, bootstrap=300, seed=0)
    assert row["unit"] == "meme" and row["units"] == len(MEMES)
    assert row["spearman"]["value"] == pytest.approx(1.0)
    assert row["spearman"]["ci_low"] == pytest.approx(1.0)  # same scores in every draw
    assert row["discordant"] == [] and row["summary"].startswith("same order")


def test_where_methods_disagree_is_named_by_the_pairs_they_order_oppositely() -> None:
    def flat(skills: Sequence[float]) -> dict[str, list[float]]:
        return {m: [s] * len(MEMES) for m, s in zip("abcd", skills, strict=True)}

    a = _meme_source("one", flat((4, 3, 2, 1)), MEMES)
    b = _meme_source("two", flat((4, 2, 3, 1)), MEMES)
    row = agreement(a, b, bootstrap=200, seed=0)
    assert row["discordant"] == [["b", "c"]]
    assert "One puts b above c, Two the reverse" in row["summary"]
    assert row["spearman"]["value"] == pytest.approx(0.8)
    shifts = {r["model"]: r["shift"] for r in row["ranks"]}
    assert shifts == {"a": 0, "b": 1, "c": -1, "d": 0}


def test_a_lower_is_better_score_is_turned_before_comparing() -> None:
    up = ScoreSource("one", "One", "judge", "ndcg", {"a": 0.9, "b": 0.5, "c": 0.1})
    down = ScoreSource(
        "two", "Two", "judge", "rank", {"a": 1.0, "b": 2.0, "c": 3.0}, higher_is_better=False
    )
    row = agreement(up, down, bootstrap=200, seed=0)
    assert row["spearman"]["value"] == pytest.approx(1.0) and row["unit"] == "model"
    assert "different items" in row["why"]


def test_methods_sharing_no_memes_resample_models_and_few_models_are_not_compared() -> None:
    a = _meme_source("one", {m: [float(i)] * 6 for i, m in enumerate("abcde")}, MEMES[:6])
    b = _meme_source("two", {m: [float(-i)] * 6 for i, m in enumerate("abcde")}, MEMES[6:])
    row = agreement(a, b, bootstrap=400, seed=0)
    assert row["unit"] == "model" and row["units"] == 5
    assert "they share only 0 memes" in row["why"]
    assert row["spearman"]["value"] == pytest.approx(-1.0)
    lo, hi = row["spearman"]["ci_low"], row["spearman"]["ci_high"]
    assert lo == pytest.approx(-1.0) and hi == pytest.approx(-1.0)
    assert 0 < row["draws"] <= 400  # draws of one model repeated have no order to compare
    few = ScoreSource("three", "Three", "target", "x", {"a": 1.0, "z": 2.0})
    small = agreement(a, few, bootstrap=10, seed=0)
    assert small["spearman"] is None and f"fewer than {MIN_MODELS}" in small["summary"]
