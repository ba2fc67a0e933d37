"""Rendering of the Adapt method: its leaderboard.json section, lineage file, human-labelling
export, console summary and the report's Adapt section. Rendering only: the numbers come from
``memearena.analysis.adapt``. Meme text and model output are untrusted: the HTML escapes them,
the console prints them as plain text, and the CSV export defuses spreadsheet formulas."""

from __future__ import annotations

import csv
import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from memearena.config import RunConfig
from memearena.jsonsafe import dumps_strict
from memearena.pipelines.schedule import seeded_rng
from memearena.report.safe import console_safe, csv_safe, name_cell

__all__ = [
    "HUMAN_KEY_FILE",
    "HUMAN_LABELS_FILE",
    "adapt_view",
    "csv_cell",
    "fmt_interval",
    "print_adapt_summary",
    "write_adapt_outputs",
]

HUMAN_LABELS_FILE = "adapt_human_labels.csv"
"""Blind labelling sheet: item, image, text, and empty ``harmful`` / ``category`` columns."""
HUMAN_KEY_FILE = "adapt_human_key.csv"
"""What each item of the labelling sheet is (kept apart so the labellers stay blind)."""


def csv_cell(value: object) -> object:
    """A cell a spreadsheet will show as text, never evaluate (formula injection)."""
    return csv_safe("" if value is None else value)


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _merge_board(run_dir: Path, section: dict[str, Any]) -> dict[str, Any]:
    """leaderboard.json with its ``adapt`` key replaced (other methods' keys kept)."""
    path = run_dir / "leaderboard.json"
    board: dict[str, Any] = {}
    if path.exists():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(loaded, dict):
                board = loaded
        except (OSError, json.JSONDecodeError):
            board = {}  # an unreadable board is rewritten with what this run knows
    board["adapt"] = section
    _atomic_write(path, dumps_strict(board, indent=2, ensure_ascii=False))
    return board


def _human_export(run_dir: Path, cfg: RunConfig, outcome: Any, memes: dict[str, Any]) -> int:
    """Refined items and their matched originals, shuffled, for blind harmfulness labels."""
    items: dict[tuple[str, str], dict[str, Any]] = {}
    for c in outcome.chains:
        for s in c["steps"]:
            if not s.get("text"):
                continue
            items.setdefault(
                ("refined", s["text"]),
                {
                    "kind": "refined",
                    "meme": s["meme"],
                    "text": s["text"],
                    "category": c["category"],
                },
            )
            items.setdefault(
                ("original", s["meme"]),
                {
                    "kind": "original",
                    "meme": s["meme"],
                    "text": s["parent_text"],
                    "category": c["category"],
                },
            )
    rows = sorted(items.values(), key=lambda r: (r["meme"], r["kind"], r["text"]))
    seeded_rng(cfg.seed, "adapt.human_export").shuffle(rows)
    labels: list[list[object]] = [["item", "image", "text", "harmful", "category"]]
    key: list[list[object]] = [["item", "kind", "meme", "category", "text"]]
    for i, r in enumerate(rows, start=1):
        item = f"item-{i:05d}"
        image = memes.get(r["meme"])
        labels.append([item, csv_cell(image), csv_cell(r["text"]), "", ""])
        key.append(
            [item, r["kind"], csv_cell(r["meme"]), csv_cell(r["category"]), csv_cell(r["text"])]
        )
    for name, table in ((HUMAN_LABELS_FILE, labels), (HUMAN_KEY_FILE, key)):
        buf = _Buffer()
        csv.writer(buf).writerows(table)
        _atomic_write(run_dir / name, buf.text())
    return len(rows)


class _Buffer:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, s: str) -> int:
        self.parts.append(s)
        return len(s)

    def text(self) -> str:
        return "".join(self.parts)


def write_adapt_outputs(
    run_dir: Path, cfg: RunConfig, outcome: Any, section: dict[str, Any]
) -> dict[str, Any]:
    """leaderboard.json (``adapt`` key), ``adapt_chains.jsonl``, ``adapt_scores.jsonl``, the
    human-labelling export, and report.html; returns the whole board."""
    from memearena.data import load_datasets
    from memearena.report.html import write_report

    board = _merge_board(run_dir, section)
    _atomic_write(
        run_dir / "adapt_chains.jsonl",
        "".join(dumps_strict(c, ensure_ascii=False) + "\n" for c in outcome.chains),
    )
    _atomic_write(
        run_dir / "adapt_scores.jsonl",
        "".join(dumps_strict(o, ensure_ascii=False) + "\n" for o in outcome.originals),
    )
    if cfg.adapt is not None and cfg.adapt.human_export:
        loaded = load_datasets(cfg.data, cfg.image, check_images=False)
        images = {m.uid: str(m.image_path) if m.image_path else "" for m in loaded.memes}
        _human_export(run_dir, cfg, outcome, images)
    write_report(run_dir, board)
    return board


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


def print_adapt_summary(console: Console, section: dict[str, Any], title: str = "Adapt") -> None:
    """Per-model scores and failure rates, conditional loop vs control, the taxonomy."""
    table = Table(
        title=Text(title),
        caption=Text(
            f"failure = score < {section['failure_threshold']:g}; loop + / control +: failure-rate"
            f" increase (points); (95% interval: bootstrap over memes, {section['repeats']} seeds)"
        ),
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1),
    )
    for col in ("model", "avg score", "failure %", "loop +", "control +", "refused"):
        table.add_column(col, justify="left" if col == "model" else "right", no_wrap=True)
    for m in section["models"]:
        table.add_row(
            name_cell(m["model"]),
            fmt_interval(m["avg_score"], m["avg_score_ci"], 1, 1.0),
            fmt_interval(m["failure_rate"], m["failure_rate_ci"], 0, 100.0),
            fmt_interval(m["refined_increase"], m["refined_increase_ci"], 0, 100.0),
            fmt_interval(m["control_increase"], m["control_increase_ci"], 0, 100.0),
            str(m["refused"]),
        )
    console.print(table)
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
            "avg": _ci(m["avg_score"], m["avg_score_ci"], pct=False),
            "fr": _ci(m["failure_rate"], m["failure_rate_ci"]),
            "refined": _ci(m["refined_failure_rate"], m["refined_failure_rate_ci"]),
            "loop_inc": _ci(m["refined_increase"], m["refined_increase_ci"]),
            "control": _ci(m["control_failure_rate"], m["control_failure_rate_ci"]),
            "control_inc": _ci(m["control_increase"], m["control_increase_ci"]),
            "refused": m["refused"],
            "unparsed": m["unparsed"],
            "self": ", ".join(m.get("scored_by_itself") or []),
        }
        for m in sec["models"]
    ]
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
                "stop": c["stop"],
                "steps": steps,
            }
        )
    return {
        "categories": cats,
        "heat": heat,
        "models": models,
        "chains": chains,
        "weaknesses": sec.get("weaknesses", [])[:20],
        "taxonomy": sec.get("taxonomy", []),
        "decisions": sec.get("taxonomy_decisions", []),
        "version": sec.get("taxonomy_version", ""),
        "threshold": f"{sec.get('failure_threshold', 4.0):g}",
        "repeats": sec.get("repeats"),
        "agreement": sec.get("scorer_agreement", []),
        "simulated": sec.get("simulated"),
        "pending": sec.get("pending", 0),
    }
