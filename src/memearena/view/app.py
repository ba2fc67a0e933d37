"""The viewer's web app: server-rendered pages (Jinja2, autoescaped) over ``queries``.

Threats: every string on a page comes from a model, a dataset or a config, so each reaches
the page through autoescaping only (no ``|safe`` of run data, no script at all); the
Content-Security-Policy forbids any remote load and any inline script or style, so a string
that slipped through still could not run or call out; the server binds loopback (another
address only with ``allow_remote``) and answers only requests addressed to an allowed host
name (a web page elsewhere cannot rebind a name to it and read the run).

A run directory is untrusted too (shared, downloaded, damaged): only the run's own files are
read, links resolved, and an image from a dataset is shown only as the prepared image its
recorded hash names, made again from the file (a crafted row cannot show any other file);
integers in a URL are bounded; a damaged record turns its page into an error panel; a call page
shows the first ``SHOWN_CHARS`` of a reply, with a link to the whole. Pages are rendered in
worker threads, at most ``HEAVY_PAGES`` at once with ``MAX_WAITING`` more queued and
``REQUEST_TIMEOUT_S`` in all (past either, a 503 with Retry-After), so the event loop keeps
answering; a connection that has not sent a whole request within ``HEADER_TIMEOUT_S`` is
closed (``server_options``)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import re
import socket
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, TypeGuard
from urllib.parse import urlencode

from aiohttp import web
from jinja2 import (
    BaseLoader,
    ChoiceLoader,
    Environment,
    FileSystemLoader,
    PackageLoader,
    PrefixLoader,
    StrictUndefined,
    select_autoescape,
)

from memearena.engine.registry import method_html, method_names, method_pages
from memearena.view.compare import add_compare_page
from memearena.view.keys import ALLOWED_HOSTS, CSP, VIEWER, WARMING
from memearena.view.profile import profile_page
from memearena.view.queries import OUTCOMES, DamagedRecord, Page, RunReader, ViewError, find_runs

__all__ = [
    "CSP",
    "HEADER_TIMEOUT_S",
    "HEAVY_PAGES",
    "LOOPBACK_HOSTS",
    "MAX_WAITING",
    "REQUEST_TIMEOUT_S",
    "SHOWN_CHARS",
    "MethodPages",
    "View",
    "finite",
    "host_names",
    "make_app",
    "query_int",
    "row_id",
    "server_options",
]

log = logging.getLogger("memearena.view")

LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
"""Addresses the viewer binds without ``allow_remote``."""
HEADER_TIMEOUT_S = 5.0
"""A connection that has not sent a whole request (or its next one) within this is closed."""
REQUEST_TIMEOUT_S = 60.0
"""A page not rendered within this (its wait for a slot included) is a 503."""
HEAVY_PAGES = 2
"""Pages rendered at once (each in a worker thread over the run's files)."""
MAX_WAITING = 64
"""Pages queued for a slot; past this a request is a 503 at once."""
SHOWN_CHARS = 200_000
"""Characters of a reply, or of a request's text part, shown on a call page (the rest: the
download links)."""
MAX_QUERY_INT = 1_000_000_000
"""The largest ``offset`` or ``limit`` a URL may give (400 past it)."""
MAX_ROW_ID = 2**63 - 1
"""The largest row id SQLite stores: a call id past it is a 404."""
_INTEGER = re.compile(r"([+-]?)([0-9]+)")
_VERIFIED_IMAGES = 256
"""Dataset images kept prepared and verified (each a prepared meme: well under a MiB)."""

_LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
_WILDCARDS = frozenset({"", "0.0.0.0", "::", "[::]"})
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def _host_name(host: str) -> str:
    """A host as a Host header names it: lower case, an IPv6 address in brackets."""
    host = host.strip().lower()
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def host_names(bind_host: str, extra: Iterable[str] = ()) -> frozenset[str]:
    """The host names a request may be addressed to: the loopback names, the bound address
    (for a wildcard bind: this machine's name, full name and their addresses) and ``extra``."""
    names = set(_LOOPBACK_NAMES)
    if bind_host.strip().lower() in _WILDCARDS:
        found = {socket.gethostname(), socket.getfqdn()}
        for name in list(found):
            try:
                found |= {str(a[4][0]) for a in socket.getaddrinfo(name, None)}
            except OSError:
                continue
        names |= {_host_name(h) for h in found if h}
    else:
        names.add(_host_name(bind_host))
    names |= {_host_name(h) for h in extra if h.strip()}
    return frozenset(names)


def server_options(header_timeout: float = HEADER_TIMEOUT_S) -> dict[str, Any]:
    """The connection settings the viewer is served with (``web.run_app`` / ``AppRunner``
    keywords): a connection idle, or still sending its request's headers, ``header_timeout``
    seconds after it opened or after its last reply is closed (aiohttp's keep-alive timer is
    started when the connection opens and reset only by a reply)."""
    return {"keepalive_timeout": header_timeout}


def _image_type(head: bytes) -> str | None:
    """The image type of encoded bytes by their first bytes (PNG, JPEG, GIF, WebP), or None:
    only an image is ever served, whatever a run directory holds."""
    for magic, ctype in _MAGIC:
        if head.startswith(magic):
            return ctype
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _env() -> Environment:
    loader: BaseLoader = PackageLoader("memearena.view", "templates")
    folders = {
        name: FileSystemLoader(str(f)) for name in method_names() if (f := method_html(name))
    }
    if folders:
        # A method's page templates are its package's own files, named under its name.
        loader = ChoiceLoader([loader, PrefixLoader(folders)])
    env = Environment(
        loader=loader,
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["pretty"] = lambda v: json.dumps(v, indent=1, ensure_ascii=False, default=str)
    env.filters["pct"] = lambda v: "–" if not finite(v) else f"{100 * float(v):.0f}%"
    env.filters["est"] = _est
    env.filters["words"] = _words
    env.globals["pct_ci"] = _pct_ci
    env.globals["num_ci"] = _num_ci
    env.globals["qs"] = _qs
    env.globals["bar"] = _bar
    env.globals["cell_fill"] = _cell_fill
    env.globals["page_links"] = page_links
    return env


def finite(v: Any) -> TypeGuard[float]:
    """A number that is neither a bool nor infinite nor NaN."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _num(v: Any, digits: int = 2) -> str:
    if isinstance(v, bool) or v is None:
        return "–" if v is None else str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if finite(v):
        return f"{v:,.{digits}f}"
    return str(v)


def _est(e: Any, digits: int = 2) -> str:
    """An estimate ``{"value", "ci_low", "ci_high"}`` as the report writes it,
    ``value [lo, hi]`` (``value`` alone without an interval; ``no data`` without a value); a
    bare number as ``num``."""
    if not isinstance(e, dict):
        return _num(e, digits) if finite(e) else "no data"
    v, lo, hi = e.get("value"), e.get("ci_low"), e.get("ci_high")
    if not finite(v):
        return "no data"
    if not (finite(lo) and finite(hi)):
        return f"{v:.{digits}f}"
    return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _pct_ci(v: Any, ci: Any) -> str:
    """A proportion with its interval as the report writes it: ``89% [35%, 100%]``."""
    if not finite(v):
        return "–"
    if isinstance(ci, list | tuple) and len(ci) == 2 and finite(ci[0]) and finite(ci[1]):
        return f"{v:.0%} [{ci[0]:.0%}, {ci[1]:.0%}]"
    return f"{v:.0%}"


def _num_ci(v: Any, ci: Any, digits: int = 2) -> str:
    """A mean with its interval as the report writes it: ``8.39 [7.76, 8.98]``."""
    if not finite(v):
        return "–"
    if isinstance(ci, list | tuple) and len(ci) == 2 and finite(ci[0]) and finite(ci[1]):
        return f"{v:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"
    return f"{v:.{digits}f}"


def _words(v: Any, none: str = "none") -> str:
    """A value from a run's JSON as words on a page: booleans as yes/no, a missing value as
    ``none``, a list joined with commas (never a Python or JSON literal)."""
    if v is None or v == "" or v == [] or v == {}:
        return none
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list | tuple):
        return ", ".join(_words(x, none) for x in v)
    if isinstance(v, dict):
        return "; ".join(f"{k}: {_words(x, none)}" for k, x in v.items())
    return _num(v) if isinstance(v, int | float) else str(v)


def _endpoint(value: Any) -> dict[str, Any]:
    """An endpoint identity as words: its names (provider, model id, base URLs, the simulated
    world) joined, and its settings as ``(name, value)`` pairs, never as a nested literal."""
    names: list[str] = []
    settings: list[tuple[str, str]] = []

    def walk(v: Any, prefix: str = "") -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if isinstance(x, dict | list):
                    walk(x, f"{prefix}{k} ")
                else:
                    settings.append((f"{prefix}{k}", _words(x)))
        elif isinstance(v, list | tuple):
            for x in v:
                walk(x, prefix)
        elif v is not None and v != "":
            if prefix:
                settings.append((prefix.strip(), _words(v)))
            else:
                names.append(_words(v))

    walk(value)
    return {"names": " · ".join(names) or "none", "settings": settings}


def _qs(base: dict[str, Any], **changes: Any) -> str:
    """A query string: ``base`` with ``changes`` applied, empty values dropped."""
    merged = {**base, **changes}
    return urlencode({k: v for k, v in merged.items() if v not in ("", None, 0)})


def _bar(value: Any, low: Any, high: Any, lo: float, hi: float, width: int = 160) -> dict[str, Any]:
    """Pixel positions of a point and its interval on a scale from ``lo`` to ``hi``."""
    span = (hi - lo) or 1.0

    def x(v: Any) -> float | None:
        if not finite(v):
            return None
        return round(max(0.0, min(1.0, (float(v) - lo) / span)) * (width - 4) + 2, 1)

    return {"w": width, "x": x(value), "lo": x(low), "hi": x(high)}


def _cell_fill(v: Any) -> str:
    """A fill for a rate in [0, 1] (white to red); grey when missing."""
    if not finite(v):
        return "#eeeeee"
    t = max(0.0, min(1.0, float(v)))
    g = int(255 - 155 * t)
    return f"rgb(255,{g},{g})"


def query_int(request: web.Request, name: str, default: int = 0) -> int:
    """A non-negative integer of the query (``default`` when absent or not a number); a value
    past ``MAX_QUERY_INT`` is a 400."""
    raw = request.query.get(name)
    if raw is None:
        return default
    m = _INTEGER.fullmatch(raw.strip())
    if m is None:
        return default
    if m.group(1) != "-" and len(m.group(2).lstrip("0")) > 10:
        raise web.HTTPBadRequest(text=f"{name}: at most {MAX_QUERY_INT:,}")
    value = 0 if m.group(1) == "-" else int(m.group(2))
    if value > MAX_QUERY_INT:
        raise web.HTTPBadRequest(text=f"{name}: at most {MAX_QUERY_INT:,}")
    return value


def row_id(request: web.Request, name: str) -> int | None:
    """A row id of the path (None when not one: its page is a 404)."""
    raw = request.match_info[name]
    if not raw.isascii() or not raw.isdecimal() or len(raw) > 19:
        return None
    value = int(raw)
    return value if value <= MAX_ROW_ID else None


def _busy(reason: str) -> web.Response:
    return web.Response(status=503, text=reason, headers={"Retry-After": "5"})


class _Gate:
    """Heavy pages in worker threads: at most ``slots`` at once, at most ``waiting`` more
    queued, ``timeout`` seconds in all; past any, a 503 with Retry-After. A page past its
    timeout keeps its slot until its thread ends, so the bound holds."""

    def __init__(self, slots: int, waiting: int, timeout: float) -> None:
        self.slots = max(1, slots)
        self.max_waiting = max(0, waiting)
        self.timeout = timeout
        self.admitted = 0
        """Pages queued or rendering (counted at once: a semaphore shows its queue late)."""
        self._sem: asyncio.Semaphore | None = None
        self.pool = ThreadPoolExecutor(max_workers=self.slots, thread_name_prefix="memearena-view")

    def _leave(self, sem: asyncio.Semaphore | None) -> None:
        self.admitted -= 1
        if sem is not None:
            sem.release()

    async def run(self, fn: Callable[[], web.StreamResponse]) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.slots)
        sem = self._sem
        if self.admitted >= self.slots + self.max_waiting:
            return _busy("busy: too many pages at once")
        deadline = loop.time() + self.timeout
        self.admitted += 1
        try:
            await asyncio.wait_for(sem.acquire(), self.timeout)
        except TimeoutError:
            self._leave(None)
            return _busy("busy: no slot for this page in time")
        except BaseException:  # the client left while it waited
            self._leave(None)
            raise
        try:
            fut = loop.run_in_executor(self.pool, fn)
        except BaseException:
            self._leave(sem)
            raise
        fut.add_done_callback(lambda _: self._leave(sem))
        try:
            return await asyncio.wait_for(asyncio.shield(fut), max(0.0, deadline - loop.time()))
        except TimeoutError:
            return _busy(f"busy: this page took more than {self.timeout:g} s")


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    # Only an allowed host name is answered (DNS rebinding), wherever the viewer is bound.
    raw = (request.host or "").lower()
    host = raw.split("]")[0] + "]" if raw.startswith("[") else raw.rsplit(":", 1)[0]
    if host not in request.app[ALLOWED_HOSTS]:
        return web.Response(status=421, text="misdirected request")
    if request.method not in ("GET", "HEAD"):
        return web.Response(status=405, text="read-only viewer")
    viewer: View = request.app[VIEWER]
    try:
        resp = await handler(request)
    except web.HTTPException:
        raise
    except DamagedRecord as e:
        resp = viewer.error_page(request, 200, "A record of this run is damaged", str(e))
    except ViewError as e:
        resp = viewer.error_page(request, 404, "Not found", str(e))
    except Exception as e:
        # Whatever a damaged record makes a page raise ends as its error panel, on one line.
        reason = f"{type(e).__name__}: {str(e)[:300]}"
        log.warning("%s: %s", request.path[:200], reason)
        detail = f"this page could not be rendered from the run's records ({reason})"
        resp = viewer.error_page(request, 200, "A record of this run is damaged", detail)
    resp.headers["Content-Security-Policy"] = CSP
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Referrer-Policy"] = "no-referrer"
    resp.headers["X-Frame-Options"] = "DENY"
    resp.headers["Cache-Control"] = "no-store"
    return resp


def _clip(text: Any) -> tuple[Any, int]:
    """``text`` cut to ``SHOWN_CHARS`` and its length (0 when shown whole)."""
    if isinstance(text, str) and len(text) > SHOWN_CHARS:
        return text[:SHOWN_CHARS], len(text)
    return text, 0


class View:
    """The viewer over a folder of runs: each run's reader, the page environment, and the
    page helpers a method's pages use (``reader``, ``label``, ``render``, ``listing``)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.paths = find_runs(self.root)
        self.readers: dict[int, RunReader] = {}
        self.env = _env()
        self._images: OrderedDict[tuple[Any, ...], tuple[bytes, str]] = OrderedDict()

    def warm(self) -> None:
        """Compute every run's summaries and meme index (reads only; a failure is left for the
        page that needs it to report)."""
        import memearena.data  # noqa: F401  (what a dataset image's check needs, loaded once here)

        # The pages' templates compiled now, not by the first request of each page.
        pages = [n for n in self.env.list_templates(extensions=["j2"]) if "report." not in n]
        for name in pages:  # (a method's report partial is the report's, not a page)
            with contextlib.suppress(Exception):  # a broken one is the page's to report
                self.env.get_template(name)
        for n, path in enumerate(self.paths):
            try:
                reader = self.readers.setdefault(n, RunReader(path))
                reader.warm()
            except Exception:
                continue

    def reader(self, request: web.Request) -> tuple[int, RunReader]:
        raw = request.match_info["run"]
        if not raw.isascii() or not raw.isdecimal() or len(raw) > 9 or int(raw) >= len(self.paths):
            raise web.HTTPNotFound(text="no such run")
        n = int(raw)
        if n not in self.readers:
            self.readers[n] = RunReader(self.paths[n])
        return n, self.readers[n]

    def label(self, n: int) -> str:
        p = self.paths[n]
        rel = p.relative_to(self.root) if p != self.root else Path(p.name)
        return str(rel)

    def render(
        self, request: web.Request, template: str, *, status: int = 200, **ctx: Any
    ) -> web.Response:
        """A page; a run's page shows the damage its reader found (``damage``), if any."""
        damage = ctx.pop("damage", None)
        n = ctx.get("n")
        reader = self.readers.get(n) if isinstance(n, int) else None
        if reader is not None and reader.board_error:
            damage = f"{reader.board_error}" + (f"; {damage}" if damage else "")
        # The navigation offers the pages of the methods this run holds (no dead links).
        ctx.setdefault("methods", reader.methods() if reader is not None else [])
        nav: list[tuple[str, str]] = []
        search: tuple[str, str] | None = None
        for name in ctx["methods"]:
            pages = method_pages(name)
            if pages is not None:
                nav += list(pages.nav)
                search = search or pages.search
        ctx.setdefault("nav", nav)
        ctx.setdefault("search", search)
        html = self.env.get_template(template).render(
            runs=[self.label(i) for i in range(len(self.paths))],
            query=dict(request.query),
            path=request.path,
            outcomes=OUTCOMES,
            damage=damage,
            **ctx,
        )
        return web.Response(text=html, content_type="text/html", charset="utf-8", status=status)

    def error_page(
        self, request: web.Request, status: int, title: str, message: str
    ) -> web.Response:
        """The error panel in the page frame (the run's navigation when the URL names a run)."""
        ctx: dict[str, Any] = {}
        raw = request.match_info.get("run", "")
        if raw.isascii() and raw.isdecimal() and len(raw) <= 9 and int(raw) < len(self.paths):
            ctx = {"n": int(raw), "label": self.label(int(raw))}
        try:
            return self.render(
                request, "error.html.j2", status=status, title=title, message=message, **ctx
            )
        except Exception:  # the frame itself failed: the message alone
            return web.Response(status=status, text=f"{title}: {message}")

    # ------------------------------------------------------------------ pages
    def runs(self, request: web.Request) -> web.Response:
        rows = []
        for n in range(len(self.paths)):
            if n not in self.readers:
                self.readers[n] = RunReader(self.paths[n])
            o = self.readers[n].overview()
            rows.append({"n": n, "label": self.label(n), **o})
        return self.render(request, "runs.html.j2", rows=rows)

    def overview(self, request: web.Request) -> web.Response:
        n, r = self.reader(request)
        o = r.overview()
        links = []
        for name in o["methods"]:
            pages = method_pages(name)
            links.append((name, pages.nav[0][0] if pages is not None and pages.nav else None))
        return self.render(
            request, "overview.html.j2", n=n, label=self.label(n), o=o, method_links=links
        )

    def listing(
        self,
        request: web.Request,
        template: str,
        fetch: Callable[..., Page],
        filters: tuple[str, ...],
        **ctx: Any,
    ) -> web.Response:
        """A filtered page of one list: the query's ``filters``, ``offset`` and ``limit`` (50)
        passed to ``fetch(reader, ...)``; ``f`` holds the values the filters offer (the reader's
        ``filter_values`` unless the page gives its own)."""
        n, r = self.reader(request)
        q = request.query
        page = fetch(
            r,
            **{name: q.get(name, "") for name in filters},
            offset=query_int(request, "offset"),
            limit=query_int(request, "limit", 50) or 50,
        )
        if "f" not in ctx:  # a page that gives its own values needs no scan of the calls
            ctx["f"] = r.filter_values()
        return self.render(request, template, n=n, label=self.label(n), page=page, **ctx)

    def memes_shown(self, reader: RunReader) -> dict[str, Mapping[str, str | None]]:
        """The memes of this run with a page of their own (the first method of the run that
        shows each): ``{"href": path under the run, "image": its image hash}`` by uid."""
        out: dict[str, Mapping[str, str | None]] = {}
        for name in reader.methods():
            pages = method_pages(name)
            if pages is None or pages.meme_pages is None:
                continue
            for uid, shown in pages.meme_pages(reader).items():
                out.setdefault(uid, shown)
        return out

    def meme_pages(self, reader: RunReader) -> dict[str, str]:
        """The memes of this run with a page of their own, by uid: that page's path from the
        site's root."""
        n = self.paths.index(reader.dir) if reader.dir in self.paths else 0
        return {uid: f"/r/{n}{m.get('href')}" for uid, m in self.memes_shown(reader).items()}

    def calls(self, request: web.Request) -> web.Response:
        filters = ("model", "role", "status")
        return self.listing(request, "calls.html.j2", RunReader.calls, filters)

    def _call(self, request: web.Request) -> tuple[int, dict[str, Any]]:
        n, r = self.reader(request)
        call_id = row_id(request, "id")
        c = None if call_id is None else r.call(call_id)
        if c is None:
            raise ViewError("no such call in this run")
        return n, c

    def call(self, request: web.Request) -> web.Response:
        n, c = self._call(request)
        # A page holds the first SHOWN_CHARS of each text: the whole is one link away.
        c["response"], c["response_chars"] = _clip(c["response"])
        clipped = 0
        for msg in (c.get("request") or {}).get("messages") or []:
            for part in msg.get("content") or []:
                if part.get("type") == "text":
                    part["text"], size = _clip(part.get("text"))
                    clipped += size > 0
        c["request_clipped"] = clipped
        endpoint = _endpoint((c.get("request") or {}).get("endpoint"))
        served = self.readers[n].call_context(
            str(c.get("request_hash") or ""), str(c.get("role") or "")
        )
        return self.render(
            request,
            "call.html.j2",
            n=n,
            label=self.label(n),
            c=c,
            endpoint=endpoint,
            served=served,
            shown_chars=SHOWN_CHARS,
            damage=c.get("request_damage"),
        )

    def call_reply(self, request: web.Request) -> web.Response:
        """The whole reply of a call, as a text file."""
        _, c = self._call(request)
        if c["response"] is None:
            raise ViewError("this call has no reply on record")
        name = f"call-{c['id']}-reply.txt"
        return web.Response(
            text=str(c["response"]),
            content_type="text/plain",
            charset="utf-8",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )

    def call_request(self, request: web.Request) -> web.Response:
        """The whole request of a call as sent, as a JSON file."""
        _, c = self._call(request)
        if c["request"] is None:
            raise DamagedRecord(c["request_damage"] or "this call's request is not on record")
        name = f"call-{c['id']}-request.json"
        return web.Response(
            text=json.dumps(c["request"], indent=1, ensure_ascii=False),
            content_type="application/json",
            charset="utf-8",
            headers={"Content-Disposition": f'attachment; filename="{name}"'},
        )

    def image(self, request: web.Request) -> web.StreamResponse:
        _, r = self.reader(request)
        sha = request.match_info["sha"]
        data = r.image_bytes(sha)  # the run's own copy, checked against its hash
        ctype = _image_type(data[:12]) if data else None
        if data is not None and ctype is not None:
            return web.Response(body=data, headers={"Content-Type": ctype})
        path = r.dataset_image_path(sha)  # an older run: the dataset's file, only as prepared
        if path is not None:
            got = self._verified(r, path, sha)
            if got is not None:
                return web.Response(body=got[0], headers={"Content-Type": got[1]})
        raise web.HTTPNotFound(text="image not on record")

    def _verified(self, r: RunReader, path: Path, sha: str) -> tuple[bytes, str] | None:
        """The image prepared from ``path`` as the run prepared it, when its hash is ``sha``:
        a row naming any other file shows nothing (its hash cannot match)."""
        import base64

        from memearena.config import ImageConfig
        from memearena.data import prepare_image
        from memearena.errors import DataError

        try:
            st = path.stat()
        except OSError:
            return None
        key = (str(path), st.st_size, st.st_mtime_ns, sha)
        hit = self._images.get(key)
        if hit is not None:
            return hit
        run = r.board.get("run")
        cfg_image = ((run.get("config") if isinstance(run, dict) else None) or {}).get("image")
        try:
            image_cfg = ImageConfig.model_validate(cfg_image or {})
        except ValueError:
            image_cfg = ImageConfig.model_validate({})
        try:
            prepared = prepare_image(path, image_cfg)
        except DataError:
            return None
        if prepared.sha256 != sha:
            return None
        data = base64.b64decode(prepared.data_url.split(",", 1)[1])
        self._images[key] = (data, prepared.mime)
        while len(self._images) > _VERIFIED_IMAGES:
            self._images.popitem(last=False)
        return data, prepared.mime

    async def css(self, request: web.Request) -> web.Response:
        text = resources.files("memearena.view").joinpath("static/view.css").read_text("utf-8")
        return web.Response(text=text, content_type="text/css")


_Viewer = View
"""The former name of :class:`View`."""


@dataclass(frozen=True)
class MethodPages:
    """A method's pages in the viewer, declared as ``PAGES`` in its package's ``pages.py``
    (templates in its ``html/`` folder, named ``<method>/<file>``). Every function is given
    the run's reader; a page function, the viewer and the request."""

    routes: tuple[tuple[str, Callable[[View, web.Request], web.StreamResponse]], ...]
    """``(path under /r/{run}, page function)``; paths start with ``/``."""
    nav: tuple[tuple[str, str], ...] = ()
    """``(path, label)`` links in the navigation of a run holding the method."""
    search: tuple[str, str] | None = None
    """``(path, placeholder)`` of a search box (its ``q`` parameter), or None."""
    served: Callable[[RunReader, str, str], list[dict[str, Any]]] | None = None
    """(reader, request hash, role) -> where a call of one of its roles served, each
    ``{"href", "label", "note"}`` (``href`` under the run, from ``/``)."""
    meme_pages: Callable[[RunReader], Mapping[str, Mapping[str, str | None]]] | None = None
    """(reader) -> the memes it shows on a page of their own, by uid: ``{"href": path under
    the run, "image": the meme's image hash}``."""
    warm: Callable[[RunReader], object] | None = None
    """(reader) -> computed at start: the indexes its first pages need."""
    image_folders: tuple[str, ...] = ()
    """Folders of the run directory where an older run of it kept images of its own."""
    filters: Callable[[RunReader], Mapping[str, list[str]]] | None = None
    """(reader) -> values its list filters offer, by name (in ``RunReader.filter_values``)."""
    queries: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    """Its queries by name, each ``(reader, ...)``: also reachable as the reader's methods
    (``reader.battles(...)``), as they were before a method's queries moved to its package."""


def make_app(
    root: Path,
    bind_host: str = "127.0.0.1",
    *,
    warm: bool = True,
    allow_remote: bool = False,
    allowed_hosts: Iterable[str] = (),
    heavy_pages: int = HEAVY_PAGES,
    max_waiting: int = MAX_WAITING,
    request_timeout: float = REQUEST_TIMEOUT_S,
    label: bool = False,
) -> web.Application:
    """The viewer over one run directory or a folder of runs (ViewError when none is there,
    or when ``bind_host`` is not a loopback address and ``allow_remote`` is not given).
    ``warm``: at start, compute each run's summaries and meme index in a worker thread (reads
    only), so the first pages of a large run open as fast as the next ones. Requests are
    answered only when addressed to a name of ``host_names(bind_host, allowed_hosts)``.
    ``label``: add the labelling pages and their writes (``memearena.view.labels``)."""
    if bind_host.strip().lower() not in LOOPBACK_HOSTS and not allow_remote:
        raise ViewError(
            f"--host {bind_host}: not a loopback address; the viewer shows every request, reply"
            " and image of the runs to whoever reaches it: pass --allow-remote to serve it there"
        )
    v = View(root)
    gate = _Gate(heavy_pages, max_waiting, request_timeout)
    app = web.Application(middlewares=[_guard])
    app[ALLOWED_HOSTS] = host_names(bind_host, allowed_hosts)
    app[VIEWER] = v

    def heavy(page: Callable[[web.Request], web.StreamResponse]) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            return await gate.run(lambda: page(request))

        return handler

    r = app.router
    r.add_get("/static/view.css", v.css)
    for path, page in (
        ("/", v.runs),
        ("/r/{run}/", v.overview),
        ("/r/{run}/calls", v.calls),
        ("/r/{run}/call/{id}", v.call),
        ("/r/{run}/call/{id}/reply", v.call_reply),
        ("/r/{run}/call/{id}/request", v.call_request),
        ("/r/{run}/image/{sha}", v.image),
        ("/r/{run}/profile", profile_page(v)),
    ):
        r.add_get(path, heavy(page))
    # Each registered method's own pages (its package's pages.py), under the run's prefix.
    for name in method_names():
        pages = method_pages(name)
        for sub, method_page in pages.routes if pages is not None else ():
            r.add_get("/r/{run}" + sub, heavy(functools.partial(method_page, v)))
    add_compare_page(r, v, heavy)

    async def close(_: web.Application) -> None:
        task = app.get(WARMING)
        if task is not None and not task.done():
            await asyncio.wait([task], timeout=30)
        gate.pool.shutdown(wait=False, cancel_futures=True)
        for reader in v.readers.values():
            reader.close()

    async def start_warming(_: web.Application) -> None:
        app[WARMING] = asyncio.get_running_loop().create_task(asyncio.to_thread(v.warm))

    if label:  # imported here: the labelling module builds on this one
        from memearena.view.labels import install

        install(app, warm=warm)
    if warm:
        app.on_startup.append(start_warming)
    app.on_cleanup.append(close)
    return app


def page_links(page: Page) -> dict[str, int | None]:
    """Offsets of the previous and next pages (None at either end)."""
    prev = max(0, page.offset - page.limit) if page.offset > 0 else None
    return {"prev": prev, "next": page.offset + page.limit if page.more else None}
