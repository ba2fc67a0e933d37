"""One source of every number: the console, the report, the viewer and the notebook API show the
demo's figures as its analysis computed them — Adapt's failure rule, failure rates, loop and
control (like with like) with their intervals; the Judge audit's ranking and trust; the Arena's
ranking and rating intervals. Each view writes a figure its own way (``4% [0%, 23%]`` in HTML,
``4 (0,23)`` on an 80-column console); each is checked against the section's values written
that way, and the rankings against the section's order."""

from __future__ import annotations

import asyncio
import html
import io
import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from rich.console import Console

from memearena.api import open_run
from memearena.methods.adapt.view import control_chain_min, fmt_interval, print_adapt_summary
from memearena.methods.arena.view import print_arena_summary
from memearena.methods.judge_audit.view import print_judge_audit_summary
from memearena.report.console import interval_text
from memearena.view import make_app


class _Tables(HTMLParser):
    """Every table row's cell texts, with the id of the enclosing table (or section)."""

    def __init__(self) -> None:
        super().__init__()
        self.where: list[str] = []
        self.rows: list[tuple[str, list[str]]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag in ("section", "table"):
            self.where.append(a.get("id") or (self.where[-1] if self.where else ""))
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("section", "table") and self.where:
            self.where.pop()
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append((self.where[-1] if self.where else "", self._row))
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _tables(html: str) -> list[tuple[str, list[str]]]:
    p = _Tables()
    p.feed(html)
    return p.rows


def _row(rows: list[tuple[str, list[str]]], where: str, name: str, *want: str) -> list[str]:
    """The first row under ``where`` naming ``name`` in a cell and holding every ``want``."""
    for w, cells in rows:
        if w == where and name in cells and all(any(x in c for c in cells) for x in want):
            return cells
    shown = [c for w, c in rows if w == where and name in c]
    raise AssertionError(f"no row of {where!r} for {name!r} shows {want}: {shown}")


def _order(rows: list[tuple[str, list[str]]], where: str, names: list[str]) -> list[str]:
    """``names`` in the order the first table under ``where`` lists them."""
    out: list[str] = []
    for w, cells in rows:
        if w == where:
            out += [c for c in cells if c in names and c not in out]
    return out


def _pct(v: float, ci: list[float]) -> str:
    """A proportion with its interval as the report and the viewer write it."""
    return f"{v:.0%} [{ci[0]:.0%}, {ci[1]:.0%}]"


def _est(e: dict[str, Any]) -> str:
    return f"{e['value']:.2f} [{e['ci_low']:.2f}, {e['ci_high']:.2f}]"


def _close(a: Any, b: Any) -> bool:
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)


def _console(fn: Any, *args: Any) -> list[str]:
    out = io.StringIO()
    fn(Console(file=out, width=300), *args)
    return out.getvalue().splitlines()


def _line(lines: list[str], name: str) -> str:
    """The first console table row of ``name`` (a row, not a prose line)."""
    for line in lines:
        cells = [c.strip() for c in line.replace("┃", "│").split("│")]
        if name in cells or line.startswith(name + " "):
            return line
    raise AssertionError(f"no console row for {name!r}")


@pytest.fixture(scope="module")
def views(demo_run: Path) -> dict[str, Any]:
    board = json.loads((demo_run / "leaderboard.json").read_text(encoding="utf-8"))

    async def pages() -> dict[str, str]:
        async with TestClient(TestServer(make_app(demo_run, warm=False))) as client:
            return {
                p: await (await client.get(f"/r/0/{p}")).text()
                for p in ("adapt", "judge-audit", "arena")
            }

    viewer = asyncio.run(pages())
    return {
        "board": board,
        "viewer": {k: _tables(v) for k, v in viewer.items()},
        "viewer_text": viewer,
        "report": _tables((demo_run / "report.html").read_text(encoding="utf-8")),
        "report_text": (demo_run / "report.html").read_text(encoding="utf-8"),
        "api": open_run(demo_run),
    }


def _api_figure(row: Any, name: str) -> tuple[float, float, float]:
    """A figure of an API row as (value, low, high), in either interval shape the API writes:
    ``name`` with ``name_ci`` [lo, hi], or ``name_value`` / ``name_ci_low`` / ``name_ci_high``."""
    if f"{name}_ci" in row:
        lo, hi = row[f"{name}_ci"]
        return row[name], lo, hi
    value = row[f"{name}_value"] if f"{name}_value" in row else row[name]
    return value, row[f"{name}_ci_low"], row[f"{name}_ci_high"]


