"""The echo method's page in the viewer: its leaderboard and every restatement on record, each
linked to its call; a call of its role links back here. Registered as ``PAGES``."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from memearena.view.app import MethodPages, View
from memearena.view.queries import RunReader, ViewError, last_hash

KIND = "echo.restate"


def restatements(r: RunReader) -> list[dict[str, Any]]:
    """Every restatement on record: its meme, its text and the call that made it."""
    rows = r.q("SELECT key, value FROM artifacts WHERE kind=? ORDER BY key", (KIND,))
    out = []
    for key, value in rows:
        meme = key.rsplit("|", 1)[0]
        out.append(
            {
                "meme": meme,
                "text": str(json.loads(value).get("text") or ""),
                "call": r.call_for(last_hash(key)),
            }
        )
    return out


def _page(v: View, request: web.Request) -> web.Response:
    n, r = v.reader(request)
    section = r.board.get("echo")
    if not isinstance(section, dict):
        raise ViewError("this run has no Echo results")
    return v.render(
        request,
        "echo/echo.html.j2",
        n=n,
        label=v.label(n),
        rows=section.get("leaderboard") or [],
        restated=restatements(r),
    )


def _served(r: RunReader, request_hash: str, role: str) -> list[dict[str, Any]]:
    rows = r.q(
        "SELECT key FROM artifacts WHERE kind=? AND key LIKE ? LIMIT 1",
        (KIND, "%|" + request_hash),
    )
    return [
        {"href": "/echo#restated", "label": "its restatement", "note": key.rsplit("|", 1)[0]}
        for (key,) in rows
    ]


PAGES = MethodPages(routes=(("/echo", _page),), nav=(("/echo", "Echo"),), served=_served)
