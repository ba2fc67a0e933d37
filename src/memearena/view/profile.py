"""The viewer's profile page: one profile per model across the methods of a run, and how far
the methods agree (``memearena.engine.profile``, computed once per state of the run's files).

Only this page reads the methods' result classes (through the registry, when it is first
opened): every other page of the viewer reads ``run.db`` and ``leaderboard.json`` alone."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from memearena.view.queries import ViewError

__all__ = ["profile_page"]

_KEPT = 16
"""Profiles kept computed (one per run directory state)."""
_FILES = ("leaderboard.json", "battles.jsonl", "adapt_scores.jsonl", "judge_audit_scores.jsonl")
"""The files a profile is read from: a change to any computes it again."""


def _state(path: Path) -> tuple[Any, ...]:
    out: list[Any] = [str(path)]
    for name in _FILES:
        try:
            st = (path / name).stat()
        except OSError:
            out.append(None)
            continue
        out.append((st.st_size, st.st_mtime_ns))
    return tuple(out)


def profile_page(viewer: Any) -> Callable[[web.Request], web.Response]:
    """The page handler over the viewer's runs (``/r/{run}/profile``)."""
    cache: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
    lock = threading.Lock()

    def page(request: web.Request) -> web.Response:
        from memearena.engine.profile import build_profile
        from memearena.errors import MemearenaError

        n, _ = viewer.reader(request)
        path = Path(viewer.paths[n])
        key = _state(path)
        with lock:
            profile = cache.get(key)
        if profile is None:
            try:
                profile = build_profile(path)
            except MemearenaError as e:
                raise ViewError(str(e)) from None
            with lock:
                cache[key] = profile
                while len(cache) > _KEPT:
                    cache.popitem(last=False)
        return viewer.render(request, "profile.html.j2", n=n, label=viewer.label(n), p=profile)

    return page