def test_adapt_failure_rule_rates_and_controls_agree(views: dict[str, Any]) -> None:
    sec = views["board"]["adapt"]
    rule = f"score < {sec['failure_threshold']:g}"
    console = _console(print_adapt_summary, sec)
    assert any(f"failure = {rule}" in line for line in console)
    assert f"Failure = {rule.replace('<', '&lt;')}" in views["report_text"]
    assert f"Failure = {rule.replace('<', '&lt;')}" in views["viewer_text"]["adapt"]
    api = views["api"].adapt.models().set_index("model")
    for m in sec["models"]:
        name = m["model"]
        fr = _pct(m["failure_rate"], m["failure_rate_ci"])
        ctrl = control_chain_min(m)
        loop = _pct(m["refined_increase"], m["refined_increase_ci"])
        control = _pct(ctrl["increase"], ctrl["increase_ci"])
        # Report and viewer: the same strings, the loop's chain minimum beside the control's.
        _row(views["report"], "adapt-outcomes", name, fr)
        _row(views["viewer"]["adapt"], "adapt-models", name, fr)
        _row(views["report"], "adapt", name, loop, control)
        _row(views["viewer"]["adapt"], "adapt-control", name, loop, control)
        step = m["loop_vs_control"]["per_step"]
        same = [_pct(step[k]["increase"], step[k]["increase_ci"]) for k in ("loop", "control")]
        _row(views["report"], "adapt", name, *same)
        _row(views["viewer"]["adapt"], "adapt-same", name, *same)
        # Console: its compact form of the same values, in the main table's row.
        row = _line(console, name)
        for v, ci in (
            (m["failure_rate"], m["failure_rate_ci"]),
            (m["refined_increase"], m["refined_increase_ci"]),
            (ctrl["increase"], ctrl["increase_ci"]),
        ):
            assert fmt_interval(v, ci, 0, 100.0) in row, (name, row)
        # API: the very values.
        got = _api_figure(api.loc[name], "failure_rate")
        assert all(
            _close(a, b)
            for a, b in zip(got, (m["failure_rate"], *m["failure_rate_ci"]), strict=True)
        )
        got = _api_figure(api.loc[name], "refined_increase")
        assert _close(got[0], m["refined_increase"])
        q = api.loc[name]["loop_vs_control"]
        assert _close(q["per_chain_min"]["control"]["increase"], ctrl["increase"])


