"""Compositional judge bias (MM-JudgeBias): Bias-Deviation and Bias-Conformity.

With y the score a judge gave the unbiased triplet, ŷ the score it gave the perturbed one and
S the top of the scale:

* BD = mean over pairs with y > 1 of max(0, y − ŷ) / (y − 1), for the Integrality and Congruity
  types (a perturbation that removes or mismatches evidence should lower the score; 1 = the
  judge always drops to the bottom, 0 = it never notices);
* BC = mean of 1 − |y − ŷ| / max(y − 1, S − y), for the Robustness types (a perturbation that
  keeps the meaning should not move the score; 1 = perfectly stable).

Both are higher-is-better. A pair with a missing score (unparsed, or an abstention) is not a
number and never enters a mean; it is counted as excluded. A category is the plain mean of its
types and the overall figure the plain mean of the types, each over the types that have data,
as the reference implementation (MM-JudgeBias ``evaluate.py``) computes them. By default the
table is reference-compatible: a BD type whose every scored pair has y = 1 is 0.0 and averaged
in, as the reference gives; ``reference_compat=False`` makes it "no data" instead, labelled.
A type with no scored pair at all is "no data" (None) in both modes, never 0. The standalone
``bias_deviation`` / ``bias_conformity`` return None where no pair qualifies. Intervals come
from a bootstrap over items (the unit that was sampled).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from memearena.stats.errors import StatsError

__all__ = [
    "BIAS_CATEGORIES",
    "BIAS_TYPES",
    "BiasFigure",
    "BiasPair",
    "BiasTable",
    "BiasTerms",
    "BiasTermsBuilder",
    "RatioEstimate",
    "bias_conformity",
    "bias_deviation",
    "bias_table",
    "bias_table_of",
    "bias_terms",
    "bootstrap_weights",
    "category_of",
    "difference_in_differences",
    "holm_adjusted",
    "mean_of_types",
    "metric_of",
    "studentized_p",
    "type_values",
    "unit_ratio",
    "unit_ratios",
]

BIAS_TYPES: dict[str, tuple[str, Literal["bd", "bc"]]] = {
    "text_dominance": ("integrality", "bd"),
    "image_dominance": ("integrality", "bd"),
    "response_dominance": ("integrality", "bd"),
    "instruction_misalignment": ("congruity", "bd"),
    "image_misalignment": ("congruity", "bd"),
    "detail_description": ("robustness", "bc"),
    "unnecessary_image": ("robustness", "bc"),
    "visual_transformation": ("robustness", "bc"),
    "texture_insertion": ("robustness", "bc"),
}
"""The nine bias types: type → (category, metric)."""

BIAS_CATEGORIES: dict[str, Literal["bd", "bc"]] = {
    "integrality": "bd",
    "congruity": "bd",
    "robustness": "bc",
}
"""The three categories and the metric their types use."""


def category_of(bias_type: str) -> str:
    """The category of a bias type (StatsError naming it if unknown)."""
    try:
        return BIAS_TYPES[bias_type][0]
    except KeyError:
        raise StatsError(
            f"unknown bias type {bias_type!r}; expected one of {', '.join(BIAS_TYPES)}"
        ) from None


def metric_of(bias_type: str) -> Literal["bd", "bc"]:
    """``bd`` or ``bc`` for a bias type."""
    category_of(bias_type)
    return BIAS_TYPES[bias_type][1]


def _pairs(
    unbiased: Sequence[float | None], biased: Sequence[float | None]
) -> list[tuple[float, float]]:
    if len(unbiased) != len(biased):
        raise StatsError(
            f"unbiased and biased scores differ in length ({len(unbiased)} vs {len(biased)})"
        )
    return [
        (float(y), float(h))
        for y, h in zip(unbiased, biased, strict=True)
        if y is not None and h is not None
    ]


def _bd_term(y: float, y_hat: float) -> float | None:
    # y = 1 cannot drop any further: such a pair says nothing about sensitivity.
    return max(0.0, y - y_hat) / (y - 1) if y > 1 else None


def _bc_term(y: float, y_hat: float, scale: float) -> float | None:
    denom = max(y - 1, scale - y)
    return 1.0 - abs(y - y_hat) / denom if denom > 0 else None


def bias_deviation(
    unbiased: Sequence[float | None], biased: Sequence[float | None]
) -> float | None:
    """BD over paired scores (None entries skipped); None when no pair has y > 1."""
    terms = [t for y, h in _pairs(unbiased, biased) if (t := _bd_term(y, h)) is not None]
    return float(np.mean(terms)) if terms else None


def bias_conformity(
    unbiased: Sequence[float | None], biased: Sequence[float | None], scale: float = 10
) -> float | None:
    """BC over paired scores on a 1..``scale`` scale (None entries skipped); None when no
    pair qualifies."""
    terms = [t for y, h in _pairs(unbiased, biased) if (t := _bc_term(y, h, scale)) is not None]
    return float(np.mean(terms)) if terms else None


@dataclass(frozen=True, slots=True)
class BiasPair:
    """One judge's scores on one unbiased/biased pair (None: unparsed or abstained)."""

    item: str
    """The sampled unit (bootstrap resamples items)."""
    bias_type: str
    """One of ``BIAS_TYPES``."""
    unbiased: float | None
    """Score of the unbiased triplet."""
    biased: float | None
    """Score of the perturbed triplet."""


