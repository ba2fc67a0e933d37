"""The single-file HTML report of a run: ``report.html``, readable offline, no scripts.

The page is a shell (``report.html.j2``: run facts, banners, navigation) around one included
partial per method section of ``leaderboard.json`` (``_arena.html.j2``, ...): a method's view
adds its section with ``register_section(Section(key, title, partial, builder))``; the shell
imports no method.

Everything the document holds reaches the page through Jinja2 with autoescape on: model names,
judge names, setting and group labels come from users and from models, so any of them may carry
markup. Charts are inline SVG whose geometry is computed in Python (here and in
:mod:`memearena.report.svg`) and whose text is escaped by the template like every other string.
The page loads nothing from anywhere (no CSS, fonts, scripts) and says so in its
Content-Security-Policy. Every method section gets the same frame from the shell
(``_health.html.j2``: its banner when incomplete or capped, its run facts, usage and errors).
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, Undefined

from memearena.report.svg import estimate, interval_chart, matrix_chart, nice_ticks

__all__ = [
    "RUN_PARTS",
    "SECTIONS",
    "Section",
    "register_section",
    "render_report",
    "write_report",
]

SENSITIVITY_SECTIONS: tuple[tuple[str, str], ...] = (
    ("self_judging_include", "Self-judged battles included"),
    ("self_judging_exclude", "Self-judged battles excluded"),
    ("refusals_as_losses", "A refusal counted as a loss"),
    ("length_controlled", "Length-controlled"),
)
"""The Arena's alternative leaderboards (``arena.sensitivity``), shown among the breakdowns."""

GROUP_SECTIONS: tuple[tuple[str, str], ...] = (
    ("by_criterion", "By criterion"),
    ("by_context", "By context"),
    ("by_source", "By source"),
    ("by_judge", "By judge"),
)
"""Grouped leaderboards of the ``arena`` section, in the order the report shows them."""

JUDGE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("battles", "Battles"),
    ("ndcg", "NDCG"),
    ("kendall_tau", "Kendall τ"),
    ("position_consistency", "Position consistency"),
    ("p_prefer_first", "P(first)"),
    ("p_prefer_longer", "P(longer)"),
    ("self_preference", "Self-preference (own − panel)"),
    ("parse_failures", "Parse failures"),
)
"""Known judge-bias columns; any further scalar key of a judge row gets a column after these."""

USAGE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("calls", "Calls"),
    ("cost_usd", "Cost (USD)"),
    ("input_tokens", "Input tokens"),
    ("output_tokens", "Output tokens"),
    ("cached", "Cached"),
    ("errors", "Errors"),
    ("refusals", "Refusals"),
    ("budget", "Over budget"),
    ("unsettled", "Unsettled"),
    ("latency_s", "Latency (s)"),
)
"""Usage columns, the money first: on a narrow screen the cost is never the column pushed out."""

_CHART_WIDTH = 720
_LABEL_WIDTH = 190
_ROW_HEIGHT = 26
_AXIS_HEIGHT = 30


