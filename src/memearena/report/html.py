"""The single-file HTML report of a run: ``report.html``, readable offline, no scripts.

The page is a shell (``report.html.j2``: run facts, banners, navigation) around one included
partial per method section of ``leaderboard.json`` (``_arena.html.j2``, ...): a method's view
adds its section with ``register_section(Section(key, title, partial, builder))``; the shell
imports no method.

Everything the document holds reaches the page through Jinja2 with autoescape on: model names,
judge names, setting and group labels come from users and from models, so any of them may carry
markup. Charts are inline SVG whose geometry is computed here and whose text is escaped by the
template like every other string. The page loads nothing from anywhere (no CSS, fonts, scripts).
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

from jinja2 import Environment, PackageLoader, StrictUndefined

__all__ = ["SECTIONS", "Section", "register_section", "render_report", "write_report"]

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
    ("cached", "Cached"),
    ("errors", "Errors"),
    ("refusals", "Refusals"),
    ("budget", "Over budget"),
    ("input_tokens", "Input tokens"),
    ("output_tokens", "Output tokens"),
    ("cost_usd", "Cost (USD)"),
    ("latency_s", "Latency (s)"),
)

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


def _nice_ticks(lo: float, hi: float, count: int = 6) -> list[float]:
    """Round tick values covering [lo, hi]."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step) * step
    ticks = []
    t = first
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 10) + 0.0)  # no "-0" label
        t += step
    return ticks


def _axis(lo: float, hi: float, width: float) -> tuple[Any, list[dict[str, Any]]]:
    span = hi - lo or 1.0

    def x(v: float) -> float:
        return round(_LABEL_WIDTH + (v - lo) / span * width, 2)

    ticks = [{"x": x(t), "label": f"{t:.6g}"} for t in _nice_ticks(lo, hi)]
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


def _leaderboard(rows: Any) -> list[dict[str, Any]]:
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
                "win_rate": fmt_pct(r.get("win_rate")),
                "battles": fmt_num(r.get("battles")),
            }
        )
    return out


def _judges(rows: Any) -> dict[str, Any] | None:
    judges = _rows(rows)
    if not judges:
        return None
    known = {k for k, _ in JUDGE_COLUMNS} | {"judge", "ranking"}
    columns = [(k, label) for k, label in JUDGE_COLUMNS if any(k in j for j in judges)]
    extras: list[str] = []
    for j in judges:
        for k, v in j.items():
            scalar = v is None or isinstance(v, str | int | float | bool)
            if k not in known and k not in extras and scalar:
                extras.append(k)
    columns += [(k, k.replace("_", " ")) for k in extras]
    table = [
        {
            "judge": str(j.get("judge", "?")),
            "cells": [fmt_cell(j.get(k), k) for k, _ in columns],
            "ranking": " > ".join(str(m) for m in _list(j.get("ranking"))),
        }
        for j in judges
    ]
    return {
        "columns": [label for _, label in columns],
        "rows": table,
        "has_ranking": any(r["ranking"] for r in table),
        "chart": bar_chart([(str(j.get("judge", "?")), j.get("ndcg")) for j in judges]),
    }


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
        keys += [k for k, v in u.items() if k not in keys and _is_number(v)]
    totals: dict[str, float] = {}
    for u in usage.values():
        for k in keys:
            if _is_number(u.get(k)):
                totals[k] = totals.get(k, 0) + u[k]
    return {
        "columns": [labels.get(k, k.replace("_", " ")) for k in keys],
        "rows": [
            {"model": m, "cells": [fmt_cell(u.get(k), k) for k in keys]} for m, u in usage.items()
        ],
        "totals": [fmt_cell(totals.get(k), k) for k in keys],
    }


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
    errors = [(str(k), fmt_num(v)) for k, v in _dict(arena.get("errors")).items()]
    judges = _judges(arena.get("judges"))
    settings = _settings(arena.get("settings"))
    answers = _answers(arena.get("answers"))
    usage = _usage(arena.get("usage"))
    panel = _panel(arena.get("panel"))
    nav = [("overall", "Leaderboard")]
    nav += [("groups", "Breakdowns")] if groups else []
    nav += [("judges", "Judge bias")] if judges else []
    nav += [("agreement", "Agreement")] if panel else []
    nav += [("settings", "Settings")] if settings else []
    nav += [("answers", "Answers")] if answers else []
    nav += [("usage", "Usage")] if usage else []
    nav += [("errors", "Errors")] if "errors" in arena else []
    return {
        "setting": str(arena["setting"]) if arena.get("setting") is not None else None,
        "battles": fmt_num(arena["battles"]) if arena.get("battles") is not None else None,
        "no_battles": not overall or arena.get("battles") == 0,
        "models": len(overall),
        "overall": _leaderboard(overall),
        "overall_chart": rating_chart(overall),
        "groups": groups,
        "judges": judges,
        "panel": panel,
        "settings": settings,
        "answers": answers,
        "usage": usage,
        "errors": errors,
        "has_errors_key": "errors" in arena,
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


def _status(value: Any) -> dict[str, Any] | None:
    """The failure banner's content, when the run says it is not complete."""
    status = _dict(value)
    if not status or status.get("complete") is not False:
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
    return {"problems": problems, "spent": spent}


def build_view(board: Mapping[str, Any], *, title: str) -> dict[str, Any]:
    """Everything the template shows, formatted, from a ``leaderboard.json`` document.

    Tolerates missing or malformed keys anywhere: what is absent is simply not shown."""
    board = _dict(board)
    sections = []
    for sec in SECTIONS:
        if sec.key in board:
            view = sec.build(_dict(board.get(sec.key)), board)
            if view is not None:
                sections.append(
                    {"key": sec.key, "title": sec.title, "template": sec.template, **view}
                )
    arena = next((s for s in sections if s["key"] == "arena"), None)
    run = _run_facts(board.get("run"))
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


@cache
def _environment() -> Environment:
    # Autoescape unconditionally: the template's suffix is .j2, which extension-based
    # selection would not treat as HTML, and every string in the document is untrusted.
    return Environment(
        loader=PackageLoader("memearena.report", "templates"),
        autoescape=True,
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
    text = render_report(board)
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