class BiasFigure(BaseModel):
    """One BD/BC figure with its bootstrap interval and the pairs behind it."""

    model_config = ConfigDict(frozen=True)

    metric: str
    """``bd``, ``bc`` or ``mixed`` (the overall mean of both)."""
    value: float | None
    """The figure; None = no data (no scored pair, or, without reference compatibility, no
    qualifying pair)."""
    ci_low: float | None
    """Lower bound of the bootstrap percentile interval (None without data)."""
    ci_high: float | None
    """Upper bound of the interval."""
    pairs: int
    """Pairs that entered the figure."""
    excluded: int = 0
    """Pairs left out because a score was missing (unparsed or N/A) or y = 1 for BD."""
    note: str | None = None
    """Why the value is what it is when that is a convention, not a measurement (``BD 0.0
    by the reference's convention: no pair with y > 1``), or why there is none."""


class BiasTable(BaseModel):
    """BD/BC per type, per category and overall."""

    types: dict[str, BiasFigure]
    """Per bias type (all nine, in taxonomy order)."""
    categories: dict[str, BiasFigure]
    """Per category: the plain mean of its types that have data."""
    overall: BiasFigure
    """The plain mean of the types that have data."""
    reference_compat: bool = True
    """True: a BD type whose every scored pair has y = 1 is 0.0 and averaged in, as the
    reference code (MM-JudgeBias ``evaluate.py``) does; False: it is "no data"."""


REFERENCE_ZERO_NOTE = "BD 0.0 by the reference's convention: no pair with y > 1"
"""The note of a BD type that has scored pairs but none with y > 1 (reference compatibility)."""
NO_QUALIFYING_NOTE = "no data: no pair with y > 1 (the reference would report 0.0)"
"""The note of the same type without reference compatibility."""


def _interval(samples: np.ndarray, ci: float) -> tuple[float | None, float | None]:
    finite = samples[np.isfinite(samples)]
    if not len(finite):
        return None, None
    tail = 100 * (1 - ci) / 2
    lo, hi = np.percentile(finite, [tail, 100 - tail])
    return float(lo), float(hi)


@dataclass(frozen=True)
class BiasTerms:
    """One judge's BD/BC terms as per-item sums: the matrices every figure, and every paired
    comparison between judges, is computed from (rows: ``items`` in sorted order; columns: the
    nine types in taxonomy order)."""

    items: tuple[str, ...]
    """The items with at least one scored pair, sorted."""
    sums: np.ndarray
    """Σ of BD/BC terms per (item, type)."""
    counts: np.ndarray
    """Terms per (item, type)."""
    scored: np.ndarray
    """Pairs with both scores per (item, type) (a BD pair with y = 1 is scored, not a term)."""
    excluded: np.ndarray
    """Per type: pairs without a term (a missing score, or y = 1 for BD)."""

    def aligned(self, items: Sequence[str]) -> BiasTerms:
        """The same terms on another item list (absent items are zero rows), so two judges'
        terms can be resampled with the same bootstrap weights."""
        index = {k: i for i, k in enumerate(self.items)}
        n = len(BIAS_TYPES)
        S, C, P = np.zeros((len(items), n)), np.zeros((len(items), n)), np.zeros((len(items), n))
        for r, k in enumerate(items):
            i = index.get(k)
            if i is not None:
                S[r], C[r], P[r] = self.sums[i], self.counts[i], self.scored[i]
        return BiasTerms(tuple(items), S, C, P, self.excluded)