# formatting -------------------------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def fmt_num(value: Any, digits: int = 3) -> str:
    """A number for a table cell: counts (ints) with separators, floats to ``digits`` decimals
    (ratings and other values of 100 or more to one), anything else as its text."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "—"
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        if abs(value) >= 100:
            return f"{value:.1f}"
        return f"{value:.{digits}f}"
    return str(value)


def fmt_pct(value: Any) -> str:
    """A fraction in [0, 1] as a percentage."""
    if not _is_number(value) or math.isnan(value):
        return fmt_num(value)
    return f"{100 * value:.1f}%"


def fmt_usd(value: Any) -> str:
    """A cost: cents for sums of a dollar or more, four decimals below (API calls are cheap)."""
    if not _is_number(value) or math.isnan(value):
        return fmt_num(value)
    return f"${value:,.2f}" if abs(value) >= 1 else f"${value:.4f}"


def fmt_cell(value: Any, key: str) -> str:
    """A cell by the meaning its column name implies; an estimate ``{"value", "ci_low",
    "ci_high"}`` shows its 95% interval."""
    if isinstance(value, Mapping) and "value" in value:
        text = fmt_num(_float(value.get("value")))
        low, high = _float(value.get("ci_low")), _float(value.get("ci_high"))
        if low is not None and high is not None and text != "—":
            text += f" [{fmt_num(low)}, {fmt_num(high)}]"
        if value.get("model"):
            text += f" ({value['model']})"
        return text
    if key == "cost_usd":
        return fmt_usd(value)
    if key == "win_rate" or key.endswith("_rate"):
        return fmt_pct(value)
    if key == "latency_s" and _is_number(value):
        return fmt_num(float(value), 2)
    return fmt_num(value)


# tolerant access --------------------------------------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return list(value)
    return []


def _rows(value: Any) -> list[dict[str, Any]]:
    return [dict(r) for r in _list(value) if isinstance(r, Mapping)]


def _float(value: Any) -> float | None:
    if not _is_number(value):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


# charts -----------------------------------------------------------------------------------


def _axis(lo: float, hi: float, width: float) -> tuple[Any, list[dict[str, Any]]]:
    span = hi - lo or 1.0

    def x(v: float) -> float:
        return round(_LABEL_WIDTH + (v - lo) / span * width, 2)

    ticks = [{"x": x(t), "label": f"{t:.6g}"} for t in nice_ticks(lo, hi)]
    return x, ticks


def rating_chart(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Geometry of the BT-rating chart: one point per model with its 95% CI as whiskers."""
    points = [(r, bt) for r in rows if (bt := _float(r.get("bt"))) is not None]
    if not points:
        return None
    values: list[float] = []
    for r, bt in points:
        values.append(bt)
        values += [v for v in (_float(r.get("ci_low")), _float(r.get("ci_high"))) if v is not None]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.08 or 10.0
    plot_width = _CHART_WIDTH - _LABEL_WIDTH - 20
    x, ticks = _axis(lo - pad, hi + pad, plot_width)
    bars = []
    for i, (r, bt) in enumerate(points):
        low, high = _float(r.get("ci_low")), _float(r.get("ci_high"))
        bars.append(
            {
                "label": str(r.get("model", "?")),
                "y": _AXIS_HEIGHT + i * _ROW_HEIGHT + _ROW_HEIGHT / 2,
                "x": x(bt),
                "x_low": x(low) if low is not None else None,
                "x_high": x(high) if high is not None else None,
                "value": fmt_num(bt),
                "ci": f"[{fmt_num(low)}, {fmt_num(high)}]" if low is not None else "",
            }
        )
    height = _AXIS_HEIGHT + len(points) * _ROW_HEIGHT + 10
    return {
        "width": _CHART_WIDTH,
        "height": height,
        "label_x": _LABEL_WIDTH - 8,
        "plot_top": _AXIS_HEIGHT - 6,
        "plot_bottom": height - 6,
        "ticks": ticks,
        "points": bars,
    }


def bar_chart(items: list[tuple[str, Any]], *, maximum: float = 1.0) -> dict[str, Any] | None:
    """Geometry of a horizontal bar chart of values in [0, maximum] (NDCG)."""
    bars = [(label, f) for label, v in items if (f := _float(v)) is not None]
    if not bars:
        return None
    top = max([maximum] + [v for _, v in bars])
    plot_width = _CHART_WIDTH - _LABEL_WIDTH - 70
    x, ticks = _axis(0.0, top, plot_width)
    out = []
    for i, (label, v) in enumerate(bars):
        v0 = max(v, 0.0)
        out.append(
            {
                "label": label,
                "y": _AXIS_HEIGHT + i * _ROW_HEIGHT + 4,
                "y_text": _AXIS_HEIGHT + i * _ROW_HEIGHT + _ROW_HEIGHT / 2,
                "x": _LABEL_WIDTH,
                "width": round(x(v0) - _LABEL_WIDTH, 2),
                "x_end": x(v0),
                "value": fmt_num(v),
            }
        )
    height = _AXIS_HEIGHT + len(bars) * _ROW_HEIGHT + 10
    return {
        "width": _CHART_WIDTH,
        "height": height,
        "bar_height": _ROW_HEIGHT - 8,
        "label_x": _LABEL_WIDTH - 8,
        "plot_top": _AXIS_HEIGHT - 6,
        "plot_bottom": height - 6,
        "ticks": ticks,
        "bars": out,
    }