def _prose(page: str) -> str:
    """A page's text as a reader sees it: tags dropped, entities decoded, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def _num(v: float, ci: list[float]) -> str:
    """A mean with its interval as the report and the viewer write it."""
    return f"{v:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def test_adapt_original_image_figure_and_refusal_rate_agree(views: dict[str, Any]) -> None:
    sec = views["board"]["adapt"]
    console = " ".join(" ".join(_console(print_adapt_summary, sec)).split())
    originals = console[console.index(sec["images"]["original_image"]) :]
    refusals = console[console.index("refusal rate:") :]
    # Each view says which image its figures used and how refusals were counted.
    pages = (views["report_text"], views["viewer_text"]["adapt"])
    for text in (*(_prose(p) for p in pages), console):
        assert sec["images"]["scores"] in text
        assert sec["images"]["original_image"] in text
        assert sec["refusals_note"] in text
    for m in sec["models"]:
        name, o = m["model"], m["original_image"]
        assert o is not None and o["image"] == "original image"
        refusal = _pct(m["refusal_rate"], m["refusal_rate_ci"])
        _row(
            views["report"],
            "adapt-outcomes",
            name,
            _pct(m["failure_rate"], m["failure_rate_ci"]),
            refusal,
        )
        _row(views["viewer"]["adapt"], "adapt-models", name, refusal)
        own = (
            _num(o["avg_score"], o["avg_score_ci"]),
            _pct(o["failure_rate"], o["failure_rate_ci"]),
            _num(o["score_gap"], o["score_gap_ci"]),
        )
        _row(views["report"], "adapt-original", name, "original image", *own)
        _row(views["viewer"]["adapt"], "adapt-original", name, "original image", *own)
        # Console: the same values in its compact form, each model's on the one line.
        part = originals.split(f" {name} ", 1)[1].split(";", 1)[0]
        assert part.startswith(fmt_interval(o["avg_score"], o["avg_score_ci"], 1, 1.0)), part
        fr = fmt_interval(o["failure_rate"], o["failure_rate_ci"], 0, 100.0)
        assert f"failure {fr}%" in part
        assert f"gap {fmt_interval(o['score_gap'], o['score_gap_ci'], 1, 1.0)}" in part
        got = fmt_interval(m["refusal_rate"], m["refusal_rate_ci"], 0, 100.0)
        assert f"{name} {got}%" in refusals, refusals


def test_judge_audit_ranking_and_trust_agree(views: dict[str, Any]) -> None:
    sec = views["board"]["judge_audit"]
    by = sec.get("order_by", "trust")
    judges = [r["judge"] for r in sec["leaderboard"]]
    assert len(judges) > 3
    console = _console(print_judge_audit_summary, sec)
    result = views["api"].judge_audit
    api = result.leaderboard()
    figures = result.intervals()
    assert list(api["judge"]) == judges
    assert _order(views["viewer"]["judge-audit"], "evaluators", judges) == judges
    assert _order(views["report"], "judge-audit-leaderboard", judges) == judges
    # The report's first figure column is the one the section orders by.
    head = next(c for w, c in views["report"] if w == "judge-audit-leaderboard")
    assert head[2] == {"overall": "Overall", "trust": "Trust"}[by], head
    level = sec["flagging"]["family_wise_alpha"]
    assert f"family-wise error rate of {level:g} per judge" in views["report_text"]
    lines = [_line(console, j) for j in judges]
    assert sorted(lines, key=console.index) == lines  # the console lists them in that order
    for r, (_, a) in zip(sec["leaderboard"], api.iterrows(), strict=True):
        rank = str(r.get("rank_label", r["rank"]))
        ranked, trust = r[by], r["trust"]
        _row(views["viewer"]["judge-audit"], "evaluators", r["judge"], rank, _est(trust))
        _row(views["viewer"]["judge-audit"], "evaluators", r["judge"], _est(r["overall"]))
        _row(
            views["report"], "judge-audit-leaderboard", r["judge"], _est(trust), _est(r["overall"])
        )
        # Flags with their adjusted p-values, the same in the report and on the console.
        flag_line = next(x for x in console if x.startswith(f"flags of {r['judge']}:"))
        for f, p in (r.get("flag_p_adjusted") or {}).items():
            if f in r["flags"]:
                _row(
                    views["report"],
                    "judge-audit-leaderboard",
                    r["judge"],
                    f"{f} (adjusted p {p:.3g})",
                )
                assert f"{f} (p {p:.3g})" in flag_line, flag_line
        # P(prefer concise) just after P(padded), in the report as on the console.
        padded, concise = _est(r["p_prefer_padded"]), _est(r["p_prefer_concise"])
        cells = _row(views["report"], "judge-audit-classic", r["judge"], padded, concise)
        assert cells.index(concise) == cells.index(padded) + 1, cells
        line = _line(console, r["judge"])
        assert interval_text(ranked["value"], ranked["ci_low"], ranked["ci_high"]) in line
        assert rank in [c.strip() for c in line.split("│")]
        # API: the rank and the figure it is ranked by, in the one interval convention.
        assert a["rank"] == r["rank"] and a["figure"] == by
        got = (a["value"], a["ci_low"], a["ci_high"])
        want = (ranked["value"], ranked["ci_low"], ranked["ci_high"])
        assert all(_close(x, y) for x, y in zip(got, want, strict=True))
        t = figures[(figures["judge"] == r["judge"]) & (figures["figure"] == "trust")].iloc[0]
        got = (t["value"], t["ci_low"], t["ci_high"])
        want = (trust["value"], trust["ci_low"], trust["ci_high"])
        assert all(_close(x, y) for x, y in zip(got, want, strict=True))


def test_arena_ranking_and_intervals_agree(views: dict[str, Any]) -> None:
    board = views["board"]
    rows = board["arena"]["overall"]
    models = [r["model"] for r in rows]
    console = _console(print_arena_summary, board)
    api = views["api"].arena.leaderboard_df()
    assert list(api["model"]) == models
    assert _order(views["viewer"]["arena"], "board-1", models) == models
    assert _order(views["report"], "overall", models) == models
    for r, (_, a) in zip(rows, api.iterrows(), strict=True):
        _row(views["viewer"]["arena"], "board-1", r["model"], f"{r['ci_low']:,.0f} – ")
        _row(views["report"], "overall", r["model"], f"{r['ci_low']:.1f} – {r['ci_high']:.1f}")
        assert f"{r['ci_low']:.0f}–{r['ci_high']:.0f}" in _line(console, r["model"])
        assert a["rank"] == r["rank"]
        assert _close(a["ci_low"], r["ci_low"]) and _close(a["ci_high"], r["ci_high"])
