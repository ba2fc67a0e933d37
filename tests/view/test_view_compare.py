"""The viewer's comparison page: two of the viewer's runs, named by number only (no path
reaches it), compared as ``memearena compare`` does, every value escaped."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from memearena.view import find_runs, make_app


def _get_all(root: Path, urls: list[str]) -> list[tuple[int, str]]:
    async def go() -> list[tuple[int, str]]:
        async with TestClient(TestServer(make_app(root, warm=False))) as client:
            out = []
            for url in urls:
                resp = await client.get(url)
                out.append((resp.status, await resp.text()))
            return out

    return asyncio.run(go())


def test_the_compare_page_shows_two_runs_of_a_method(demo_run: Path) -> None:
    runs = find_runs(demo_run)
    a = runs.index(demo_run)
    b = next(i for i, p in enumerate(runs) if p.name == "adapt-null-world")
    pages: list[Any] = _get_all(
        demo_run,
        [
            "/compare",
            f"/compare?a={a}&b={b}&method=adapt",
            f"/compare?a={a}&b={a}",
            f"/compare?a={a}&b={b}&method=%3Cscript%3Ex",
            "/compare?a=../../etc&b=0",
            f"/compare?a={len(runs)}&b=0",
        ],
    )
    (form, _), (ok, page), (several, text), (bad, hostile), (path, _), (missing, _) = pages
    assert form == 200 and ok == 200, page
    assert "rank A (range)" in page and "sim-borealis" in page and 'id="compare-config"' in page
    assert "adapt.sim.null_world" in page  # the one setting the two runs differ in
    assert several == 404 and "pick --method" in text
    assert bad == 404 and "<script>" not in hostile and "&lt;script&gt;" in hostile
    assert path == 404 and missing == 404
