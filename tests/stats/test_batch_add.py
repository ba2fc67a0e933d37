"""The column-wise (batch) adds count exactly what one add per battle counts, and fail alike."""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memearena.stats import StatsError, Verdict, VerdictMetrics
from memearena.stats.cluster import (
    BattleCodes,
    ClusteredCounts,
    ClusteredCountsBuilder,
    ClusterIndex,
)
from memearena.stats.leaderboard import LeaderboardAccumulator
from memearena.stats.style import LengthObservations

MODELS = ("m0", "m1", "m2", "m3")
names = st.sampled_from([*MODELS, "stranger"])
winners = st.sampled_from(["model_a", "model_b", "tie", "tie (bothbad)", "both"])
clusters = st.one_of(st.sampled_from(["x", "y", "z"]), st.tuples(st.integers(0, 3), st.just("c")))
battle = st.tuples(names, names, winners, clusters)
valid_battle = st.tuples(
    st.sampled_from(MODELS), st.sampled_from(MODELS), st.sampled_from(["model_a", "model_b", "tie"])
).filter(lambda t: t[0] != t[1])


def _error(fn: object) -> str | None:
    try:
        fn()  # type: ignore[operator]
    except StatsError as e:
        return str(e)
    return None


def _same_counts(x: ClusteredCounts, y: ClusteredCounts) -> None:
    assert x.models == y.models and x.n_clusters == y.n_clusters
    for f in ("cluster", "i", "j", "outcome", "count"):
        a, b = getattr(x, f), getattr(y, f)
        assert a.dtype == b.dtype and np.array_equal(a, b), f


def _columns(rows: list[tuple[str, str, str, Hashable]]) -> tuple[list, list, list, list]:
    return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(battle, max_size=20), max_size=3))
def test_builder_add_many_equals_one_add_per_battle(
    blocks: list[list[tuple[str, str, str, Hashable]]],
) -> None:
    one, many = ClusteredCountsBuilder(MODELS), ClusteredCountsBuilder(MODELS)
    for rows in blocks:

        def row_by_row(rows: list[tuple[str, str, str, Hashable]] = rows) -> None:
            for r in rows:
                one.add(*r)

        assert _error(lambda rows=rows: many.add_many(*_columns(rows))) == _error(row_by_row)
    _same_counts(one.build(), many.build())
    assert one.index.keys() == many.index.keys()


@settings(max_examples=60, deadline=None)
@given(st.lists(battle, max_size=30))
def test_leaderboard_add_many_equals_one_add_per_battle(
    rows: list[tuple[str, str, str, Hashable]],
) -> None:
    one = LeaderboardAccumulator(MODELS, elo_k=8.0)
    many = LeaderboardAccumulator(MODELS, elo_k=8.0)

    def row_by_row() -> None:
        for r in rows:
            one.add(*r)

    assert _error(lambda: many.add_many(*_columns(rows))) == _error(row_by_row)
    _same_counts(one.counts(), many.counts())
    assert one.n == many.n
    # Online Elo is sequential: the batch replays it in the same order, to the bit.
    assert [one.elo[m].hex() for m in MODELS] == [many.elo[m].hex() for m in MODELS]


