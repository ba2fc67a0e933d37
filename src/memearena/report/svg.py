"""Geometry of the report's inline SVG charts: numbers in, coordinates and labels out.

A chart here is a plain dict that ``_charts.html.j2`` draws. Every label is text from the run
(model, judge, category names) and reaches the page through the template's autoescape, never as
markup; colours come from a fixed palette, never from the document. Charts scale down with the
page (``viewBox`` and ``max-width: 100%``), so none of them can make the page scroll sideways.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PALETTE",
    "Interval",
    "estimate",
    "interval_chart",
    "matrix_chart",
    "nice_ticks",
]

PALETTE: tuple[str, ...] = (
    "#2f6fd0",
    "#d9730d",
    "#2e9d5b",
    "#b3261e",
    "#7b4fc9",
    "#8c6d1f",
    "#c2408f",
    "#4a4f57",
)
"""Series colours (colour-blind-safe enough for up to eight series; they repeat after that)."""

WIDTH = 720
LABEL_WIDTH = 200
GROUP_HEIGHT = 22
ROW_HEIGHT = 16
AXIS_HEIGHT = 28
MAX_LABEL = 30
"""Longest label drawn in full; a longer one is cut with an ellipsis (its whole text is in the
row's tooltip and in the table beside the chart)."""


@dataclass(frozen=True)
class Interval:
    """One point estimate with its 95% interval (either end may be missing)."""

    label: str
    """Row label (a judge, a model, a measure)."""
    value: float | None
    """The estimate; None draws an empty row marked "no data"."""
    low: float | None = None
    """Lower end of the interval."""
    high: float | None = None
    """Upper end of the interval."""
    series: int = 0
    """Index into :data:`PALETTE` (the legend's entry)."""


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def estimate(label: str, value: Any, series: int = 0) -> Interval:
    """An :class:`Interval` from an estimate as leaderboard.json writes it: ``{"value",
    "ci_low", "ci_high"}``, a bare number, or Adapt's ``(value, [low, high])``."""
    if isinstance(value, Mapping):
        return Interval(
            label,
            _finite(value.get("value")),
            _finite(value.get("ci_low")),
            _finite(value.get("ci_high")),
            series,
        )
    if isinstance(value, tuple) and len(value) == 2:
        v, ci = value
        ci = ci if isinstance(ci, Sequence) and not isinstance(ci, str) and len(ci) == 2 else ()
        lo, hi = (ci[0], ci[1]) if ci else (None, None)
        return Interval(label, _finite(v), _finite(lo), _finite(hi), series)
    return Interval(label, _finite(value), None, None, series)


def nice_ticks(lo: float, hi: float, count: int = 6) -> list[float]:
    """Round tick values covering [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    ticks = []
    t = math.ceil(lo / step) * step
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 10) + 0.0)  # no "-0" label
        t += step
    return ticks


def _short(label: str, most: int = MAX_LABEL) -> str:
    return label if len(label) <= most else label[: most - 1] + "…"


def _fmt(v: float | None, pct: bool) -> str:
    if v is None:
        return "—"
    return f"{100 * v:.0f}%" if pct else f"{v:.2f}"


def interval_chart(
    groups: Sequence[tuple[str, Sequence[Interval]]],
    *,
    title: str,
    domain: tuple[float, float] | None = None,
    reference: float | None = None,
    legend: Sequence[str] = (),
    percent: bool = False,
) -> dict[str, Any] | None:
    """A forest plot: for each group a heading row, then one dot with its interval per row.

    ``domain`` fixes the axis (probabilities: (0, 1)); otherwise it spans the data, the
    intervals and ``reference`` (the no-bias value, drawn as a dashed line). None when no row has
    a value."""
    rows = [p for _, points in groups for p in points]
    values = [v for p in rows for v in (p.value, p.low, p.high) if v is not None]
    if not values:
        return None
    if domain is None:
        lo, hi = min(values), max(values)
        if reference is not None:
            lo, hi = min(lo, reference), max(hi, reference)
        pad = (hi - lo) * 0.06 or 0.05
        lo, hi = lo - pad, hi + pad
    else:
        lo = min(domain[0], *values)
        hi = max(domain[1], *values)
    span = hi - lo
    plot = WIDTH - LABEL_WIDTH - 64

    def x(v: float) -> float:
        return round(LABEL_WIDTH + (v - lo) / span * plot, 2)

    y = AXIS_HEIGHT
    heads: list[dict[str, Any]] = []
    points: list[dict[str, Any]] = []
    for name, members in groups:
        if not members:
            continue
        if name:
            heads.append(
                {"label": _short(name, 3 * MAX_LABEL), "full": name, "y": y + GROUP_HEIGHT - 7}
            )
            y += GROUP_HEIGHT
        for p in members:
            mid = y + ROW_HEIGHT / 2
            ci = (
                ""
                if p.low is None or p.high is None
                else (f" [{_fmt(p.low, percent)}, {_fmt(p.high, percent)}]")
            )
            points.append(
                {
                    "label": _short(p.label),
                    "title": f"{name + ' — ' if name else ''}{p.label}: "
                    f"{_fmt(p.value, percent)}{ci}",
                    "y": round(mid, 2),
                    "x": None if p.value is None else x(p.value),
                    "x_low": None if p.low is None else x(p.low),
                    "x_high": None if p.high is None else x(p.high),
                    "value": _fmt(p.value, percent),
                    "colour": PALETTE[p.series % len(PALETTE)],
                }
            )
            y += ROW_HEIGHT
    height = y + 8
    ticks = [
        {"x": x(t), "label": f"{100 * t:.0f}%" if percent else f"{t:.6g}"}
        for t in nice_ticks(lo, hi)
    ]
    return {
        "kind": "interval",
        "title": title,
        "width": WIDTH,
        "height": round(height, 2),
        "label_x": LABEL_WIDTH - 8,
        "value_x": WIDTH - 4,
        "plot_top": AXIS_HEIGHT - 6,
        "plot_bottom": round(height - 4, 2),
        "ticks": ticks,
        "reference": None if reference is None or not lo <= reference <= hi else x(reference),
        "groups": heads,
        "points": points,
        "legend": [
            {"label": name, "colour": PALETTE[i % len(PALETTE)]} for i, name in enumerate(legend)
        ],
    }


def _heat(v: float) -> str:
    """Fill of a win-rate cell: blue above 0.5, red below, paler towards 0.5."""
    d = max(-1.0, min(1.0, (v - 0.5) * 2))
    hue = 215 if d >= 0 else 4
    light = round(96 - 40 * abs(d))
    return f"hsl({hue}, 65%, {light}%)"


def matrix_chart(
    names: Sequence[str],
    values: Sequence[Sequence[Any]],
    counts: Sequence[Sequence[Any]] | None = None,
    *,
    title: str,
) -> dict[str, Any] | None:
    """A heatmap of a square matrix of shares in [0, 1] (row's share against column); None on
    a malformed or empty matrix. ``counts`` (same shape) go into each cell's tooltip."""
    n = len(names)
    if n < 2 or len(values) != n or any(len(r) != n for r in values):
        return None
    cell = 58
    label = 170
    top = 30 + 7 * min(max((len(s) for s in names), default=0), MAX_LABEL)
    cells = []
    for i, row in enumerate(values):
        for j, raw in enumerate(row):
            v = _finite(raw)
            if i == j:
                continue
            n_ij = counts[i][j] if counts is not None and i < len(counts) else None
            n_txt = f" ({n_ij:,} battles)" if isinstance(n_ij, int) else ""
            cells.append(
                {
                    "x": label + j * cell,
                    "y": top + i * cell,
                    "fill": "#f3f5f8" if v is None else _heat(v),
                    "text": "—" if v is None else f"{100 * v:.0f}%",
                    "title": f"{names[i]} vs {names[j]}: "
                    + ("no battles" if v is None else f"{100 * v:.1f}% won{n_txt}"),
                }
            )
    return {
        "kind": "matrix",
        "title": title,
        "width": label + n * cell + 10,
        "height": top + n * cell + 10,
        "cell": cell,
        "rows": [
            {"label": _short(s), "full": s, "y": top + i * cell + cell / 2 + 4}
            for i, s in enumerate(names)
        ],
        "cols": [
            {"label": _short(s), "full": s, "x": label + j * cell + cell / 2, "y": top - 8}
            for j, s in enumerate(names)
        ],
        "diagonal": [{"x": label + i * cell, "y": top + i * cell} for i in range(n)],
        "label_x": label - 8,
        "cells": cells,
    }
