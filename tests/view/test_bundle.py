"""``memearena view DIR --bundle OUT``: the viewer's pages as a static site. Every page of a
small Arena run is written with links that resolve to files of the bundle; file names stay
inside it whatever a URL holds; a bounded bundle sends links past its bound to a notice; and in
Chromium, from ``file://``, a leaderboard row drills down to the exact request a judge was sent
with every image shown and nothing logged as an error."""

from __future__ import annotations

import io
import posixpath
import re
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from typer.testing import CliRunner

from memearena.view import ViewError
from memearena.view.bundle import LEFT_OUT, MARKER, bundle_path, url_key, write_bundle

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
try:
    from playwright.sync_api import Page, sync_playwright
except ImportError:  # pragma: no cover - the test extra installs it
    sync_playwright = None  # type: ignore[assignment]

browser_only = [
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt install chromium)"),
    pytest.mark.skipif(
        sync_playwright is None, reason="playwright is not installed (pip install -e '.[test]')"
    ),
]
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
_LINK = re.compile(r"""\s(href|src|action)=["']([^"']*)["']""")


def _small_arena(run: Path) -> Path:
    from rich.console import Console

    from memearena.config import DatasetConfig
    from memearena.demo import demo_config
    from memearena.engine.lifecycle import run_method

    cfg = demo_config(bootstrap=50)
    assert cfg.arena is not None
    arena = cfg.arena.model_copy(
        update={
            "targets": cfg.arena.targets[:3],
            "judges": cfg.arena.judges[:2],
            "contexts": 1,
            "fusion_rounds": 2,
            "criteria": cfg.arena.criteria[:1],
        }
    )
    cfg = cfg.model_copy(update={"arena": arena, "data": [DatasetConfig(format="demo", limit=3)]})
    console = Console(file=io.StringIO())
    # In a thread of its own: a browser test's event loop may be running in this one.
    with ThreadPoolExecutor(1) as ex:
        ex.submit(run_method, "arena", cfg, run, console=console, show_progress=False).result()
    return run


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An Arena run of 3 memes, 3 targets and 2 judges (a few dozen calls)."""
    return _small_arena(tmp_path_factory.mktemp("bundle-run") / "arena")


@pytest.fixture(scope="module")
def bundle(small_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "site"
    summary = write_bundle(small_run, out)
    assert summary.failed == () and summary.left_out == 0
    assert summary.pages > 30 and summary.files >= 2  # the stylesheet and the meme images
    return out


def _links(html_file: Path) -> list[tuple[str, str]]:
    return _LINK.findall(html_file.read_text(encoding="utf-8"))


def test_url_names_are_deterministic_and_stay_inside_the_bundle() -> None:
    assert bundle_path("/", "text/html") == "index.html"
    assert bundle_path("/r/0/", "text/html") == "r/0/index.html"
    assert bundle_path("/r/0/arena", "text/html") == "r/0/arena.html"
    assert bundle_path("/static/view.css", "text/css") == "static/view.css"
    assert bundle_path("/r/0/call/7/reply", "text/plain") == "r/0/call/7/reply.txt"
    a = url_key("/r/0/battles?model=m&judge=j")
    assert a == url_key("/r/0/battles?judge=j&model=m")  # one page, one file
    assert bundle_path(a, "text/html") != bundle_path(url_key("/r/0/battles?model=n"), "text/html")
    hostile = [
        "/r/0/battles?model=../../../../etc/passwd",
        "/r/0/battles?model=%2F..%2F..%2Fx",
        "/r/0/%2E%2E/%2E%2E/escape",
        "/../../escape",
        "/r/0/battles?model=" + "<script>" * 50,
        "/r/0/x%00y/%0Aname",
    ]
    for key in hostile:
        path = bundle_path(url_key(key), "text/html")
        assert path == bundle_path(url_key(key), "text/html")
        parts = path.split("/")
        assert ".." not in parts and "." not in parts and "" not in parts, path
        assert re.fullmatch(r"[A-Za-z0-9_./-]+", path), path
        assert all(len(p) <= 140 for p in parts), path


def test_every_link_of_the_bundle_resolves_to_one_of_its_files(bundle: Path) -> None:
    pages = sorted(bundle.rglob("*.html"))
    assert (bundle / "index.html").is_file() and (bundle / MARKER).is_file()
    run = bundle / "r" / "0"
    assert (run / "arena.html").is_file() and (run / "battles.html").is_file()
    for pattern in ("battle__coord_*.html", "meme__id_*.html", "call/*.html", "image/*.png"):
        assert list(run.glob(pattern)), pattern
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "<script" not in text.lower(), page
        assert 'http-equiv="Content-Security-Policy"' in text or page.name == LEFT_OUT, page
        for attr, raw in _links(page):
            assert attr != "action", (page, raw)  # a form never points at the server
            if raw.startswith(("#", "data:")):
                continue
            assert not raw.startswith(("/", "http:", "https:")), (page, raw)
            target = urlsplit(raw).path
            resolved = (page.parent / unquote(target)).resolve()
            assert resolved.is_file(), (page, raw)
            assert bundle.resolve() in resolved.parents
            assert resolved.name != LEFT_OUT, (page, raw)  # an unbounded bundle has every page


def test_forms_that_need_the_server_are_kept_disabled(bundle: Path) -> None:
    text = (bundle / "r" / "0" / "memes.html").read_text(encoding="utf-8")
    assert text.count("<form") == text.count('<fieldset class="bundle-off" disabled') >= 1


def test_a_bounded_bundle_sends_links_past_its_bound_to_a_notice(
    small_run: Path, tmp_path: Path
) -> None:
    summary = write_bundle(small_run, tmp_path / "site", max_pages=30)
    files = [p for p in (tmp_path / "site").rglob("*") if p.is_file()]
    assert summary.pages <= 30 and summary.left_out > 0
    assert len(files) == summary.pages + summary.files + 2  # the notice and the marker
    notice = tmp_path / "site" / LEFT_OUT
    assert "not in this bundle" in notice.read_text(encoding="utf-8").lower()
    pages = [p for p in files if p.suffix == ".html" and p.name != LEFT_OUT]
    linked = [(p, attr, raw) for p in pages for attr, raw in _links(p)]
    assert any(posixpath.basename(raw) == LEFT_OUT for _, attr, raw in linked if attr == "href")
    shown = [(p, raw) for p, attr, raw in linked if attr == "src"]
    assert shown  # a bundled page's images come with it, past the bound too
    for page, raw in shown:
        target = (page.parent / unquote(raw)).resolve()
        assert target.is_file() and target.name != LEFT_OUT, (page, raw)


def test_a_folder_that_is_not_a_bundle_is_never_replaced(small_run: Path, tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ViewError, match="not a memearena bundle"):
        write_bundle(small_run, taken, max_pages=3)
    assert (taken / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]  # no half-written bundle left
    again = tmp_path / "again"
    write_bundle(small_run, again, max_pages=3)
    write_bundle(small_run, again, max_pages=5)  # an earlier bundle is replaced whole
    assert (again / MARKER).is_file()


def test_the_view_command_writes_a_bundle(small_run: Path, tmp_path: Path) -> None:
    from memearena.cli.main import app

    out = tmp_path / "site"
    result = CliRunner().invoke(
        app, ["view", str(small_run), "--bundle", str(out), "--max-pages", "5"]
    )
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "MiB" in result.output and (out / "index.html").is_file()
    elsewhere = tmp_path / "deeper" / "site"
    refused = CliRunner().invoke(app, ["view", str(tmp_path / "none"), "--bundle", str(elsewhere)])
    assert refused.exit_code == 2 and "no such directory" in refused.output
    assert "Traceback" not in refused.output and not (tmp_path / "deeper").exists()


# ---- in Chromium, from file:// ------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    assert sync_playwright is not None
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _broken_images(page: Page) -> list[str]:
    return list(
        page.eval_on_selector_all(
            "img", "els => els.filter(e => !(e.complete && e.naturalWidth)).map(e => e.src)"
        )
    )


@pytest.mark.parametrize("_", [pytest.param(None, marks=browser_only)])
def test_the_bundle_opens_from_disk_and_drills_down_to_the_judges_request(
    _: None, browser: Any, bundle: Path
) -> None:
    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
    page = ctx.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("requestfailed", lambda r: problems.append(f"failed: {r.url}"))
    visited: list[str] = []

    def arrived() -> None:
        page.wait_for_load_state()
        assert page.url.startswith("file://"), page.url
        visited.append(page.url)
        assert _broken_images(page) == [], page.url

    page.goto((bundle / "index.html").as_uri())
    arrived()
    page.locator("table#runs a").first.click()
    arrived()
    page.locator("nav a", has_text="Arena").click()
    arrived()
    row = page.locator("#board-1 a.model").first
    model = row.inner_text()
    row.click()
    arrived()
    assert "/battles__" in page.url
    sides = page.locator("table#pairs tr.pair td:nth-child(3)").all_inner_texts()
    assert sides and all(model in s.split("\n") for s in sides)
    page.locator("a.battle-link").first.click()
    arrived()
    assert "verdicts" in page.locator("#raw-forward").inner_text()
    assert model in page.locator("#battle-facts").inner_text()
    page.get_by_text("the exact request the judge was sent").first.click()
    arrived()
    assert "/call/" in page.url
    assert "arena.judge" in page.locator("#call-facts").inner_text()
    assert "meme_text" in page.locator("#request").inner_text()
    assert page.eval_on_selector("#request img", "e => e.naturalWidth") > 0
    page.locator("a.brand").click()  # back to the front page, by the bundle's own link
    arrived()
    assert page.url == (bundle / "index.html").as_uri()
    page.goto((bundle / "r" / "0" / "memes.html").as_uri())
    arrived()
    assert page.locator("form.filters button").first.is_disabled()
    assert problems == [], problems
    assert len(visited) == 8
    ctx.close()
