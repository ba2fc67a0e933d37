"""The report's profile part: one profile per model across the methods of a run directory, and
how far the methods agree (computed by ``memearena.engine.profile``, which registers the part
and hands its data to the report; this module only formats it, escaping is the template's)."""

from __future__ import annotations

import math
from typing import Any

from memearena.report.html import Section, register_section

__all__ = ["estimate", "profile_view"]


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def estimate(e: Any, digits: int = 2) -> str:
    """``value [low, high]``; ``value`` alone without an interval; ``—`` without a value."""
    if not isinstance(e, dict) or not _finite(e.get("value")):
        return "—"
    v, lo, hi = e["value"], e.get("ci_low"), e.get("ci_high")
    if _finite(lo) and _finite(hi):
        return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"
    return f"{v:.{digits}f}"


def _rows(part: dict[str, Any]) -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    if part.get("rank") is not None:
        text = f"{part['rank']} of {part.get('ranked') or '?'}"
        rr = part.get("rank_range")
        if isinstance(rr, list) and len(rr) == 2:
            text += f" (its interval allows {rr[0]}–{rr[1]})"
        rows.append(("rank", text))
    rows += [(str(f.get("figure")), estimate(f)) for f in part.get("figures") or []]
    if part.get("flags"):
        rows.append(("flagged", ", ".join(str(f) for f in part["flags"])))
    rows += [("note", str(n)) for n in part.get("notes") or []]
    return rows


def profile_view(section: dict[str, Any], board: dict[str, Any]) -> dict[str, Any] | None:
    """The part's view model (``_profile.html.j2``), or None when there is nothing to show."""
    if section.get("error"):
        return {"error": str(section["error"]), "nav": [("profiles", "Profiles")]}
    models = [
        {
            "model": str(m.get("model")),
            "parts": [
                {"title": str(p.get("title")), "rows": _rows(p)} for p in m.get("parts") or []
            ],
        }
        for m in section.get("models") or []
        if isinstance(m, dict)
    ]
    if not models:
        return None
    agreement = [
        {
            "methods": f"{a.get('a_title')} vs {a.get('b_title')}",
            "scores": f"{a.get('a_figure')} · {a.get('b_figure')}",
            "models": len(a.get("models") or []),
            "rho": estimate(a.get("spearman")),
            "unit": f"{a.get('units')} {a.get('unit')}s" if a.get("unit") else "—",
            "summary": str(a.get("summary", "")),
            "why": str(a.get("why", "")),
        }
        for a in section.get("agreement") or []
        if isinstance(a, dict)
    ]
    return {
        "error": None,
        "models": models,
        "agreement": agreement,
        "bootstrap": section.get("bootstrap"),
        "nav": [("profiles", "Profiles")],
    }


register_section(
    Section("profile", "Profiles across methods", "_profile.html.j2", profile_view, order=900)
)
