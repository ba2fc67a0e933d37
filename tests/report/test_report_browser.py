"""The demo report in headless Chromium at 1400 and 800 px: judge and model names stay one line
high (wide tables scroll sideways instead of squeezing names), and the page itself never
scrolls sideways. Skips when Chromium is not installed (``.ci/run`` installs Debian's)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from memearena.report.html import render_report

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")

# Added to a test copy of the page only: the report itself carries no scripts.
MEASURE = """<script>
// The height of the name's own text (not of its cell, which a wrapping neighbour can grow).
const cells = [...document.querySelectorAll('#judges td.name, #overall td.name')].map(td => {
  const range = document.createRange();
  range.selectNodeContents(td);
  return {text: td.textContent, h: range.getBoundingClientRect().height,
          line: parseFloat(getComputedStyle(td).lineHeight),
          visible: td.getClientRects().length > 0, table: td.closest('section').id};
});
const pre = document.createElement('pre');
pre.id = 'measure';
pre.textContent = JSON.stringify({width: window.innerWidth,
  page: document.documentElement.scrollWidth, cells: cells});
document.body.appendChild(pre);
</script>"""


@pytest.fixture(scope="module")
def demo_board(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real demo run (every demo model and judge; two memes to stay quick)."""
    import memearena

    cfg = memearena.demo_config(bootstrap=20)
    cfg = cfg.model_copy(update={"data": [cfg.data[0].model_copy(update={"limit": 2})]})
    run = tmp_path_factory.mktemp("demo") / "run"
    result = memearena.run_arena(cfg, run, show_progress=False)
    assert result.leaderboard["arena"]["judges"]
    return result.leaderboard


def _measure(tmp_path: Path, html: str, width: int) -> dict[str, Any]:
    page = tmp_path / f"report-{width}.html"
    page.write_text(html.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
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
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)
    m = re.search(r'<pre id="measure">(.*?)</pre>', out.stdout, re.DOTALL)
    assert m, f"chromium gave no measurement (exit {out.returncode}): {out.stderr[-500:]}"
    return json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def _check_one_line(m: dict[str, Any], width: int, names: set[str]) -> None:
    assert m["width"] == width
    judge_cells = [c for c in m["cells"] if c["table"] == "judges"]
    assert {c["text"] for c in judge_cells} >= names
    visible = [c for c in m["cells"] if c["visible"]]
    assert len(visible) >= len(names)
    for c in visible:
        assert 0 < c["h"] < 1.5 * c["line"], f"{c['text']!r} wraps at {width}px: {c}"
    assert m["page"] <= width, "the page scrolls sideways: a table escaped its scroll box"


@pytest.mark.parametrize("width", [1400, 800])
def test_demo_report_keeps_judge_names_on_one_line(
    tmp_path: Path, demo_board: dict[str, Any], width: int
) -> None:
    judges = {j["judge"] for j in demo_board["arena"]["judges"]}
    m = _measure(tmp_path, render_report(demo_board, title="memearena demo"), width)
    _check_one_line(m, width, judges)


@pytest.mark.parametrize("width", [1400, 800])
def test_long_names_scroll_instead_of_squeezing(
    tmp_path: Path, demo_board: dict[str, Any], width: int
) -> None:
    board = json.loads(json.dumps(demo_board))
    long = "Qwen/Qwen2.5-VL-72B-Instruct-AWQ served by vLLM on gpu-cluster-east-7 (replica 3)"
    board["arena"]["judges"][0]["judge"] = long
    board["arena"]["overall"][0]["model"] = long + " as a target"
    m = _measure(tmp_path, render_report(board), width)
    _check_one_line(m, width, {long})
