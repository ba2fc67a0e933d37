"""A page's first load reads only what it shows: the navigation of a run's pages comes from
leaderboard.json (the methods it holds), so the Arena page never scans the calls for the
overview's figures."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from memearena.view import RunReader
from memearena.view.app import make_app


def test_the_arena_page_computes_no_overview(
    demo_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    overviews: list[int] = []
    compute = RunReader._overview

    def counting(self: RunReader) -> dict[str, Any]:
        overviews.append(1)
        return compute(self)

    monkeypatch.setattr(RunReader, "_overview", counting)

    async def go() -> tuple[str, str]:
        async with TestClient(TestServer(make_app(demo_run, warm=False))) as client:
            arena = await client.get("/r/0/arena")
            first = await arena.text()
            assert arena.status == 200 and not overviews
            overview = await client.get("/r/0/")
            return first, await overview.text()

    arena, overview = asyncio.run(go())
    assert len(overviews) == 1  # the overview page itself
    for page in (arena, overview):  # the same navigation either way
        assert 'href="/r/0/arena"' in page and 'href="/r/0/memes"' in page
    reader = RunReader(demo_run)
    try:
        assert reader.methods() == reader.overview()["methods"] == ["arena", "adapt", "judge_audit"]
    finally:
        reader.close()
