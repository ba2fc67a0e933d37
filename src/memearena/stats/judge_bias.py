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
    "RatioEstimate",
    "bias_conformity",
    "bias_deviation",
    "bias_table",
    "bias_terms",
    "bootstrap_weights",
    "category_of",
    "difference_in_differences",
    "mean_of_types",
    "metric_of",
    "type_values",
    "unit_ratio",
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


def bias_terms(pairs: Iterable[BiasPair], *, scale: float = 10) -> BiasTerms:
    """Per-item BD/BC term sums of one judge's pairs (StatsError on an unknown bias type)."""
    types = list(BIAS_TYPES)
    t_index = {t: i for i, t in enumerate(types)}
    rows: dict[str, np.ndarray] = {}
    excluded = np.zeros(len(types), dtype=np.int64)
    for p in pairs:
        category_of(p.bias_type)
        ti = t_index[p.bias_type]
        if p.unbiased is None or p.biased is None:
            excluded[ti] += 1
            continue
        y, h = float(p.unbiased), float(p.biased)
        term = _bd_term(y, h) if metric_of(p.bias_type) == "bd" else _bc_term(y, h, scale)
        row = rows.get(p.item)
        if row is None:
            row = rows[p.item] = np.zeros((3, len(types)))
        row[2, ti] += 1
        if term is None:
            excluded[ti] += 1
            continue
        row[0, ti] += term
        row[1, ti] += 1
    # Rows in item order, not arrival order: the same pairs give the same interval however
    # they were gathered (a resumed run reports exactly what an uninterrupted one does).
    keys = tuple(sorted(rows))
    arr = np.array([rows[k] for k in keys]).reshape(-1, 3, len(types))
    return BiasTerms(keys, arr[:, 0, :], arr[:, 1, :], arr[:, 2, :], excluded)


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


def bootstrap_weights(n_items: int, n_boot: int, seed: int) -> np.ndarray:
    """Multinomial resampling weights over items (``n_boot`` × ``n_items``): one draw shared by
    every judge makes their comparisons paired."""
    if not n_items or n_boot <= 0:
        return np.zeros((0, n_items))
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_items, np.full(n_items, 1.0 / n_items), size=n_boot).astype(float)


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
    terms = bias_terms(pairs, scale=scale)
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


_BOOT_CELLS = 1 << 20
"""Bootstrap weights are drawn this many cells at a time."""


def _multinomial_weights(rng: np.random.Generator, n: int, n_boot: int) -> np.ndarray:
    """``rng.multinomial(n, uniform, size=n_boot)`` as float64, drawn in blocks of rows into one
    array: the same draws (each row comes from the stream in the same order) and the same
    products as the integer matrix (which ``@`` would copy to float64 anyway), in half its
    peak memory: with one unit per call, that matrix is the audit's largest allocation."""
    p = np.full(n, 1.0 / n)
    w = np.empty((n_boot, n))
    rows = max(1, _BOOT_CELLS // n)
    for i in range(0, n_boot, rows):
        k = min(rows, n_boot - i)
        w[i : i + k] = rng.multinomial(n, p, size=k)
    return w


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
    num = np.asarray(numerators, dtype=np.float64)
    den = np.asarray(denominators, dtype=np.float64)
    if num.shape != den.shape:
        raise StatsError("numerators and denominators differ in length")
    keep = den > 0
    num, den = num[keep], den[keep]
    if not len(den):
        return RatioEstimate(value=None, ci_low=None, ci_high=None, n=0, count=0.0)
    value = float(num.sum() / den.sum())
    lo = hi = None
    if n_boot > 0:
        rng = np.random.default_rng(seed)
        w = _multinomial_weights(rng, len(den), n_boot)
        bn, bd = w @ num, w @ den
        with np.errstate(invalid="ignore", divide="ignore"):
            lo, hi = _interval(np.where(bd > 0, bn / np.maximum(bd, 1e-300), np.nan), ci)
    return RatioEstimate(value=value, ci_low=lo, ci_high=hi, n=len(den), count=float(den.sum()))


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