_IS_BD = np.array([m == "bd" for _, m in BIAS_TYPES.values()])
_TYPE_INDEX = {t: i for i, t in enumerate(BIAS_TYPES)}


class BiasTermsBuilder:
    """BD/BC terms summed per (group, item, type) as pairs arrive, one batch of arrays at a
    time (a group is e.g. one judge): a cell's terms are added in the order they arrive, so
    pairs streamed in batches give exactly the sums ``bias_terms`` gives on the whole list."""

    def __init__(self, items: Sequence[str], groups: int = 1, *, scale: float = 10) -> None:
        self.items = list(items)
        """The item names that ``add``'s item indices refer to."""
        shape = (groups, len(self.items), len(BIAS_TYPES))
        self._sums, self._counts, self._scored = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        self._excluded = np.zeros((groups, len(BIAS_TYPES)), dtype=np.int64)
        self._scale = float(scale)

    def add(
        self,
        group: np.ndarray,
        item: np.ndarray,
        bias_type: np.ndarray,
        unbiased: np.ndarray,
        biased: np.ndarray,
    ) -> None:
        """Pairs as equal-length arrays: group, item (an index into ``items``) and bias type
        (an index into ``BIAS_TYPES``) as integers, the two scores as floats (NaN: missing)."""
        g = np.asarray(group, dtype=np.intp)
        t = np.asarray(bias_type, dtype=np.intp)
        y = np.asarray(unbiased, dtype=np.float64)
        h = np.asarray(biased, dtype=np.float64)
        n_types = len(BIAS_TYPES)
        cell = (g * len(self.items) + np.asarray(item, dtype=np.intp)) * n_types + t
        scored = ~(np.isnan(y) | np.isnan(h))
        bd = _IS_BD[t]
        with np.errstate(invalid="ignore", divide="ignore"):
            denom = np.maximum(y - 1, self._scale - y)
            # The same operations as _bd_term / _bc_term, element by element.
            term = np.where(bd, np.maximum(0.0, y - h) / (y - 1), 1.0 - np.abs(y - h) / denom)
            qualifies = scored & np.where(bd, y > 1, denom > 0)
        np.add.at(self._scored.reshape(-1), cell[scored], 1.0)
        np.add.at(self._counts.reshape(-1), cell[qualifies], 1.0)
        # ufunc.at adds in index order, unbuffered: the arrival order of a cell's terms.
        np.add.at(self._sums.reshape(-1), cell[qualifies], term[qualifies])
        np.add.at(self._excluded.reshape(-1), (g * n_types + t)[~qualifies], 1)

    def terms(self, group: int = 0) -> BiasTerms:
        """The group's terms, as ``bias_terms`` gives them (items with a scored pair, sorted)."""
        have = np.flatnonzero(self._scored[group].sum(axis=1) > 0)
        rows = sorted(have.tolist(), key=self.items.__getitem__)
        keys = tuple(self.items[i] for i in rows)
        arr = np.stack(
            [self._sums[group][rows], self._counts[group][rows], self._scored[group][rows]],
            axis=1,
        ).reshape(-1, 3, len(BIAS_TYPES))
        return BiasTerms(keys, arr[:, 0, :], arr[:, 1, :], arr[:, 2, :], self._excluded[group])


