"""BD / BC on hand-computed tables, aggregation, exclusions and intervals."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memearena.stats import (
    BIAS_TYPES,
    BiasPair,
    StatsError,
    bias_conformity,
    bias_deviation,
    bias_table,
)


def test_bd_hand_computed() -> None:
    # (5 -> 3): 2/4 = 0.5; (10 -> 10): 0; (4 -> 6): score rose, max(0, -2) = 0; (3 -> 1): 2/2 = 1
    assert bias_deviation([5, 10, 4, 3], [3, 10, 6, 1]) == pytest.approx((0.5 + 0 + 0 + 1) / 4)


def test_bd_skips_y_equal_one_and_is_none_without_qualifying_pairs() -> None:
    assert bias_deviation([1, 5], [1, 1]) == pytest.approx(1.0)  # only (5 -> 1) qualifies
    assert bias_deviation([1, 1], [1, 5]) is None
    assert bias_deviation([], []) is None


def test_bc_hand_computed_including_scale_ends() -> None:
    # y=5: denom max(4, 5) = 5 -> 1 - 2/5; y=10: denom 9 -> 1 - 3/9; y=1: denom 9 -> 1 - 9/9
    got = bias_conformity([5, 10, 1], [7, 7, 10])
    assert got == pytest.approx(((1 - 2 / 5) + (1 - 3 / 9) + 0.0) / 3)


def test_bc_ties_are_perfectly_stable() -> None:
    assert bias_conformity([3, 8, 10, 1], [3, 8, 10, 1]) == pytest.approx(1.0)


def test_bc_other_scale() -> None:
    # S = 5, y = 4: denom max(3, 1) = 3
    assert bias_conformity([4], [2], scale=5) == pytest.approx(1 - 2 / 3)


def test_missing_scores_are_skipped_not_counted_as_numbers() -> None:
    assert bias_deviation([5, None, 5], [3, 1, None]) == pytest.approx(0.5)
    assert bias_conformity([None], [5]) is None


def test_length_mismatch_is_an_error() -> None:
    with pytest.raises(StatsError):
        bias_deviation([1, 2], [1])


def _pairs(bias_type: str, ys: list[int | None], hs: list[int | None]) -> list[BiasPair]:
    return [
        BiasPair(f"{bias_type}-{i}", bias_type, y, h)
        for i, (y, h) in enumerate(zip(ys, hs, strict=True))
    ]


def test_table_types_categories_overall_and_no_data() -> None:
    pairs = _pairs("text_dominance", [5, 3], [1, 3])  # BD terms 1, 0 -> 0.5
    pairs += _pairs("image_dominance", [10, 1], [1, 1])  # 1; y = 1 excluded -> 1.0
    pairs += _pairs("image_misalignment", [6, None], [1, 2])  # 1; one unparsed -> 1.0
    pairs += _pairs("texture_insertion", [5, 5], [5, 10])  # 1, 0 -> 0.5
    t = bias_table(pairs, n_boot=200, seed=1)
    assert t.types["text_dominance"].value == pytest.approx(0.5)
    assert t.types["text_dominance"].pairs == 2
    assert t.types["image_dominance"].value == pytest.approx(1.0)
    assert t.types["image_dominance"].excluded == 1
    assert t.types["image_misalignment"].excluded == 1
    assert t.types["response_dominance"].value is None  # no data, not 0
    assert t.types["response_dominance"].pairs == 0
    # category = plain mean of its types with data (not pooled over pairs)
    assert t.categories["integrality"].value == pytest.approx((0.5 + 1.0) / 2)
    assert t.categories["integrality"].pairs == 3
    assert t.categories["congruity"].value == pytest.approx(1.0)
    assert t.categories["robustness"].value == pytest.approx(0.5)
    assert t.overall.value == pytest.approx((0.5 + 1.0 + 1.0 + 0.5) / 4)
    assert t.overall.metric == "mixed"
    assert list(t.types) == list(BIAS_TYPES)


def test_empty_category_is_no_data() -> None:
    t = bias_table(_pairs("texture_insertion", [5], [5]), n_boot=50)
    assert t.categories["integrality"].value is None
    assert t.categories["integrality"].ci_low is None
    assert t.overall.value == pytest.approx(1.0)


def test_empty_table_is_no_data_everywhere() -> None:
    t = bias_table([], n_boot=50)
    assert t.overall.value is None and t.overall.pairs == 0


def test_unknown_bias_type_is_an_error() -> None:
    with pytest.raises(StatsError, match="unknown bias type 'nope'"):
        bias_table([BiasPair("1", "nope", 5, 5)])


def test_interval_brackets_value_and_shrinks_with_items() -> None:
    import random

    rng = random.Random(3)

    def make(n: int) -> list[BiasPair]:
        return [
            BiasPair(str(i), "text_dominance", rng.randint(2, 10), rng.randint(1, 10))
            for i in range(n)
        ]

    small = bias_table(make(30), n_boot=400, seed=0).types["text_dominance"]
    big = bias_table(make(600), n_boot=400, seed=0).types["text_dominance"]
    for f in (small, big):
        assert f.ci_low is not None and f.ci_high is not None and f.value is not None
        assert f.ci_low <= f.value <= f.ci_high
    assert (big.ci_high - big.ci_low) < (small.ci_high - small.ci_low)  # type: ignore[operator]


def test_bootstrap_unit_is_the_item() -> None:
    # One item with many identical pairs: resampling items can only ever draw that item.
    pairs = [BiasPair("only", "text_dominance", 5, 3) for _ in range(50)]
    f = bias_table(pairs, n_boot=100).types["text_dominance"]
    assert f.ci_low == pytest.approx(0.5) and f.ci_high == pytest.approx(0.5)


scores = st.integers(min_value=1, max_value=10)


@given(st.lists(st.tuples(scores, scores), min_size=1, max_size=40))
def test_metrics_stay_in_unit_interval(pairs: list[tuple[int, int]]) -> None:
    ys, hs = [p[0] for p in pairs], [p[1] for p in pairs]
    bd = bias_deviation(ys, hs)
    bc = bias_conformity(ys, hs)
    assert bc is not None and 0.0 <= bc <= 1.0
    assert bd is None or 0.0 <= bd <= 1.0
    assert (bd is None) == all(y == 1 for y in ys)


def test_table_does_not_depend_on_arrival_order() -> None:
    import random

    rng = random.Random(5)
    pairs = [
        BiasPair(str(i % 13), t, rng.randint(1, 10), rng.randint(1, 10))
        for i in range(120)
        for t in ("text_dominance", "detail_description")
    ]
    shuffled = pairs[:]
    rng.shuffle(shuffled)
    a, b = bias_table(pairs, n_boot=100), bias_table(shuffled, n_boot=100)
    for name in a.types:
        fa, fb = a.types[name], b.types[name]
        assert (fa.pairs, fa.excluded) == (fb.pairs, fb.excluded)
        for x, y in ((fa.value, fb.value), (fa.ci_low, fb.ci_low), (fa.ci_high, fb.ci_high)):
            assert x == pytest.approx(y, abs=1e-12)  # sums in another order: rounding only


@pytest.mark.parametrize("cells", [1, 7, 1 << 20])
def test_unit_ratio_interval_is_the_one_a_single_weight_draw_gives(cells, monkeypatch):
    # Weights drawn and multiplied in blocks of rows (flat memory over many units) resample
    # exactly as one draw of the whole matrix: with whole-number values every product is exact
    # in any summation order, so the interval is the same to the last bit; with real values it
    # is when the matrix fits one block, and within rounding of the dot products otherwise.
    import numpy as np

    import memearena.stats.judge_bias as jb

    rng = np.random.default_rng(5)
    monkeypatch.setattr(jb, "_BOOT_CELLS", cells)
    w = np.random.default_rng(11).multinomial(301, np.full(301, 1 / 301), size=200)
    whole = rng.integers(0, 9, 301).astype(float), rng.integers(1, 4, 301).astype(float)
    real = rng.random(301) * 9, rng.random(301) + 0.5
    for (num, den), exact in ((whole, True), (real, cells >= 200 * 301)):
        got = jb.unit_ratio(list(num), list(den), n_boot=200, seed=11)
        lo, hi = jb._interval((w @ num) / (w @ den), 0.95)
        if exact:
            assert (got.ci_low, got.ci_high) == (lo, hi)
        else:
            assert (got.ci_low, got.ci_high) == (
                pytest.approx(lo, rel=1e-12),
                pytest.approx(hi, rel=1e-12),
            )


_SCORE = st.one_of(st.none(), st.integers(1, 10), st.floats(1, 10).map(lambda x: round(x, 1)))
_PAIR = st.tuples(
    st.sampled_from(["a", "b", "c"]), st.sampled_from(list(BIAS_TYPES)), _SCORE, _SCORE
)


@given(st.lists(_PAIR, max_size=80), st.integers(1, 9), st.integers(1, 3))
def test_streamed_terms_are_the_sums_in_arrival_order(pairs, batch, groups) -> None:
    # The builder adds a cell's terms in the order the pairs arrive, however they are batched:
    # the sums are those of a plain loop over the pairs, to the last bit.
    import numpy as np

    from memearena.stats import BiasTermsBuilder, bias_terms
    from memearena.stats.judge_bias import _bc_term, _bd_term

    items = ["a", "b", "c"]
    types = list(BIAS_TYPES)
    b = BiasTermsBuilder(items, groups)
    nan = float("nan")
    for k in range(0, len(pairs), batch):
        part = pairs[k : k + batch]
        b.add(
            np.array([(k + i) % groups for i in range(len(part))]),
            np.array([items.index(p[0]) for p in part], dtype=np.intp),
            np.array([types.index(p[1]) for p in part], dtype=np.intp),
            np.array([nan if p[2] is None else p[2] for p in part], dtype=float),
            np.array([nan if p[3] is None else p[3] for p in part], dtype=float),
        )
    for g in range(groups):
        mine = [p for i, p in enumerate(pairs) if i % groups == g]
        sums: dict[tuple[str, str], float] = {}
        for item, t, y, h in mine:
            if y is None or h is None:
                continue
            bd = BIAS_TYPES[t][1] == "bd"
            term = _bd_term(float(y), float(h)) if bd else _bc_term(float(y), float(h), 10)
            if term is not None:
                sums[(item, t)] = sums.get((item, t), 0.0) + term
        got = b.terms(g)
        assert got.items == bias_terms([BiasPair(*p) for p in mine]).items
        for (item, t), v in sums.items():
            assert got.sums[got.items.index(item), types.index(t)] == v  # exactly
        want = bias_terms([BiasPair(*p) for p in mine])
        for name in ("sums", "counts", "scored", "excluded"):
            assert np.array_equal(getattr(got, name), getattr(want, name))


def test_unit_ratios_share_one_draw() -> None:
    from memearena.stats.judge_bias import unit_ratio, unit_ratios

    a, b, den = [3.0, 1.5, 0.25, 7.0, 2.0], [0.1, 0.2, 0.3, 0.4, 0.5], [1.0] * 5
    got = unit_ratios([a, b], den, n_boot=300, seed=4)
    assert got == [unit_ratio(a, den, n_boot=300, seed=4), unit_ratio(b, den, n_boot=300, seed=4)]
    with pytest.raises(StatsError):
        unit_ratios([a, b[:3]], den)


@pytest.mark.parametrize("cells", [1, 50, 1 << 18])
def test_item_weights_are_one_multinomial_draw_however_they_are_blocked(cells, monkeypatch):
    import numpy as np

    import memearena.stats.judge_bias as jb

    monkeypatch.setattr(jb, "_BOOT_CELLS", cells)
    want = np.random.default_rng(3).multinomial(17, np.full(17, 1 / 17), size=120)
    got = jb.bootstrap_weights(17, 120, 3)
    assert got.dtype == np.float64 and np.array_equal(got, want)


def test_holm_adjusts_one_family_and_leaves_untested_out() -> None:
    from memearena.stats.judge_bias import holm_adjusted

    adj = holm_adjusted([0.01, 0.04, 0.03, None])
    # Sorted: 0.01 × 3, 0.03 × 2, 0.04 × 1 — kept non-decreasing.
    assert adj[0] == pytest.approx(0.03)
    assert adj[2] == pytest.approx(0.06) and adj[1] == pytest.approx(0.06)
    assert adj[3] is None
    assert holm_adjusted([0.5, 0.9]) == [1.0, 1.0]


@given(st.lists(st.one_of(st.none(), st.floats(0, 1)), max_size=20))
def test_holm_never_lowers_a_p_value_and_keeps_their_order(ps: list[float | None]) -> None:
    from memearena.stats.judge_bias import holm_adjusted

    adj = holm_adjusted(ps)
    pairs = [(p, a) for p, a in zip(ps, adj, strict=True) if p is not None]
    assert all(a is not None and p <= a <= 1.0 for p, a in pairs)
    for p, a in pairs:
        for q, b in pairs:
            if p < q:
                assert a is not None and b is not None and a <= b


def test_studentized_p_reads_the_bootstrap_standard_error() -> None:
    from memearena.stats.judge_bias import studentized_p

    rng = np.random.default_rng(0)
    reps = 2.0 + rng.normal(0, 1, 20000)
    above = studentized_p(2.0, reps, 0.0, 1, 100_000)
    below = studentized_p(2.0, reps, 0.0, -1, 100_000)
    both = studentized_p(2.0, reps, 0.0, 0, 100_000)
    assert above == pytest.approx(0.0228, abs=0.002)
    assert below == pytest.approx(1 - 0.0228, abs=0.002)
    assert both == pytest.approx(2 * above)
    # Few units: Student's t with n − 1 degrees of freedom is wider than the normal.
    few = studentized_p(2.0, reps, 0.0, 1, 10)
    assert few is not None and few > above * 1.5
    # A zero-width interval, one unit or no estimate is not testable.
    assert studentized_p(2.0, np.full(100, 2.0), 0.0, 1, 30) is None
    assert studentized_p(2.0, reps, 0.0, 1, 1) is None
    assert studentized_p(None, reps, 0.0, 1, 30) is None
