"""``memearena view`` driven in Debian's headless Chromium (Playwright, the system browser; no
browser download): each page renders without a console error or a blocked load; a drill-down
goes from a leaderboard row to one battle's raw verdicts and to the exact request the judge was
sent; search and a filter narrow the lists; memes, answers and model names holding markup and
script execute nothing: a loopback beacon stays silent while a positive-control page fires it.

Skips when Chromium or Playwright is missing (``.ci/run`` installs both)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

import pytest

from .conftest import PAGES, PAYLOADS, make_hostile

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
try:
    from playwright.sync_api import Page, sync_playwright
except ImportError:  # pragma: no cover - the test extra installs it
    sync_playwright = None  # type: ignore[assignment]

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt install chromium)"),
    pytest.mark.skipif(
        sync_playwright is None, reason="playwright is not installed (pip install -e '.[test]')"
    ),
]

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(root: Path) -> Iterator[str]:
    """``memearena view ROOT`` in its own process (this tree's code); yields its base URL."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "memearena", "view", str(root), "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/", timeout=5).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out = proc.stdout.read().decode() if proc.stdout else ""
                    raise RuntimeError(f"memearena view did not start: {out[-1000:]}") from None
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


class Beacon:
    """A loopback HTTP server that records every request; ``/control.html`` is the positive
    control: the payloads unescaped, with no CSP."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        beacon = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/control.html":
                    body = "<!doctype html><body>" + "".join(
                        p.replace("__BEACON__", beacon.url) for p in PAYLOADS
                    )
                    data = body.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                else:
                    beacon.hits.append(self.path)
                    data = b"ok"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def beacon() -> Iterator[Beacon]:
    b = Beacon()
    yield b
    b.close()


@pytest.fixture(scope="module")
def demo_view(demo_run: Path) -> Iterator[str]:
    yield from _serve(demo_run)


@pytest.fixture(scope="module")
def hostile_view(
    demo_run: Path, beacon: Beacon, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    run = make_hostile(demo_run, tmp_path_factory.mktemp("hostile") / "run", beacon.url)
    yield from _serve(run)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    assert sync_playwright is not None
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = ctx.new_page()
    pg.problems = []  # type: ignore[attr-defined]
    pg.on(
        "console",
        lambda m: pg.problems.append(m.text) if m.type == "error" else None,  # type: ignore[attr-defined]
    )
    pg.on("pageerror", lambda e: pg.problems.append(str(e)))  # type: ignore[attr-defined]
    yield pg
    ctx.close()


def test_each_page_renders(page: Page, demo_view: str) -> None:
    for url in PAGES:
        resp = page.goto(demo_view + url)
        assert resp is not None and resp.ok, url
        assert page.locator("h1").first.inner_text().strip(), url
        imgs = page.eval_on_selector_all(
            "img", "els => els.map(e => [e.getAttribute('src'), e.complete && e.naturalWidth])"
        )
        assert all(width for _, width in imgs), (url, imgs)  # every image shown is on disk
    assert page.problems == []  # type: ignore[attr-defined]


def test_drill_down_from_a_leaderboard_row_to_the_judges_request(
    page: Page, demo_view: str
) -> None:
    page.goto(demo_view + "/r/0/arena")
    row = page.locator("#board-1 a.model").first
    model = row.inner_text()
    row.click()
    page.wait_for_url("**/battles?**")
    sides = page.locator("table#pairs tr.pair td:nth-child(3)").all_inner_texts()
    assert sides and all(model in s.split("\n") for s in sides)
    page.locator("a.battle-link").first.click()
    page.wait_for_url("**/battle?**")
    assert "verdicts" in page.locator("#raw-forward").inner_text()
    assert "verdicts" in page.locator("#raw-backward").inner_text()
    assert model in page.locator("#battle-facts").inner_text()
    page.get_by_text("the exact request the judge was sent").first.click()
    page.wait_for_url("**/call/*")
    facts = page.locator("#call-facts").inner_text()
    assert "arena.judge" in facts
    request = page.locator("#request").inner_text()
    assert "meme_text" in request and "[Background Knowledge]" in request
    shown = page.eval_on_selector("#request img", "e => e.naturalWidth")
    assert shown > 0  # the meme image, found by its content hash
    assert page.problems == []  # type: ignore[attr-defined]


def test_search_and_a_filter_narrow_the_lists(page: Page, demo_view: str) -> None:
    page.goto(demo_view + "/r/0/memes")
    every = page.locator("table#memes a.meme-link").count()
    page.locator("form.filters input[name=q]").fill("vellmarian")
    page.locator("form.filters button").click()
    page.wait_for_url("**q=vellmarian**")
    texts = page.locator("table#memes td.text").all_inner_texts()
    assert 0 < len(texts) < every
    assert all("vellmarian" in t.lower() for t in texts)

    page.goto(demo_view + "/r/0/battles")
    judges = set(page.locator("table#pairs tr.pair td:nth-child(4)").all_inner_texts())
    assert len(judges) > 1
    page.locator("select[name=judge]").select_option("sim-judge-grove")
    page.locator("form.filters button").click()
    page.wait_for_url("**judge=sim-judge-grove**")
    narrowed = page.locator("table#pairs tr.pair td:nth-child(4)").all_inner_texts()
    assert narrowed and set(narrowed) == {"sim-judge-grove"}


HOSTILE_PAGES = (
    "/",
    "/r/0/",
    "/r/0/arena",
    "/r/0/memes?q=HOSTILE",
    "/r/0/meme?id=demo:m01",
    "/r/0/battles",
    "/r/0/calls",
)


def test_hostile_strings_execute_nothing(page: Page, hostile_view: str, beacon: Beacon) -> None:
    # Positive control: the same payloads, unescaped and without a CSP, fire the beacon.
    page.goto(beacon.url + "/control.html")
    page.wait_for_timeout(1000)
    assert beacon.hits, "the positive control did not fire: the beacon cannot be trusted"
    beacon.hits.clear()

    for url in HOSTILE_PAGES:
        resp = page.goto(hostile_view + url)
        assert resp is not None and resp.ok, url
    text = page.locator("body").inner_text()
    page.goto(hostile_view + "/r/0/meme?id=demo:m01")
    text += page.locator("body").inner_text()
    for link in page.locator("a").all()[:40]:  # follow links holding hostile names
        href = link.get_attribute("href") or ""
        assert not href.lower().startswith("javascript:")
    page.goto(hostile_view + "/r/0/arena")
    page.locator("#board-1 a.model").first.click()
    page.wait_for_load_state()
    page.wait_for_timeout(1000)
    assert beacon.hits == []
    assert page.evaluate("document.querySelectorAll('script').length") == 0
    for p in PAYLOADS:  # shown as text
        assert p.replace("__BEACON__", beacon.url) in text


# ---- a crawl of whole runs: what every page shows is on record and in words ---------------

_REPR = re.compile(r"\b(None|False|True|nan)\b|\{'|\['|\('|<[a-z_]+ object at 0x")
"""A Python value printed into prose (pre blocks hold raw replies and JSON, and are left out)."""

PER_KIND = 1
"""Pages crawled per kind of page (path and query names): every kind, the first one linked (a
deterministic sample; ``bench/view_crawl.py`` follows every page). Call pages are sampled per
role apart (``_call_per_role``): what a call page shows (its images above all) depends on its
role."""


def _kind(url: str) -> str:
    """A page's kind: its path with the ids after the run's number as ``N``, and the names of
    its query parameters (``/r/0/adapt/chain/N?``)."""
    p = urlparse(url)
    parts = p.path.split("/")
    parts[4:] = ["N" if x.isdigit() else x for x in parts[4:]]
    return "/".join(parts) + "?" + ",".join(sorted(parse_qs(p.query)))


def _call_per_role(base: str, start: str) -> dict[str, str]:
    """The first call page of each role of the run (from the call list filtered by role,
    read over HTTP: the lists themselves are not what this crawl looks at)."""
    with urllib.request.urlopen(base + start + "calls", timeout=60) as r:
        listing = r.read().decode()
    select = re.search(r'<select name="role">(.*?)</select>', listing, re.S)
    roles = re.findall(r'<option value="([^"]+)"', select.group(1) if select else "")
    out: dict[str, str] = {}
    for role in roles:
        url = f"{base}{start}calls?{urlencode({'role': role})}"
        with urllib.request.urlopen(url, timeout=60) as r:
            first = re.search(r'href="(/r/\d+/call/\d+)"', r.read().decode())
        if first is not None:
            out[role] = first.group(1)
    return out


def _crawl(page: Page, base: str, start: str) -> dict[str, Any]:
    """Follow every same-origin link from ``start`` (at most ``PER_KIND`` pages of a kind),
    and the first call page of each role; per page: its status, images not shown, Python
    values in its prose, chain steps without their image or answer."""
    seen: set[str] = set()
    roles = _call_per_role(base, start)
    queue = [start, *roles.values()]
    per: dict[str, int] = {f"call of {role}": 1 for role in roles}
    found: dict[str, list[Any]] = {"status": [], "images": [], "reprs": [], "steps": []}
    while queue:
        url = queue.pop(0)
        if url in seen:
            continue
        seen.add(url)
        resp = page.goto(base + url)
        if resp is None or not resp.ok:
            found["status"].append((url, resp.status if resp else None))
            continue
        broken = page.eval_on_selector_all(
            "img", "els => els.filter(e => !(e.complete && e.naturalWidth)).map(e => e.src)"
        )
        found["images"] += [(url, b) for b in broken]
        prose = page.evaluate(
            "() => { const b = document.body.cloneNode(true);"
            " b.querySelectorAll('pre').forEach(e => e.remove()); return b.innerText; }"
        )
        found["reprs"] += [
            (url, prose[max(0, m.start() - 40) : m.end() + 40]) for m in _REPR.finditer(prose)
        ]
        if "/adapt/chain/" in url:
            for step in page.locator("section.step").all():
                has_rewrite = step.locator("figure.shown").count() > 0
                shown = step.locator("img").evaluate_all("els => els.map(e => e.naturalWidth)")
                answer = step.locator("td.answer").inner_text()
                if not shown or not all(shown) or (has_rewrite and len(shown) < 2):
                    found["steps"].append((url, "image", step.get_attribute("id")))
                if has_rewrite and ("no answer on record" in answer or not answer.strip()):
                    found["steps"].append((url, "answer", step.get_attribute("id")))
        for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"):
            if not href.startswith(base):
                continue
            rel = href[len(base) :].split("#")[0]
            if not rel.startswith("/r/") or rel in seen:
                continue
            kind = _kind(rel)
            if per.get(kind, 0) < PER_KIND:
                per[kind] = per.get(kind, 0) + 1
                queue.append(rel)
    found["pages"] = len(seen)
    found["kinds"] = sorted(per)
    found["roles"] = sorted(roles)
    return found


def _run_number(base: str, label: str) -> str:
    """The viewer's path of a run listed on its front page under ``label``."""
    with urllib.request.urlopen(base + "/", timeout=30) as r:
        front = r.read().decode()
    for n, name in re.findall(r'href="/r/(\d+)/">([^<]+)</a>', front):
        if name.strip() == label:
            return f"/r/{n}/"
    raise AssertionError(f"run {label!r} not listed: {front[:500]}")


@pytest.fixture(scope="module")
def audit_view(judge_audit_run: Path) -> Iterator[str]:
    yield from _serve(judge_audit_run)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("which", ["demo", "adapt-null-world", "judge-audit"])
def test_a_crawl_finds_every_image_on_record_and_no_python_value_in_prose(
    page: Page, demo_view: str, audit_view: str, which: str
) -> None:
    if which == "judge-audit":
        base, start = audit_view, "/r/0/"
    else:
        base = demo_view
        start = _run_number(base, which) if which != "demo" else "/r/0/"
    found = _crawl(page, base, start)
    print(which, found["pages"], "pages of", len(found["kinds"]), "kinds")
    kinds = " ".join(found["kinds"])
    roles = found["roles"]
    if which == "demo":
        assert "/battle?" in kinds and "/call/" in kinds and "/adapt/chain/" in kinds
        assert {"arena.judge", "adapt.answer", "adapt.score", "judge_audit.score"} <= set(roles)
        assert len(found["kinds"]) >= 50, found["kinds"]
    if which == "adapt-null-world":
        assert "/adapt/chain/" in kinds and "/call/" in kinds and "/arena" not in kinds
        assert {"adapt.answer", "adapt.score", "adapt.miner"} <= set(roles)
    if which == "judge-audit":
        assert "/judge-audit/pairs" in kinds and "/call/" in kinds and "/adapt" not in kinds
        assert "judge_audit.score" in roles
    assert found["status"] == []
    assert found["images"] == []
    assert found["reprs"] == []
    assert found["steps"] == []
    assert page.problems == []  # type: ignore[attr-defined]
