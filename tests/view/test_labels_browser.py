"""Labelling in ``memearena view --label`` driven in Debian's headless Chromium (Playwright,
the system browser): battles, a guideline and a rewrite labelled with the keyboard, the queue
resumed after a reload, the agreement page following the labels, a second annotator in a
second browser context labelling at the same time, and ``run.db`` unchanged throughout.

Skips when Chromium or Playwright is missing (``.ci/run`` installs both)."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from memearena.labels import LabelStore, queue_items
from memearena.view import make_app

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


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def run(demo_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the demo run (labels are written into it)."""
    dst = tmp_path_factory.mktemp("label-browser") / "demo"
    shutil.copytree(
        demo_run,
        dst,
        ignore=shutil.ignore_patterns("run.lock", "cache.sqlite", "adapt-null-world"),
    )
    return dst


@pytest.fixture(scope="module")
def served(run: Path) -> Iterator[tuple[str, str]]:
    """The viewer with its labelling pages (``make_app(..., label=True)``, what ``memearena
    view RUN --label`` serves) on a loopback port, in a thread of its own; yields its base URL
    and the hash of ``run.db`` taken before it started."""
    digest = _sha(run / "run.db")
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(make_app(run, label=True), access_log=None)
    ready = threading.Event()

    def serve() -> None:
        # Set up and run in this thread: Playwright's sync API holds the main thread's loop.
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", 0).start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(60), "the viewer did not start"
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}", digest
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    assert sync_playwright is not None
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _watch(pg: Page, problems: list[str]) -> Page:
    """``pg``, its console errors (a CSP violation among them) and uncaught errors noted."""
    pg.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: problems.append(str(e)))
    return pg


def _sign_in(pg: Page, base: str, name: str) -> None:
    pg.goto(base + "/label")
    pg.wait_for_url("**/r/0/label")
    pg.fill("#annotator-name", name)
    with pg.expect_navigation():
        pg.press("#annotator-name", "Enter")
    assert pg.locator("#annotator").inner_text() == name


def _keys(pg: Page, keys: str) -> str:
    """Type ``keys`` on the shown item, then Enter; the key of the item labelled."""
    key = pg.locator("#item").get_attribute("data-key") or ""
    for k in keys:
        pg.keyboard.press(k)
    with pg.expect_navigation():
        pg.keyboard.press("Enter")
    return key


def _mine(run: Path, annotator: str) -> dict[tuple[str, str], dict[str, str]]:
    with LabelStore(run, create=False) as store:
        return {
            (lb.queue, lb.item_key): lb.answer for lb in store.labels() if lb.annotator == annotator
        }


def test_keyboard_labelling_resumes_and_two_annotators_are_kept(
    browser: Any, served: tuple[str, str], run: Path
) -> None:
    base, digest = served
    battles = queue_items(run, "battles")
    guideline = queue_items(run, "guidelines")[0]
    fields = [f.name for f in battles[0].fields]
    problems: list[str] = []
    ctx_a = browser.new_context(viewport={"width": 1300, "height": 900})
    ctx_b = browser.new_context(viewport={"width": 1300, "height": 900})
    alice = _watch(ctx_a.new_page(), problems)
    bob = _watch(ctx_b.new_page(), problems)
    _sign_in(alice, base, "alice")
    _sign_in(bob, base, "bob")

    alice.goto(base + "/r/0/label/agreement")
    assert alice.locator("#no-figures").count() == 1

    alice.goto(base + "/r/0/label/battles")
    bob.goto(base + "/r/0/label/battles")
    first = battles[0]
    hidden = {first.hidden["A"], first.hidden["B"], *first.hidden["judges"]}
    shown = alice.content()
    assert not [name for name in hidden if name in shown]  # blind: no model or judge named
    # a picks A in the first question; j skips the second; t then k, b: B in the third.
    assert _keys(alice, "ajtkb") == first.key
    revealed = alice.locator("#revealed").text_content() or ""
    assert first.hidden["A"] in revealed and first.hidden["B"] in revealed
    # The second annotator, at the same time, on the same item, then the next.
    assert _keys(bob, "tttttt") == first.key
    assert _keys(alice, "jjjjja") == battles[1].key  # five j: the last question, overall
    assert _keys(bob, "b") == battles[1].key

    alice.goto(base + "/r/0/label/guidelines")
    assert _keys(alice, "12321") == guideline.key
    alice.goto(base + "/r/0/label/rewrites")
    rewrite = _keys(alice, "yn")

    # A fresh page of the queue resumes at the first item alice has not labelled.
    alice.close()
    alice = _watch(ctx_a.new_page(), problems)
    alice.goto(base + "/r/0/label/battles")
    assert alice.locator("#item").get_attribute("data-key") == battles[2].key
    assert alice.locator("#done").inner_text() == "2"
    alice.goto(base + "/r/0/label")
    assert alice.locator("#queue-battles td.done").inner_text() == "2"
    assert alice.locator("#queue-guidelines td.done").inner_text() == "1"

    alice.goto(base + "/r/0/label/agreement")
    assert alice.locator("#no-figures").count() == 0
    assert alice.locator("#summary-battles td.labels").inner_text() == "4"
    assert alice.locator("#figure-battles-kappa tbody tr").count() > 0
    assert alice.locator("#figure-guidelines-guideline_mean tbody tr").count() > 0

    assert _mine(run, "alice") == {
        ("battles", first.key): {fields[0]: "A", fields[2]: "B"},
        ("battles", battles[1].key): {"overall": "A"},
        ("guidelines", guideline.key): dict(
            zip([f.name for f in guideline.fields], "12321", strict=True)
        ),
        ("rewrites", rewrite): {"carries_misbelief": "yes", "still_harmful": "no"},
    }
    assert _mine(run, "bob") == {
        ("battles", first.key): dict.fromkeys(fields, "tie"),
        ("battles", battles[1].key): {fields[0]: "B"},
    }
    assert problems == []
    ctx_a.close()
    ctx_b.close()
    assert _sha(run / "run.db") == digest