# view model -------------------------------------------------------------------------------


def _win_rate_cell(value: Any, interval: Any) -> str:
    """A win rate, with its interval when the analysis computed one (the overall board's)."""
    shown = fmt_pct(value)
    if not isinstance(interval, dict):
        return shown
    lo: Any = interval.get("ci_low")
    hi: Any = interval.get("ci_high")
    if not (_is_number(lo) and _is_number(hi)) or math.isnan(lo) or math.isnan(hi):
        return shown
    return f"{shown} ({100 * lo:.1f}–{100 * hi:.1f})"


def _leaderboard(rows: Any, win_rates: Any = None) -> list[dict[str, Any]]:
    """Leaderboard rows for the template; ``win_rates``: the interval of each model's win rate
    (``arena.win_rates``), shown beside it."""
    intervals = win_rates if isinstance(win_rates, dict) else {}
    out = []
    for r in _rows(rows):
        low, high = r.get("ci_low"), r.get("ci_high")
        out.append(
            {
                "rank": fmt_num(r.get("rank")),
                "model": str(r.get("model", "?")),
                "bt": fmt_num(r.get("bt")),
                "ci": f"{fmt_num(low)} – {fmt_num(high)}" if low is not None else "—",
                "elo": fmt_num(r.get("elo")),
                "win_rate": _win_rate_cell(r.get("win_rate"), intervals.get(r.get("model"))),
                "battles": fmt_num(r.get("battles")),
            }
        )
    return out


PANEL_COLUMNS = ("battles", "ndcg", "kendall_tau", "parse_failures")
"""Judge-table columns about agreement with the panel; the classic biases get their own table."""
BIAS_COLUMNS = ("position_consistency", "p_prefer_first", "p_prefer_longer", "self_preference")
"""Classic-bias columns of the judge tables (an estimate each, with its interval)."""


def _with_interval(row: dict[str, Any], key: str) -> Any:
    """``row[key]`` as an estimate when the row spells its interval as ``key_ci_low`` and
    ``key_ci_high`` beside it (the Arena's NDCG and Kendall τ)."""
    low, high = row.get(f"{key}_ci_low"), row.get(f"{key}_ci_high")
    if _is_number(row.get(key)) and _is_number(low) and _is_number(high):
        return {"value": row[key], "ci_low": low, "ci_high": high}
    return row.get(key)


def _judge_flags(row: dict[str, Any]) -> list[str]:
    flags = [str(f) for f in _list(row.get("flags"))]
    flags += [k.removesuffix("_flagged") for k, v in row.items() if k.endswith("_flagged") and v]
    return flags


def _judges(rows: Any) -> dict[str, Any] | None:
    judges = _rows(rows)
    if not judges:
        return None
    labels = dict(JUDGE_COLUMNS)
    known = set(labels) | {"judge", "ranking", "flags", "reference"}
    columns = [k for k in PANEL_COLUMNS if any(k in j for j in judges)]
    extras: list[str] = []
    for j in judges:
        for k, v in j.items():
            scalar = v is None or isinstance(v, str | int | float | bool)
            folded = k.endswith(("_ci_low", "_ci_high", "_flagged"))
            if k not in known and k not in extras and scalar and not folded:
                extras.append(k)
    columns += extras
    bias = [k for k in BIAS_COLUMNS if any(k in j for j in judges)]
    references = {str(j["reference"]) for j in judges if j.get("reference") is not None}
    table = []
    for j in judges:
        table.append(
            {
                "judge": str(j.get("judge", "?")),
                "cells": [fmt_cell(_with_interval(j, k), k) for k in columns],
                "bias": [fmt_cell(j.get(k), k) for k in bias],
                "flags": _judge_flags(j),
                "ranking": " > ".join(str(m) for m in _list(j.get("ranking"))),
            }
        )
    names = [str(j.get("judge", "?")) for j in judges]
    probabilities = [
        (label, [estimate(n, j.get(key)) for n, j in zip(names, judges, strict=True)])
        for key, label in (
            ("p_prefer_first", "P(first): prefers the answer shown first"),
            ("p_prefer_longer", "P(longer): prefers the longer answer"),
        )
        if any(key in j for j in judges)
    ]
    selfish = [estimate(n, j.get("self_preference")) for n, j in zip(names, judges, strict=True)]
    return {
        "columns": [labels.get(k, k.replace("_", " ")) for k in columns],
        "bias_columns": [labels[k] for k in bias],
        "rows": table,
        "reference": ", ".join(sorted(references)),
        "has_ranking": any(r["ranking"] for r in table),
        "chart": bar_chart([(str(j.get("judge", "?")), j.get("ndcg")) for j in judges]),
        "bias_chart": interval_chart(
            probabilities,
            title="Position and length bias per judge, with 95% intervals (0.5: no bias)",
            domain=(0.0, 1.0),
            reference=0.5,
        ),
        "self_chart": interval_chart(
            [("Self-preference: own model's win rate minus the panel's", selfish)],
            title="Self-preference per judge, with 95% intervals (0: none)",
            reference=0.0,
        ),
    }


