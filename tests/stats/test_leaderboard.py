"""Win rates and leaderboards, overall and grouped."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memearena.stats import (
    Battle,
    DisconnectedComparisonError,
    LeaderboardRow,
    average_win_rate,
    grouped_leaderboards,
    leaderboard,
    win_rate_matrix,
)


def b(a: str, c: str, w: str, **extra: str) -> Battle:
    return Battle(model_a=a, model_b=c, winner=w, **extra)  # type: ignore[arg-type]


BATTLES = [
    b("x", "y", "model_a", criterion="relevance", source="s1"),
    b("y", "x", "model_b", criterion="relevance", source="s1"),
    b("x", "y", "tie", criterion="accuracy", source="s2"),
    b("y", "z", "model_a", criterion="accuracy", source="s2"),
    b("z", "y", "tie (bothbad)", criterion="relevance", source="s1"),
    b("x", "z", "model_a", criterion="accuracy", source="s2"),
    b("z", "x", "model_a", criterion="relevance", source="s1"),
    b("y", "z", "model_b", criterion="accuracy", source="s2"),
]


def test_win_rate_matrix_counts_ties_half_and_marks_unmet_pairs() -> None:
    models, w = win_rate_matrix(
        [b("x", "y", "model_a"), b("y", "x", "tie"), b("y", "z", "model_b")]
    )
    assert models == ("x", "y", "z")
    assert w[0, 1] == pytest.approx(0.75) and w[1, 0] == pytest.approx(0.25)
    assert w[2, 1] == 1.0 and math.isnan(w[0, 2]) and math.isnan(w[0, 0])
    avg = average_win_rate([b("x", "y", "model_a"), b("y", "x", "tie"), b("y", "z", "model_b")])
    assert avg == pytest.approx({"x": 0.75, "y": 0.125, "z": 1.0})


def test_leaderboard_rows_follow_the_rank_contract() -> None:
    rows = leaderboard(BATTLES, bootstrap=100)
    assert all(isinstance(r, LeaderboardRow) for r in rows)
    assert set(rows[0].model_dump()) == {
        "model",
        "rank",
        "rank_ub",
        "elo",
        "bt",
        "ci_low",
        "ci_high",
        "win_rate",
        "battles",
        "mle",
    }
    assert [r.rank for r in rows] == [1, 2, 3]
    assert [r.bt for r in rows] == sorted((r.bt for r in rows), reverse=True)
    assert np.mean([r.bt for r in rows]) == pytest.approx(1000)
    assert {r.model: r.battles for r in rows} == {"x": 5, "y": 6, "z": 5}
    assert all(r.ci_low <= r.bt <= r.ci_high for r in rows)


def test_leaderboard_anchor_puts_that_model_at_1000() -> None:
    rows = leaderboard(BATTLES, bootstrap=50, anchor="z")
    assert {r.model: r.bt for r in rows}["z"] == 1000.0


def test_grouped_leaderboards_by_declared_and_extra_fields() -> None:
    by_criterion = grouped_leaderboards(BATTLES, by="criterion", bootstrap=20)
    assert set(by_criterion) == {"accuracy", "relevance"}
    assert sum(r.battles for r in by_criterion["accuracy"]) == 2 * 4
    by_source = grouped_leaderboards(BATTLES, by="source", bootstrap=20)
    assert set(by_source) == {"s1", "s2"}
    missing = grouped_leaderboards(BATTLES, by="judge", bootstrap=20)
    assert set(missing) == {"(none)"}


def test_grouped_error_names_the_group() -> None:
    style = [b("p", "q", "tie", criterion="style"), b("r", "s", "tie", criterion="style")]
    with pytest.raises(DisconnectedComparisonError, match=r"^criterion='style'"):
        grouped_leaderboards([*BATTLES, *style], by="criterion")


def test_elo_can_be_averaged_over_shuffled_orders_without_touching_bt() -> None:
    plain = {r.model: r for r in leaderboard(BATTLES, bootstrap=0)}
    shuffled = {r.model: r for r in leaderboard(BATTLES, bootstrap=0, elo_shuffles=30, seed=1)}
    assert all(plain[m].bt == shuffled[m].bt for m in plain)
    assert any(plain[m].elo != shuffled[m].elo for m in plain)
    assert plain["x"].ci_low == plain["x"].bt  # no bootstrap: a zero-width interval