def test_first_invalid_row_names_its_own_problem() -> None:
    pos = {m: k for k, m in enumerate(MODELS)}
    codes = BattleCodes.encode(
        pos, ["m0", "m1", "m2", "m0"], ["m1", "m1", "zz", "m0"], ["tie", "nope", "tie", "tie"]
    )
    assert codes.valid == 1 and str(codes.error) == "battle compares 'm1' with itself"
    assert BattleCodes.encode(pos, ["m0"], ["m1"], ["won"]).error is not None
    assert str(BattleCodes.encode(pos, ["m0"], ["m1"], ["won"]).error) == "unknown winner 'won'"
    acc = LeaderboardAccumulator(MODELS)
    with pytest.raises(StatsError, match="model 'zz', not in the model list"):
        acc.add_many(["m0", "m2"], ["m1", "zz"], ["tie", "tie"], ["a", "b"])
    assert acc.n == 1  # the row before the invalid one was counted, as add would


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 6), max_size=40), st.lists(st.integers(0, 6), max_size=20))
def test_cluster_index_codes_keep_first_seen_order(first: list[int], then: list[int]) -> None:
    one, many = ClusterIndex(), ClusterIndex()
    expected = [one(k) for k in first] + [one(k) for k in then]
    got = [
        *many.codes(np.array(first, dtype=np.int64)),
        *many.codes(np.array(then, dtype=np.int64)),
    ]
    assert got == expected and one.keys() == many.keys()


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(valid_battle, st.integers(0, 50), st.integers(0, 50), st.integers(0, 4)),
        max_size=40,
    )
)
def test_length_add_codes_equal_one_add_per_battle(
    rows: list[tuple[tuple[str, str, str], int, int, int]],
) -> None:
    one, many = LengthObservations(MODELS), LengthObservations(MODELS)
    for (a, b, w), la, lb, c in rows:
        one.add(a, b, w, la, lb, c)
    pos = {m: k for k, m in enumerate(MODELS)}
    codes = BattleCodes.encode(
        pos, [r[0][0] for r in rows], [r[0][1] for r in rows], [r[0][2] for r in rows]
    )
    assert codes.error is None
    cl = many.index.codes(np.array([r[3] for r in rows], dtype=np.int64))
    many.add_codes(codes.a, codes.b, codes.kind, [r[1] for r in rows], [r[2] for r in rows], cl)
    for x, y in zip(one.arrays(), many.arrays(), strict=True):
        assert x.dtype == y.dtype and np.array_equal(x, y)
        if x.dtype.kind == "f":  # the same bits, signed zeros included
            assert [math.copysign(1, v) for v in x] == [math.copysign(1, v) for v in y]


def _verdict_rows(winner: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.tuples(
        st.sampled_from(["j1", "j2", "j3"]),
        st.sampled_from(["i1", "i2"]),
        st.sampled_from(MODELS[:3]),
        st.sampled_from(MODELS[:3]),
        winner,
        st.sampled_from(["c1", "c2", None]),
        st.one_of(st.none(), st.integers(1, 9)),
        st.one_of(st.none(), st.integers(1, 9)),
        st.one_of(st.none(), st.sampled_from(["u1", "u2", "u3"])),
    )


valid_verdict = _verdict_rows(st.sampled_from(["model_a", "model_b", "tie"])).filter(
    lambda r: r[2] != r[3]
)
any_verdict = _verdict_rows(st.sampled_from(["model_a", "model_b", "tie", "nobody"]))
verdict_batch = st.tuples(
    st.lists(valid_verdict, max_size=12), st.one_of(st.none(), any_verdict), st.integers(0, 12)
).map(lambda t: t[0] if t[1] is None else [*t[0][: t[2]], t[1], *t[0][t[2] :]])


def _metrics() -> VerdictMetrics:
    return VerdictMetrics(
        own_models={"j1": "m0", "j3": ["m1", "m2"]},
        panel=["j1", "j2", "j3"],
        pairs=[("j1", "j2"), ("j1", "j3"), ("j2", "j3")],
    )


def _figures(vm: VerdictMetrics) -> list[Any]:
    out: list[Any] = [
        vm.position_consistency(n_boot=20),
        vm.prefer_first_rate(n_boot=20),
        vm.prefer_longer_rate(n_boot=20),
        vm.relative_longer_rate(n_boot=20),
        vm.self_preference(n_boot=20),
        vm.krippendorff_alpha(n_boot=20),
        *(vm.cohen_kappa(a, b, n_boot=20) for a, b in vm.pairs),
    ]
    return [repr(x) for x in out]  # NaN-safe, to the last digit printed


@settings(max_examples=60, deadline=None)
@given(st.lists(verdict_batch, max_size=3))
def test_verdict_rows_aggregate_as_verdicts_do(batches: list[list[tuple[Any, ...]]]) -> None:
    objects, rows = _metrics(), _metrics()
    for batch in batches:

        def as_objects(batch: list[tuple[Any, ...]] = batch) -> None:
            objects.add([Verdict(*r) for r in batch])

        assert _error(lambda batch=batch: rows.add_rows(batch)) == _error(as_objects)
    assert objects.judges == rows.judges
    assert _figures(objects) == _figures(rows)
