"""The viewer's comparison page: two runs of the viewer's root side by side
(``/compare?a=N&b=M[&method=NAME]``, ``memearena.engine.compare``).

A run is named by its number in the viewer's own list of runs, never by a path, so the page
reads nothing outside the folder the viewer was started on. Every name and value shown comes
from run files (untrusted): the page template escapes it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from memearena.errors import MemearenaError
from memearena.view.queries import ViewError

__all__ = ["add_compare_page", "compare_page"]


def _index(request: web.Request, name: str, count: int) -> int | None:
    raw = request.query.get(name, "")
    if not raw:
        return None
    if not raw.isascii() or not raw.isdecimal() or len(raw) > 9 or int(raw) >= count:
        raise ViewError(f"{name}: no such run")
    return int(raw)


def compare_page(viewer: Any, request: web.Request) -> web.Response:
    """The page: a form choosing two of the viewer's runs, and their comparison once chosen.
    ``viewer`` gives ``paths`` (the runs), ``label(n)`` and ``render(request, template, ...)``."""
    from memearena.engine.compare import compare_runs

    count = len(viewer.paths)
    a, b = _index(request, "a", count), _index(request, "b", count)
    method = request.query.get("method") or None
    choices = [{"n": n, "label": viewer.label(n)} for n in range(count)]
    comparison = None
    if a is not None and b is not None:
        try:
            comparison = compare_runs(viewer.paths[a], viewer.paths[b], method=method).to_dict()
        except MemearenaError as e:  # the message names paths: shown relative to the root
            text = str(e)
            for n in (a, b):
                text = text.replace(str(viewer.paths[n]), viewer.label(n))
            raise ViewError(text) from None
    return viewer.render(
        request,
        "compare.html",
        choices=choices,
        a=a,
        b=b,
        label_a=viewer.label(a) if a is not None else None,
        label_b=viewer.label(b) if b is not None else None,
        c=comparison,
    )


def add_compare_page(
    router: web.UrlDispatcher,
    viewer: Any,
    wrap: Callable[[Callable[[web.Request], web.StreamResponse]], Any],
) -> None:
    """Serve ``/compare`` on ``router``; ``wrap`` runs a page as the viewer runs its others."""
    router.add_get("/compare", wrap(lambda request: compare_page(viewer, request)))