def bias_terms(pairs: Iterable[BiasPair], *, scale: float = 10) -> BiasTerms:
    """Per-item BD/BC term sums of one judge's pairs (StatsError on an unknown bias type)."""
    index: dict[str, int] = {}
    cols: tuple[list[int], list[int], list[float], list[float]] = ([], [], [], [])
    nan = float("nan")
    for p in pairs:
        category_of(p.bias_type)
        cols[0].append(index.setdefault(p.item, len(index)))
        cols[1].append(_TYPE_INDEX[p.bias_type])
        cols[2].append(nan if p.unbiased is None else float(p.unbiased))
        cols[3].append(nan if p.biased is None else float(p.biased))
    b = BiasTermsBuilder(list(index), scale=scale)
    # Rows in item order, not arrival order: the same pairs give the same interval however
    # they were gathered (a resumed run reports exactly what an uninterrupted one does).
    b.add(np.zeros(len(cols[0]), dtype=np.intp), *(np.asarray(c) for c in cols))
    return b.terms()


def type_values(
    sums: np.ndarray, counts: np.ndarray, scored: np.ndarray, *, reference_compat: bool = True
) -> np.ndarray:
    """Per-type values from (possibly bootstrap-weighted) column totals, NaN = no data; the
    last axis is the type. With ``reference_compat`` a BD type with scored pairs but no term
    (every y = 1) is 0.0, as the reference code gives."""
    with np.errstate(invalid="ignore", divide="ignore"):
        v = np.where(counts > 0, sums / np.maximum(counts, 1e-300), np.nan)
    if reference_compat:
        bd = np.array([BIAS_TYPES[t][1] == "bd" for t in BIAS_TYPES])
        v = np.where(np.isnan(v) & (scored > 0) & bd, 0.0, v)
    return v


