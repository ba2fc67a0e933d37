"""The Wilson interval: never zero width, always inside [0, 1], always around the proportion."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memearena.stats import wilson_interval


@given(st.integers(1, 2000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_the_interval_holds_the_proportion_and_is_never_empty(kn: tuple[int, int]) -> None:
    k, n = kn
    lo, hi = wilson_interval(k, n)
    assert 0.0 <= lo <= k / n <= hi <= 1.0
    assert hi - lo > 0


def test_known_values_at_the_edges() -> None:
    assert wilson_interval(0, 1) == (0.0, pytest.approx(0.7935, abs=1e-4))
    assert wilson_interval(1, 1) == (pytest.approx(0.2065, abs=1e-4), 1.0)
    lo, hi = wilson_interval(0, 20)
    assert lo == 0.0 and math.isclose(hi, 0.1611, abs_tol=1e-4)
    lo, hi = wilson_interval(5, 10)
    assert math.isclose(lo, 0.2366, abs_tol=1e-4) and math.isclose(hi, 0.7634, abs_tol=1e-4)


def test_bad_counts_are_refused() -> None:
    with pytest.raises(ValueError):
        wilson_interval(0, 0)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_widened_interval_is_wilsons_or_the_wider_given_bounds() -> None:
    from memearena.stats.proportion import widened_interval

    lo, hi = wilson_interval(0, 20)
    assert widened_interval(0.0, 20, 0.0, 0.0) == (0.0, hi)  # a collapsed bootstrap widened
    assert widened_interval(0.5, 20, 0.1, 0.95) == (0.1, 0.95)  # a wider bootstrap kept
    assert widened_interval(0.0, 20, None, None) == (lo, hi)
    assert widened_interval(None, 20, 0.2, 0.3) == (0.2, 0.3)  # nothing to widen
    assert widened_interval(0.4, 0, 0.2, 0.3) == (0.2, 0.3)
