"""Judge agreement and bias metrics, each with a seeded bootstrap percentile interval.

Inputs are generic `Verdict` records; the Arena (or anything else) adapts its records to them.
Scores follow the rest of the module: a win is 1, a tie 0.5, a loss 0.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from memearena.stats.counts import FloatArray
from memearena.stats.errors import StatsError

VerdictWinner = Literal["model_a", "model_b", "tie"]
_LABELS: tuple[str, ...] = ("model_a", "model_b", "tie")


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


def _boot_weights(n_units: int, n_boot: int, rng: np.random.Generator) -> FloatArray:
    """Resample counts per unit (rounds × units): a multinomial draw of the units."""
    return rng.multinomial(n_units, np.full(n_units, 1.0 / n_units), size=n_boot).astype(float)


def _mean_estimate(
    values: Sequence[float], n_boot: int, rng: np.random.Generator, ci: float
) -> Estimate:
    v = np.asarray(values, dtype=np.float64)
    if not len(v):
        return Estimate(value=float("nan"), ci_low=float("nan"), ci_high=float("nan"), n=0)
    boot = _boot_weights(len(v), n_boot, rng) @ v / len(v)
    low, high = _interval(boot, ci)
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
        shown: dict[tuple, dict[str, list[Verdict]]] = defaultdict(lambda: defaultdict(list))
        for v in items:
            key = (v.criterion, v.item, frozenset((v.model_a, v.model_b)))
            shown[key][v.model_a].append(v)
        agree = []
        for orders in shown.values():
            if len(orders) == 2:
                first, second = orders.values()
                agree += [
                    float(x.outcome == y.outcome) for x, y in zip(first, second, strict=False)
                ]
        out[judge] = _mean_estimate(agree, n_boot, rng, ci)
    return out


def prefer_first_rate(
    verdicts: Iterable[Verdict], *, n_boot: int = 1000, seed: int = 0, ci: float = 0.95
) -> dict[str, Estimate]:
    """Per judge: P(the response shown first wins), ties counting half (0.5 = no bias)."""
    rng = np.random.default_rng(seed)
    return {
        judge: _mean_estimate([v.score(v.model_a) for v in items], n_boot, rng, ci)
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
        values = [
            v.score(v.model_a if v.len_a > v.len_b else v.model_b)
            for v in items
            if v.len_a is not None and v.len_b is not None and v.len_a != v.len_b
        ]
        out[judge] = _mean_estimate(values, n_boot, rng, ci)
    return out


def self_preference(
    verdicts: Iterable[Verdict],
    own_models: Mapping[str, str],
    *,
    n_boot: int = 1000,
    seed: int = 0,
    ci: float = 0.95,
) -> dict[str, SelfPreference]:
    """Per judge in `own_models` (judge → its own model): the win rate it gives its own model
    minus the win rate the other judges give it; bootstrap resamples each side separately."""
    rng = np.random.default_rng(seed)
    verdicts = list(verdicts)
    out = {}
    for judge, model in sorted(own_models.items()):
        own = [
            v.score(model) for v in verdicts if v.judge == judge and model in (v.model_a, v.model_b)
        ]
        panel = [
            v.score(model) for v in verdicts if v.judge != judge and model in (v.model_a, v.model_b)
        ]
        if not own or not panel:
            nan = float("nan")
            diff = Estimate(value=nan, ci_low=nan, ci_high=nan, n=min(len(own), len(panel)))
            out[judge] = SelfPreference(
                judge=judge,
                model=model,
                own_win_rate=float(np.mean(own)) if own else nan,
                panel_win_rate=float(np.mean(panel)) if panel else nan,
                difference=diff,
            )
            continue
        a, b = np.asarray(own), np.asarray(panel)
        boot = (_boot_weights(len(a), n_boot, rng) @ a) / len(a) - (
            _boot_weights(len(b), n_boot, rng) @ b
        ) / len(b)
        low, high = _interval(boot, ci)
        out[judge] = SelfPreference(
            judge=judge,
            model=model,
            own_win_rate=float(a.mean()),
            panel_win_rate=float(b.mean()),
            difference=Estimate(
                value=float(a.mean() - b.mean()), ci_low=low, ci_high=high, n=len(a)
            ),
        )
    return out


def _units(verdicts: Iterable[Verdict]) -> dict[tuple, dict[str, str]]:
    """(criterion, item, model_a, model_b) → judge → winner label; duplicates are an error."""
    units: dict[tuple, dict[str, str]] = defaultdict(dict)
    for v in verdicts:
        key = (v.criterion, v.item, v.model_a, v.model_b)
        if v.judge in units[key]:
            raise StatsError(
                f"judge {v.judge!r} has two verdicts on item {v.item!r} ({v.model_a} vs "
                f"{v.model_b}, criterion {v.criterion!r})"
            )
        units[key][v.judge] = v.winner
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
    rows = [
        (_LABELS.index(j[judge_1]), _LABELS.index(j[judge_2]))
        for j in _units(verdicts).values()
        if judge_1 in j and judge_2 in j
    ]
    if not rows:
        nan = float("nan")
        return Estimate(value=nan, ci_low=nan, ci_high=nan, n=0)
    onehot = np.zeros((len(rows), 9))
    onehot[np.arange(len(rows)), [3 * a + b for a, b in rows]] = 1.0
    value = float(_kappa(onehot.sum(axis=0, keepdims=True))[0])
    rng = np.random.default_rng(seed)
    low, high = _interval(_kappa(_boot_weights(len(rows), n_boot, rng) @ onehot), ci)
    return Estimate(value=value, ci_low=low, ci_high=high, n=len(rows))


def _coincidences(units: Sequence[Sequence[Hashable | None]]) -> tuple[FloatArray, int]:
    """Per-unit coincidence matrices (units × C², flattened) for pairable units."""
    categories = sorted({v for u in units for v in u if v is not None}, key=repr)
    index = {c: k for k, c in enumerate(categories)}
    c = max(len(categories), 1)
    rows = []
    for unit in units:
        counts = np.zeros(c)
        for v in unit:
            if v is not None:
                counts[index[v]] += 1
        m = counts.sum()
        if m < 2:
            continue  # a unit with one value cannot be paired
        rows.append(((np.outer(counts, counts) - np.diag(counts)) / (m - 1)).ravel())
    return (np.array(rows) if rows else np.zeros((0, c * c))), c


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
    table, c = _coincidences(units)
    if not len(table):
        raise StatsError("Krippendorff's alpha needs a unit with at least two values")
    return float(_alpha(table.sum(axis=0, keepdims=True), c)[0])


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
    panel = sorted({j for u in units.values() for j in u}) if judges is None else list(judges)
    values = [[u.get(j) for j in panel] for u in units.values()]
    table, c = _coincidences(values)
    if not len(table):
        nan = float("nan")
        return Estimate(value=nan, ci_low=nan, ci_high=nan, n=0)
    value = float(_alpha(table.sum(axis=0, keepdims=True), c)[0])
    rng = np.random.default_rng(seed)
    low, high = _interval(_alpha(_boot_weights(len(table), n_boot, rng) @ table, c), ci)
    return Estimate(value=value, ci_low=low, ci_high=high, n=len(table))
