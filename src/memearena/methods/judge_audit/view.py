"""Rendering of the Judge audit section: the console summary and the HTML report's view.

Reads only the ``"judge_audit"`` section of ``leaderboard.json`` (and, for the before/after
examples, the run's images by content hash). Every string from the document is untrusted:
the console prints it without markup, the HTML template escapes it, and an image is embedded
only when its bytes still hash to the name the document gives (a decoded, re-encoded thumbnail).
"""

from __future__ import annotations

import base64
import hashlib
import io
import math
import re
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from memearena.report.console import INTERVAL_NOTE, fitted_tables, interval_text
from memearena.report.html import Section, register_section
from memearena.report.safe import console_safe, name_cell, strip_control
from memearena.report.svg import estimate, interval_chart
from memearena.stats.judge_bias import BIAS_CATEGORIES, BIAS_TYPES

__all__ = [
    "attach_thumbnails",
    "classic_table",
    "demo_check",
    "judge_audit_table",
    "judge_audit_view",
    "print_judge_audit_summary",
    "report_section",
    "thumbnail",
]

_SCORES_FILE = "judge_audit_scores.jsonl"  # every scored pair, beside leaderboard.json
_SHA = re.compile(r"^[0-9a-f]{64}$")
_THUMB = 240


def _num(x: Any, digits: int = 2) -> str:
    return f"{x:.{digits}f}" if isinstance(x, int | float) and not isinstance(x, bool) else "—"


def _fig(e: Any, digits: int = 2) -> str:
    """``value [lo, hi]`` of an estimate, or ``no data``."""
    if not isinstance(e, dict) or e.get("value") is None:
        return "no data"
    if e.get("ci_low") is None or e.get("ci_high") is None:
        return _num(e["value"], digits)
    return f"{_num(e['value'], digits)} [{_num(e['ci_low'], digits)}, {_num(e['ci_high'], digits)}]"


def _short(e: Any) -> str:
    """An estimate with its interval for the console (``report.console.interval_text``), or
    ``—``."""
    if not isinstance(e, dict) or e.get("value") is None:
        return "—"
    if e.get("ci_low") is None or e.get("ci_high") is None:
        return _num(e["value"])
    values = (e["value"], e["ci_low"], e["ci_high"])
    if not all(isinstance(v, int | float) and math.isfinite(v) for v in values):
        return _num(e["value"])
    return interval_text(*values)


def judge_audit_table(section: dict[str, Any]) -> Table:
    """The evaluator leaderboard as a rich table (untrusted strings escaped)."""
    table = Table(
        title="Judge audit — evaluator leaderboard (BD/BC, higher is better)",
        caption=f"95% bootstrap intervals over items: {INTERVAL_NOTE}",
    )
    for c in ("#", "judge", "overall", *BIAS_CATEGORIES, "flags"):
        table.add_column(c, justify="left" if c in ("judge", "flags") else "right")
    for r in _rows(section):
        cats = r.get("categories") or {}
        table.add_row(
            str(r.get("rank_label", r.get("rank", ""))),
            escape(str(r.get("judge", ""))),
            _short(r.get("overall")),
            *(_short(cats.get(c)) for c in BIAS_CATEGORIES),
            escape(", ".join(str(f) for f in r.get("flags") or []) or "none"),
        )
    return table


def classic_table(section: dict[str, Any]) -> Table:
    """Position, verbosity and self-enhancement bias, abstentions and parse failures."""
    table = Table(title="Judge audit — classic biases and outcomes")
    cols = (
        "judge",
        "P(first)",
        "consistency",
        "decisive",
        "P(padded)",
        "P(concise)",
        "self-enh.",
        "abstain",
        "unparsed",
    )
    for c in cols:
        table.add_column(c, justify="left" if c == "judge" else "right")
    for r in _rows(section):
        table.add_row(
            escape(str(r.get("judge", ""))),
            _short(r.get("p_prefer_first")),
            _short(r.get("position_consistency")),
            _short(r.get("decisive_consistency")),
            _short(r.get("p_prefer_padded")),
            _short(r.get("p_prefer_concise")),
            _short(r.get("self_enhancement")),
            _short(r.get("abstention_rate")),
            _short(r.get("parse_failure_rate")),
        )
    return table


