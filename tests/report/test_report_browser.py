"""The demo report in headless Chromium at 1400 and 800 px, for each method alone and all three
together: no Python repr on the page, no table column outside the viewport or its scroll box
(the verdict columns above all: Flags, Self-preference, Unparsed, Scored by itself, Cost), no
box that scrolls sideways, judge names one line high, and a banner on a capped Adapt or Judge
audit. Skips when Chromium is not installed (``.ci/run`` installs Debian's)."""

from __future__ import annotations

import copy
import html
import io
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from memearena.report.html import render_report

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")

WIDTHS = [1400, 800]

VERDICT_COLUMNS = {
    "judge-audit": ["Flags", "Unparsed"],
    "judges": ["Flags", "Self-preference (own − panel)"],
    "adapt": ["Unparsed", "Scored by itself"],
    "arena-usage": ["Cost (USD)"],
    "adapt-usage": ["Cost (USD)"],
    "judge-audit-usage": ["Cost (USD)"],
}
"""Section id -> columns that carry a verdict or the money: each must be on screen."""

REPR = re.compile(
    r"<built-in method|<bound method|<function |\bobject at 0x|dict_(items|keys|values)\(|"
    r"<generator object|Undefined\b"
)

# Added to a test copy of the page only: the report itself carries no scripts. Every <details>
# is opened first, so that what a reader can unfold is measured too.
MEASURE = """<script>
document.querySelectorAll('details').forEach(d => { d.open = true; });
const vw = document.documentElement.clientWidth;
function clip(el) {  // the right edge of what is visible of el without scrolling sideways
  let right = vw;
  for (let p = el.parentElement; p; p = p.parentElement) {
    if (getComputedStyle(p).overflowX !== 'visible') {
      right = Math.min(right, p.getBoundingClientRect().right);
    }
  }
  return right;
}
function column(cell) {  // a cell's column: its data-label, or its table's header text
  if (cell.tagName === 'TH') return cell.textContent.trim();
  if (cell.dataset.label) return cell.dataset.label;
  const head = cell.closest('table').querySelector('thead tr');
  const th = head && head.children[cell.cellIndex];
  return th ? th.textContent.trim() : '';
}
const cells = [...document.querySelectorAll('th, td')].map(c => {
  const r = c.getBoundingClientRect();
  return {col: column(c), section: (c.closest('section') || {}).id || '', tag: c.tagName,
          right: r.right, left: r.left, limit: clip(c), visible: r.width > 0 && r.height > 0};
});
const boxes = [...document.querySelectorAll('*')].filter(e => {
  const o = getComputedStyle(e).overflowX;
  return (o === 'auto' || o === 'scroll') && e.scrollWidth > e.clientWidth + 1;
}).map(e => ({section: (e.closest('section') || {}).id || '', tag: e.tagName,
              scroll: e.scrollWidth, client: e.clientWidth}));
const names = [...document.querySelectorAll('#judges td.name, #overall td.name')].map(td => {
  const range = document.createRange();
  range.selectNodeContents(td);
  return {text: td.textContent, h: range.getBoundingClientRect().height,
          line: parseFloat(getComputedStyle(td).lineHeight),
          visible: td.getClientRects().length > 0, table: td.closest('section').id};
});
const banners = [...document.querySelectorAll('.banner.failed')].map(b => ({
  id: b.id, text: b.innerText, visible: b.getBoundingClientRect().height > 0}));
const pre = document.createElement('pre');
pre.id = 'measure';
pre.textContent = JSON.stringify({width: window.innerWidth, client: vw,
  page: document.documentElement.scrollWidth,
  cells: cells, boxes: boxes, names: names, banners: banners, text: document.body.innerText});
document.body.appendChild(pre);
</script>"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The documents of a real demo run: all three methods together, and each one alone (the
    Adapt null-world run is a standalone Adapt run; the audit's section alone a standalone
    Judge audit)."""
    from memearena.demo import run_demo

    run = tmp_path_factory.mktemp("demo") / "run"
    run_demo(run, console=Console(file=io.StringIO()), show_progress=False)
    board = json.loads((run / "leaderboard.json").read_text(encoding="utf-8"))
    assert {"arena", "adapt", "judge_audit"} <= set(board)
    adapt = json.loads((run / "adapt-null-world" / "leaderboard.json").read_text("utf-8"))
    return {
        "all": board,
        "arena": {k: v for k, v in board.items() if k not in ("adapt", "judge_audit")},
        "adapt": adapt,
        "judge_audit": {"judge_audit": board["judge_audit"], "run": board["run"]},
    }


CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'"


def _chromium(tmp_path: Path, page_html: str, width: int) -> str:
    """The DOM of ``page_html`` after Chromium loaded it at ``width`` px."""
    page = tmp_path / f"report-{width}.html"
    page.write_text(page_html, encoding="utf-8")
    cmd = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / f'profile-{width}'}",
        f"--window-size={width},900",
        "--dump-dom",
        page.as_uri(),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert out.stdout, f"chromium gave no page (exit {out.returncode}): {out.stderr[-500:]}"
    return out.stdout


def _measure(tmp_path: Path, page_html: str, width: int) -> dict[str, Any]:
    # The report's policy forbids every script; the test copy lets the measuring one run.
    assert CSP in page_html
    page_html = page_html.replace(CSP, CSP + "; script-src 'unsafe-inline'")
    dom = _chromium(tmp_path, page_html.replace("</body>", MEASURE + "</body>"), width)
    m = re.search(r'<pre id="measure">(.*?)</pre>', dom, re.DOTALL)
    assert m, "the measuring script did not run"
    measured: dict[str, Any] = json.loads(html.unescape(m.group(1)))
    assert measured["width"] == width
    return measured


def _assert_fits(m: dict[str, Any], width: int) -> None:
    """Every visible cell ends inside the viewport and inside every box that clips it, and no
    box scrolls sideways: nothing of any table is off screen."""
    off = [
        (c["section"], c["col"], round(c["right"]))
        for c in m["cells"]
        if c["visible"] and c["right"] > c["limit"] + 1
    ]
    assert not off, f"{len(off)} cells off screen at {width}px, e.g. {off[:8]}"
    assert not m["boxes"], f"{len(m['boxes'])} boxes scroll sideways at {width}px: {m['boxes'][:5]}"
    assert m["page"] <= m["client"], "the page scrolls sideways"


def _assert_verdicts_in_view(m: dict[str, Any], sections: set[str]) -> None:
    for section, columns in VERDICT_COLUMNS.items():
        if section not in sections:
            continue
        for col in columns:
            shown = [
                c
                for c in m["cells"]
                if c["section"] == section and c["col"] == col and c["visible"]
            ]
            assert shown, f"no visible {col!r} cell in #{section}"
            assert all(c["left"] >= 0 and c["right"] <= c["limit"] + 1 for c in shown), (
                section,
                col,
            )


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("method", ["all", "arena", "adapt", "judge_audit"])
def test_every_table_fits_and_no_repr_shows(
    tmp_path: Path, demo: dict[str, dict[str, Any]], method: str, width: int
) -> None:
    m = _measure(tmp_path, render_report(demo[method], title="memearena demo"), width)
    assert not REPR.search(m["text"]), REPR.search(m["text"])
    _assert_fits(m, width)
    sections = {c["section"] for c in m["cells"]}
    expected = {
        "all": {"judges", "adapt", "judge-audit", "arena-usage", "adapt-usage"},
        "arena": {"judges", "arena-usage"},
        "adapt": {"adapt", "adapt-usage"},
        "judge_audit": {"judge-audit", "judge-audit-usage"},
    }[method]
    assert expected <= sections, sections
    _assert_verdicts_in_view(m, sections)


@pytest.mark.parametrize("width", WIDTHS)
def test_a_standalone_method_report_has_run_facts_usage_and_errors(
    tmp_path: Path, demo: dict[str, dict[str, Any]], width: int
) -> None:
    for method, anchor in (("adapt", "adapt"), ("judge_audit", "judge-audit")):
        doc = demo[method]
        # The run's facts: the document's (the run lifecycle writes them for every method).
        facts = doc.get("run") or doc[method]["run"]
        m = _measure(tmp_path, render_report(doc), width)
        sections = {c["section"] for c in m["cells"]}
        assert {"run", f"{anchor}-usage"} <= sections, (method, sections)
        assert facts["config_sha256"] and facts["config_sha256"] in m["text"]
        assert f"Errors — {'Adapt' if method == 'adapt' else 'Judge audit'}" in m["text"]


