"""Online Elo: hand-computed updates, ties, shuffled averaging."""

from __future__ import annotations

import pytest

from memearena.stats import Battle, online_elo


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