def _rank_range(ci: Any) -> str:
    if isinstance(ci, list | tuple) and len(ci) == 2:
        return f"{ci[0]}–{ci[1]}"
    return "—"


def _shortfalls(trust: Any) -> str:
    """The trust composite's components (shortfalls from the ideal; no data: —)."""
    comps = trust.get("components") if isinstance(trust, dict) else None
    if not isinstance(comps, dict):
        return "—"
    short = {"bd_bc": "bd/bc", "position": "pos", "verbosity": "verb", "self_enhancement": "self"}
    return " ".join(
        f"{short.get(k, k)} {_num(v) if isinstance(v, int | float) else '—'}"
        for k, v in comps.items()
    )


def _order_by(section: dict[str, Any]) -> str:
    """The figure the leaderboard is ordered by, as the section states it."""
    by = section.get("order_by")
    return {"overall": "overall", "composite": "trust"}.get(str(by), "overall")


def _flags_text(r: dict[str, Any]) -> str:
    """A row's flags, each with its family-wise adjusted p-value where the row gives one."""
    given = r.get("flag_p_adjusted")
    p_of: dict[str, Any] = given if isinstance(given, dict) else {}
    out = []
    for f in r.get("flags") or []:
        p = p_of.get(f)
        out.append(f"{f} (p {p:.3g})" if isinstance(p, int | float) else str(f))
    return ", ".join(out) or "none"


def _flags_shown(r: dict[str, Any]) -> list[str]:
    """A row's flags for the report, each with its family-wise adjusted p-value where the row
    gives one (``verbosity (adjusted p 1.06e-17)``, as the console writes it)."""
    given = r.get("flag_p_adjusted")
    p_of: dict[str, Any] = given if isinstance(given, dict) else {}
    out = []
    for f in r.get("flags") or []:
        p = p_of.get(f)
        ok = isinstance(p, int | float) and not isinstance(p, bool) and math.isfinite(p)
        out.append(f"{f} (adjusted p {p:.3g})" if ok else str(f))
    return out


def _flagging_note(section: dict[str, Any]) -> str:
    """How flags hold their error rate, from the section's ``flagging`` block ('' when absent)."""
    f = section.get("flagging")
    alpha = f.get("family_wise_alpha") if isinstance(f, dict) else None
    if not isinstance(f, dict) or not isinstance(alpha, int | float) or isinstance(alpha, bool):
        return ""
    tests = f.get("tests")
    n = f" over its {len(tests)} tests" if isinstance(tests, list) and tests else ""
    method = f" ({f['method']})" if f.get("method") else ""
    pairs = f.get("min_pairs")
    least = f"; a test with fewer than {pairs} pairs per type never flags" if pairs else ""
    return (
        f"Flags hold a family-wise error rate of {alpha:g} per judge{n}{method}; each flag "
        f"shows its adjusted p-value{least}."
    )


def _rows(section: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in section.get("leaderboard") or [] if isinstance(r, dict)]


def demo_check(section: dict[str, Any]) -> tuple[list[str], bool]:
    """For simulated judges: one line per injected bias (flagged or not), per weakly injected
    bias (information only) and per clean judge (nothing injected: must be flagged on
    nothing); and whether every required check passed."""
    sim = section.get("simulated") or {}
    injected: dict[str, list[str]] = sim.get("injected") or {}
    weak: dict[str, list[str]] = sim.get("weak") or {}
    flags = {str(r.get("judge")): set(r.get("flags") or []) for r in _rows(section)}
    lines: list[str] = []
    ok = True
    for judge, expected in injected.items():
        got = flags.get(judge, set())
        if not expected and not weak.get(judge):
            good = not got
            ok &= good
            shown = ", ".join(sorted(got)) if got else "nothing"
            lines.append(f"{'ok ' if good else 'FAIL'} clean judge {judge}: flagged on {shown}")
            continue
        for bias in expected:
            good = bias in got
            ok &= good
            said = "is flagged" if good else "is NOT flagged"
            lines.append(f"{'ok ' if good else 'FAIL'} {judge}: injected {bias} {said}")
        for bias in weak.get(judge, []):
            said = "flagged" if bias in got else "not flagged"
            lines.append(f"info {judge}: weakly injected {bias}, {said}")
    return lines, ok


