"""One profile per model across the methods of a run directory, and how far the methods agree.

A directory holding several methods (the demo's) says several things about the same models:
where a model ranks in one method, where it fails in another, how it judges in a third. Every
method says its part through its result class (``Method.result``), read from the run directory
only: ``profile_parts()`` (what the method knows of each model: rank, range, figures with
intervals, flags, one-line notes) and ``score_sources()`` (one score per model that the
method orders models by, and, where the method can recompute it on a resample of its units,
how). A method without them is read generically from its leaderboard rows. This module names
no method: it reads the registry.

Agreement: for two sources about the same role (targets, judges) and at least
``MIN_MODELS`` shared models, Spearman's ρ between their scores (each oriented so higher is
better: ρ > 0 is agreement), with a percentile bootstrap interval. The unit resampled is the
one both methods sampled: the memes, when both recompute their scores on a resample of memes
and share at least ``MIN_UNITS`` of them (the same resample drives both: a meme drawn twice
counts twice in each); otherwise the models themselves (the methods saw different items, so
only the set of models is a common sample; with few models that interval is wide, and says so).
Where they disagree is said by the pairs of models the two order oppositely."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from memearena.engine.registry import get_method, method_names
from memearena.engine.results import MethodResult, interval, read_json
from memearena.errors import MemearenaError

if TYPE_CHECKING:  # numpy is imported by the functions that compute: a run's finish needs none
    import numpy as np

__all__ = [
    "BOOTSTRAP",
    "MAX_BOOTSTRAP",
    "MIN_MODELS",
    "MIN_UNITS",
    "ProfilePart",
    "Resampler",
    "ScoreSource",
    "agreement",
    "build_profile",
    "rank_range",
    "register_report_part",
    "report_part",
    "spearman_rows",
]

BOOTSTRAP = 1000
"""Bootstrap draws of each agreement interval."""
MAX_BOOTSTRAP = 100_000
"""The most draws asked for (each draw refits every method's scores)."""
MIN_MODELS = 3
"""Shared models below which two methods' agreement is not estimated."""
MIN_UNITS = 5
"""Shared memes below which the bootstrap resamples models instead."""
LEVEL = 0.95
"""Coverage of every interval."""

Resampler: TypeAlias = "Callable[[Sequence[str], np.ndarray], Mapping[str, np.ndarray]]"
"""(units, weights: draws × units) -> each model's score in every draw (draws,)."""


@dataclass(frozen=True)
class ProfilePart:
    """What one method says about one model."""

    method: str
    """The method (its registry name)."""
    title: str
    """The method as a heading (``Arena``, ``Arena (as judge)``)."""
    model: str
    """The model (a target or a judge)."""
    role: str
    """``target`` (answers are evaluated) or ``judge`` (it evaluates)."""
    rank: int | None = None
    """Its rank in the method (1 best), when the method ranks."""
    rank_range: tuple[int, int] | None = None
    """The ranks its interval allows (best, worst)."""
    ranked: int | None = None
    """How many the method ranks."""
    figures: tuple[tuple[str, dict[str, Any]], ...] = ()
    """(label, ``{"value", "ci_low", "ci_high"}``), in the method's order."""
    flags: tuple[str, ...] = ()
    """What the method flags about it (a Judge-audit bias, ...)."""
    notes: tuple[str, ...] = ()
    """One-line findings (its weakest category, ...)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "title": self.title,
            "role": self.role,
            "rank": self.rank,
            "rank_range": list(self.rank_range) if self.rank_range else None,
            "ranked": self.ranked,
            "figures": [{"figure": name, **est} for name, est in self.figures],
            "flags": list(self.flags),
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class ScoreSource:
    """One score per model that a method orders models by."""

    method: str
    title: str
    """The method as a heading."""
    role: str
    """``target`` or ``judge``: only sources about the same role are compared."""
    figure: str
    """What the score is (``rating (Bradley–Terry)``, ``average score``)."""
    values: Mapping[str, float]
    """Each model's score as the method published it."""
    higher_is_better: bool = True
    unit: str | None = None
    """The unit the method sampled (``meme``), when it can recompute on a resample of them."""
    units: tuple[str, ...] = ()
    """The units' ids (meme ids)."""
    resample: Resampler | None = field(default=None, compare=False)
    """Recompute every model's score under unit weights (None: it cannot)."""


def rank_range(rows: Sequence[tuple[str, float, float]]) -> dict[str, tuple[int, int]]:
    """Per model, the ranks its interval allows among ``(model, ci_low, ci_high)`` (higher
    better): best is 1 + the models whose lower bound is above its upper bound, worst is the
    count of models whose upper bound is not below its lower bound."""
    out = {}
    for name, lo, hi in rows:
        better = sum(1 for n, lo2, _ in rows if n != name and lo2 > hi)
        not_worse = sum(1 for n, _, hi2 in rows if n != name and hi2 >= lo)
        out[name] = (1 + better, 1 + not_worse)
    return out


def _ranks(a: np.ndarray) -> np.ndarray:
    """Average ranks along the last axis, 1 lowest (ties share their mean rank)."""
    import numpy as np

    a = np.asarray(a, dtype=np.float64)
    less = (a[..., None, :] < a[..., :, None]).sum(axis=-1)
    equal = (a[..., None, :] == a[..., :, None]).sum(axis=-1)
    return np.asarray(less + (equal + 1) / 2, dtype=np.float64)


def spearman_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Spearman's ρ of each row of ``x`` with the same row of ``y`` (NaN where either row is
    constant, no order to compare, or holds a missing score)."""
    import numpy as np

    x, y = (
        np.atleast_2d(np.asarray(x, dtype=np.float64)),
        np.atleast_2d(np.asarray(y, dtype=np.float64)),
    )
    missing = ~(np.isfinite(x).all(axis=1) & np.isfinite(y).all(axis=1))
    rx, ry = _ranks(x), _ranks(y)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    den = np.sqrt((rx * rx).sum(axis=1) * (ry * ry).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (rx * ry).sum(axis=1) / den
    rho[(den == 0) | missing] = np.nan
    return np.asarray(rho)


def _interval(draws: np.ndarray) -> tuple[float | None, float | None, int]:
    import numpy as np

    ok = draws[np.isfinite(draws)]
    if len(ok) == 0:
        return None, None, 0
    tail = 100 * (1 - LEVEL) / 2
    lo, hi = np.percentile(ok, [tail, 100 - tail])
    return float(lo), float(hi), len(ok)


def _rank(r: float) -> int | float:
    """A rank as shown: tied models share the mean of their places (2.5)."""
    return int(r) if float(r).is_integer() else float(r)


def agreement(
    a: ScoreSource, b: ScoreSource, *, bootstrap: int, seed: int
) -> dict[str, Any] | None:
    """How far two sources about the same role agree on their shared models."""
    import numpy as np

    shared = [m for m in a.values if m in b.values]
    row: dict[str, Any] = {
        "a": a.method,
        "b": b.method,
        "a_title": a.title,
        "b_title": b.title,
        "role": a.role,
        "a_figure": a.figure,
        "b_figure": b.figure,
        "models": shared,
    }
    if len(shared) < MIN_MODELS:
        return row | {
            "spearman": None,
            "summary": f"{len(shared)} shared models: fewer than {MIN_MODELS}, not compared",
        }
    sign_a = 1.0 if a.higher_is_better else -1.0
    sign_b = 1.0 if b.higher_is_better else -1.0
    pa = np.array([sign_a * a.values[m] for m in shared])
    pb = np.array([sign_b * b.values[m] for m in shared])
    rng = np.random.default_rng([seed, len(shared), bootstrap])
    units = [u for u in a.units if u in set(b.units)]
    joint = (
        a.resample is not None
        and b.resample is not None
        and a.unit is not None
        and a.unit == b.unit
        and len(units) >= MIN_UNITS
    )
    if joint:
        assert a.resample is not None and b.resample is not None
        counts = rng.multinomial(len(units), np.full(len(units), 1 / len(units)), size=bootstrap)
        weights = counts.astype(np.float64)
        ga, gb = a.resample(units, weights), b.resample(units, weights)
        xa = np.stack([sign_a * ga[m] for m in shared], axis=1)
        xb = np.stack([sign_b * gb[m] for m in shared], axis=1)
        if len(units) < max(len(a.units), len(b.units)):  # the point on the shared memes too
            ones = np.ones((1, len(units)))
            fa, fb = a.resample(units, ones), b.resample(units, ones)
            pa = np.array([sign_a * float(fa[m][0]) for m in shared])
            pb = np.array([sign_b * float(fb[m][0]) for m in shared])
        draws = spearman_rows(xa, xb)
        unit, n_units = str(a.unit), len(units)
        why = (
            f"the {n_units} {unit}s both scored ({a.title} {len(a.units)}, {b.title}"
            f" {len(b.units)}) resampled: one draw drives both methods' scores"
        )
    else:
        idx = rng.integers(0, len(shared), size=(bootstrap, len(shared)))
        draws = spearman_rows(pa[idx], pb[idx])
        unit, n_units = "model", len(shared)
        reason = (
            f"they share only {len(units)} {a.unit}s"
            if a.unit is not None and a.unit == b.unit and a.resample and b.resample
            else "the methods sampled different items"
        )
        why = (
            f"the {len(shared)} shared models resampled: {reason}, so the models are their"
            " only common sample (few models: a wide interval)"
        )
    value = float(spearman_rows(pa, pb)[0])
    lo, hi, used = _interval(draws)
    ra = {m: _rank(r) for m, r in zip(shared, len(shared) + 1 - _ranks(pa), strict=True)}
    rb = {m: _rank(r) for m, r in zip(shared, len(shared) + 1 - _ranks(pb), strict=True)}
    discordant = [
        (x, y) if pa[i] > pa[j] else (y, x)
        for (i, x), (j, y) in itertools.combinations(enumerate(shared), 2)
        if (pa[i] - pa[j]) * (pb[i] - pb[j]) < 0
    ]
    pairs = len(shared) * (len(shared) - 1) // 2
    tied = sum(
        1
        for i, j in itertools.combinations(range(len(shared)), 2)
        if pa[i] == pa[j] or pb[i] == pb[j]
    )
    ties = f"; {tied} pairs tied in one of them" if tied else ""
    if discordant:
        shown = "; ".join(
            f"{a.title} puts {x} above {y}, {b.title} the reverse" for x, y in discordant[:5]
        )
        more = f" (and {len(discordant) - 5} more)" if len(discordant) > 5 else ""
        summary = f"disagree on {len(discordant)} of {pairs} pairs: {shown}{more}{ties}"
    elif tied:
        summary = f"no pair ordered oppositely{ties}"
    else:
        summary = f"same order of all {len(shared)} shared models"
    return row | {
        "spearman": {
            "value": value if math.isfinite(value) else None,
            "ci_low": lo,
            "ci_high": hi,
        },
        "unit": unit,
        "units": n_units,
        "why": why,
        "draws": used,
        "ranks": [
            {"model": m, "a_rank": ra[m], "b_rank": rb[m], "shift": rb[m] - ra[m]} for m in shared
        ],
        "discordant": [list(p) for p in discordant],
        "pairs": pairs,
        "tied": tied,
        "summary": summary,
    }


def _generic_parts(result: MethodResult) -> list[ProfilePart]:
    """A method without ``profile_parts``: its leaderboard rows."""
    role = "judge" if result.entity == "judge" else "target"
    rows = result.ranked()
    out = []
    for row in rows:
        est = interval(row) or {}
        out.append(
            ProfilePart(
                method=result.name,
                title=result.name,
                model=str(row.get(result.entity)),
                role=role,
                rank=row.get("rank") if isinstance(row.get("rank"), int) else None,
                ranked=len(rows),
                figures=((str(row.get("figure")), est),) if est else (),
            )
        )
    return out


def _generic_sources(result: MethodResult) -> list[ScoreSource]:
    """A method without ``score_sources``: its ranks (1 best), when it ranks."""
    rows = [r for r in result.ranked() if isinstance(r.get("rank"), int)]
    if not rows:
        return []
    role = "judge" if result.entity == "judge" else "target"
    values = {str(r.get(result.entity)): float(r["rank"]) for r in rows}
    return [ScoreSource(result.name, result.name, role, "rank", values, higher_is_better=False)]


def _result(name: str, run_dir: Path) -> MethodResult:
    cls: type[MethodResult] = getattr(get_method(name), "result", MethodResult)
    return cls(run_dir, method=name)


def build_profile(
    run_dir: str | Path, *, bootstrap: int = BOOTSTRAP, seed: int = 0
) -> dict[str, Any]:
    """The profile of every model of a run directory across its methods, and the methods'
    agreement, as JSON-able data: ``methods`` (name, title), ``models`` (one entry per model:
    ``parts``, one per method and role, in registry order), ``agreement`` (one row per pair of
    sources about the same role). MemearenaError when the directory holds no method's
    results."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise MemearenaError(f"{run_dir}: no such run directory")
    if not 1 <= bootstrap <= MAX_BOOTSTRAP:
        raise MemearenaError(f"bootstrap: must be between 1 and {MAX_BOOTSTRAP:,}, got {bootstrap}")
    board = read_json(run_dir / "leaderboard.json")
    names = [m for m in method_names() if isinstance(board.get(m), dict)]
    if not names:
        raise MemearenaError(f"{run_dir}: holds no results of any method (no leaderboard.json)")
    parts: list[ProfilePart] = []
    sources: list[ScoreSource] = []
    titles: dict[str, str] = {}
    for name in names:
        result = _result(name, run_dir)
        own_parts = getattr(result, "profile_parts", None)
        own_sources = getattr(result, "score_sources", None)
        got = list(own_parts()) if callable(own_parts) else _generic_parts(result)
        parts += got
        sources += list(own_sources()) if callable(own_sources) else _generic_sources(result)
        titles[name] = next((p.title for p in got if p.role != "judge"), None) or (
            got[0].title if got else name
        )
    models: dict[str, list[dict[str, Any]]] = {}
    for p in parts:
        models.setdefault(p.model, []).append(p.as_dict())
    pairs = [
        row
        for a, b in itertools.combinations(sources, 2)
        if a.role == b.role and a.method != b.method
        for row in [agreement(a, b, bootstrap=bootstrap, seed=seed)]
        if row is not None
    ]
    return {
        "run_dir": str(run_dir),
        "methods": [{"method": n, "title": titles[n]} for n in names],
        "models": [{"model": m, "parts": ps} for m, ps in models.items()],
        "agreement": pairs,
        "bootstrap": bootstrap,
        "level": LEVEL,
        "seed": seed,
    }


def report_part(run_dir: Path, board: dict[str, Any]) -> dict[str, Any] | None:
    """The report's profile part: for a directory holding several methods, its profile (or
    what kept it from being computed: a report is never lost to it); else nothing."""
    if sum(isinstance(board.get(m), dict) for m in method_names()) < 2:
        return None
    try:
        return build_profile(run_dir)
    except Exception as e:  # a damaged output file: said in the part, the report still written
        return {"error": f"{type(e).__name__}: {str(e)[:300]}"}


def register_report_part() -> None:
    """Add the profile to the report's parts (``report.html.RUN_PARTS``) and its section: done
    by what renders the report (``engine.lifecycle.write_run_report``), so that importing this
    module, as each method's result class does, loads no renderer."""
    import memearena.report.profile  # noqa: F401  (registers the part's section)
    from memearena.report.html import RUN_PARTS

    RUN_PARTS["profile"] = report_part
