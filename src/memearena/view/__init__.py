"""``memearena view``: a local, read-only viewer of one run directory or a folder of runs.

Every leaderboard number opens what is behind it: the memes, every target's answer, the
guideline rounds, both orders' raw verdicts and the exact request each model was sent. Pages
are rendered on the server from ``run.db`` (opened read-only) and ``leaderboard.json``; the
viewer loads nothing from the network and binds 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from memearena.view.queries import Page, RunReader, ViewError, find_runs

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["Page", "RunReader", "ViewError", "find_runs", "make_app", "serve"]


def make_app(root: Path, bind_host: str = "127.0.0.1", *, warm: bool = True) -> web.Application:
    """The viewer's aiohttp application over ``root`` (ViewError when no run is there);
    ``warm``: compute each run's summaries at start, in a worker thread."""
    from memearena.view.app import make_app as _make

    return _make(root, bind_host, warm=warm)


def serve(root: Path, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve the viewer until interrupted (one event loop; Ctrl-C stops it)."""
    from aiohttp import web

    if not 1 <= port <= 65535:
        raise ViewError(f"--port: must be between 1 and 65535, got {port}")
    app = make_app(root, host)
    shown = f"[{host}]" if ":" in host else host
    banner = f"memearena view: http://{shown}:{port}/  (Ctrl-C to stop)"
    try:
        # aiohttp calls ``print`` once every socket listens: a busy port announces nothing.
        web.run_app(
            app,
            host=host,
            port=port,
            print=lambda _msg: print(banner, flush=True),
            access_log=None,
        )
    except OSError as e:
        reason = os.strerror(e.errno) if e.errno else str(e)
        raise ViewError(f"cannot listen on {shown}:{port} ({reason})") from None
