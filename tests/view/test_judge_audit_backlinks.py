"""A Judge-audit call's page links back to where the call served, as the Arena's and Adapt's
calls do: a response or description to its item's scored pairs, a score to its judge's (its
pair's, where the score log names its request), a pairwise verdict to the leaderboard."""

from __future__ import annotations

import asyncio
import html
import re
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from aiohttp.test_utils import TestClient, TestServer

from memearena.view import make_app

_SERVED = re.compile(r'<td id="call-served">(.*?)</td>', re.S)
_LINK = re.compile(r'<a class="back" href="([^"]+)">([^<]*)</a>')
_PAIR_ROW = re.compile(
    r"<tr><td>([^<]*)</td><td class=\"mono\">([^<]*)</td><td class=\"name\">([^<]*)</td>"
)


def _first_calls(run: Path) -> dict[str, tuple[int, str, str]]:
    """The first answered call of each Judge-audit role: (id, model, request hash)."""
    db = sqlite3.connect(f"file:{run / 'run.db'}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT role, MIN(rowid), model, request_hash FROM calls"
            " WHERE role LIKE 'judge_audit.%' AND status='ok' GROUP BY role"
        ).fetchall()
        ids = {role: (rowid, model, rh) for role, rowid, model, rh in rows}
        # The viewer's call ids are the calls' ids, not rowids.
        out = {}
        for role, (rowid, model, rh) in ids.items():
            (cid,) = db.execute("SELECT id FROM calls WHERE rowid=?", (rowid,)).fetchone()
            out[role] = (int(cid), str(model), str(rh))
        return out
    finally:
        db.close()


def _pages(run: Path, calls: dict[str, tuple[int, str, str]]) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with TestClient(TestServer(make_app(run))) as client:
            for role, (cid, _, _) in calls.items():
                resp = await client.get(f"/r/0/call/{cid}")
                assert resp.status == 200, role
                m = _SERVED.search(await resp.text())
                links = _LINK.findall(m.group(1)) if m else []
                followed = []
                for href, label in links:
                    page = await client.get(html.unescape(href))
                    followed.append((html.unescape(href), label, page.status, await page.text()))
                out[role] = followed
        return out

    return asyncio.run(go())


def test_judge_audit_calls_link_back_to_their_pairs_and_leaderboard(demo_run: Path) -> None:
    calls = _first_calls(demo_run)
    assert {"judge_audit.respond", "judge_audit.score", "judge_audit.pairwise"} <= calls.keys()
    pages = _pages(demo_run, calls)
    for role, followed in pages.items():
        assert followed, f"{role}: the call page links back nowhere"
        for href, _label, status, _body in followed:
            assert status == 200, (role, href)

    # A response (and a description) links to its own item's scored pairs.
    for role in ("judge_audit.respond", "judge_audit.describe"):
        if role not in pages:
            continue
        href, _, _, body = pages[role][0]
        item = parse_qs(urlsplit(href).query)["item"][0]
        rows = _PAIR_ROW.findall(body)
        assert rows and {html.unescape(r[1]) for r in rows} == {item}, role

    # A score links to the pairs it scored: of its judge, item and bias type.
    _, judge, _ = calls["judge_audit.score"]
    for href, _, _, body in pages["judge_audit.score"]:
        query = parse_qs(urlsplit(href).query)
        assert query["judge"] == [judge] and query["item"] and query["bias_type"]
        rows = {tuple(html.unescape(x) for x in r) for r in _PAIR_ROW.findall(body)}
        assert rows == {(query["bias_type"][0], query["item"][0], judge)}

    # A pairwise verdict (kept only as the leaderboard's figures) links to the leaderboard.
    href, _, _, body = pages["judge_audit.pairwise"][0]
    assert urlsplit(href).path.endswith("/judge-audit") and 'id="evaluators"' in body
