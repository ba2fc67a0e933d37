"""Judge agreement and bias metrics, each with a seeded bootstrap percentile interval.

Inputs are generic `Verdict` records; the Arena (or anything else) adapts its records to them.
Scores follow the rest of the module: a win is 1, a tie 0.5, a loss 0.

Intervals resample the unit that was sampled: a verdict's `cluster` (e.g. its meme) when set,
so that the correlated verdicts of one meme move together; otherwise single verdicts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from memearena.stats.counts import FloatArray, IntArray
from memearena.stats.errors import StatsError

VerdictWinner = Literal["model_a", "model_b", "tie"]
_LABELS: tuple[str, ...] = ("model_a", "model_b", "tie")
_FIRST_SCORE = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5}


@dataclass(frozen=True, slots=True)
class Verdict:
    """One judge's decision on one pair, with `model_a` the response shown first."""

    judge: str
    item: str
    model_a: str
    model_b: str
    winner: VerdictWinner
    criterion: str | None = None
    len_a: int | None = None
    """Length of `model_a`'s response (any unit, e.g. characters), if known."""
    len_b: int | None = None
    """Length of `model_b`'s response, same unit, if known."""
    cluster: Hashable | None = None
    """The sampled unit the verdict belongs to (e.g. its meme): bootstrap intervals resample
    whole clusters. None: the verdict (or presentation) is its own unit."""

    def __post_init__(self) -> None:
        if self.winner not in _LABELS:
            raise StatsError(f"verdict winner must be one of {', '.join(_LABELS)}")
        if self.model_a == self.model_b:
            raise StatsError(f"verdict compares {self.model_a!r} with itself")

    def score(self, model: str) -> float:
        """Points `model` scored in this verdict (1 win, 0.5 tie, 0 loss)."""
        if self.winner == "tie":
            return 0.5
        won = self.model_a if self.winner == "model_a" else self.model_b
        return 1.0 if won == model else 0.0

    @property
    def outcome(self) -> str:
        """Order-free outcome: the winning model's name, or 'tie'."""
        return {"model_a": self.model_a, "model_b": self.model_b}.get(self.winner, "tie")


class Estimate(BaseModel):
    """A statistic with its bootstrap percentile interval."""

    model_config = ConfigDict(frozen=True)

    value: float
    """Point estimate (NaN when there is nothing to measure)."""
    ci_low: float
    """Lower bound of the percentile interval."""
    ci_high: float
    """Upper bound of the percentile interval."""
    n: int
    """Number of units the statistic is computed on."""


class SelfPreference(BaseModel):
    """How much more a judge favours its own model than the rest of the panel does."""

    model_config = ConfigDict(frozen=True)

    judge: str
    """The judge."""
    model: str
    """The judge's own model (or family)."""
    own_win_rate: float
    """Win rate (ties half) the judge gives its own model."""
    panel_win_rate: float
    """Win rate the other judges give that model."""
    difference: Estimate
    """own − panel, with a stratified bootstrap interval."""


def _interval(samples: FloatArray, ci: float) -> tuple[float, float]:
    finite = samples[np.isfinite(samples)]
    if not len(finite):
        return float("nan"), float("nan")
    tail = 100 * (1 - ci) / 2
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


_MULTINOMIAL_COST = 8
"""A binomial draw costs about this many index draws: with fewer than n / 8 distinct units,
resample as a multinomial over the distinct unit types; otherwise draw unit indices."""
_CHUNK = 1 << 22  # index draws per batch when resampling indices (about 32 MB)