def print_judge_audit_summary(console: Console, section: dict[str, Any]) -> None:
    """The evaluator leaderboard, the classic biases and what was run, from the
    ``judge_audit`` section. Tables fit the console's width (split into parts that repeat the
    judge column: a judge's name is cut only past NAME_CHARS)."""
    rows = _rows(section)
    names = [name_cell(r.get("judge", "")) for r in rows]
    lead_headers = ["#", "rank range", "trust", "shortfalls", "overall", *BIAS_CATEGORIES]
    lead_cells = [
        [
            str(r.get("rank_label", r.get("rank", ""))),
            _rank_range(r.get("rank_ci")),
            _short(r.get("trust")),
            _shortfalls(r.get("trust")),
            _short(r.get("overall")),
            *(_short((r.get("categories") or {}).get(c)) for c in BIAS_CATEGORIES),
        ]
        for r in rows
    ]
    for table in fitted_tables(
        f"Judge audit — evaluator leaderboard (ordered by {_order_by(section)}; * flagged)",
        "judge",
        names,
        lead_headers,
        lead_cells,
        console.width,
        caption=(
            "trust = 1 − mean shortfall (BD/BC, 1 − decisive consistency, 1 − P(concise), "
            f"self-enhancement); 95% bootstrap intervals over items: {INTERVAL_NOTE}"
        ),
    ):
        console.print(table)
    for name, r in zip(names, rows, strict=True):
        console.print(f"flags of {name}: {console_safe(_flags_text(r))}", highlight=False)
    flagging = section.get("flagging")
    if isinstance(flagging, dict) and isinstance(flagging.get("family_wise_alpha"), int | float):
        console.print(
            strip_control(
                f"flags: family-wise error {flagging['family_wise_alpha']:g} per judge "
                f"({flagging.get('method', '')}); at least {flagging.get('min_pairs')} pairs "
                "per type; p = adjusted p-value"
            ),
            markup=False,
        )
    classic = [
        ("P(first)", "p_prefer_first"),
        ("consistency", "position_consistency"),
        ("decisive", "decisive_consistency"),
        ("P(padded)", "p_prefer_padded"),
        ("P(concise)", "p_prefer_concise"),
        ("self-enh.", "self_enhancement"),
        ("abstain", "abstention_rate"),
        ("unparsed", "parse_failure_rate"),
    ]
    for table in fitted_tables(
        "Judge audit — classic biases and outcomes",
        "judge",
        names,
        [h for h, _ in classic],
        [[_short(r.get(k)) for _, k in classic] for r in rows],
        console.width,
    ):
        console.print(table)
    console.print(
        strip_control(f"{section.get('items', 0)} items, prompt {section.get('prompt')!s}"),
        markup=False,
    )
    errors = section.get("errors") or {}
    if errors:
        console.print(
            strip_control(
                "recorded problems: " + ", ".join(f"{k} ×{v}" for k, v in errors.items())
            ),
            markup=False,
        )


# ---- HTML view ---------------------------------------------------------------------------------

_THUMB_URL = re.compile(r"^data:image/jpeg;base64,[A-Za-z0-9+/]+={0,2}$")
_THUMB_MAX = 200_000


