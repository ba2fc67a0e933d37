"""Judge agreement and bias metrics, each with a seeded bootstrap percentile interval.

Inputs are generic `Verdict` records; the Arena (or anything else) adapts its records to them.
Scores follow the rest of the module: a win is 1, a tie 0.5, a loss 0.

Intervals resample the unit that was sampled: a verdict's `cluster` (e.g. its meme) when set,
so that the correlated verdicts of one meme move together; otherwise single verdicts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
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


VerdictRow = tuple[str, str, str, str, str, str | None, int | None, int | None, Hashable | None]
"""A verdict as a plain tuple: judge, item, model_a, model_b, winner, criterion, len_a, len_b,
cluster (`Verdict`'s fields, in its order)."""


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


def _nan_estimate(n: int = 0) -> Estimate:
    nan = float("nan")
    return Estimate(value=nan, ci_low=nan, ci_high=nan, n=n)


def _kappa(tables: FloatArray) -> FloatArray:
    """Cohen's κ for a stack of flattened 3×3 contingency tables (rounds × 9)."""
    t = tables.reshape(-1, 3, 3)
    n = t.sum(axis=(1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        p_o = np.trace(t, axis1=1, axis2=2) / n
        p_e = (t.sum(axis=2) * t.sum(axis=1)).sum(axis=1) / n**2
        return (p_o - p_e) / (1 - p_e)


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
    return _coincidence_rows(patterns.astype(float)), counts.astype(np.int64), c


def _coincidence_rows(patterns: FloatArray) -> FloatArray:
    """Each unit's coincidence matrix (units × C², flattened) from its value counts per
    category (units × C, every unit with at least two values)."""
    c = patterns.shape[1]
    m = patterns.sum(axis=1)
    outer = patterns[:, :, None] * patterns[:, None, :]
    outer[:, np.arange(c), np.arange(c)] -= patterns
    return (outer / (m - 1)[:, None, None]).reshape(len(patterns), c * c)


def alpha_of_coincidences(coincidence: FloatArray, c: int) -> FloatArray:
    """Krippendorff's nominal α of each row of flattened ``c × c`` coincidence matrices."""
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
    return float(alpha_of_coincidences((counts @ types)[None, :], c)[0])


@lru_cache(maxsize=4096)
def _coincidence_of(counts: tuple[int, int, int]) -> tuple[float, ...]:
    """A unit's flattened coincidence matrix (by its value counts per label) and a one."""
    return (*_coincidence_rows(np.array([counts], dtype=float))[0].tolist(), 1.0)


def _unit_coincidence(values: Sequence[str]) -> tuple[float, ...]:
    """The coincidence row (see `_coincidence_of`) of one unit's winner labels."""
    counts = [0, 0, 0]
    for x in values:
        counts[_CODE[x]] += 1
    return _coincidence_of((counts[0], counts[1], counts[2]))


# ---- streaming aggregation --------------------------------------------------------------------


class _Sample:
    """The rows of one statistic, summed per cluster; a row without a cluster is its own unit,
    kept as a count of distinct rows (all the bootstrap needs). Memory grows with the clusters
    and the distinct rows, not with the rows."""

    __slots__ = ("_index", "_seen", "_sums", "_units")

    def __init__(self, width: int, index: dict[Hashable, int]) -> None:
        self._index = index  # cluster → row, shared by the samples of one stream
        self._sums = np.zeros((0, width))
        self._seen = np.zeros(0, dtype=bool)
        self._units: Counter[tuple[float, ...]] = Counter()

    def add(self, row: Sequence[float], cluster: Hashable | None) -> None:
        if cluster is None:
            self._units[tuple(row)] += 1
            return
        k = self._index.setdefault(cluster, len(self._index))
        if k >= len(self._sums):
            size = max(64, 2 * len(self._sums), k + 1)
            sums = np.zeros((size, self._sums.shape[1]))
            sums[: len(self._sums)] = self._sums
            seen = np.zeros(size, dtype=bool)
            seen[: len(self._seen)] = self._seen
            self._sums, self._seen = sums, seen
        self._sums[k] += row
        self._seen[k] = True

    def units(self) -> tuple[FloatArray, IntArray]:
        """The distinct unit totals (types × width) and how many units have each."""
        rows = [self._sums[: len(self._seen)][self._seen]]
        weights = [np.ones(len(rows[0]), dtype=np.int64)]
        if self._units:
            rows.append(np.array(list(self._units), dtype=np.float64))
            weights.append(np.fromiter(self._units.values(), np.int64, len(self._units)))
        table, times = np.concatenate(rows), np.concatenate(weights)
        if not len(table):
            return table, times
        types, inverse = np.unique(table, axis=0, return_inverse=True)
        counts = np.bincount(inverse.ravel(), weights=times, minlength=len(types))
        return types, counts.astype(np.int64)


_WIDTH = {"consistency": 2, "first": 2, "longer": 2, "relative": 2, "self": 4, "kappa": 9}
_WIDTH["alpha"] = 10  # the 3×3 coincidence matrix and one (the unit count)
METRICS = frozenset(_WIDTH)
"""What a `VerdictMetrics` can aggregate: position consistency, P(first), P(longer), P(longer)
relative to the panel, self-preference, Cohen's κ per judge pair, Krippendorff's α."""
_CODE = {label: k for k, label in enumerate(_LABELS)}


class VerdictMetrics:
    """Judge agreement and bias metrics over a stream of verdicts, aggregated per cluster as
    they arrive: memory grows with the clusters, never with the verdicts.

    Verdicts come in batches (`add`): the verdicts matched across orders or judges (those on
    one item: the same criterion, item and pair) must arrive in the same batch, e.g. one
    batch per item. `own_models` (judge → its own model or models) selects the judges measured
    for self-preference and drops a judge's verdicts on its own models from the relative
    length preference; `panel` restricts Krippendorff's α to those judges (default: all);
    `pairs` are the judge pairs Cohen's κ is computed for.
    """

    def __init__(
        self,
        *,
        metrics: Collection[str] = METRICS,
        own_models: Mapping[str, str | Collection[str]] | None = None,
        panel: Sequence[str] | None = None,
        pairs: Sequence[tuple[str, str]] = (),
    ) -> None:
        unknown = set(metrics) - METRICS
        if unknown:
            raise StatsError(f"unknown verdict metrics: {', '.join(sorted(unknown))}")
        self.metrics = frozenset(metrics)
        self.own = {
            j: frozenset({m} if isinstance(m, str) else m) for j, m in (own_models or {}).items()
        }
        self.panel = None if panel is None else list(panel)
        self.pairs = list(pairs)
        self.judges: set[str] = set()
        self._relative_judges: set[str] = set()
        self._index: dict[Hashable, int] = {}
        self._samples: dict[tuple[str, Any], _Sample] = {}

    @classmethod
    def of(cls, verdicts: Iterable[Verdict], **kwargs: Any) -> VerdictMetrics:
        """The metrics of a whole collection of verdicts (one batch)."""
        out = cls(**kwargs)
        out.add(verdicts)
        return out

    def _sample(self, key: tuple[str, Any]) -> _Sample:
        s = self._samples.get(key)
        if s is None:
            s = self._samples[key] = _Sample(_WIDTH[key[0]], self._index)
        return s

    def add(self, verdicts: Iterable[Verdict]) -> None:
        """Aggregate one batch of verdicts (see the class: matched verdicts share a batch)."""
        self._add(
            [
                (
                    v.judge,
                    v.item,
                    v.model_a,
                    v.model_b,
                    v.winner,
                    v.criterion,
                    v.len_a,
                    v.len_b,
                    v.cluster,
                )
                for v in verdicts
            ]
        )

    def add_rows(self, rows: Iterable[VerdictRow]) -> None:
        """`add` for verdicts given as tuples in `Verdict`'s field order (no object per
        verdict): the same sums; a row that `Verdict` would refuse raises the same error, and
        then nothing of the batch is added."""
        rows = list(rows)
        for row in rows:
            if row[4] not in _LABELS:
                raise StatsError(f"verdict winner must be one of {', '.join(_LABELS)}")
            if row[2] == row[3]:
                raise StatsError(f"verdict compares {row[2]!r} with itself")
        self._add(rows)

    def _add(self, verdicts: Sequence[VerdictRow]) -> None:
        want = self.metrics
        local: dict[tuple[tuple[str, Any], Hashable], list[float]] = {}

        def put(key: tuple[str, Any], cluster: Hashable | None, row: Sequence[float]) -> None:
            if cluster is None:
                self._sample(key).add(row, None)
                return
            cur = local.get((key, cluster))
            if cur is None:
                local[(key, cluster)] = list(row)
            else:
                for k, x in enumerate(row):
                    cur[k] += x

        def put2(key: tuple[str, Any], cluster: Hashable | None, x: float) -> None:
            """`put` of the row (x, 1.0), the same sums in the same order."""
            if cluster is None:
                self._sample(key).add((x, 1.0), None)
                return
            cur = local.get((key, cluster))
            if cur is None:
                local[(key, cluster)] = [x, 1.0]
            else:
                cur[0] += x
                cur[1] += 1.0

        once: dict[tuple, tuple[str, Hashable | None]] = {}
        again: dict[tuple, list[str]] = {}
        units: dict[tuple, dict[Any, Any]] = {}
        longer: dict[tuple, dict[str, tuple[float, Hashable | None]]] = {}
        need_units = bool({"kappa", "alpha"} & want)
        do_first, do_longer = "first" in want, "longer" in want
        do_relative, do_consistency = "relative" in want, "consistency" in want
        owners = list(self.own.items()) if "self" in want else []
        own_get, no_own = self.own.get, frozenset[str]()
        add_judge = self.judges.add
        for judge, item, a, b, w, criterion, len_a, len_b, cluster in verdicts:
            add_judge(judge)
            first = _FIRST_SCORE[w]
            # Rows of two columns (points, 1) summed in place, in verdict order: the same sums
            # as `put`, without a call per verdict.
            if do_first:
                if cluster is None:
                    put(("first", judge), None, (first, 1.0))
                else:
                    cur = local.get((("first", judge), cluster))
                    if cur is None:
                        local[(("first", judge), cluster)] = [first, 1.0]
                    else:
                        cur[0] += first
                        cur[1] += 1.0
            if len_a is not None and len_b is not None and len_a != len_b:
                score = first if len_a > len_b else 1.0 - first  # the longer response's points
                if do_longer:
                    if cluster is None:
                        put(("longer", judge), None, (score, 1.0))
                    else:
                        cur = local.get((("longer", judge), cluster))
                        if cur is None:
                            local[(("longer", judge), cluster)] = [score, 1.0]
                        else:
                            cur[0] += score
                            cur[1] += 1.0
                if do_relative:
                    mine = own_get(judge, no_own)
                    if a not in mine and b not in mine:
                        panel = longer.get((criterion, item, a, b))
                        if panel is None:
                            panel = longer[(criterion, item, a, b)] = {}
                        panel[judge] = (score, cluster)
            if do_consistency:
                key = (judge, criterion, item, a, b)
                outcome = "tie" if w == "tie" else a if w == "model_a" else b
                if key in once:
                    again.setdefault(key, []).append(outcome)
                else:
                    once[key] = (outcome, cluster)
            for owner, own_set in owners:
                a_own, b_own = a in own_set, b in own_set
                if a_own == b_own:
                    continue
                s = 0.5 if w == "tie" else 1.0 if (w == "model_a") == a_own else 0.0
                mix = (s, 1.0, 0.0, 0.0) if judge == owner else (0.0, 0.0, s, 1.0)
                put(("self", owner), cluster, mix)
            if need_units:
                unit = units.get((criterion, item, a, b))
                if unit is None:
                    unit = units[(criterion, item, a, b)] = {None: cluster}
                if judge in unit:
                    raise StatsError(
                        f"judge {judge!r} has two verdicts on item {item!r} ({a} vs {b}, "
                        f"criterion {criterion!r})"
                    )
                unit[judge] = w
        for key, (x, cluster) in once.items():
            judge, criterion, item, a, b = key
            swapped = (judge, criterion, item, b, a)
            if a < b and (y := once.get(swapped)) is not None:
                put2(("consistency", judge), cluster, float(x == y[0]))
                if key in again and swapped in again:
                    for p, q in zip(again[key], again[swapped], strict=False):
                        put2(("consistency", judge), cluster, float(p == q))
        for panel in longer.values():
            self._relative_judges.update(panel)
            if len(panel) < 2:
                continue
            for judge, (own, cluster) in panel.items():
                others = [s for j, (s, _) in panel.items() if j != judge]
                put2(("relative", judge), cluster, own - sum(others) / len(others))
        kappa_keys = [(("kappa", pair), pair) for pair in self.pairs] if "kappa" in want else []
        for unit in units.values():
            cluster = unit[None]
            for kkey, (j1, j2) in kappa_keys:
                if j1 in unit and j2 in unit:
                    cell = 3 * _CODE[unit[j1]] + _CODE[unit[j2]]
                    if cluster is None:
                        row = [0.0] * 9
                        row[cell] = 1.0
                        put(kkey, None, row)
                        continue
                    # A one-hot row: adding its zeros changes no sum, so only its one is added.
                    cur = local.get((kkey, cluster))
                    if cur is None:
                        cur = local[(kkey, cluster)] = [0.0] * 9
                        cur[cell] = 1.0
                    else:
                        cur[cell] += 1.0
            if "alpha" in want:
                judged = (
                    [unit[j] for j in unit if j is not None]
                    if self.panel is None
                    else [unit[j] for j in self.panel if j in unit]
                )
                if len(judged) >= 2:
                    put(("alpha", None), cluster, _unit_coincidence(judged))
        for (name, cluster), sums in local.items():
            self._sample(name).add(sums, cluster)

    # ---- estimates ---------------------------------------------------------------------------

    def _ratio(
        self, key: tuple[str, Any], n_boot: int, rng: np.random.Generator, ci: float
    ) -> Estimate:
        """Sum of the first column over sum of the second, with a bootstrap over the units."""
        s = self._samples.get(key)
        types, counts = s.units() if s is not None else (np.zeros((0, 2)), np.zeros(0, np.int64))
        if not len(types):
            return _nan_estimate()
        total = counts @ types
        boot = _boot_totals(types, counts, n_boot, rng)
        with np.errstate(invalid="ignore", divide="ignore"):
            low, high = _interval(boot[:, 0] / boot[:, 1], ci)
        n = round(float(total[1]))
        return Estimate(value=float(total[0] / total[1]), ci_low=low, ci_high=high, n=n)

    def _per_judge(
        self, name: str, judges: Iterable[str], n_boot: int, seed: int, ci: float
    ) -> dict[str, Estimate]:
        rng = np.random.default_rng(seed)
        return {j: self._ratio((name, j), n_boot, rng, ci) for j in sorted(judges)}

    def position_consistency(
        self, *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
    ) -> dict[str, Estimate]:
        """See `position_consistency`."""
        return self._per_judge("consistency", self.judges, n_boot, seed, ci)

    def prefer_first_rate(
        self, *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
    ) -> dict[str, Estimate]:
        """See `prefer_first_rate`."""
        return self._per_judge("first", self.judges, n_boot, seed, ci)

    def prefer_longer_rate(
        self, *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
    ) -> dict[str, Estimate]:
        """See `prefer_longer_rate`."""
        return self._per_judge("longer", self.judges, n_boot, seed, ci)

    def relative_longer_rate(
        self, *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
    ) -> dict[str, Estimate]:
        """See `relative_longer_rate`."""
        return self._per_judge("relative", self._relative_judges, n_boot, seed, ci)

    def self_preference(
        self, *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
    ) -> dict[str, SelfPreference]:
        """See `self_preference` (for the judges of `own_models`)."""
        rng = np.random.default_rng(seed)
        out = {}
        nan = float("nan")
        for judge, own_set in sorted(self.own.items()):
            s = self._samples.get(("self", judge))
            types, counts = (
                s.units() if s is not None else (np.zeros((0, 4)), np.zeros(0, np.int64))
            )
            total = counts @ types if len(types) else np.zeros(4)
            n_own, n_panel = round(float(total[1])), round(float(total[3]))
            own_rate = total[0] / n_own if n_own else nan
            panel_rate = total[2] / n_panel if n_panel else nan
            label = ", ".join(sorted(own_set))
            if not n_own or not n_panel:
                difference = _nan_estimate(min(n_own, n_panel))
            else:
                boot = _boot_totals(types, counts, n_boot, rng)
                with np.errstate(invalid="ignore", divide="ignore"):
                    diff = boot[:, 0] / boot[:, 1] - boot[:, 2] / boot[:, 3]
                low, high = _interval(diff, ci)
                difference = Estimate(
                    value=float(own_rate - panel_rate), ci_low=low, ci_high=high, n=n_own
                )
            out[judge] = SelfPreference(
                judge=judge,
                model=label,
                own_win_rate=float(own_rate),
                panel_win_rate=float(panel_rate),
                difference=difference,
            )
        return out

    def cohen_kappa(
        self, judge_1: str, judge_2: str, *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
    ) -> Estimate:
        """See `cohen_kappa` (for a pair given in `pairs`)."""
        if (judge_1, judge_2) not in self.pairs:
            raise StatsError(f"Cohen's kappa of {judge_1!r} and {judge_2!r} was not aggregated")
        s = self._samples.get(("kappa", (judge_1, judge_2)))
        if s is None:
            return _nan_estimate()
        types, counts = s.units()
        table = counts @ types
        value = float(_kappa(table[None, :])[0])
        boot = _boot_totals(types, counts, n_boot, np.random.default_rng(seed))
        low, high = _interval(_kappa(boot), ci)
        return Estimate(value=value, ci_low=low, ci_high=high, n=round(float(table.sum())))

    def krippendorff_alpha(
        self, *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
    ) -> Estimate:
        """See `krippendorff_alpha` (over `panel`)."""
        s = self._samples.get(("alpha", None))
        if s is None:
            return _nan_estimate()
        types, counts = s.units()
        total = counts @ types
        value = float(alpha_of_coincidences(total[None, :9], 3)[0])
        boot = _boot_totals(types, counts, n_boot, np.random.default_rng(seed))
        low, high = _interval(alpha_of_coincidences(boot[:, :9], 3), ci)
        return Estimate(value=value, ci_low=low, ci_high=high, n=round(float(total[9])))


# ---- one call per metric ----------------------------------------------------------------------


def position_consistency(
    verdicts: Iterable[Verdict], *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> dict[str, Estimate]:
    """Per judge: share of pairs judged in both orders whose two verdicts agree.

    Agreement is on the order-free outcome (same winning model, or both ties). Verdicts on the
    same (criterion, item, pair) are matched across orders in the order given.
    """
    m = VerdictMetrics.of(verdicts, metrics={"consistency"})
    return m.position_consistency(n_boot=n_boot, seed=seed, ci=ci)


def prefer_first_rate(
    verdicts: Iterable[Verdict], *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> dict[str, Estimate]:
    """Per judge: P(the response shown first wins), ties counting half (0.5 = no bias)."""
    m = VerdictMetrics.of(verdicts, metrics={"first"})
    return m.prefer_first_rate(n_boot=n_boot, seed=seed, ci=ci)


def prefer_longer_rate(
    verdicts: Iterable[Verdict], *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> dict[str, Estimate]:
    """Per judge: P(the longer response wins), ties half, over verdicts with unequal known
    lengths (0.5 = no verbosity bias)."""
    m = VerdictMetrics.of(verdicts, metrics={"longer"})
    return m.prefer_longer_rate(n_boot=n_boot, seed=seed, ci=ci)


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
    favours length no more than the rest of the panel. Needs at least two judges. A judge's
    verdicts on its own models (`own_models`) are left out.
    """
    m = VerdictMetrics.of(verdicts, metrics={"relative"}, own_models=own_models)
    return m.relative_longer_rate(n_boot=n_boot, seed=seed, ci=ci)


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
    m = VerdictMetrics.of(verdicts, metrics={"self"}, own_models=own_models)
    return m.self_preference(n_boot=n_boot, seed=seed, ci=ci)


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

    NaN when chance agreement is 1 (both judges always gave the same single label). A judge
    with two verdicts on one presentation is an error.
    """
    m = VerdictMetrics.of(verdicts, metrics={"kappa"}, pairs=[(judge_1, judge_2)])
    return m.cohen_kappa(judge_1, judge_2, n_boot=n_boot, seed=seed, ci=ci)


def krippendorff_alpha(
    verdicts: Iterable[Verdict],
    *,
    judges: Sequence[str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> Estimate:
    """Krippendorff's α (nominal) across a judge panel (`judges`, default every judge); units
    are (criterion, item, A, B) presentations, values the winner labels, bootstrap over units
    (or their clusters). A judge with two verdicts on one presentation is an error."""
    m = VerdictMetrics.of(verdicts, metrics={"alpha"}, panel=judges)
    return m.krippendorff_alpha(n_boot=n_boot, seed=seed, ci=ci)
