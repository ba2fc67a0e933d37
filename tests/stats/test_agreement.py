"""Judge agreement and bias metrics on hand-made cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memearena.stats import (
    StatsError,
    Verdict,
    agreement,
    cohen_kappa,
    krippendorff_alpha,
    nominal_alpha,
    position_consistency,
    prefer_first_rate,
    prefer_longer_rate,
    self_preference,
)

LABELS = ("model_a", "model_b", "tie")


def v(judge: str, item: str, a: str, b: str, winner: str, **kw: object) -> Verdict:
    return Verdict(judge=judge, item=item, model_a=a, model_b=b, winner=winner, **kw)  # type: ignore[arg-type]


def both_orders(judge: str, item: str, first_wins_twice: bool) -> list[Verdict]:
    """x vs y shown both ways; either the same model wins both times, or position A does."""
    if first_wins_twice:
        return [v(judge, item, "x", "y", "model_a"), v(judge, item, "y", "x", "model_a")]
    return [v(judge, item, "x", "y", "model_a"), v(judge, item, "y", "x", "model_b")]


def test_perfect_position_consistency_is_one() -> None:
    verdicts = [x for k in range(10) for x in both_orders("j", f"i{k}", first_wins_twice=False)]
    est = position_consistency(verdicts)["j"]
    assert est.value == 1.0 and est.ci_low == 1.0 and est.ci_high == 1.0 and est.n == 10


def test_position_consistency_counts_disagreeing_orders() -> None:
    verdicts = [
        x for k in range(10) for x in both_orders("j", f"i{k}", first_wins_twice=k % 2 == 0)
    ]
    verdicts.append(v("j", "lonely", "x", "y", "model_a"))  # only one order: not a pair
    est = position_consistency(verdicts, n_boot=500, seed=1)["j"]
    assert est.value == 0.5 and est.n == 10
    assert 0.0 <= est.ci_low < 0.5 < est.ci_high <= 1.0


def test_a_judge_always_choosing_a_prefers_first_with_probability_one() -> None:
    verdicts = [v("j", f"i{k}", "x", "y", "model_a") for k in range(5)]
    verdicts += [v("j", f"i{k}", "y", "x", "model_a") for k in range(5)]
    est = prefer_first_rate(verdicts)["j"]
    assert (est.value, est.ci_low, est.ci_high) == (1.0, 1.0, 1.0)


def test_ties_count_half_for_position_bias() -> None:
    verdicts = [v("j", "i", "x", "y", "tie"), v("j", "k", "x", "y", "model_b")]
    assert prefer_first_rate(verdicts)["j"].value == pytest.approx(0.25)


def test_prefer_longer_uses_only_unequal_known_lengths() -> None:
    verdicts = [
        v("j", "1", "x", "y", "model_a", len_a=300, len_b=100),
        v("j", "2", "x", "y", "model_b", len_a=100, len_b=300),
        v("j", "3", "x", "y", "model_a", len_a=100, len_b=100),  # equal: ignored
        v("j", "4", "x", "y", "model_b"),  # unknown: ignored
    ]
    est = prefer_longer_rate(verdicts)["j"]
    assert est.value == 1.0 and est.n == 2


def test_self_preference_detects_a_judge_favouring_its_own_model() -> None:
    verdicts = []
    for k in range(40):
        verdicts.append(v("gpt-judge", f"i{k}", "gpt", "other", "model_a"))
        verdicts.append(v("fair-judge", f"i{k}", "gpt", "other", "model_a" if k % 2 else "model_b"))
    pref = self_preference(verdicts, {"gpt-judge": "gpt"}, n_boot=500)["gpt-judge"]
    assert pref.own_win_rate == 1.0 and pref.panel_win_rate == 0.5
    assert pref.difference.value == pytest.approx(0.5)
    assert pref.difference.ci_low > 0


def test_kappa_of_identical_judges_is_one() -> None:
    labels = ["model_a", "model_b", "tie", "model_a", "model_b", "model_a"]
    verdicts = [v(j, f"i{k}", "x", "y", w) for j in ("j1", "j2") for k, w in enumerate(labels)]
    est = cohen_kappa(verdicts, "j1", "j2")
    assert est.value == pytest.approx(1.0) and est.n == 6


def test_kappa_by_hand() -> None:
    # 2x2 table [[2, 1], [1, 2]] over model_a/model_b: p_o = 4/6, p_e = 1/2 -> kappa = 1/3.
    one = ["model_a", "model_a", "model_a", "model_b", "model_b", "model_b"]
    two = ["model_a", "model_a", "model_b", "model_a", "model_b", "model_b"]
    verdicts = [v("j1", f"i{k}", "x", "y", w) for k, w in enumerate(one)]
    verdicts += [v("j2", f"i{k}", "x", "y", w) for k, w in enumerate(two)]
    assert cohen_kappa(verdicts, "j1", "j2").value == pytest.approx(1 / 3)


def test_krippendorff_alpha_matches_the_published_example() -> None:
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability": nominal alpha = 0.743.
    a = [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None]
    b = [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3]
    c = [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None]
    d = [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None]
    assert nominal_alpha(list(zip(a, b, c, d, strict=True))) == pytest.approx(0.743, abs=5e-4)


def test_krippendorff_alpha_on_verdicts() -> None:
    labels = ["model_a", "model_b", "tie", "model_a", "model_b"]
    same = [v(j, f"i{k}", "x", "y", w) for j in ("j1", "j2", "j3") for k, w in enumerate(labels)]
    est = krippendorff_alpha(same, n_boot=200)
    assert est.value == pytest.approx(1.0) and est.n == 5
    # Two coders, units (A,A), (A,B): 2x2 coincidences -> alpha = 1 - 3 * 2 / (3 * 1 * 2) = 0.
    pairs = [v("j1", "1", "x", "y", "model_a"), v("j2", "1", "x", "y", "model_a")]
    pairs += [v("j1", "2", "x", "y", "model_a"), v("j2", "2", "x", "y", "model_b")]
    assert krippendorff_alpha(pairs).value == pytest.approx(nominal_alpha([["A", "A"], ["A", "B"]]))


def test_duplicate_verdicts_are_rejected_for_agreement() -> None:
    dup = [v("j1", "1", "x", "y", "model_a"), v("j1", "1", "x", "y", "model_b")]
    with pytest.raises(StatsError, match="two verdicts"):
        cohen_kappa(dup, "j1", "j2")


def test_nothing_to_measure_is_nan_not_an_error() -> None:
    est = position_consistency([v("j", "1", "x", "y", "model_a")])["j"]
    assert math.isnan(est.value) and est.n == 0


def test_bootstrap_intervals_are_seeded() -> None:
    winners = ["model_a", "model_b", "tie", "model_a"]
    verdicts = [v("j", f"i{k}", "x", "y", winners[k % 4]) for k in range(37)]
    first = prefer_first_rate(verdicts, n_boot=25, seed=5)
    assert first == prefer_first_rate(verdicts, n_boot=25, seed=5)
    assert first != prefer_first_rate(verdicts, n_boot=25, seed=6)


def test_repeated_presentations_are_matched_across_orders_in_the_order_given() -> None:
    verdicts = [
        v("j", "i", "x", "y", "model_a"),  # x wins
        v("j", "i", "x", "y", "model_a"),  # x wins
        v("j", "i", "y", "x", "model_b"),  # x wins: agrees with the first x-first verdict
        v("j", "i", "y", "x", "model_a"),  # y wins: disagrees with the second
    ]
    est = position_consistency(verdicts)["j"]
    assert est.value == 0.5 and est.n == 2


def test_bootstrap_interval_of_a_rate_matches_the_normal_approximation() -> None:
    # 15,000 verdicts, 30% first-position wins: the percentile interval should be p ± 1.96 se.
    n, wins = 15_000, 4_500
    verdicts = [v("j", f"i{k}", "x", "y", "model_a" if k < wins else "model_b") for k in range(n)]
    est = prefer_first_rate(verdicts, n_boot=2000, seed=3)["j"]
    half = 1.96 * math.sqrt(0.3 * 0.7 / n)
    assert est.ci_low == pytest.approx(0.3 - half, abs=0.15 * half)
    assert est.ci_high == pytest.approx(0.3 + half, abs=0.15 * half)


@pytest.mark.parametrize("cost", [1, 10**9])  # resample over unit types / over unit indices
def test_both_resampling_paths_draw_the_bootstrap_distribution(
    cost: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agreement, "_MULTINOMIAL_COST", cost)
    types = np.array([[0.0], [0.5], [1.0]])
    counts = np.array([300, 100, 600])
    totals = agreement._boot_totals(types, counts, 4000, np.random.default_rng(0))[:, 0]
    units = np.repeat(types[:, 0], counts)
    # Sum of n draws with replacement: mean n·x̄, variance n·var(x).
    assert totals.mean() == pytest.approx(units.sum(), rel=2e-3)
    assert totals.std() == pytest.approx(math.sqrt(len(units) * units.var()), rel=0.05)


def test_kappa_and_alpha_intervals_cover_the_estimate_on_a_large_panel() -> None:
    rng = np.random.default_rng(1)
    truth = rng.integers(0, 3, 3000)
    verdicts = [
        v(j, f"i{k}", "x", "y", LABELS[t if rng.random() < 0.7 else rng.integers(0, 3)])
        for j in ("j1", "j2", "j3")
        for k, t in enumerate(truth)
    ]
    kappa = cohen_kappa(verdicts, "j1", "j2", n_boot=500)
    alpha = krippendorff_alpha(verdicts, n_boot=500)
    for est in (kappa, alpha):
        assert est.n == 3000
        assert est.ci_low < est.value < est.ci_high
        assert 0.01 < est.ci_high - est.ci_low < 0.1


def _random_panel(seed: int, memes: int, clustered: bool) -> list[list[Verdict]]:
    """Verdicts of three judges on every pair of three models, both orders, two criteria,
    per meme (one batch per meme), with lengths; judge j0 owns model x."""
    rng = np.random.default_rng(seed)
    batches = []
    for m in range(memes):
        batch = []
        lengths = {name: int(rng.integers(50, 60)) for name in "xyz"}
        for judge in ("j0", "j1", "j2"):
            for a, b in (("x", "y"), ("y", "x"), ("x", "z"), ("z", "x"), ("y", "z"), ("z", "y")):
                for crit in ("c1", "c2"):
                    w = str(rng.choice(LABELS, p=[0.5, 0.3, 0.2]))
                    batch.append(
                        v(
                            judge,
                            f"m{m}",
                            a,
                            b,
                            w,
                            criterion=crit,
                            len_a=lengths[a],
                            len_b=lengths[b],
                            cluster=f"m{m}" if clustered else None,
                        )
                    )
        batches.append(batch)
    return batches


@pytest.mark.parametrize("clustered", [True, False])
def test_streaming_meme_by_meme_gives_the_figures_of_the_whole_collection(
    clustered: bool,
) -> None:
    """Aggregating one meme at a time (memory per meme, not per verdict) gives the same
    estimates, intervals included, as the one-call functions on every verdict at once."""
    batches = _random_panel(5, 60, clustered)
    every = [x for batch in batches for x in batch]
    own = {"j0": ["x"]}
    stream = agreement.VerdictMetrics(
        own_models=own, panel=["j0", "j1", "j2"], pairs=[("j0", "j1"), ("j1", "j2")]
    )
    for batch in batches:
        stream.add(batch)
    kw = {"n_boot": 300, "seed": 4}

    def same(x: agreement.Estimate, y: agreement.Estimate) -> None:
        assert x.n == y.n
        assert [x.value, x.ci_low, x.ci_high] == pytest.approx([y.value, y.ci_low, y.ci_high])

    for name in ("position_consistency", "prefer_first_rate", "prefer_longer_rate"):
        got, want = getattr(stream, name)(**kw), getattr(agreement, name)(every, **kw)
        assert got.keys() == want.keys() == {"j0", "j1", "j2"}
        for j in got:
            same(got[j], want[j])
    got = stream.relative_longer_rate(**kw)
    want = agreement.relative_longer_rate(every, own_models=own, **kw)
    assert got.keys() == want.keys()
    for j in got:
        same(got[j], want[j])
    sp, sp_want = stream.self_preference(**kw)["j0"], self_preference(every, own, **kw)["j0"]
    same(sp.difference, sp_want.difference)
    same(stream.cohen_kappa("j1", "j2", **kw), cohen_kappa(every, "j1", "j2", **kw))
    same(stream.krippendorff_alpha(**kw), krippendorff_alpha(every, **kw))


def test_hand_counted_figures_of_a_streamed_panel() -> None:
    """Figures counted here by hand from the verdicts, independently of the module."""
    batches = _random_panel(8, 30, clustered=True)
    stream = agreement.VerdictMetrics(pairs=[("j1", "j2")])
    for batch in batches:
        stream.add(batch)
    every = [x for batch in batches for x in batch]
    j1 = [x for x in every if x.judge == "j1"]
    first = sum({"model_a": 1.0, "model_b": 0.0, "tie": 0.5}[x.winner] for x in j1) / len(j1)
    assert stream.prefer_first_rate(n_boot=10)["j1"].value == pytest.approx(first)
    outcome = {(x.criterion, x.item, x.model_a, x.model_b): x.outcome for x in j1}
    pairs = [(k, (k[0], k[1], k[3], k[2])) for k in outcome if k[2] < k[3]]
    agree = sum(outcome[p] == outcome[q] for p, q in pairs) / len(pairs)
    est = stream.position_consistency(n_boot=10)["j1"]
    assert (est.value, est.n) == (pytest.approx(agree), len(pairs))
    j2 = {(x.criterion, x.item, x.model_a, x.model_b): x.winner for x in every if x.judge == "j2"}
    j1w = {k: x.winner for x in j1 for k in [(x.criterion, x.item, x.model_a, x.model_b)]}
    p_o = sum(j1w[k] == j2[k] for k in j1w) / len(j1w)
    p_e = (
        sum(
            sum(w == lab for w in j1w.values()) * sum(w == lab for w in j2.values())
            for lab in LABELS
        )
        / len(j1w) ** 2
    )
    assert stream.cohen_kappa("j1", "j2", n_boot=10).value == pytest.approx((p_o - p_e) / (1 - p_e))


def test_a_stream_holds_one_row_per_cluster_not_per_verdict() -> None:
    stream = agreement.VerdictMetrics(metrics={"first"})
    for k in range(200):
        stream.add([v("j", f"i{k}", "x", "y", "model_a", cluster=f"m{k % 4}")] * 10)
    types, counts = stream._samples[("first", "j")].units()
    assert counts.sum() == 4 and types.tolist() == [[500.0, 500.0]]
    est = stream.prefer_first_rate(n_boot=50)["j"]
    assert (est.value, est.n) == (1.0, 2000)


def test_unknown_metrics_and_unaggregated_pairs_are_errors() -> None:
    with pytest.raises(StatsError, match="unknown verdict metrics: fairness"):
        agreement.VerdictMetrics(metrics={"fairness"})
    with pytest.raises(StatsError, match="not aggregated"):
        agreement.VerdictMetrics().cohen_kappa("a", "b")
