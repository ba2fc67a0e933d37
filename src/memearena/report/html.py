"""The single-file HTML report of a run: ``report.html``, readable offline, no scripts.

The page is a shell (``report.html.j2``: run facts, banners, navigation) around one included
partial per method section of ``leaderboard.json``: a method's view adds its section with
``register_section(Section(key, title, partial, builder, folder=...))``, the partial a template
file in the method's own package (its ``html/`` folder); the shell imports and names no method.
A section's view model may give the header's facts (``meta``: ``(before, value, after)``), a
page subtitle and an ``empty`` banner (no results to rank).

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

from jinja2 import (
    BaseLoader,
    ChoiceLoader,
    Environment,
    FileSystemLoader,
    PackageLoader,
    PrefixLoader,
    StrictUndefined,
    Undefined,
)

from memearena.report.inputs import rendered_inputs as rendered_inputs
from memearena.report.labels import labels_view
from memearena.report.svg import nice_ticks

__all__ = [
    "RUN_PARTS",
    "SECTIONS",
    "Section",
    "bar_chart",
    "dict_of",
    "float_of",
    "fmt_cell",
    "fmt_num",
    "fmt_pct",
    "fmt_usd",
    "is_number",
    "list_of",
    "rating_chart",
    "register_section",
    "render_report",
    "rendered_inputs",
    "rows_of",
    "write_report",
]

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


def is_number(value: Any) -> bool:
    """An int or float that is not a bool."""
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
    if not is_number(value) or math.isnan(value):
        return fmt_num(value)
    return f"{100 * value:.1f}%"


def fmt_usd(value: Any) -> str:
    """A cost: cents for sums of a dollar or more, four decimals below (API calls are cheap)."""
    if not is_number(value) or math.isnan(value):
        return fmt_num(value)
    return f"${value:,.2f}" if abs(value) >= 1 else f"${value:.4f}"


def fmt_cell(value: Any, key: str) -> str:
    """A cell by the meaning its column name implies; an estimate ``{"value", "ci_low",
    "ci_high"}`` shows its 95% interval."""
    if isinstance(value, Mapping) and "value" in value:
        text = fmt_num(float_of(value.get("value")))
        low, high = float_of(value.get("ci_low")), float_of(value.get("ci_high"))
        if low is not None and high is not None and text != "—":
            text += f" [{fmt_num(low)}, {fmt_num(high)}]"
        if value.get("model"):
            text += f" ({value['model']})"
        return text
    if key == "cost_usd":
        return fmt_usd(value)
    if key == "win_rate" or key.endswith("_rate"):
        return fmt_pct(value)
    if key == "latency_s" and is_number(value):
        return fmt_num(float(value), 2)
    return fmt_num(value)


# tolerant access --------------------------------------------------------------------------


def dict_of(value: Any) -> dict[str, Any]:
    """``value`` as a dict (empty unless a mapping)."""
    return dict(value) if isinstance(value, Mapping) else {}


def list_of(value: Any) -> list[Any]:
    """``value`` as a list (empty unless a sequence other than text)."""
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return list(value)
    return []


def rows_of(value: Any) -> list[dict[str, Any]]:
    """The mappings of a list, as dicts (anything else in it left out)."""
    return [dict(r) for r in list_of(value) if isinstance(r, Mapping)]


def float_of(value: Any) -> float | None:
    """``value`` as a finite float, or None."""
    if not is_number(value):
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
    points = [(r, bt) for r in rows if (bt := float_of(r.get("bt"))) is not None]
    if not points:
        return None
    values: list[float] = []
    for r, bt in points:
        values.append(bt)
        values += [
            v for v in (float_of(r.get("ci_low")), float_of(r.get("ci_high"))) if v is not None
        ]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.08 or 10.0
    plot_width = _CHART_WIDTH - _LABEL_WIDTH - 20
    x, ticks = _axis(lo - pad, hi + pad, plot_width)
    bars = []
    for i, (r, bt) in enumerate(points):
        low, high = float_of(r.get("ci_low")), float_of(r.get("ci_high"))
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
    bars = [(label, f) for label, v in items if (f := float_of(v)) is not None]
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


def _usage(value: Any) -> dict[str, Any] | None:
    usage = {str(m): dict_of(u) for m, u in dict_of(value).items()}
    if not usage:
        return None
    keys = [k for k, _ in USAGE_COLUMNS if any(k in u for u in usage.values())]
    labels = dict(USAGE_COLUMNS)
    for u in usage.values():
        keys += [k for k, v in u.items() if k not in keys and k != "unsettled_usd" and is_number(v)]
    totals: dict[str, float] = {}
    for u in usage.values():
        for k in [*keys, "unsettled_usd"]:
            if is_number(u.get(k)):
                totals[k] = totals.get(k, 0) + u[k]

    def cell(u: Mapping[str, Any], k: str) -> str:
        text = fmt_cell(u.get(k), k)
        # Calls sent but never settled (a kill mid-call) show the most they can have cost.
        if k == "unsettled" and u.get(k) and is_number(u.get("unsettled_usd")):
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
    return [(str(k), fmt_num(v)) for k, v in dict_of(section.get("errors")).items()]


def _simulated(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    sim = dict_of(value)
    truth = [str(m) for m in list_of(sim.get("true_ranking"))]
    return {
        "note": str(sim.get("note", "")),
        "true_ranking": " > ".join(truth),
        "kendall_tau": fmt_num(sim.get("kendall_tau")),
        "spearman_rho": fmt_num(sim.get("spearman_rho")),
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
    folder: Path | None = None
    """The method package's folder holding ``template`` (its ``html/``), or None: the
    template is found under ``<key>/`` of that folder, beside the shell's own templates."""

    @property
    def template_name(self) -> str:
        """The partial's name in the report's template environment."""
        return f"{self.key}/{self.template}" if self.folder is not None else self.template