def _boot_totals(
    types: FloatArray, counts: IntArray, n_boot: int, rng: np.random.Generator
) -> FloatArray:
    """Column sums over each bootstrap resample of the units (rounds × d), the units given as
    distinct rows `types` (k × d) with multiplicities `counts`.

    Drawing n units with replacement from n units of which counts[k] are of type k is exactly a
    multinomial(n, counts / n) over the types, so the cost grows with k, not with n.
    """
    n = int(counts.sum())
    if _MULTINOMIAL_COST * len(types) <= n:
        return rng.multinomial(n, counts / n, size=n_boot) @ types
    rows = np.repeat(types, counts, axis=0)
    out = np.empty((n_boot, types.shape[1]))
    step = max(1, _CHUNK // n)
    for start in range(0, n_boot, step):
        k = min(step, n_boot - start)
        picks = rng.integers(0, n, size=(k, n)) + n * np.arange(k)[:, None]
        out[start : start + k] = np.bincount(picks.ravel(), minlength=k * n).reshape(k, n) @ rows
    return out


def _boot_mean(v: FloatArray, n_boot: int, rng: np.random.Generator) -> FloatArray:
    """Bootstrap distribution of the mean of `v` (one value per round)."""
    types, counts = np.unique(v, return_counts=True)
    return _boot_totals(types[:, None], counts, n_boot, rng)[:, 0] / len(v)


def cluster_totals(clusters: Sequence[Hashable | None], rows: FloatArray) -> FloatArray:
    """Row sums per cluster (clusters × d); a None cluster makes the row its own unit."""
    index: dict[Hashable, int] = {}
    ids = np.empty(len(clusters), dtype=np.int64)
    for k, c in enumerate(clusters):
        key = ("\x00unit", k) if c is None else c
        ids[k] = index.setdefault(key, len(index))
    out = np.zeros((len(index), rows.shape[1]))
    np.add.at(out, ids, rows)
    return out


def boot_cluster_totals(totals: FloatArray, n_boot: int, rng: np.random.Generator) -> FloatArray:
    """Column sums over each bootstrap resample of the clusters (rounds × d), clusters given
    as their per-cluster totals; identical clusters are pooled (a multinomial over types)."""
    types, counts = np.unique(totals, axis=0, return_counts=True)
    return _boot_totals(types, counts.astype(np.int64), n_boot, rng)


def _nan_estimate(n: int = 0) -> Estimate:
    nan = float("nan")
    return Estimate(value=nan, ci_low=nan, ci_high=nan, n=n)


def _mean_estimate(
    values: Sequence[float],
    n_boot: int,
    rng: np.random.Generator,
    ci: float,
    clusters: Sequence[Hashable | None] | None = None,
) -> Estimate:
    v = np.asarray(values, dtype=np.float64)
    if not len(v):
        return _nan_estimate()
    if clusters is None or all(c is None for c in clusters):
        low, high = _interval(_boot_mean(v, n_boot, rng), ci)
        return Estimate(value=float(v.mean()), ci_low=low, ci_high=high, n=len(v))
    # A ratio estimator: resampled clusters carry their sums and their sizes.
    totals = cluster_totals(clusters, np.stack([v, np.ones_like(v)], axis=1))
    boot = boot_cluster_totals(totals, n_boot, rng)
    with np.errstate(invalid="ignore", divide="ignore"):
        low, high = _interval(boot[:, 0] / boot[:, 1], ci)
    return Estimate(value=float(v.mean()), ci_low=low, ci_high=high, n=len(v))


def _by_judge(verdicts: Iterable[Verdict]) -> dict[str, list[Verdict]]:
    out: dict[str, list[Verdict]] = defaultdict(list)
    for v in verdicts:
        out[v.judge].append(v)
    return dict(sorted(out.items()))


def position_consistency(
    verdicts: Iterable[Verdict], *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> dict[str, Estimate]:
    """Per judge: share of pairs judged in both orders whose two verdicts agree.

    Agreement is on the order-free outcome (same winning model, or both ties). Verdicts on the
    same (criterion, item, pair) are matched across orders in the order given.
    """
    rng = np.random.default_rng(seed)
    out = {}
    for judge, items in _by_judge(verdicts).items():
        # (criterion, item, model shown first, model shown second) → order-free outcome; repeats
        # apart, so that most keys hold a string rather than a list (no garbage-collector load).
        once: dict[tuple, str] = {}
        again: dict[tuple, list[str]] = {}
        cluster_of: dict[tuple, Hashable | None] = {}
        for v in items:
            a, w = v.model_a, v.winner
            key = (v.criterion, v.item, a, v.model_b)
            outcome = "tie" if w == "tie" else a if w == "model_a" else v.model_b
            if key in once:
                again.setdefault(key, []).append(outcome)
            else:
                once[key] = outcome
                if v.cluster is not None:
                    cluster_of[key] = v.cluster
        agree: list[bool] = []
        clusters: list[Hashable | None] = []
        for key, x in once.items():
            criterion, item, a, b = key
            if a < b and (y := once.get(swapped := (criterion, item, b, a))) is not None:
                agree.append(x == y)
                n_more = 0
                if key in again and swapped in again:
                    more = [p == q for p, q in zip(again[key], again[swapped], strict=False)]
                    agree += more
                    n_more = len(more)
                clusters += [cluster_of.get(key)] * (1 + n_more)
        out[judge] = _mean_estimate(agree, n_boot, rng, ci, clusters)
    return out


def prefer_first_rate(
    verdicts: Iterable[Verdict], *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> dict[str, Estimate]:
    """Per judge: P(the response shown first wins), ties counting half (0.5 = no bias)."""
    rng = np.random.default_rng(seed)
    return {
        judge: _mean_estimate(
            [_FIRST_SCORE[v.winner] for v in items], n_boot, rng, ci, [v.cluster for v in items]
        )
        for judge, items in _by_judge(verdicts).items()
    }


def prefer_longer_rate(
    verdicts: Iterable[Verdict], *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> dict[str, Estimate]:
    """Per judge: P(the longer response wins), ties half, over verdicts with unequal known
    lengths (0.5 = no verbosity bias)."""
    rng = np.random.default_rng(seed)
    out = {}
    for judge, items in _by_judge(verdicts).items():
        unequal = [
            v for v in items if v.len_a is not None and v.len_b is not None and v.len_a != v.len_b
        ]
        values = [_longer_score(v) for v in unequal]
        out[judge] = _mean_estimate(values, n_boot, rng, ci, [v.cluster for v in unequal])
    return out


def _longer_score(v: Verdict) -> float:
    """Points the longer response scored (lengths known and unequal)."""
    assert v.len_a is not None and v.len_b is not None
    return _FIRST_SCORE[v.winner] if v.len_a > v.len_b else 1.0 - _FIRST_SCORE[v.winner]


def relative_longer_rate(
    verdicts: Iterable[Verdict],
    *,
    own_models: Mapping[str, Collection[str]] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> dict[str, Estimate]:
    """Per judge: P(the longer response wins) minus the other judges' mean P on the very same
    presentations (criterion, item, shown order), ties half.

    Longer answers are often the better ones, so a raw P(longer) above 0.5 confounds quality
    with verbosity; on the same presentations the quality is the same, so 0 means the judge
    favours length no more than the rest of the panel. Needs at least two judges.
    """
    rng = np.random.default_rng(seed)
    by_presentation: dict[tuple, dict[str, tuple[float, Hashable | None]]] = {}
    for v in verdicts:
        if v.len_a is None or v.len_b is None or v.len_a == v.len_b:
            continue
        mine = own_models.get(v.judge, ()) if own_models else ()
        if v.model_a in mine or v.model_b in mine:
            continue
        key = (v.criterion, v.item, v.model_a, v.model_b)
        by_presentation.setdefault(key, {})[v.judge] = (_longer_score(v), v.cluster)
    judges = sorted({j for p in by_presentation.values() for j in p})
    out = {}
    for judge in judges:
        diffs: list[float] = []
        clusters: list[Hashable | None] = []
        for panel in by_presentation.values():
            if judge not in panel or len(panel) < 2:
                continue
            own, cluster = panel[judge]
            others = [s for j, (s, _) in panel.items() if j != judge]
            diffs.append(own - sum(others) / len(others))
            clusters.append(cluster)
        out[judge] = _mean_estimate(diffs, n_boot, rng, ci, clusters)
    return out


def self_preference(
    verdicts: Iterable[Verdict],
    own_models: Mapping[str, str | Collection[str]],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> dict[str, SelfPreference]:
    """Per judge in `own_models` (judge → its own model, or every model of its family): the
    win rate it gives its own models minus the win rate the other judges give them.

    Only comparisons of an own model against a model of another family count (two models of
    the judge's family facing each other say nothing about self-preference). The bootstrap
    resamples clusters (or single verdicts) jointly for both sides."""
    rng = np.random.default_rng(seed)
    verdicts = list(verdicts)
    out = {}
    for judge, mine in sorted(own_models.items()):
        own_set = {mine} if isinstance(mine, str) else set(mine)
        rows: list[tuple[float, float, float, float]] = []
        clusters: list[Hashable | None] = []
        for v in verdicts:
            a_own, b_own = v.model_a in own_set, v.model_b in own_set
            if a_own == b_own:
                continue
            score = v.score(v.model_a if a_own else v.model_b)
            rows.append((score, 1.0, 0.0, 0.0) if v.judge == judge else (0.0, 0.0, score, 1.0))
            clusters.append(v.cluster)
        label = ", ".join(sorted(own_set))
        table = np.asarray(rows, dtype=np.float64).reshape(-1, 4)
        sums = table.sum(axis=0)
        n_own, n_panel = int(sums[1]), int(sums[3])
        nan = float("nan")
        own_rate = sums[0] / n_own if n_own else nan
        panel_rate = sums[2] / n_panel if n_panel else nan
        if not n_own or not n_panel:
            out[judge] = SelfPreference(
                judge=judge,
                model=label,
                own_win_rate=own_rate,
                panel_win_rate=panel_rate,
                difference=_nan_estimate(min(n_own, n_panel)),
            )
            continue
        boot = boot_cluster_totals(cluster_totals(clusters, table), n_boot, rng)
        with np.errstate(invalid="ignore", divide="ignore"):
            low, high = _interval(boot[:, 0] / boot[:, 1] - boot[:, 2] / boot[:, 3], ci)
        out[judge] = SelfPreference(
            judge=judge,
            model=label,
            own_win_rate=float(own_rate),
            panel_win_rate=float(panel_rate),
            difference=Estimate(
                value=float(own_rate - panel_rate), ci_low=low, ci_high=high, n=n_own
            ),
        )
    return out


def _units(verdicts: Iterable[Verdict]) -> dict[tuple, dict[Any, Any]]:
    """(criterion, item, model_a, model_b) → judge → winner label; duplicates are an error.
    The presentation's cluster (of its first verdict) is kept under the key None."""
    units: dict[tuple, dict[Any, Any]] = {}
    for v in verdicts:
        unit = units.setdefault((v.criterion, v.item, v.model_a, v.model_b), {None: v.cluster})
        if v.judge in unit:
            raise StatsError(
                f"judge {v.judge!r} has two verdicts on item {v.item!r} ({v.model_a} vs "
                f"{v.model_b}, criterion {v.criterion!r})"
            )
        unit[v.judge] = v.winner
    return units


def _kappa(tables: FloatArray) -> FloatArray:
    """Cohen's κ for a stack of flattened 3×3 contingency tables (rounds × 9)."""
    t = tables.reshape(-1, 3, 3)
    n = t.sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        p_o = np.trace(t, axis1=1, axis2=2) / n
        p_e = (t.sum(axis=2) * t.sum(axis=1)).sum(axis=1) / n**2
        return (p_o - p_e) / (1 - p_e)


def cohen_kappa(
    verdicts: Iterable[Verdict],
    judge_1: str,
    judge_2: str,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> Estimate:
    """Cohen's κ between two judges over the presentations (criterion, item, A, B) both judged.

    NaN when chance agreement is 1 (both judges always gave the same single label).
    """
    code = {label: k for k, label in enumerate(_LABELS)}
    both = [j for j in _units(verdicts).values() if judge_1 in j and judge_2 in j]
    cells = [3 * code[j[judge_1]] + code[j[judge_2]] for j in both]
    if not cells:
        return _nan_estimate()
    # A presentation contributes one to one of the nine cells: bootstrap the cell counts.
    table = np.bincount(cells, minlength=9)
    value = float(_kappa(table[None, :].astype(float))[0])
    rng = np.random.default_rng(seed)
    clusters = [j[None] for j in both]
    if all(c is None for c in clusters):
        seen = np.flatnonzero(table)
        boot = _boot_totals(np.eye(9)[seen], table[seen], n_boot, rng)
    else:
        boot = boot_cluster_totals(cluster_totals(clusters, np.eye(9)[cells]), n_boot, rng)
    low, high = _interval(_kappa(boot), ci)
    return Estimate(value=value, ci_low=low, ci_high=high, n=len(cells))


def _distinct_rows(rows: IntArray) -> tuple[IntArray, IntArray]:
    """The distinct rows of a non-negative integer matrix and how often each occurs."""
    base = int(rows.max(initial=0)) + 1
    if rows.shape[1] * np.log2(base) < 62:  # one int64 key per row: a fast 1-D unique
        keys = rows @ base ** np.arange(rows.shape[1], dtype=np.int64)
        _, first, counts = np.unique(keys, return_index=True, return_counts=True)
        return rows[first], counts
    return np.unique(rows, axis=0, return_counts=True)


def _coincidences(
    units: Sequence[Sequence[Hashable | None]],
) -> tuple[FloatArray, IntArray, int]:
    """Distinct per-unit coincidence matrices (types × C², flattened) over the pairable units,
    how many units have each, and C. A unit's matrix depends only on its value counts."""
    categories = sorted({v for u in units for v in u if v is not None}, key=repr)
    index = {c: k for k, c in enumerate(categories)}
    c = max(len(categories), 1)
    flat = [u * c + index[v] for u, unit in enumerate(units) for v in unit if v is not None]
    per_unit = np.bincount(flat, minlength=len(units) * c).reshape(len(units), c)
    per_unit = per_unit[per_unit.sum(axis=1) >= 2]  # a unit with one value cannot be paired
    patterns, counts = _distinct_rows(per_unit)
    patterns = patterns.astype(float)
    m = patterns.sum(axis=1)
    outer = patterns[:, :, None] * patterns[:, None, :]
    outer[:, np.arange(c), np.arange(c)] -= patterns
    types = (outer / (m - 1)[:, None, None]).reshape(len(patterns), c * c)
    return types, counts.astype(np.int64), c


def _alpha(coincidence: FloatArray, c: int) -> FloatArray:
    o = coincidence.reshape(-1, c, c)
    n_c = o.sum(axis=2)
    n = n_c.sum(axis=1)
    off = ~np.eye(c, dtype=bool)
    observed = o[:, off].sum(axis=1)
    expected = (n_c[:, :, None] * n_c[:, None, :])[:, off].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return 1.0 - (n - 1) * observed / expected


def nominal_alpha(units: Sequence[Sequence[Hashable | None]]) -> float:
    """Krippendorff's α (nominal) for a table of units × coders (None = missing value)."""
    types, counts, c = _coincidences(units)
    if not len(types):
        raise StatsError("Krippendorff's alpha needs a unit with at least two values")
    return float(_alpha((counts @ types)[None, :], c)[0])


def krippendorff_alpha(
    verdicts: Iterable[Verdict],
    *,
    judges: Sequence[str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> Estimate:
    """Krippendorff's α (nominal) across a judge panel; units are (criterion, item, A, B)
    presentations, values the winner labels, bootstrap over units."""
    units = _units(verdicts)
    panel = (
        sorted({j for u in units.values() for j in u if j is not None})
        if judges is None
        else list(judges)
    )
    values = [[u.get(j) for j in panel] for u in units.values()]
    types, counts, c = _coincidences(values)
    if not len(types):
        return _nan_estimate()
    value = float(_alpha((counts @ types)[None, :], c)[0])
    rng = np.random.default_rng(seed)
    clusters = [u[None] for u in units.values()]
    if all(k is None for k in clusters):
        boot = _boot_totals(types, counts, n_boot, rng)
    else:
        # Each pairable presentation's coincidence matrix, summed per cluster.
        per_unit, keep = _unit_coincidences(values)
        kept = [k for k, ok in zip(clusters, keep, strict=True) if ok]
        boot = boot_cluster_totals(cluster_totals(kept, per_unit), n_boot, rng)
    low, high = _interval(_alpha(boot, c), ci)
    return Estimate(value=value, ci_low=low, ci_high=high, n=int(counts.sum()))


def _unit_coincidences(
    units: Sequence[Sequence[Hashable | None]],
) -> tuple[FloatArray, np.ndarray]:
    """Each pairable unit's coincidence matrix (pairable units × C², flattened), and which
    units are pairable (categories ordered as in `_coincidences`)."""
    categories = sorted({v for u in units for v in u if v is not None}, key=repr)
    index = {c: k for k, c in enumerate(categories)}
    c = max(len(categories), 1)
    flat = [u * c + index[v] for u, unit in enumerate(units) for v in unit if v is not None]
    per_unit = np.bincount(flat, minlength=len(units) * c).reshape(len(units), c).astype(float)
    keep = per_unit.sum(axis=1) >= 2
    p = per_unit[keep]
    m = p.sum(axis=1)
    outer = p[:, :, None] * p[:, None, :]
    outer[:, np.arange(c), np.arange(c)] -= p
    return (outer / (m - 1)[:, None, None]).reshape(len(p), c * c), keep
