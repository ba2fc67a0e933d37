"""Rendering of the Adapt method: its console summary and the report's Adapt section, from the
``adapt`` key of leaderboard.json only. Rendering only: the numbers come from
``memearena.methods.adapt.analysis``. Meme text and model output are untrusted: the HTML escapes
them and the console prints them as plain text."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from memearena.report.html import Section, register_section
from memearena.report.safe import console_safe, name_cell
from memearena.report.svg import estimate, interval_chart

__all__ = [
    "adapt_view",
    "control_chain_min",
    "fmt_interval",
    "print_adapt_summary",
    "report_section",
]

# ---- console --------------------------------------------------------------------------------


def _ci(v: Any, ci: Sequence[Any] | None, pct: bool = True) -> str:
    if v is None:
        return "—"
    lo, hi = ci if ci else (None, None)
    if pct:
        return f"{v:.0%} [{lo:.0%}, {hi:.0%}]" if lo is not None else f"{v:.0%}"
    return f"{v:.2f} [{lo:.2f}, {hi:.2f}]" if lo is not None else f"{v:.2f}"


def fmt_interval(v: Any, ci: Sequence[Any] | None, digits: int, scale: float) -> str:
    """``22 (10,35)``: a value and its interval, compact enough for 80 columns."""
    if v is None:
        return "—"
    lo, hi = ci if ci else (None, None)
    head = f"{v * scale:.{digits}f}"
    if lo is None or hi is None:
        return head
    return f"{head} ({lo * scale:.{digits}f},{hi * scale:.{digits}f})"


def compact_table(title: Text | str, caption: str, name: str, columns: Sequence[str]) -> Table:
    """Adapt's console table: light rules, no edge columns, a name column that folds when the
    table is too wide for the console (a long name wraps; no header or number is ever cut),
    then right-aligned number columns."""
    table = Table(
        title=title,
        caption=Text(caption),
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1),
    )
    table.add_column(name, justify="left", overflow="fold")
    for col in columns:
        table.add_column(col, justify="right", no_wrap=True)
    return table


def control_chain_min(m: dict[str, Any]) -> dict[str, Any]:
    """The control's figures in the loop's own measure (a chain's hardest version vs its seed:
    ``loop_vs_control.per_chain_min.control``), ``{}`` when the section has none: what the
    loop's ``refined_*`` figures are set beside, like with like (the control's own
    ``control_*`` figures are per step)."""
    q = m.get("loop_vs_control")
    got = ((q or {}).get("per_chain_min") or {}).get("control") if isinstance(q, dict) else None
    return got if isinstance(got, dict) else {}


def print_adapt_summary(console: Console, section: dict[str, Any], title: str = "Adapt") -> None:
    """Per-model scores and failure rates, conditional loop vs control, the taxonomy."""
    table = compact_table(
        Text(title),
        f"failure = score < {section['failure_threshold']:g}; loop + / control +: failure-rate"
        " increase (points) of a chain's hardest version over its seed, for both; 95% intervals"
        f" over memes (proportions: Wilson), {section['repeats']} seeds",
        "model",
        ("avg score", "failure %", "loop +", "control +", "refused"),
    )
    for m in section["models"]:
        ctrl = control_chain_min(m)
        table.add_row(
            name_cell(m["model"]),
            fmt_interval(m["avg_score"], m["avg_score_ci"], 1, 1.0),
            fmt_interval(m["failure_rate"], m["failure_rate_ci"], 0, 100.0),
            fmt_interval(m["refined_increase"], m["refined_increase_ci"], 0, 100.0),
            fmt_interval(ctrl.get("increase"), ctrl.get("increase_ci"), 0, 100.0),
            str(m["refused"]),
        )
    console.print(table)
    print_images_and_refusals(console, section)
    print_loop_vs_control(console, section)
    shown = section.get("refine_image")
    if shown:
        area = shown.get("mask_area")
        console.print(
            console_safe(
                f"refined items: {shown['note']}"
                + (
                    "; images by source: "
                    + ", ".join(f"{k} {n:,}" for k, n in shown["sources"].items())
                    if shown.get("sources")
                    else ""
                )
                + (f"; eraser mask area mean {area['mean']:.1%}" if area else "")
            )
        )
    selfish = [m["model"] for m in section["models"] if m.get("scored_by_itself")]
    if selfish:
        console.print(
            console_safe(
                "flagged: scored by its own model or family (left out of its score when another "
                "scorer exists): " + ", ".join(selfish)
            )
        )
    mined = [t["name"] for t in section["taxonomy"] if t.get("origin") == "mined"]
    console.print(
        console_safe(
            f"taxonomy {section['taxonomy_version']}: {len(section['taxonomy'])} categories"
            + (f" (mined: {', '.join(mined)})" if mined else "")
            + f"; {len(section['weaknesses'])} weakness step(s) recorded"
            + (f"; {section['pending']} step(s) pending a re-run" if section["pending"] else "")
        )
    )


def _pct(v: Any, ci: Any) -> str:
    return fmt_interval(v, ci, 0, 100.0)


def print_images_and_refusals(console: Console, section: dict[str, Any]) -> None:
    """Which image the scores used (the loop's, like for like), the "original image" figure
    beside them, and the refusal rate with how refusals were counted."""
    images = section.get("images") or {}
    own = [(m["model"], m.get("original_image")) for m in section["models"]]
    if images.get("scores"):
        console.print(console_safe("scores above: " + images["scores"]))
    if any(o for _, o in own):
        console.print(
            console_safe(
                (images.get("original_image") or "original image (caption in the picture)")
                + "; gap = its score minus the score above, meme by meme: "
                + "; ".join(
                    f"{name} {fmt_interval(o['avg_score'], o['avg_score_ci'], 1, 1.0)}, "
                    f"failure {_pct(o['failure_rate'], o['failure_rate_ci'])}%, "
                    f"gap {fmt_interval(o.get('score_gap'), o.get('score_gap_ci'), 1, 1.0)}"
                    for name, o in own
                    if o
                )
            )
        )
    if section.get("refusals_note"):
        console.print(
            console_safe(
                section["refusals_note"]
                + "; refusal rate: "
                + "; ".join(
                    f"{m['model']} {_pct(m.get('refusal_rate'), m.get('refusal_rate_ci'))}%"
                    for m in section["models"]
                )
            )
        )


def print_loop_vs_control(console: Console, section: dict[str, Any]) -> None:
    """The loop and the control in the same two quantities: the failure-rate change per step
    and per chain minimum, with the mean number of scored rewrites (draws) per chain."""
    rows = [m for m in section["models"] if m.get("loop_vs_control")]
    if not rows:
        return
    table = compact_table(
        Text("loop vs control, same quantities"),
        "failure-rate increase (points): /step = each rewrite vs its own original; /min = a "
        "chain's hardest version vs its seed (more draws, lower minimum); draws: loop/ctrl",
        "model",
        ("loop/step", "ctrl/step", "loop/min", "ctrl/min", "draws"),
    )
    for m in rows:
        q = m["loop_vs_control"]
        step, chain = q["per_step"], q["per_chain_min"]

        def inc(d: dict[str, Any]) -> str:
            return fmt_interval(d["increase"], d["increase_ci"], 0, 100.0)

        draws = [chain[k].get("draws_per_chain") for k in ("loop", "control")]
        table.add_row(
            console_safe(m["model"]),
            inc(step["loop"]),
            inc(step["control"]),
            inc(chain["loop"]),
            inc(chain["control"]),
            "/".join("—" if d is None else f"{d:.1f}" for d in draws),
        )
    console.print(table)


# ---- HTML view ------------------------------------------------------------------------------


def _cell(v: Any, ci: Sequence[Any] | None) -> dict[str, Any]:
    if v is None:
        return {"text": "—", "ci": "", "style": ""}
    lo, hi = ci if ci else (None, None)
    shade = max(0, min(100, round(100 - 55 * float(v))))
    return {
        "text": f"{v:.0%}",
        "ci": f"[{lo:.0%}, {hi:.0%}]" if lo is not None else "",
        # A number computed here, never text from the run: safe inside the style attribute.
        "style": f"background: hsl(0, 70%, {shade}%)",
    }


MAX_REPORTED_WEAKNESSES = 20
"""Weakness steps the report lists (largest score drops first); the section holds them all."""


def _count(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else "—"


def _shown(shown: int, total: Any) -> str:
    """``showing 20 of 131``: a cut list always says so."""
    if isinstance(total, int) and not isinstance(total, bool) and total != shown:
        return f"showing {shown:,} of {total:,}"
    return f"all {shown:,}"


def _original_view(o: Any) -> dict[str, Any] | None:
    """The "original image" figure of a model (its originals answered and scored on their own
    image, the caption still in it) and its gap to the score above, or None: not measured."""
    if not isinstance(o, dict):
        return None
    return {
        "image": str(o.get("image") or "original image"),
        "scored": _count(o.get("scored")),
        "refused": _count(o.get("refused")),
        "avg": _ci(o.get("avg_score"), o.get("avg_score_ci"), pct=False),
        "fr": _ci(o.get("failure_rate"), o.get("failure_rate_ci")),
        "gap": _ci(o.get("score_gap"), o.get("score_gap_ci"), pct=False),
    }


def _images_view(images: Any) -> dict[str, str]:
    """Which image each figure used, as the section says it (empty strings: not stated)."""
    got = images if isinstance(images, dict) else {}
    return {k: str(got.get(k) or "") for k in ("scores", "original_image")}


def adapt_view(board: dict[str, Any]) -> dict[str, Any] | None:
    """What the report's Adapt section shows (None when the board has no Adapt section)."""
    sec = board.get("adapt")
    if not isinstance(sec, dict) or not sec.get("models"):
        return None
    cats = sorted(sec.get("by_category", {}))
    heat = []
    for m in sec["models"]:
        row = {"model": m["model"], "cells": []}
        for c in cats:
            r = next((x for x in sec["by_category"][c] if x["model"] == m["model"]), None)
            row["cells"].append(_cell(r and r["failure_rate"], r and r["failure_rate_ci"]))
        heat.append(row)
    models = [
        {
            "model": m["model"],
            "answers": _count(m.get("answers")),
            "scored": _count(m.get("scored")),
            "avg": _ci(m["avg_score"], m["avg_score_ci"], pct=False),
            "fr": _ci(m["failure_rate"], m["failure_rate_ci"]),
            "seed_chains": _count(m.get("seed_chains")),
            "refined": _ci(m["refined_failure_rate"], m["refined_failure_rate_ci"]),
            "loop_inc": _ci(m["refined_increase"], m["refined_increase_ci"]),
            "control_chains": _count(control_chain_min(m).get("chains")),
            "control": _ci(
                control_chain_min(m).get("failure_rate"),
                control_chain_min(m).get("failure_rate_ci"),
            ),
            "control_inc": _ci(
                control_chain_min(m).get("increase"), control_chain_min(m).get("increase_ci")
            ),
            "refused": m["refused"],
            "refusal_rate": _ci(m.get("refusal_rate"), m.get("refusal_rate_ci")),
            "original": _original_view(m.get("original_image")),
            "unparsed": m["unparsed"],
            "self": ", ".join(m.get("scored_by_itself") or []) or "no",
            "flag": bool(m.get("scored_by_itself")),
        }
        for m in sec["models"]
    ]
    loop_chart = interval_chart(
        [
            (
                str(m["model"]),
                [
                    estimate("conditional loop", (m["refined_increase"], m["refined_increase_ci"])),
                    estimate(
                        "unconditional control",
                        (
                            control_chain_min(m).get("increase"),
                            control_chain_min(m).get("increase_ci"),
                        ),
                        1,
                    ),
                ],
            )
            for m in sec["models"]
        ],
        title="Failure-rate increase from refinement, a chain's hardest version vs its seed: "
        "conditional loop vs unconditional control, with 95% intervals (0: no change)",
        reference=0.0,
        percent=True,
        legend=["conditional loop", "unconditional control"],
    )
    chains = []
    for c in sec.get("chains", []):
        steps = []
        for s in c["steps"]:
            checks = s.get("checks") or []
            steps.append(
                {
                    "step": s["step"],
                    "meme": s["meme"],
                    "from": s.get("parent_text") or "",
                    "misbelief": s.get("misbelief") or "",
                    "text": s.get("text") or "(no accepted rewrite)",
                    "before": f"{s['score_before']:g}",
                    "after": "—" if s.get("score_after") is None else f"{s['score_after']:g}",
                    "checks": "; ".join(
                        f"{ch.get('outcome')}" + (f": {ch['reason']}" if ch.get("reason") else "")
                        for ch in checks
                    ),
                }
            )
        chains.append(
            {
                "target": c["target"],
                "category": c["category"],
                "mode": c["mode"],
                "repeat": c["repeat"],
                "meme": c.get("seed") or (c["steps"][0]["meme"] if c["steps"] else ""),
                "stop": c["stop"],
                "steps": steps,
            }
        )
    weaknesses = [w for w in sec.get("weaknesses", []) if isinstance(w, dict)]
    shown = weaknesses[:MAX_REPORTED_WEAKNESSES]
    return {
        "categories": cats,
        "heat": heat,
        "models": models,
        "loop_chart": loop_chart,
        "chains": chains,
        "chains_shown": _shown(len(chains), sec.get("chains_total")),
        "weaknesses": [
            {
                "model": w.get("model", ""),
                "category": w.get("category", ""),
                "meme": w.get("meme", ""),
                "chain_seed": w.get("chain_seed", ""),
                "repeat": w.get("repeat", ""),
                "misbelief": w.get("misbelief", ""),
                "steps": w.get("steps", ""),
                "score_drop": f"{w['score_drop']:.1f}"
                if isinstance(w.get("score_drop"), int | float)
                else "—",
            }
            for w in shown
        ],
        "weaknesses_shown": _shown(len(shown), len(weaknesses)),
        "taxonomy": sec.get("taxonomy", []),
        "decisions": sec.get("taxonomy_decisions", []),
        "version": sec.get("taxonomy_version", ""),
        "threshold": f"{sec.get('failure_threshold', 4.0):g}",
        "repeats": sec.get("repeats"),
        "agreement": sec.get("scorer_agreement", []),
        "simulated": sec.get("simulated"),
        "pending": sec.get("pending", 0),
        "interval": sec.get("interval"),
        "refine_image": sec.get("refine_image"),
        "images": _images_view(sec.get("images")),
        "refusals_note": str(sec.get("refusals_note") or ""),
        "same_quantities_columns": [
            "Loop, per step",
            "Control, per step",
            "Loop, chain minimum",
            "Control, chain minimum",
            "Draws per chain (loop/control)",
        ],
        "same_quantities": [
            {
                "model": m["model"],
                "cells": [
                    _ci(q[kind][mode]["increase"], q[kind][mode]["increase_ci"])
                    for kind in ("per_step", "per_chain_min")
                    for mode in ("loop", "control")
                ],
                "draws": "/".join(
                    "—" if d is None else f"{d:.1f}"
                    for d in (
                        q["per_chain_min"][mode].get("draws_per_chain")
                        for mode in ("loop", "control")
                    )
                ),
            }
            for m in sec["models"]
            for q in [m.get("loop_vs_control")]
            if q
        ],
    }


def report_section(section: dict[str, Any], board: dict[str, Any]) -> dict[str, Any] | None:
    """The report's Adapt part (``html/report.html.j2``), or None when there is nothing to show."""
    view = adapt_view(board)
    return None if view is None else {"adapt": view, "nav": [("adapt", "Adapt")]}


register_section(
    Section(
        "adapt",
        "Adapt",
        "report.html.j2",
        report_section,
        order=1,
        folder=Path(__file__).parent / "html",
    )
)