SECTIONS: list[Section] = [
    Section("labels", "Human labels", "_labels.html.j2", labels_view, order=50),
]
"""Method sections, shown in ``order``; a method's view registers its own (``register_section``):
the shell never imports a method."""


RUN_PARTS: dict[str, Callable[[Path, dict[str, Any]], Any]] = {}
"""Report parts read from the run directory, not from leaderboard.json: key -> (run_dir,
board) -> the part's data (shown by the section registered under that key), or None; each
registered from above, like a method's section."""


def register_section(section: Section) -> None:
    """Add (or replace, by key) one method's part of the report (its partial loaded from its
    own package's folder)."""
    SECTIONS[:] = [s for s in SECTIONS if s.key != section.key]
    SECTIONS.append(section)
    SECTIONS.sort(key=lambda s: s.order)
    _environment.cache_clear()


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
    run = dict_of(value)
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
    hashes = [(str(k), str(v)) for k, v in dict_of(run.get("prompt_hashes")).items()]
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
    status = dict_of(value)
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
        if is_number(status.get(key))
    ]
    problems = [str(p) for p in list_of(status.get("problems"))]
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
    board = dict_of(board)
    sections = []
    for sec in SECTIONS:
        if sec.key in board:
            data = dict_of(board.get(sec.key))
            view = sec.build(data, board)
            if view is not None:
                health = _health(sec.key, sec.title, data)
                sections.append(
                    {
                        "key": sec.key,
                        "title": sec.title,
                        "template": sec.template_name,
                        **view,
                        "nav": [*list_of(view.get("nav")), *health["nav"]],
                        "health": health,
                    }
                )
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
        "subtitle": (run or {}).get("name")
        or next((x["subtitle"] for x in sections if x.get("subtitle")), None),
        "run": run,
        "status": _status(board.get("status")),
        "no_results": not sections,
        "empty": next((x["empty"] for x in sections if x.get("empty")), None),
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
    loader: BaseLoader = PackageLoader("memearena.report", "templates")
    folders = {s.key: FileSystemLoader(str(s.folder)) for s in SECTIONS if s.folder is not None}
    if folders:
        # A method's partial is its package's own file, named under its key.
        loader = ChoiceLoader([loader, PrefixLoader(folders)])
    return Environment(
        loader=loader,
        autoescape=True,
        finalize=_printable,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_report(
    board: dict[str, Any],
    *,
    title: str = "memearena report",
    inputs: tuple[str, str] | None = None,
) -> str:
    """The report of a ``leaderboard.json`` document as one self-contained HTML page.
    ``inputs``: (the digest of what it is made from, the date it shows), recorded in its head
    (``rendered_inputs``)."""
    template = _environment().get_template("report.html.j2")
    return template.render(view=build_view(board, title=title), inputs=inputs)


def write_report(
    run_dir: Path, board: dict[str, Any], *, inputs: tuple[str, str] | None = None
) -> Path:
    """Write ``run_dir/report.html`` atomically (a reader never sees half a page); its path.
    ``inputs``: as ``render_report``'s."""
    run_dir = Path(run_dir)
    path = run_dir / "report.html"
    parts = {k: v for k, part in RUN_PARTS.items() if (v := part(run_dir, board)) is not None}
    text = render_report({**board, **parts}, inputs=inputs)
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
