"""stats.human against the project's other implementations and the textbook formulas."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from memearena.stats import nominal_alpha
from memearena.stats.human import (
    alpha_codes,
    bt_ranking,
    cohen_kappa_codes,
    mean_codes,
    narrowing,
    plurality,
)

units = st.lists(
    st.lists(st.one_of(st.none(), st.integers(0, 2)), min_size=3, max_size=3),
    min_size=2,
    max_size=30,
)


@settings(max_examples=60)
@given(units)
def test_alpha_equals_the_panel_alpha_of_stats_agreement(table: list[list[int | None]]) -> None:
    pairable = [u for u in table if sum(v is not None for v in u) >= 2]
    values = {v for u in pairable for v in u if v is not None}
    if not pairable or len(values) < 2:
        return
    mine = alpha_codes(table, list(range(len(table))), 3, n_boot=0)
    assert math.isclose(mine.value, nominal_alpha(table), rel_tol=1e-9, abs_tol=1e-12)


@settings(max_examples=60)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=2, max_size=40))
def test_kappa_is_cohens_formula(pairs: list[tuple[int, int]]) -> None:
    x, y = [a for a, _ in pairs], [b for _, b in pairs]
    n = len(pairs)
    p_o = sum(a == b for a, b in pairs) / n
    p_e = sum((x.count(c) / n) * (y.count(c) / n) for c in range(3))
    kappa, agree = cohen_kappa_codes(x, y, list(range(n)), 3, n_boot=50)
    assert math.isclose(agree.value, p_o)
    if p_e < 1:
        assert math.isclose(kappa.value, (p_o - p_e) / (1 - p_e), abs_tol=1e-12)
        assert kappa.ci_low <= kappa.ci_high
    else:
        assert math.isnan(kappa.value)


def test_clusters_move_together_in_the_bootstrap() -> None:
    # Two clusters, each internally constant: the mean's interval spans the cluster means.
    est = mean_codes([0.0] * 10 + [1.0] * 10, ["a"] * 10 + ["b"] * 10, n_boot=500)
    assert est.value == 0.5 and est.clusters == 2 and est.ci_low == 0.0 and est.ci_high == 1.0


def test_bt_ranks_the_stronger_model_first_and_plurality_needs_a_unique_top() -> None:
    outcomes = [(0, 1, 1.0)] * 8 + [(0, 1, 0.0)] * 2 + [(1, 2, 1.0)] * 7 + [(1, 2, 0.5)] * 3
    point, boot = bt_ranking(outcomes, list(range(len(outcomes))), 3, n_boot=100)
    assert point[0] > point[1] > point[2] and boot.shape == (100, 3)
    assert plurality(["A", "A", "B"]) == "A" and plurality(["A", "B"]) is None
    assert narrowing(0.1, 3) == 0.1 * (1 - math.sqrt(3 / 4))
