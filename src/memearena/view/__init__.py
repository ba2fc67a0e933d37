"""``memearena view``: a local, read-only viewer of one run directory or a folder of runs.

Every leaderboard number opens what is behind it: the memes, every target's answer, the
guideline rounds, both orders' raw verdicts and the exact request each model was sent. Pages
are rendered on the server from ``run.db`` (opened read-only) and ``leaderboard.json``; the
viewer loads nothing from the network and binds 127.0.0.1 unless told otherwise."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memearena.view.queries import Page, RunReader, ViewError, find_runs

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["Page", "RunReader", "ViewError", "find_runs", "make_app", "serve"]


def make_app(
    root: Path,
    bind_host: str = "127.0.0.1",
    *,
    warm: bool = True,
    allow_remote: bool = False,
    allowed_hosts: Iterable[str] = (),
    label: bool = False,
    **limits: Any,
) -> web.Application:
    """The viewer's aiohttp application over ``root`` (ViewError when no run is there, or
    when ``bind_host`` is not loopback and ``allow_remote`` is not given); ``warm``: compute
    each run's summaries at start, in a worker thread; ``allowed_hosts``: host names answered
    besides the loopback names and the bound address; ``label``: with the labelling pages
    (``memearena.view.labels``); ``limits``: ``heavy_pages``, ``max_waiting``,
    ``request_timeout`` (``memearena.view.app``)."""
    from memearena.view.app import make_app as _make

    return _make(
        root,
        bind_host,
        warm=warm,
        allow_remote=allow_remote,
        allowed_hosts=allowed_hosts,
        label=label,
        **limits,
    )


def serve(
    root: Path,
    host: str = "127.0.0.1",
    port: int = 8765,
    *,
    allow_remote: bool = False,
    allowed_hosts: Iterable[str] = (),
    label: bool = False,
) -> None:
    """Serve the viewer until interrupted (one event loop; Ctrl-C stops it). A host other
    than loopback is refused unless ``allow_remote``; then the banner lists the host names
    requests may be addressed to (any other is answered 421). ``label``: with the labelling
    pages (``/label``), whose writes go to each run's ``labels.sqlite``."""
    from aiohttp import web

    from memearena.view.app import host_names, server_options

    if not 1 <= port <= 65535:
        raise ViewError(f"--port: must be between 1 and 65535, got {port}")
    app = make_app(root, host, allow_remote=allow_remote, allowed_hosts=allowed_hosts, label=label)
    shown = f"[{host}]" if ":" in host else host
    banner = f"memearena view: http://{shown}:{port}/  (Ctrl-C to stop)"
    if label:
        banner += f"\nlabelling: http://{shown}:{port}/label"
    if allow_remote:
        names = ", ".join(sorted(host_names(host, allowed_hosts)))
        banner += f"\nanswering requests addressed to: {names} (add more with --allow-host)"
    try:
        # aiohttp calls ``print`` once every socket listens: a busy port announces nothing.
        web.run_app(
            app,
            host=host,
            port=port,
            print=lambda _msg: print(banner, flush=True),
            access_log=None,
            handler_cancellation=True,
            **server_options(),
        )
    except OSError as e:
        reason = os.strerror(e.errno) if e.errno else str(e)
        raise ViewError(f"cannot listen on {shown}:{port} ({reason})") from None