def _win_rates(arena: dict[str, Any]) -> dict[str, Any] | None:
    """The average win rate per model (with intervals) and the pairwise win-rate matrix."""
    rates = _dict(arena.get("win_rates"))
    order = [str(r.get("model")) for r in _rows(arena.get("overall")) if r.get("model") in rates]
    order += [str(m) for m in rates if m not in order]
    average = interval_chart(
        [("", [estimate(m, rates.get(m)) for m in order])],
        title="Average win rate against the other models, with 95% intervals (ties count half)",
        domain=(0.0, 1.0),
        reference=0.5,
        percent=True,
    )
    pairwise = _dict(arena.get("pairwise"))
    names = [str(m) for m in _list(pairwise.get("models"))]
    wins = [_list(r) for r in _list(pairwise.get("win_rate"))]
    games = [_list(r) for r in _list(pairwise.get("battles"))]
    ranked = [m for m in order if m in names] + [m for m in names if m not in order]
    if len(ranked) == len(names) == len(wins) and all(len(r) == len(names) for r in wins):
        idx = [names.index(m) for m in ranked]  # best first, as in the leaderboard
        names, wins = ranked, [[wins[i][j] for j in idx] for i in idx]
        if len(games) == len(idx) and all(len(r) == len(idx) for r in games):
            games = [[games[i][j] for j in idx] for i in idx]
        else:
            games = []
    matrix = matrix_chart(
        names,
        wins,
        games or None,
        title="Pairwise win rate: the row model's share of its battles against the column "
        "model (ties count half)",
    )
    if average is None and matrix is None:
        return None
    return {"average": average, "matrix": matrix}


def _settings(value: Any) -> dict[str, Any] | None:
    settings = _dict(value)
    if not settings:
        return None
    names = [str(s) for s in settings]
    judges: list[str] = []
    ndcg: dict[tuple[str, str], Any] = {}
    for name, section in settings.items():
        for j in _rows(_dict(section).get("judges")):
            judge = str(j.get("judge", "?"))
            if judge not in judges:
                judges.append(judge)
            ndcg[(str(name), judge)] = j.get("ndcg")
    rows = []
    for judge in judges:
        values = [_float(ndcg.get((s, judge))) for s in names]
        best = max((v for v in values if v is not None), default=None)
        rows.append(
            {
                "judge": judge,
                "cells": [
                    {"text": fmt_num(v), "best": v is not None and v == best and len(names) > 1}
                    for v in values
                ],
            }
        )
    rankings = []
    for name, section in settings.items():
        section = _dict(section)
        order = [str(r.get("model", "?")) for r in _rows(section.get("overall"))]
        rankings.append(
            {
                "setting": str(name),
                "battles": fmt_num(section.get("battles")),
                "ranking": " > ".join(order) if order else "—",
                "overall": _leaderboard(section.get("overall")),
            }
        )
    return {"names": names, "rows": rows, "rankings": rankings}


def _answers(value: Any) -> list[dict[str, Any]]:
    out = []
    for model, counts in _dict(value).items():
        counts = _dict(counts)
        answers, refusals = counts.get("answers"), counts.get("refusals")
        rate = (
            refusals / answers if _is_number(answers) and _is_number(refusals) and answers else None
        )
        out.append(
            {
                "model": str(model),
                "answers": fmt_num(answers),
                "refusals": fmt_num(refusals),
                "refusal_rate": fmt_pct(rate),
                "format_failures": fmt_num(counts.get("format_failures")),
                "flag": bool(refusals) or bool(counts.get("format_failures")),
            }
        )
    return out