@pytest.mark.parametrize("width", WIDTHS)
def test_demo_judge_names_stay_on_one_line(
    tmp_path: Path, demo: dict[str, dict[str, Any]], width: int
) -> None:
    board = demo["all"]
    judges = {j["judge"] for j in board["arena"]["judges"]}
    m = _measure(tmp_path, render_report(board), width)
    assert {c["text"] for c in m["names"] if c["table"] == "judges"} >= judges
    visible = [c for c in m["names"] if c["visible"]]
    assert len(visible) >= len(judges)
    for c in visible:
        assert 0 < c["h"] < 1.5 * c["line"], f"{c['text']!r} wraps at {width}px: {c}"


@pytest.mark.parametrize("width", WIDTHS)
def test_long_names_wrap_and_push_no_column_out_of_view(
    tmp_path: Path, demo: dict[str, dict[str, Any]], width: int
) -> None:
    board = copy.deepcopy(demo["all"])
    long = "Qwen/Qwen2.5-VL-72B-Instruct-AWQ served by vLLM on gpu-cluster-east-7 (replica 3)"
    unbroken = "x" * 140  # no break opportunity at all
    board["arena"]["judges"][0]["judge"] = long
    board["arena"]["judges"][1]["judge"] = unbroken
    board["arena"]["overall"][0]["model"] = long + " as a target"
    board["judge_audit"]["leaderboard"][0]["judge"] = unbroken
    board["adapt"]["models"][0]["model"] = long
    usage = board["arena"]["usage"]
    usage[unbroken] = usage.pop(next(iter(usage)))
    m = _measure(tmp_path, render_report(board), width)
    _assert_fits(m, width)
    _assert_verdicts_in_view(m, {c["section"] for c in m["cells"]})
    assert {long, unbroken} <= {c["text"] for c in m["names"]}


CAPPED = {
    "complete": False,
    "state": "capped",
    "problems": ["spend cap reached (--max-cost $0.5000): re-run with a higher --max-cost"],
    "spent_usd": 0.5,
    "spent_upper_bound_usd": 0.52,
    "max_cost": 0.5,
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("where", ["section", "document"])
@pytest.mark.parametrize("method", ["adapt", "judge_audit"])
def test_a_capped_adapt_or_judge_audit_run_shows_a_banner(
    tmp_path: Path, demo: dict[str, dict[str, Any]], method: str, where: str, width: int
) -> None:
    # The status a capped run writes: in its own section, or as the document's "status" (the
    # latest run's, as the run lifecycle writes it for every method).
    doc = copy.deepcopy(demo[method])
    target = doc[method] if where == "section" else doc
    status = dict(CAPPED)
    if where == "document":
        del status["state"]  # engine.status.RunStatus.as_json: the problem line says "cap"
    target["status"] = status
    m = _measure(tmp_path, render_report(doc), width)
    anchor = method.replace("_", "-") + "-incomplete" if where == "section" else "run-failed"
    (banner,) = [b for b in m["banners"] if b["id"] == anchor]
    assert banner["visible"]
    title = {"adapt": "Adapt", "judge_audit": "Judge audit"}[method]
    what = title if where == "section" else "This run"
    assert f"{what} is CAPPED — the results below are partial" in banner["text"]
    assert "spend cap reached" in banner["text"] and "cap $0.5000" in banner["text"]
    _assert_fits(m, width)
    # A complete status shows none.
    target["status"] = {**CAPPED, "complete": True, "state": "complete"}
    again = _measure(tmp_path, render_report(doc), width)
    assert not again["banners"]


def test_the_page_policy_runs_no_script_even_one_slipped_into_the_page(
    tmp_path: Path, demo: dict[str, dict[str, Any]]
) -> None:
    page = render_report(demo["judge_audit"])
    probe = "<script>document.body.setAttribute('data-ran', 'yes')</script>"
    dom = _chromium(tmp_path, page.replace("</body>", probe + "</body>"), 800)
    assert "<footer" in dom and 'data-ran="yes"' not in dom
    # The positive control: the same probe runs once the policy allows inline scripts.
    allowed = page.replace(CSP, CSP + "; script-src 'unsafe-inline'")
    dom = _chromium(tmp_path, allowed.replace("</body>", probe + "</body>"), 800)
    assert 'data-ran="yes"' in dom