def thumbnail(image_dir: Path, sha: Any) -> str | None:
    """A data URL of a small re-encoded JPEG copy of a stored image, or None (absent, or its
    bytes no longer hash to its name: a tampered file is never shown)."""
    if not isinstance(sha, str) or not _SHA.match(sha):
        return None
    from PIL import Image

    for ext in ("png", "jpg"):
        p = image_dir / f"{sha}.{ext}"
        if not p.is_file():
            continue
        data = p.read_bytes()
        if hashlib.sha256(data).hexdigest() != sha:
            return None
        try:
            with Image.open(io.BytesIO(data), formats=("PNG", "JPEG")) as src:
                im = src.convert("RGB")
            im.thumbnail((_THUMB, _THUMB))
            buf = io.BytesIO()
            im.save(buf, format="JPEG", quality=75)
        except Exception:  # a file that does not decode is simply not shown
            return None
        return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
    return None


def attach_thumbnails(section: dict[str, Any], image_dir: Path) -> dict[str, Any]:
    """The section with a ``thumb`` beside every example image hash (so the report, re-rendered
    from ``leaderboard.json`` alone, can show the before/after pictures)."""
    for examples in _mapping(section.get("examples")).values():
        for ex in examples if isinstance(examples, list) else []:
            for side in ("unbiased", "biased"):
                s = ex.get(side) if isinstance(ex, dict) else None
                if isinstance(s, dict) and s.get("image"):
                    s["thumb"] = thumbnail(image_dir, s["image"])
    return section


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _safe_thumb(value: Any) -> str | None:
    # leaderboard.json is read back from disk: only a plain base64 JPEG data URL may reach src.
    if isinstance(value, str) and len(value) <= _THUMB_MAX and _THUMB_URL.match(value):
        return value
    return None


def _side(side: Any) -> dict[str, Any]:
    side = _mapping(side)
    return {
        "query": str(side.get("query") or ""),
        "response": str(side.get("response") or ""),
        "image": _safe_thumb(side.get("thumb")),
        "has_image": side.get("image") is not None,
        "sha": str(side.get("image") or "")[:12],
    }


def _examples_shown(examples: list[dict[str, Any]]) -> str:
    """What part of the audit the before/after examples are (a sample, and where the rest is)."""
    per_type: dict[str, int] = {}
    for ex in examples:
        per_type[ex["bias_type"]] = per_type.get(ex["bias_type"], 0) + 1
    most = max(per_type.values(), default=0)
    return (
        f"{len(examples)} example(s) of {len(per_type)} bias type(s), at most {most} per type "
        f"(the config's judge_audit.examples); every scored pair is in {_SCORES_FILE}."
    )