def _usage(value: Any) -> dict[str, Any] | None:
    usage = {str(m): _dict(u) for m, u in _dict(value).items()}
    if not usage:
        return None
    keys = [k for k, _ in USAGE_COLUMNS if any(k in u for u in usage.values())]
    labels = dict(USAGE_COLUMNS)
    for u in usage.values():
        keys += [
            k for k, v in u.items() if k not in keys and k != "unsettled_usd" and _is_number(v)
        ]
    totals: dict[str, float] = {}
    for u in usage.values():
        for k in [*keys, "unsettled_usd"]:
            if _is_number(u.get(k)):
                totals[k] = totals.get(k, 0) + u[k]

    def cell(u: Mapping[str, Any], k: str) -> str:
        text = fmt_cell(u.get(k), k)
        # Calls sent but never settled (a kill mid-call) show the most they can have cost.
        if k == "unsettled" and u.get(k) and _is_number(u.get("unsettled_usd")):
            text += f" (≤ {fmt_usd(u['unsettled_usd'])})"
        return text

    return {
        "columns": [labels.get(k, k.replace("_", " ")) for k in keys],
        "rows": [{"model": m, "cells": [cell(u, k) for k in keys]} for m, u in usage.items()],
        "totals": [cell(totals, k) for k in keys],
        "note": "Latency: summed seconds of the calls. Unsettled: calls sent but never "
        "settled (a kill mid-call), with the most they can have cost."
        if "unsettled" in keys
        else "",
    }


def _errors(section: dict[str, Any]) -> list[tuple[str, str]]:
    return [(str(k), fmt_num(v)) for k, v in _dict(section.get("errors")).items()]


def _simulated(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    sim = _dict(value)
    truth = [str(m) for m in _list(sim.get("true_ranking"))]
    return {
        "note": str(sim.get("note", "")),
        "true_ranking": " > ".join(truth),
        "kendall_tau": fmt_num(sim.get("kendall_tau")),
        "spearman_rho": fmt_num(sim.get("spearman_rho")),
    }


def _panel(value: Any) -> dict[str, Any] | None:
    """Panel agreement: Krippendorff's α over the panel and Cohen's κ per judge pair."""
    panel = _dict(value)
    alpha = panel.get("krippendorff_alpha")
    kappas = [(str(pair), k) for pair, k in _dict(panel.get("cohen_kappa")).items()]
    if alpha is None and not kappas:
        return None

    def row(name: str, est: Any) -> dict[str, str]:
        est = _dict(est) if isinstance(est, Mapping) else {"value": est}
        return {
            "name": name,
            "value": fmt_cell(est, "value"),
            "n": fmt_num(est.get("n")),
        }

    return {
        "alpha": row("Krippendorff's α (whole panel)", alpha) if alpha is not None else None,
        "kappas": [row(pair, k) for pair, k in kappas],
    }


def _arena_view(arena: dict[str, Any], board: dict[str, Any]) -> dict[str, Any]:
    """The Arena section's view model (``_arena.html.j2``)."""
    overall = _rows(arena.get("overall"))
    groups = []
    for key, label in GROUP_SECTIONS:
        tables = [
            {"name": str(name), "rows": _leaderboard(rows)}
            for name, rows in _dict(arena.get(key)).items()
        ]
        if tables:
            groups.append({"id": key.replace("_", "-"), "title": label, "tables": tables})
    sensitivity = _dict(arena.get("sensitivity"))
    views = [
        {
            "name": f"{label} ({'order differs' if view.get('order_differs') else 'same order'})",
            "rows": _leaderboard(view.get("overall")),
        }
        for key, label in SENSITIVITY_SECTIONS
        if (view := _dict(sensitivity.get(key)))
    ]
    if views:
        groups.insert(0, {"id": "sensitivity", "title": "Sensitivity", "tables": views})
    judges = _judges(arena.get("judges"))
    settings = _settings(arena.get("settings"))
    answers = _answers(arena.get("answers"))
    panel = _panel(arena.get("panel"))
    win_rates = _win_rates(arena)
    nav = [("overall", "Leaderboard")]
    nav += [("win-rates", "Win rates")] if win_rates else []
    nav += [("groups", "Breakdowns")] if groups else []
    nav += [("judges", "Judge bias")] if judges else []
    nav += [("agreement", "Agreement")] if panel else []
    nav += [("settings", "Settings")] if settings else []
    nav += [("answers", "Answers")] if answers else []
    return {
        "setting": str(arena["setting"]) if arena.get("setting") is not None else None,
        "battles": fmt_num(arena["battles"]) if arena.get("battles") is not None else None,
        "no_battles": not overall or arena.get("battles") == 0,
        "models": len(overall),
        "overall": _leaderboard(overall, arena.get("win_rates")),
        "overall_chart": rating_chart(overall),
        "groups": groups,
        "judges": judges,
        "panel": panel,
        "settings": settings,
        "answers": answers,
        "win_rates": win_rates,
        "nav": nav,
    }


@dataclass(frozen=True)
class Section:
    """One method's part of the report: shown when ``leaderboard.json`` has its key."""

    key: str
    """Top-level key of leaderboard.json (``arena``, ``adapt``, ``judge_audit``)."""
    title: str
    """Heading of the section."""
    template: str
    """The partial that renders it (``_<method>.html.j2``); it reads ``section`` (the view)."""
    build: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any] | None]
    """(the section's JSON, the whole document) -> its view model (with ``nav``: a list of
    (anchor, label)), or None to leave the section out; tolerant of missing keys."""
    order: int = 100
    """Place on the page (lower first)."""


