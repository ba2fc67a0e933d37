"""Online Elo: hand-computed updates, ties, shuffled averaging."""

from __future__ import annotations

import numpy as np
import pytest

from memearena.stats import Battle, online_elo
from memearena.stats.elo import online_elo_codes

WIN = {1.0: "model_a", 0.0: "model_b", 0.5: "tie"}


def b(a: str, c: str, w: str) -> Battle:
    return Battle(model_a=a, model_b=c, winner=w)  # type: ignore[arg-type]


def test_first_win_moves_both_by_half_k() -> None:
    assert online_elo([b("x", "y", "model_a")]) == {"x": 1002.0, "y": 998.0}


def test_second_update_uses_the_expected_score() -> None:
    ratings = online_elo([b("x", "y", "model_a"), b("x", "y", "model_b")])
    expected_y = 1 / (1 + 10 ** ((1002 - 998) / 400))  # 0.49424...
    assert ratings["y"] == pytest.approx(998 + 4 * (1 - expected_y))
    assert ratings["x"] == pytest.approx(1002 - 4 * (1 - expected_y))
    assert ratings["y"] == pytest.approx(1000.0230, abs=1e-4)


def test_a_tie_between_equals_changes_nothing_and_counts_half() -> None:
    assert online_elo([b("x", "y", "tie")]) == {"x": 1000.0, "y": 1000.0}
    after = online_elo([b("x", "y", "model_a"), b("x", "y", "tie (bothbad)")], k=32)
    expected_x = 1 / (1 + 10 ** ((984 - 1016) / 400))
    assert after["x"] == pytest.approx(1016 + 32 * (0.5 - expected_x))


def test_k_scale_base_and_init_are_configurable() -> None:
    r = online_elo([b("x", "y", "model_b")], k=10, init=1500, scale=200, base=math_e())
    assert r == {"x": 1495.0, "y": 1505.0}


def math_e() -> float:
    import math

    return math.e


def test_shuffled_average_is_seeded_and_order_free() -> None:
    battles = [b("x", "y", "model_a")] * 5 + [b("x", "y", "model_b")] * 5
    ordered = online_elo(battles)
    one = online_elo(battles, shuffles=20, seed=3)
    assert one == online_elo(battles, shuffles=20, seed=3)
    assert one != online_elo(battles, shuffles=20, seed=4)
    assert one != ordered
    assert sum(one.values()) == pytest.approx(2000.0)  # Elo is zero-sum


def reference_elo(rows: list[tuple[str, str, float]], k: float = 4.0) -> dict[str, float]:
    """The textbook per-battle update, one dict lookup at a time."""
    ratings = dict.fromkeys(sorted({r[0] for r in rows} | {r[1] for r in rows}), 1000.0)
    for a, b, score_a in rows:
        ra, rb = ratings[a], ratings[b]
        expected_a = 1.0 / (1.0 + 10.0 ** ((rb - ra) / 400.0))
        delta = k * (score_a - expected_a)
        ratings[a], ratings[b] = ra + delta, rb - delta
    return ratings


def test_coded_pass_is_bit_identical_to_the_sequential_update() -> None:
    rng = np.random.default_rng(11)
    m, n = 40, 20_000
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    score = rng.choice([0.0, 0.5, 1.0], n)
    names = [f"m{k:02d}" for k in range(m)]
    rows = [(names[x], names[y], s) for x, y, s in zip(a, b, score, strict=True)]
    coded = online_elo_codes(a, b, score, m, k=8.0)
    assert {names[i]: float(r) for i, r in enumerate(coded)} == reference_elo(rows, k=8.0)
    battles = [Battle(model_a=x, model_b=y, winner=WIN[s]) for x, y, s in rows[:2000]]
    assert online_elo(battles) == reference_elo(rows[:2000])
