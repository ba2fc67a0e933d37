"""NDCG (linear gains, log2 discount) and rank correlations on hand-computed cases."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import kendalltau, spearmanr

from memearena.stats import StatsError, kendall_tau, ndcg, spearman_rho

REF = ["a", "b", "c"]
IDEAL = 3 / 1 + 2 / math.log2(3) + 1 / 2


def test_ndcg_of_the_reference_itself_is_one() -> None:
    assert ndcg(REF, REF) == pytest.approx(1.0)


def test_ndcg_of_the_reversed_ranking_by_hand() -> None:
    dcg = 1 / 1 + 2 / math.log2(3) + 3 / 2
    assert ndcg(["c", "b", "a"], REF) == pytest.approx(dcg / IDEAL)
    assert ndcg(["c", "b", "a"], REF) == pytest.approx(0.790, abs=1e-3)


def test_ndcg_missing_and_extra_models() -> None:
    # A reference model missing from the ranking earns nothing...
    assert ndcg(["a", "b"], REF) == pytest.approx((3 + 2 / math.log2(3)) / IDEAL)
    # ...and a model outside the reference has relevance 0 but takes a place.
    assert ndcg(["x", "a", "b", "c"], REF) == pytest.approx(
        (3 / math.log2(3) + 2 / 2 + 1 / math.log2(5)) / IDEAL
    )


def test_ndcg_rejects_duplicates() -> None:
    with pytest.raises(StatsError):
        ndcg(["a", "a", "b"], REF)


@given(st.permutations(list("abcdefg")))
def test_ndcg_equals_standard_ndcg_with_gains_equal_to_relevance(perm: list[str]) -> None:
    reference = list("abcdefg")
    gains = np.array([len(reference) - reference.index(m) for m in perm], dtype=float)
    discounts = 1 / np.log2(np.arange(len(perm)) + 2)
    expected = (gains * discounts).sum() / (np.sort(gains)[::-1] * discounts).sum()
    assert ndcg(perm, reference) == pytest.approx(expected)
    assert 0 < ndcg(perm, reference) <= 1 + 1e-12


def test_kendall_tau_by_hand() -> None:
    # One discordant pair out of six: (5 - 1) / 6.
    assert kendall_tau(["a", "b", "d", "c"], ["a", "b", "c", "d"]) == pytest.approx(2 / 3)
    assert kendall_tau(["d", "c", "b", "a"], ["a", "b", "c", "d"]) == pytest.approx(-1.0)


def test_spearman_rho_by_hand() -> None:
    # One adjacent swap of four: 1 - 6 * 2 / (4 * 15).
    assert spearman_rho(["a", "b", "d", "c"], ["a", "b", "c", "d"]) == pytest.approx(0.8)


def test_rank_correlations_use_the_common_models() -> None:
    assert kendall_tau(["a", "x", "b", "c"], ["a", "b", "c", "y"]) == pytest.approx(1.0)
    with pytest.raises(StatsError):
        kendall_tau(["a", "x"], ["a", "y"])


@given(st.permutations(list("abcdefghij")), st.permutations(list("abcdefghij")), st.integers(0, 4))
def test_rank_correlations_match_scipy(ranking: list[str], reference: list[str], drop: int) -> None:
    # Drop a few models from each side so that only some are shared (positions then have gaps).
    ranking, reference = ranking[drop:], reference[: len(reference) - drop]
    common = [m for m in ranking if m in reference]
    if len(common) < 2:
        return
    x = [ranking.index(m) for m in common]
    y = [reference.index(m) for m in common]
    assert kendall_tau(ranking, reference) == pytest.approx(kendalltau(x, y).statistic)
    assert spearman_rho(ranking, reference) == pytest.approx(spearmanr(x, y).statistic)


def test_importing_the_package_does_not_import_scipy() -> None:
    # scipy.stats and scipy.special take most of a second to import; they load on first use.
    code = "import sys, memearena.stats; print(any(m.startswith('scipy') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