SECTIONS: list[Section] = [Section("arena", "Arena", "_arena.html.j2", _arena_view, order=0)]
"""Method sections, shown in ``order``; a method's view registers its own (``register_section``):
the shell never imports a method."""


RUN_PARTS: dict[str, Callable[[Path, dict[str, Any]], Any]] = {}
"""Report parts read from the run directory, not from leaderboard.json: key -> (run_dir,
board) -> the part's data (shown by the section registered under that key), or None; each
registered from above, like a method's section."""


def register_section(section: Section) -> None:
    """Add (or replace, by key) one method's part of the report."""
    SECTIONS[:] = [s for s in SECTIONS if s.key != section.key]
    SECTIONS.append(section)
    SECTIONS.sort(key=lambda s: s.order)


def _redact_urls(value: Any) -> Any:
    """Config values for display: credentials in a URL (``user:pass@``) are never shown."""
    if isinstance(value, dict):
        return {k: _redact_urls(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_urls(v) for v in value]
    if isinstance(value, str) and "://" in value:
        return re.sub(r"(://)[^/@\s]*@", r"\1***@", value)
    return value


def _run_facts(value: Any) -> dict[str, Any] | None:
    run = _dict(value)
    if not run:
        return None
    facts = [
        (label, str(run[key]))
        for key, label in (
            ("name", "run"),
            ("date", "date"),
            ("seed", "seed"),
            ("version", "memearena"),
            ("config_sha256", "config sha256"),
        )
        if run.get(key) is not None
    ]
    config = run.get("config")
    hashes = [(str(k), str(v)) for k, v in _dict(run.get("prompt_hashes")).items()]
    return {
        "name": str(run["name"]) if run.get("name") is not None else None,
        "facts": facts,
        "config": json.dumps(_redact_urls(config), indent=2, ensure_ascii=False)
        if isinstance(config, dict)
        else None,
        "prompt_hashes": hashes,
    }


_CAPPED = ("capped", "budget", "spend cap", "max-cost", "max_cost")


def _status(value: Any, stopped: Any = None) -> dict[str, Any] | None:
    """The banner's content when a status says the run is not complete (``complete`` false, or
    a ``state`` other than complete), or when a method says it ``stopped`` early."""
    status = _dict(value)
    state = str(status.get("state", "")).lower()
    incomplete = status.get("complete") is False or state not in ("", "complete")
    if not incomplete and not stopped:
        return None
    spent = [
        (label, fmt_usd(status[key]))
        for key, label in (
            ("spent_usd", "spent"),
            ("spent_upper_bound_usd", "at most"),
            ("max_cost", "cap"),
        )
        if _is_number(status.get(key))
    ]
    problems = [str(p) for p in _list(status.get("problems"))]
    reasons = [str(r) for r in (status.get("stopped"), stopped) if r and r is not True]
    problems += [r for r in reasons if r not in problems]
    said = " ".join([state, *problems]).lower()
    capped = bool(status.get("stopped") or stopped) or any(w in said for w in _CAPPED)
    return {"problems": problems, "spent": spent, "capped": capped}


def _health(key: str, title: str, section: dict[str, Any]) -> dict[str, Any]:
    """What the shell shows for every method section alike (``_health.html.j2``): its banner
    when it is incomplete or capped, its own run facts, usage and errors."""
    anchor = key.replace("_", "-")
    usage = _usage(section.get("usage"))
    nav = [(f"{anchor}-usage", f"{title} usage")] if usage else []
    nav += [(f"{anchor}-errors", f"{title} errors")] if "errors" in section else []
    return {
        "anchor": anchor,
        "status": _status(section.get("status"), section.get("stopped")),
        "run": _run_facts(section.get("run")),
        "usage": usage,
        "errors": _errors(section),
        "has_errors": "errors" in section,
        "nav": nav,
    }


def build_view(board: Mapping[str, Any], *, title: str) -> dict[str, Any]:
    """Everything the template shows, formatted, from a ``leaderboard.json`` document.

    Tolerates missing or malformed keys anywhere: what is absent is simply not shown."""
    board = _dict(board)
    sections = []
    for sec in SECTIONS:
        if sec.key in board:
            data = _dict(board.get(sec.key))
            view = sec.build(data, board)
            if view is not None:
                health = _health(sec.key, sec.title, data)
                sections.append(
                    {
                        "key": sec.key,
                        "title": sec.title,
                        "template": sec.template,
                        **view,
                        "nav": [*_list(view.get("nav")), *health["nav"]],
                        "health": health,
                    }
                )
    arena = next((s for s in sections if s["key"] == "arena"), None)
    run = _run_facts(board.get("run"))
    if run is None:
        # A document written by one method alone may carry its facts in its section only.
        run = next((s["health"]["run"] for s in sections if s["health"]["run"]), None)
    for s in sections:
        own = s["health"]["run"]
        if own is not None and run is not None and own["facts"] == run["facts"]:
            s["health"]["run"] = None  # the same facts as the page's: said once, at the top
    return {
        "title": title,
        "subtitle": (run or {}).get("name") or (arena or {}).get("setting"),
        "run": run,
        "status": _status(board.get("status")),
        "no_results": not sections,
        "no_battles": arena is not None and arena["no_battles"],
        "simulated": _simulated(board.get("simulated")),
        "sections": sections,
    }


# rendering --------------------------------------------------------------------------------


def _printable(value: Any) -> Any:
    """Every ``{{ ... }}`` of a template passes here: a method or function printed by mistake
    (``{{ ja.items }}`` is ``dict.items``) fails the render instead of putting a Python repr on
    the page."""
    if callable(value) and not isinstance(value, Undefined):
        raise TypeError(f"a report template printed a callable: {value!r}")
    return value


@cache
def _environment() -> Environment:
    # Autoescape unconditionally: the template's suffix is .j2, which extension-based
    # selection would not treat as HTML, and every string in the document is untrusted.
    return Environment(
        loader=PackageLoader("memearena.report", "templates"),
        autoescape=True,
        finalize=_printable,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_report(board: dict[str, Any], *, title: str = "memearena report") -> str:
    """The report of a ``leaderboard.json`` document as one self-contained HTML page."""
    template = _environment().get_template("report.html.j2")
    return template.render(view=build_view(board, title=title))


def write_report(run_dir: Path, board: dict[str, Any]) -> Path:
    """Write ``run_dir/report.html`` atomically (a reader never sees half a page); its path."""
    run_dir = Path(run_dir)
    path = run_dir / "report.html"
    parts = {k: v for k, part in RUN_PARTS.items() if (v := part(run_dir, board)) is not None}
    text = render_report({**board, **parts})
    fd, tmp = tempfile.mkstemp(dir=run_dir, prefix=".report.", suffix=".html.tmp")
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide the report from other readers
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