def judge_audit_view(section: Any) -> dict[str, Any] | None:
    """Everything the report's Judge audit partial shows, formatted (None: no section)."""
    if not isinstance(section, dict) or not section:
        return None
    rows = []
    for r in _rows(section):
        cats = _mapping(r.get("categories"))
        types = _mapping(r.get("types"))
        rows.append(
            {
                "rank": str(r.get("rank_label", r.get("rank", ""))),
                "rank_range": _rank_range(r.get("rank_ci")),
                "trust": _fig(r.get("trust")),
                "shortfalls": _shortfalls(r.get("trust")),
                "judge": str(r.get("judge", "")),
                "overall": _fig(r.get("overall")),
                "categories": [_fig(cats.get(c)) for c in BIAS_CATEGORIES],
                "types": [_fig(types.get(t)) for t in BIAS_TYPES],
                "pairs": [str(_mapping(types.get(t)).get("pairs", 0)) for t in BIAS_TYPES],
                "p_first": _fig(r.get("p_prefer_first")),
                "consistency": _fig(r.get("position_consistency")),
                "p_padded": _fig(r.get("p_prefer_padded")),
                "p_concise": _fig(r.get("p_prefer_concise")),
                "decisive": _fig(r.get("decisive_consistency")),
                "self_enhancement": _fig(r.get("self_enhancement")),
                "abstention": _fig(r.get("abstention_rate")),
                "parse_failures": _fig(r.get("parse_failure_rate")),
                "cost": _fig(r.get("cost_usd_per_1k"), 4),
                "seconds": _fig(r.get("seconds_per_1k"), 1),
                "flags": _flags_shown(r),
            }
        )
    examples = []
    for bias_type in BIAS_TYPES:
        for ex in _mapping(section.get("examples")).get(bias_type) or []:
            if not isinstance(ex, dict):
                continue
            examples.append(
                {
                    "bias_type": bias_type,
                    "item": str(ex.get("item", "")),
                    "before": _side(ex.get("unbiased")),
                    "after": _side(ex.get("biased")),
                    "scores": [
                        (
                            str(j),
                            _num(_mapping(s).get("unbiased"), 0),
                            _num(_mapping(s).get("biased"), 0),
                        )
                        for j, s in sorted(_mapping(ex.get("scores")).items())
                    ],
                }
            )
    sim = section.get("simulated")
    judges = [str(r.get("judge", "")) for r in _rows(section)]
    boards = _rows(section)
    type_rows = [
        {
            "label": f"{t.replace('_', ' ')} ({metric.upper()}, {category})",
            "cells": [f"{row['types'][i]} ({row['pairs'][i]})" for row in rows],
        }
        for i, (t, (category, metric)) in enumerate(BIAS_TYPES.items())
    ]
    return {
        "nav": [("judge-audit", "Judge audit")],
        "rows": rows,
        "categories": list(BIAS_CATEGORIES),
        "types": list(BIAS_TYPES),
        "type_rows": type_rows,
        "type_chart": interval_chart(
            [
                (
                    f"{t.replace('_', ' ')} ({metric.upper()})",
                    [
                        estimate(j, _mapping(r.get("types")).get(t), k)
                        for k, (j, r) in enumerate(zip(judges, boards, strict=True))
                    ],
                )
                for t, (_, metric) in BIAS_TYPES.items()
            ],
            title="BD / BC per bias type and judge, with 95% intervals (higher is better)",
            domain=(0.0, 1.0),
            legend=judges,
        ),
        "classic_chart": interval_chart(
            [
                (label, [estimate(j, r.get(key)) for j, r in zip(judges, boards, strict=True)])
                for key, label in (
                    ("p_prefer_first", "P(first): prefers the response shown first"),
                    ("p_prefer_padded", "P(padded): prefers the padded, longer response"),
                    ("p_prefer_concise", "P(concise): strictly prefers the concise original"),
                    ("decisive_consistency", "Decisive consistency: one winner in both orders"),
                )
            ],
            title=(
                "Position and verbosity per judge, with 95% intervals "
                "(0.5: no bias in P(first) and P(padded))"
            ),
            domain=(0.0, 1.0),
            reference=0.5,
        ),
        "self_chart": interval_chart(
            [
                (
                    "Self-enhancement: own family's responses scored above the others'",
                    [
                        estimate(j, r.get("self_enhancement"))
                        for j, r in zip(judges, boards, strict=True)
                    ],
                )
            ],
            title="Self-enhancement per judge, with 95% intervals (0: none)",
            reference=0.0,
        ),
        "examples": examples,
        "examples_shown": _examples_shown(examples),
        "item_count": str(section.get("items", "")),
        "prompt": str(section.get("prompt", "")),
        "note": str(section.get("note", "")),
        "order_by": _order_by(section),
        "order_label": {"overall": "Overall", "trust": "Trust"}[_order_by(section)],
        "trust_shown": any(isinstance(r.get("trust"), dict) for r in boards),
        "flagging": _flagging_note(section),
        "reference": str(
            section.get("reference_judge") or "none (each judge against the mean of the others)"
        ),
        "simulated": str(sim.get("note", "")) if isinstance(sim, dict) else None,
    }


def report_section(section: dict[str, Any], board: dict[str, Any]) -> dict[str, Any] | None:
    """The report's Judge-audit part (``html/report.html.j2``)."""
    return judge_audit_view(section)


register_section(
    Section(
        "judge_audit",
        "Judge audit",
        "report.html.j2",
        report_section,
        order=2,
        folder=Path(__file__).parent / "html",
    )
)
