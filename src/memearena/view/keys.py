"""What the viewer's app and the modules that plug pages into it share, below both: the
content-security policy and the application keys (so a page module never imports the app
that installs it)."""

from __future__ import annotations

from typing import Any

from aiohttp import web

__all__ = ["ALLOWED_HOSTS", "CSP", "VIEWER", "WARMING"]

CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'none'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; "
    "connect-src 'none'"
)
"""No remote load, no script, no inline style: the pages are plain HTML and one stylesheet."""

ALLOWED_HOSTS: web.AppKey[frozenset[str]] = web.AppKey("allowed_hosts", frozenset)
"""The Host header names the app answers (421 for any other)."""
VIEWER: web.AppKey[Any] = web.AppKey("viewer", object)
"""The app's page helper (``memearena.view.app.View``)."""
WARMING: web.AppKey[Any] = web.AppKey("warming", object)