def mean_of_types(values: np.ndarray, cols: Sequence[int]) -> np.ndarray:
    """The plain mean over ``cols`` of the types that have data (NaN when none has)."""
    sub = values[..., list(cols)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a replicate without data
        return np.nanmean(sub, axis=-1)


_BOOT_CELLS = 1 << 18
"""Bootstrap weights over units are drawn, and multiplied, this many cells at a time."""


def bootstrap_weights(n_items: int, n_boot: int, seed: int) -> np.ndarray:
    """Multinomial resampling weights over items (``n_boot`` × ``n_items``): one draw shared by
    every judge makes their comparisons paired."""
    if not n_items or n_boot <= 0:
        return np.zeros((0, n_items))
    rng = np.random.default_rng(seed)
    p = np.full(n_items, 1.0 / n_items)
    w = np.empty((n_boot, n_items))
    rows = max(1, _BOOT_CELLS // n_items)
    for i in range(0, n_boot, rows):  # the same draws, without a whole integer copy beside w
        k = min(rows, n_boot - i)
        w[i : i + k] = rng.multinomial(n_items, p, size=k)
    return w


def bias_table(
    pairs: Iterable[BiasPair],
    *,
    scale: float = 10,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
    reference_compat: bool = True,
) -> BiasTable:
    """The full BD/BC table of one judge's scored pairs, with intervals from a bootstrap over
    items (every pair of a drawn item comes along; a replicate's category and overall figures
    are the plain means of its types that have data). With ``reference_compat`` (default) a
    BD type whose every scored pair has y = 1 is 0.0 and averaged in, as MM-JudgeBias's
    ``evaluate.py`` does; without it that type is "no data", labelled."""
    return bias_table_of(
        bias_terms(pairs, scale=scale),
        n_boot=n_boot,
        seed=seed,
        ci=ci,
        reference_compat=reference_compat,
    )


def bias_table_of(
    terms: BiasTerms,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
    reference_compat: bool = True,
) -> BiasTable:
    """``bias_table`` from one judge's terms (``bias_terms``, ``BiasTermsBuilder.terms``)."""
    types = list(BIAS_TYPES)
    S, C, P = terms.sums, terms.counts, terms.scored
    point = type_values(
        S.sum(axis=0), C.sum(axis=0), P.sum(axis=0), reference_compat=reference_compat
    )
    w = bootstrap_weights(len(terms.items), n_boot, seed)
    boot = (
        type_values(w @ S, w @ C, w @ P, reference_compat=reference_compat)
        if len(w)
        else np.full((0, len(types)), np.nan)
    )
    tot_c, tot_p = C.sum(axis=0), P.sum(axis=0)

    def figure(cols: list[int], metric: str) -> BiasFigure:
        vals = point[cols]
        have = [c for c, v in zip(cols, vals, strict=True) if np.isfinite(v)]
        n_pairs = int(tot_c[cols].sum())
        n_excl = int(terms.excluded[cols].sum())
        note = None
        if len(cols) == 1:
            c = cols[0]
            if BIAS_TYPES[types[c]][1] == "bd" and tot_c[c] == 0 and tot_p[c] > 0:
                note = REFERENCE_ZERO_NOTE if reference_compat else NO_QUALIFYING_NOTE
        if not have:
            return BiasFigure(
                metric=metric,
                value=None,
                ci_low=None,
                ci_high=None,
                pairs=0,
                excluded=n_excl,
                note=note or "no data: no scored pair",
            )
        value = float(np.mean(point[have]))
        lo = hi = None
        if len(boot):
            lo, hi = _interval(mean_of_types(boot, have), ci)
        return BiasFigure(
            metric=metric,
            value=value,
            ci_low=lo,
            ci_high=hi,
            pairs=n_pairs,
            excluded=n_excl,
            note=note,
        )

    t_index = {t: i for i, t in enumerate(types)}
    type_figs = {t: figure([t_index[t]], BIAS_TYPES[t][1]) for t in types}
    cat_figs = {
        cat: figure([t_index[t] for t in types if BIAS_TYPES[t][0] == cat], metric)
        for cat, metric in BIAS_CATEGORIES.items()
    }
    overall = figure(list(range(len(types))), "mixed")
    return BiasTable(
        types=type_figs, categories=cat_figs, overall=overall, reference_compat=reference_compat
    )


class RatioEstimate(BaseModel):
    """A rate or mean over units with its bootstrap interval (units resampled whole)."""

    model_config = ConfigDict(frozen=True)

    value: float | None
    """Σ numerators / Σ denominators; None without data."""
    ci_low: float | None
    """Lower bound of the bootstrap percentile interval."""
    ci_high: float | None
    """Upper bound of the interval."""
    n: int
    """Units (items) with data."""
    count: float
    """Σ denominators (e.g. judgments)."""


def unit_ratio(
    numerators: Sequence[float],
    denominators: Sequence[float],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> RatioEstimate:
    """Σ num / Σ den with an interval from a bootstrap over units (index i is one unit, e.g. a
    meme with all its judgments): the interval is computed at the unit that was sampled."""
    return unit_ratios([numerators], denominators, n_boot=n_boot, seed=seed, ci=ci)[0]


def unit_ratios(
    numerators: Sequence[Sequence[float] | np.ndarray],
    denominators: Sequence[float] | np.ndarray,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> list[RatioEstimate]:
    """``unit_ratio`` of each numerator over the same units and denominators, from one draw of
    resampling weights (the draw ``unit_ratio`` makes with this seed). The weights
    (``rng.multinomial(n, uniform, size=n_boot)``) are drawn a block of rows at a time and
    each block multiplied at once, so memory stays at ``_BOOT_CELLS`` cells however many units
    there are; the draws are the same (rows come from the stream in order) and, when
    ``n_boot`` × units fits in one block, so is every product."""
    den = np.asarray(denominators, dtype=np.float64)
    nums = [np.asarray(x, dtype=np.float64) for x in numerators]
    if any(x.shape != den.shape for x in nums):
        raise StatsError("numerators and denominators differ in length")
    keep = den > 0
    den = den[keep]
    nums = [x[keep] for x in nums]
    n = len(den)
    if not n:
        return [RatioEstimate(value=None, ci_low=None, ci_high=None, n=0, count=0.0) for _ in nums]
    bounds: list[tuple[float | None, float | None]] = [(None, None)] * len(nums)
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        p = np.full(n, 1.0 / n)
        rows = max(1, _BOOT_CELLS // n)
        block = np.empty((min(rows, n_boot), n))
        bd = np.empty(n_boot)
        bn = [np.empty(n_boot) for _ in nums]
        for i in range(0, n_boot, rows):
            k = min(rows, n_boot - i)
            w = block[:k]
            w[...] = rng.multinomial(n, p, size=k)
            bd[i : i + k] = w @ den
            for b, x in zip(bn, nums, strict=True):
                b[i : i + k] = w @ x
        del block
        with np.errstate(invalid="ignore", divide="ignore"):
            bounds = [
                _interval(np.where(bd > 0, b / np.maximum(bd, 1e-300), np.nan), ci) for b in bn
            ]
    total = float(den.sum())
    return [
        RatioEstimate(value=float(x.sum() / den.sum()), ci_low=lo, ci_high=hi, n=n, count=total)
        for x, (lo, hi) in zip(nums, bounds, strict=True)
    ]


def difference_in_differences(
    parts: Sequence[Sequence[float]],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> RatioEstimate:
    """(a1/n1 − b1/m1) − (a2/n2 − b2/m2) from per-unit sums ``parts[i] = (a1, n1, b1, m1, a2,
    n2, b2, m2)``, with an interval from a bootstrap over units. Used for self-enhancement:
    a judge's score of its own family's answers minus the other judges' score of the same
    answers, net of the same difference on the other answers (which removes plain leniency)."""
    arr = np.asarray(parts, dtype=np.float64).reshape(-1, 8)
    tot = arr.sum(axis=0)
    if not len(arr) or np.any(tot[[1, 3, 5, 7]] <= 0):
        return RatioEstimate(value=None, ci_low=None, ci_high=None, n=len(arr), count=0.0)

    def did(t: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return (t[..., 0] / t[..., 1] - t[..., 2] / t[..., 3]) - (
                t[..., 4] / t[..., 5] - t[..., 6] / t[..., 7]
            )

    value = float(did(tot))
    lo = hi = None
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        w = rng.multinomial(len(arr), np.full(len(arr), 1.0 / len(arr)), size=n_boot)
        lo, hi = _interval(did(w @ arr), ci)
    return RatioEstimate(value=value, ci_low=lo, ci_high=hi, n=len(arr), count=float(tot[1]))


def studentized_p(
    estimate: float | None,
    replicates: np.ndarray,
    null: float,
    side: int,
    units: int,
    *,
    degenerate_se: float = 0.0,
) -> float | None:
    """The p-value of ``estimate`` against ``null`` — one-sided below (``side == -1``), above
    (``+1``) or two-sided (``0``) — from its bootstrap standard error: t = (estimate − null) /
    se with se the replicates' standard deviation times √(n / (n − 1)) (the bootstrap's
    variance is (n − 1)/n of the unbiased one), referred to Student's t with n − 1 degrees of
    freedom, n = ``units`` (the items resampled). A percentile bootstrap's tails are too light
    at a few dozen items (a nominal 2.5% test rejected 3.5% of true nulls on 24); its p-values
    also stop at 1 / rounds. None (not testable) without an estimate, with fewer than two
    units or finite replicates, or with a zero standard error: a zero-width interval proves
    nothing — unless ``degenerate_se`` gives the standard error to use then (a proportion's, from
    its Wilson interval: a judge preferring the first answer every time has a zero-width
    bootstrap, not a certain rate)."""
    if estimate is None or not np.isfinite(estimate) or units < 2 or side not in (-1, 0, 1):
        return None
    reps = np.asarray(replicates, dtype=np.float64)
    reps = reps[np.isfinite(reps)]
    if len(reps) < 2:
        return None
    se = float(np.std(reps, ddof=1)) * float(np.sqrt(units / (units - 1)))
    # Replicates equal up to rounding (ratios of the same terms) are a zero-width interval.
    scale = max(1.0, abs(float(estimate)), float(np.abs(reps).max()))
    if not np.isfinite(se) or se <= 1e-9 * scale:
        se = float(degenerate_se)
    if not se > 0:
        return None
    from scipy.special import stdtr  # imported on first use: scipy.special is slow to import

    t = (estimate - null) / se
    df = float(units - 1)
    if side == 0:
        return float(min(1.0, 2 * stdtr(df, -abs(t))))
    return float(stdtr(df, t) if side == -1 else stdtr(df, -t))


def holm_adjusted(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of one family's p-values (None: not tested, not counted):
    rejecting every test whose adjusted p-value is at most α wrongly rejects one or more true
    nulls with probability at most α, whatever the tests' dependence (a category and its
    types, overall and everything)."""
    have = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    out: list[float | None] = [None] * len(pvalues)
    m, running = len(have), 0.0
    for k, (p, i) in enumerate(have):
        running = max(running, min(1.0, (m - k) * p))
        out[i] = running
    return out
