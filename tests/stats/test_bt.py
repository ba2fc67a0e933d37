"""Bradley–Terry: hand-computed fits, invariances, identifiability, bootstrap coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from memearena.stats import (
    Battle,
    DisconnectedComparisonError,
    PairCounts,
    StatsError,
    UnboundedRatingsError,
    bradley_terry,
)

ELO = 400 / math.log(10)


def two(wins_a: float, wins_b: float, ties: float = 0.0) -> PairCounts:
    return PairCounts.from_arrays(
        ["a", "b"], np.array([[0, wins_a], [wins_b, 0]]), np.array([[0, ties], [ties, 0]])
    )


def test_three_wins_to_one_is_400_log10_3_apart_around_the_mean() -> None:
    fit = bradley_terry(two(3, 1))
    assert fit.rating("a") - fit.rating("b") == pytest.approx(400 * math.log10(3), abs=1e-8)
    assert fit.ratings.mean() == pytest.approx(1000, abs=1e-9)


def test_anchor_model_gets_exactly_1000() -> None:
    fit = bradley_terry(two(3, 1), anchor="b", bootstrap=50)
    assert fit.rating("b") == 1000.0
    assert fit.rating("a") == pytest.approx(1000 + 400 * math.log10(3), abs=1e-8)
    assert fit.ci_low is not None and fit.ci_high is not None
    assert fit.ci_low[1] == fit.ci_high[1] == 1000.0
    assert "b = 1000" in fit.note


def test_ties_count_half_a_win_each_way() -> None:
    with_ties = bradley_terry(two(2, 1, ties=2))
    as_half_wins = bradley_terry(two(3, 2))
    np.testing.assert_allclose(with_ties.ratings, as_half_wins.ratings, atol=1e-8)
    assert with_ties.rating("a") - with_ties.rating("b") == pytest.approx(400 * math.log10(1.5))


def test_battles_and_counts_give_the_same_fit() -> None:
    battles = [
        Battle(model_a="a", model_b="b", winner="model_a"),
        Battle(model_a="b", model_b="a", winner="model_b"),
        Battle(model_a="a", model_b="b", winner="model_a"),
        Battle(model_a="b", model_b="a", winner="model_a"),
    ]
    assert bradley_terry(battles).as_dict() == pytest.approx(bradley_terry(two(3, 1)).as_dict())


def scipy_fit(counts: PairCounts) -> np.ndarray:
    """Independent reference: minimise the BT negative log-likelihood with scipy."""
    s = counts.scores

    def nll(theta: np.ndarray) -> float:
        d = theta[:, None] - theta[None, :]
        return float(-(s * -np.logaddexp(0, -d)).sum())

    x = minimize(nll, np.zeros(counts.n_models), method="BFGS", options={"gtol": 1e-10}).x
    return 1000 + ELO * (x - x.mean())


def test_matches_a_generic_optimiser_on_a_small_table() -> None:
    wins = np.array([[0, 5, 3, 1], [2, 0, 4, 2], [1, 3, 0, 6], [2, 1, 1, 0]])
    ties = np.array([[0, 1, 0, 2], [1, 0, 1, 0], [0, 1, 0, 0], [2, 0, 0, 0]])
    counts = PairCounts.from_arrays(list("abcd"), wins, ties)
    np.testing.assert_allclose(bradley_terry(counts).ratings, scipy_fit(counts), atol=1e-3)


def test_davidson_ties_match_a_generic_optimiser() -> None:
    wins = np.array([[0, 5, 3], [2, 0, 4], [1, 3, 0]])
    ties = np.array([[0, 3, 1], [3, 0, 2], [1, 2, 0]])
    counts = PairCounts.from_arrays(list("abc"), wins, ties)

    def nll(x: np.ndarray) -> float:
        theta, kappa = x[:3], x[3]
        total = 0.0
        for i in range(3):
            for j in range(i + 1, 3):
                d = theta[i] - theta[j]
                log_norm = np.logaddexp(np.logaddexp(d / 2, -d / 2), kappa)
                total += wins[i, j] * (d / 2 - log_norm) + wins[j, i] * (-d / 2 - log_norm)
                total += ties[i, j] * (kappa - log_norm)
        return -total

    x = minimize(nll, np.zeros(4), method="BFGS", options={"gtol": 1e-10}).x
    fit = bradley_terry(counts, ties="davidson")
    np.testing.assert_allclose(fit.ratings, 1000 + ELO * (x[:3] - x[:3].mean()), atol=1e-3)
    assert fit.tie_strength == pytest.approx(math.exp(x[3]), rel=1e-4)


def test_disconnected_graph_names_its_components() -> None:
    wins = np.zeros((4, 4))
    wins[0, 1] = wins[1, 0] = 2
    wins[2, 3] = wins[3, 2] = 1
    counts = PairCounts.from_arrays(["a", "b", "c", "d"], wins)
    with pytest.raises(DisconnectedComparisonError) as info:
        bradley_terry(counts)
    assert info.value.components == [["a", "b"], ["c", "d"]]
    assert "{a, b}; {c, d}" in str(info.value)
    fit = bradley_terry(counts, prior=1.0)  # explicit weak prior: allowed, and reported
    assert np.isfinite(fit.ratings).all()
    assert "weak prior" in fit.note


def test_a_model_that_never_lost_has_no_mle() -> None:
    with pytest.raises(UnboundedRatingsError, match=r"\{a\} never lost or tied"):
        bradley_terry(two(3, 0))
    assert bradley_terry(two(3, 0), prior=1.0).rating("a") > 1000


def test_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    counts = PairCounts.from_arrays(
        list("abc"),
        np.array([[0, 30, 20], [15, 0, 25], [10, 20, 0]]),
        np.full((3, 3), 5.0) - 5 * np.eye(3),
    )
    one = bradley_terry(counts, bootstrap=300, seed=1)
    again = bradley_terry(counts, bootstrap=300, seed=1)
    other = bradley_terry(counts, bootstrap=300, seed=2)
    assert one.samples is not None and again.samples is not None and other.samples is not None
    assert one.ci_low is not None and one.ci_high is not None
    np.testing.assert_array_equal(one.samples, again.samples)
    assert not np.array_equal(one.samples, other.samples)
    assert ((one.ci_low < one.ratings) & (one.ratings < one.ci_high)).all()
    assert one.samples.shape == (300, 3)


def test_sparse_resamples_without_mle_are_regularised_and_counted() -> None:
    fit = bradley_terry(two(3, 1), bootstrap=200)
    assert fit.regularised_rounds > 0  # some resamples have b never winning
    assert fit.ci_low is not None and np.isfinite(fit.ci_low).all()
    assert "no finite MLE" in fit.note


# --- properties -------------------------------------------------------------------------------

tables = st.integers(min_value=2, max_value=5).flatmap(
    lambda m: st.tuples(
        st.lists(st.integers(0, 9), min_size=m * m, max_size=m * m),
        st.lists(st.integers(1, 4), min_size=m * m, max_size=m * m),
        st.permutations(list(range(m))),
    )
)


def counts_from(raw: tuple[list[int], list[int], list[int]]) -> PairCounts:
    wins_flat, ties_flat, _ = raw
    m = math.isqrt(len(wins_flat))
    wins = np.array(wins_flat, dtype=float).reshape(m, m) * (1 - np.eye(m))
    ties = np.array(ties_flat, dtype=float).reshape(m, m)
    ties = np.triu(ties, 1) + np.triu(ties, 1).T  # at least one tie per pair: MLE exists
    return PairCounts.from_arrays([f"m{k}" for k in range(m)], wins, ties)


@settings(max_examples=40, deadline=None)
@given(tables)
def test_relabelling_models_permutes_ratings(raw: tuple[list[int], list[int], list[int]]) -> None:
    counts = counts_from(raw)
    perm = raw[2]
    relabelled = PairCounts.from_arrays(
        [counts.models[p] for p in perm],
        counts.wins[np.ix_(perm, perm)],
        counts.ties[np.ix_(perm, perm)],
    )
    base, moved = bradley_terry(counts), bradley_terry(relabelled)
    for name in counts.models:
        assert moved.rating(name) == pytest.approx(base.rating(name), abs=1e-6)


battle_lists = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(["model_a", "model_b", "tie", "tie (bothbad)"]),
    ).filter(lambda t: t[0] != t[1]),
    min_size=1,
    max_size=30,
)
SWAP = {"model_a": "model_b", "model_b": "model_a", "tie": "tie", "tie (bothbad)": "tie (bothbad)"}


@settings(max_examples=40, deadline=None)
@given(battle_lists)
def test_swapping_a_and_b_with_the_winner_gives_the_same_fit(
    rows: list[tuple[str, str, str]],
) -> None:
    # A tie in every pair keeps the MLE finite; then swap every battle's sides.
    rows = [*rows, ("a", "b", "tie"), ("b", "c", "tie"), ("a", "c", "tie")]
    battles = [Battle(model_a=a, model_b=b, winner=w) for a, b, w in rows]  # type: ignore[arg-type]
    swapped = [Battle(model_a=b, model_b=a, winner=SWAP[w]) for a, b, w in rows]  # type: ignore[arg-type]
    assert bradley_terry(swapped).as_dict() == pytest.approx(bradley_terry(battles).as_dict())


@settings(max_examples=40, deadline=None)
@given(tables)
def test_a_tie_equals_half_a_win_each_way(raw: tuple[list[int], list[int], list[int]]) -> None:
    counts = counts_from(raw)
    halves = PairCounts.from_arrays(counts.models, counts.wins + counts.ties / 2)
    np.testing.assert_allclose(
        bradley_terry(counts).ratings, bradley_terry(halves).ratings, atol=1e-6
    )


# --- recovery and coverage on simulated battles -------------------------------------------------

TRUE = np.array([1250.0, 1150.0, 1080.0, 1000.0, 900.0, 820.0])


def simulate(rng: np.random.Generator, n_battles: int) -> PairCounts:
    m = len(TRUE)
    a = rng.integers(0, m, n_battles)
    b = (a + rng.integers(1, m, n_battles)) % m
    p = 1 / (1 + 10 ** ((TRUE[b] - TRUE[a]) / 400))
    won = rng.random(n_battles) < p
    wins = np.zeros((m, m))
    np.add.at(wins, (np.where(won, a, b), np.where(won, b, a)), 1)
    return PairCounts.from_arrays([f"m{k}" for k in range(m)], wins)


def test_recovers_known_strengths_within_its_intervals() -> None:
    fit = bradley_terry(simulate(np.random.default_rng(7), 20_000), bootstrap=500, ci=0.99)
    truth = TRUE - TRUE.mean() + 1000
    assert fit.ci_low is not None and fit.ci_high is not None
    assert ((fit.ci_low <= truth) & (truth <= fit.ci_high)).all()
    assert fit.ranking() == [f"m{k}" for k in range(len(TRUE))]


def test_95_percent_intervals_cover_the_truth_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(2024)
    truth = TRUE - TRUE.mean() + 1000
    covered = []
    for rep in range(150):
        fit = bradley_terry(simulate(rng, 1500), bootstrap=200, seed=rep)
        assert fit.ci_low is not None and fit.ci_high is not None
        covered.append((fit.ci_low <= truth) & (truth <= fit.ci_high))
    coverage = float(np.mean(covered))
    assert 0.88 <= coverage <= 0.99, coverage


def test_warm_started_bootstrap_fits_equal_cold_newton_fits() -> None:
    from memearena.stats.bt import fit_cells, resample

    counts = simulate(np.random.default_rng(3), 400)
    draws = resample(counts, 200, seed=0)
    point, _ = fit_cells(counts, counts.cells()[3][None, :])
    priors = np.where(np.arange(200) % 7 == 0, 1.0, 0.0)  # some regularised rounds too
    cold, _ = fit_cells(counts, draws, prior=priors)
    warm, _ = fit_cells(counts, draws, prior=priors, start=point[0])
    np.testing.assert_allclose(
        warm - warm.mean(1, keepdims=True), cold - cold.mean(1, keepdims=True), atol=1e-8
    )


# --- arena scale: sparse arenas, the MLE-existence check, bounds ------------------------------


def skewed(rng: np.random.Generator, m: int, n: int) -> PairCounts:
    """Pairs meet with log-normal popularity: many pairs never meet, some models are rare."""
    pop = rng.lognormal(0, 1.5, m)
    a = rng.choice(m, n, p=pop / pop.sum())
    b = rng.choice(m, n, p=pop / pop.sum())
    a, b = a[a != b], b[a != b]
    skill = rng.normal(0, 1, m)
    u = rng.random(len(a))
    p_a = 1 / (1 + np.exp(skill[b] - skill[a]))
    outcome = np.where(u < 0.8 * p_a, 0, np.where(u < 0.8, 1, 2))
    wins, ties = np.zeros((m, m)), np.zeros((m, m))
    np.add.at(wins, (a[outcome == 0], b[outcome == 0]), 1)
    np.add.at(wins, (b[outcome == 1], a[outcome == 1]), 1)
    np.add.at(ties, (a[outcome == 2], b[outcome == 2]), 1)
    return PairCounts.from_arrays([f"m{k:02d}" for k in range(m)], wins, ties + ties.T)


def reference_mle_exists(tables: np.ndarray, i: np.ndarray, j: np.ndarray, m: int) -> np.ndarray:
    """One dense strong-connectivity search per round."""
    from scipy.sparse.csgraph import connected_components

    out = []
    for r in range(tables.shape[1]):
        graph = np.zeros((m, m), dtype=bool)
        graph[i, j] = (tables[0, r] + tables[2, r]) > 0
        graph[j, i] = (tables[1, r] + tables[2, r]) > 0
        out.append(connected_components(graph, connection="strong")[0] == 1)
    return np.array(out)


@pytest.mark.parametrize(("m", "n", "seed"), [(12, 300, 0), (40, 3000, 1), (70, 20_000, 2)])
def test_batched_mle_check_matches_one_search_per_round(m: int, n: int, seed: int) -> None:
    from memearena.stats.bt import (
        _certificate,
        _mle_exists,
        _mle_exists_draws,
        _pair_tables,
        resample,
    )

    counts = skewed(np.random.default_rng(seed), m, n)
    counts = counts.subset(counts.components()[0])
    draws = resample(counts, 120, seed)
    i, j, tables = _pair_tables(counts, draws)
    expected = reference_mle_exists(tables, i, j, counts.n_models)
    assert 0 < expected.sum() < len(expected) or m == 70  # both outcomes seen where sparse
    np.testing.assert_array_equal(_mle_exists(tables, i, j, counts.n_models), expected)
    certificate = _certificate(counts)
    np.testing.assert_array_equal(_mle_exists_draws(counts, draws, certificate), expected)


def test_past_the_dense_limit_the_certificate_labels_components_with_the_graph_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memearena.stats import bt
    from memearena.stats.bt import _certificate, _mle_exists_draws, _pair_tables, resample

    counts = skewed(np.random.default_rng(1), 40, 3000)
    counts = counts.subset(counts.components()[0])
    draws = resample(counts, 120, 1)
    i, j, tables = _pair_tables(counts, draws)
    expected = reference_mle_exists(tables, i, j, counts.n_models)
    monkeypatch.setattr(bt, "_CLOSURE_MODELS", 4)
    certificate = _certificate(counts)
    assert certificate is not None
    np.testing.assert_array_equal(_mle_exists_draws(counts, draws, certificate), expected)


def test_a_well_met_arena_is_certified_without_a_graph_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from memearena.stats import bt
    from memearena.stats.bt import _certificate, _mle_exists_draws, resample

    counts = skewed(np.random.default_rng(4), 30, 200_000)
    counts = counts.subset(counts.components()[0])
    certificate = _certificate(counts)
    assert certificate is not None and len(certificate.weak_out[1]) > 0  # weak models too

    def no_search(*_: object) -> None:
        raise AssertionError("a certified round was searched")

    monkeypatch.setattr(bt, "_mle_exists", no_search)
    assert _mle_exists_draws(counts, resample(counts, 50, 0), certificate).all()


def test_chord_steps_reach_the_newton_fit_on_a_sparse_arena() -> None:
    from memearena.stats.bt import fit_cells, resample

    counts = skewed(np.random.default_rng(5), 60, 30_000)
    counts = counts.subset(counts.components()[0])
    point, _ = fit_cells(counts, counts.cells()[3][None, :], prior=1.0)
    draws = resample(counts, 60, seed=0)
    priors = np.where(np.arange(60) % 3 == 0, 1.0, 0.5)  # two priors: two chord centres
    cold, _ = fit_cells(counts, draws, prior=priors)
    warm, _ = fit_cells(counts, draws, prior=priors, start=point[0])
    np.testing.assert_allclose(warm, cold, atol=1e-8)


@pytest.mark.parametrize("rounds", [-1, 100_001])
def test_bootstrap_rounds_are_bounded(rounds: int) -> None:
    with pytest.raises(StatsError, match="between 0 and 100,000"):
        bradley_terry(two(3, 1), bootstrap=rounds)


def test_bootstrap_batches_draw_what_one_call_would() -> None:
    from memearena.stats import bt

    counts = skewed(np.random.default_rng(4), 10, 2_000)
    counts = counts.subset(counts.components()[0])
    whole = bradley_terry(counts, bootstrap=200, seed=9, prior=1.0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bt, "_CHUNK_ELEMENTS", 3 * len(counts.cells()[0]))  # batches of 3 rounds
        batched = bradley_terry(counts, bootstrap=200, seed=9, prior=1.0)
    assert whole.samples is not None and batched.samples is not None
    np.testing.assert_allclose(batched.samples, whole.samples, atol=1e-9)


@pytest.mark.parametrize("models", [6, 30])
def test_chord_rounds_stepped_on_two_threads_are_bit_identical_to_one(models: int) -> None:
    from unittest import mock

    from memearena.stats import bt as bt_module

    rng = np.random.default_rng(models)
    wins = rng.integers(0, 40, (models, models)).astype(float)
    np.fill_diagonal(wins, 0.0)
    ties = rng.integers(0, 6, (models, models)).astype(float)
    ties = np.triu(ties, 1) + np.triu(ties, 1).T
    counts = PairCounts.from_arrays([f"m{k}" for k in range(models)], wins, ties)
    results = []
    for threads in (1, 2, 3):
        with mock.patch.object(bt_module, "_CHORD_THREADS", threads):
            fit = bradley_terry(counts, bootstrap=2 * 3 * bt_module._CHORD_SPLIT_ROUNDS, seed=1)
        assert fit.samples is not None
        results.append(fit.samples)
    assert np.array_equal(results[0], results[1]) and np.array_equal(results[0], results[2])


@settings(max_examples=80, deadline=None)
@given(
    m=st.integers(1, 12),
    density=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
)
def test_the_dense_strong_connectivity_check_agrees_with_the_graph_search(
    m: int, density: float, seed: int
) -> None:
    from scipy.sparse.csgraph import connected_components

    from memearena.stats.bt import _strong_labels, _strongly_connected

    adjacency = np.random.default_rng(seed).random((m, m)) < density
    np.fill_diagonal(adjacency, False)
    n, labels = connected_components(adjacency, directed=True, connection="strong")
    assert _strongly_connected(adjacency) == (n == 1)
    ours = _strong_labels(adjacency)  # the same partition, whatever the label values
    assert np.array_equal(ours[:, None] == ours[None, :], labels[:, None] == labels[None, :])
