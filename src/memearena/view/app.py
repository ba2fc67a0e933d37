"""The viewer's web app: server-rendered pages (Jinja2, autoescaped) over ``queries``.

Threats: every string on a page comes from a model, a dataset or a config, so each reaches
the page through autoescaping only (no ``|safe`` of run data, no script at all); the
Content-Security-Policy forbids any remote load and any inline script or style, so a string
that slipped through still could not run or call out; the server binds loopback and answers
only requests addressed to a loopback host name (a web page elsewhere cannot rebind a name to
it and read the run)."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any, TypeGuard
from urllib.parse import urlencode

from aiohttp import web
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from memearena.view.queries import OUTCOMES, Page, RunReader, ViewError, find_runs

__all__ = ["CSP", "make_app"]

CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'none'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; "
    "connect-src 'none'"
)
"""No remote load, no script, no inline style: the pages are plain HTML and one stylesheet."""

BIND_HOST: web.AppKey[str] = web.AppKey("bind_host", str)
VIEWER: web.AppKey[Any] = web.AppKey("viewer", object)
WARMING: web.AppKey[Any] = web.AppKey("warming", object)
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


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
    env = Environment(
        loader=PackageLoader("memearena.view", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["pretty"] = lambda v: json.dumps(v, indent=1, ensure_ascii=False, default=str)
    env.filters["pct"] = lambda v: "–" if not _finite(v) else f"{100 * float(v):.0f}%"
    env.filters["est"] = _est
    env.filters["words"] = _words
    env.globals["pct_ci"] = _pct_ci
    env.globals["num_ci"] = _num_ci
    env.globals["qs"] = _qs
    env.globals["bar"] = _bar
    env.globals["cell_fill"] = _cell_fill
    env.globals["page_links"] = page_links
    return env


def _finite(v: Any) -> TypeGuard[float]:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _num(v: Any, digits: int = 2) -> str:
    if isinstance(v, bool) or v is None:
        return "–" if v is None else str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if _finite(v):
        return f"{v:,.{digits}f}"
    return str(v)


def _est(e: Any, digits: int = 2) -> str:
    """An estimate ``{"value", "ci_low", "ci_high"}`` as the report writes it,
    ``value [lo, hi]`` (``value`` alone without an interval; ``no data`` without a value); a
    bare number as ``num``."""
    if not isinstance(e, dict):
        return _num(e, digits) if _finite(e) else "no data"
    v, lo, hi = e.get("value"), e.get("ci_low"), e.get("ci_high")
    if not _finite(v):
        return "no data"
    if not (_finite(lo) and _finite(hi)):
        return f"{v:.{digits}f}"
    return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _pct_ci(v: Any, ci: Any) -> str:
    """A proportion with its interval as the report writes it: ``89% [35%, 100%]``."""
    if not _finite(v):
        return "–"
    if isinstance(ci, list | tuple) and len(ci) == 2 and _finite(ci[0]) and _finite(ci[1]):
        return f"{v:.0%} [{ci[0]:.0%}, {ci[1]:.0%}]"
    return f"{v:.0%}"


def _num_ci(v: Any, ci: Any, digits: int = 2) -> str:
    """A mean with its interval as the report writes it: ``8.39 [7.76, 8.98]``."""
    if not _finite(v):
        return "–"
    if isinstance(ci, list | tuple) and len(ci) == 2 and _finite(ci[0]) and _finite(ci[1]):
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


def _value(e: Any) -> float | None:
    v = e.get("value") if isinstance(e, dict) else None
    return float(v) if _finite(v) else None


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


_ORDER_FIELDS = ("trust", "overall")
"""The leaderboard columns a Judge-audit section may be ordered by, in the order shown."""


def _order_field(section: dict[str, Any], rows: list[dict[str, Any]]) -> str | None:
    """The column the Judge-audit leaderboard is ordered by: the one the section names
    (``ranked_by``), else the shown column whose values fall with the rank (the rows keep the
    analysis's order; the viewer never sorts them)."""
    named = section.get("ranked_by")
    if isinstance(named, str) and named:
        return named
    for name in _ORDER_FIELDS:
        got = [_value(r.get(name)) for r in rows]
        vals = [v for v in got if v is not None]
        if rows and len(vals) == len(got) and all(a >= b for a, b in itertools.pairwise(vals)):
            return name
    return None


def _qs(base: dict[str, Any], **changes: Any) -> str:
    """A query string: ``base`` with ``changes`` applied, empty values dropped."""
    merged = {**base, **changes}
    return urlencode({k: v for k, v in merged.items() if v not in ("", None, 0)})


def _bar(value: Any, low: Any, high: Any, lo: float, hi: float, width: int = 160) -> dict[str, Any]:
    """Pixel positions of a point and its interval on a scale from ``lo`` to ``hi``."""
    span = (hi - lo) or 1.0

    def x(v: Any) -> float | None:
        if not _finite(v):
            return None
        return round(max(0.0, min(1.0, (float(v) - lo) / span)) * (width - 4) + 2, 1)

    return {"w": width, "x": x(value), "lo": x(low), "hi": x(high)}


def _cell_fill(v: Any) -> str:
    """A fill for a rate in [0, 1] (white to red); grey when missing."""
    if not _finite(v):
        return "#eeeeee"
    t = max(0.0, min(1.0, float(v)))
    g = int(255 - 155 * t)
    return f"rgb(255,{g},{g})"


def _int(request: web.Request, name: str, default: int = 0) -> int:
    try:
        return max(0, int(request.query.get(name, default)))
    except ValueError:
        return default


@web.middleware
async def _guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    # Bound to loopback, only a loopback name is answered (DNS rebinding); bound elsewhere on
    # purpose (--host), any name is.
    raw = request.host or ""
    host = raw.split("]")[0] + "]" if raw.startswith("[") else raw.rsplit(":", 1)[0]
    if request.app[BIND_HOST] in _LOOPBACK and host not in _LOOPBACK:
        return web.Response(status=421, text="misdirected request")
    if request.method not in ("GET", "HEAD"):
        return web.Response(status=405, text="read-only viewer")
    try:
        resp = await handler(request)
    except ViewError as e:
        resp = web.Response(status=404, text=str(e))
    resp.headers["Content-Security-Policy"] = CSP
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Referrer-Policy"] = "no-referrer"
    resp.headers["X-Frame-Options"] = "DENY"
    resp.headers["Cache-Control"] = "no-store"
    return resp


class _Viewer:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.paths = find_runs(self.root)
        self.readers: dict[int, RunReader] = {}
        self.env = _env()

    def warm(self) -> None:
        """Compute every run's summaries and meme index (reads only; a failure is left for the
        page that needs it to report)."""
        for n, path in enumerate(self.paths):
            try:
                reader = self.readers.setdefault(n, RunReader(path))
                reader.warm()
            except Exception:
                continue

    def reader(self, request: web.Request) -> tuple[int, RunReader]:
        try:
            n = int(request.match_info["run"])
            path = self.paths[n]
        except (ValueError, IndexError):
            raise web.HTTPNotFound(text="no such run") from None
        if n not in self.readers:
            self.readers[n] = RunReader(path)
        return n, self.readers[n]

    def label(self, n: int) -> str:
        p = self.paths[n]
        rel = p.relative_to(self.root) if p != self.root else Path(p.name)
        return str(rel)

    def render(self, request: web.Request, template: str, **ctx: Any) -> web.Response:
        n = ctx.get("n")
        reader = self.readers.get(n) if isinstance(n, int) else None
        # The navigation offers the pages of the methods this run holds (no dead links).
        ctx.setdefault("methods", reader.overview()["methods"] if reader is not None else [])
        html = self.env.get_template(template).render(
            runs=[self.label(i) for i in range(len(self.paths))],
            query=dict(request.query),
            path=request.path,
            outcomes=OUTCOMES,
            **ctx,
        )
        return web.Response(text=html, content_type="text/html", charset="utf-8")

    # ------------------------------------------------------------------ pages
    async def runs(self, request: web.Request) -> web.Response:
        rows = []
        for n in range(len(self.paths)):
            if n not in self.readers:
                self.readers[n] = RunReader(self.paths[n])
            o = self.readers[n].overview()
            rows.append({"n": n, "label": self.label(n), **o})
        return self.render(request, "runs.html.j2", rows=rows)

    async def overview(self, request: web.Request) -> web.Response:
        n, r = self.reader(request)
        return self.render(request, "overview.html.j2", n=n, label=self.label(n), o=r.overview())

    async def arena(self, request: web.Request) -> web.Response:
        n, r = self.reader(request)
        arena = r.board.get("arena")
        if not isinstance(arena, dict):
            raise ViewError("this run has no Arena results")
        boards: list[tuple[str, str, list[dict[str, Any]]]] = [
            ("overall", "", arena.get("overall") or [])
        ]
        for group, field in (
            ("criterion", "by_criterion"),
            ("judge", "by_judge"),
            ("context", "by_context"),
            ("source", "by_source"),
        ):
            for name, rows in (arena.get(field) or {}).items():
                boards.append((group, str(name), rows or []))
        ratings = [
            float(v)
            for _, _, rows in boards
            for row in rows
            for v in (row.get("ci_low"), row.get("ci_high"))
            if _finite(v)
        ]
        lo, hi = (min(ratings), max(ratings)) if ratings else (0.0, 1.0)
        matrix = r.pairwise()
        return self.render(
            request,
            "arena.html.j2",
            n=n,
            label=self.label(n),
            arena=arena,
            boards=boards,
            lo=lo,
            hi=hi,
            matrix=matrix,
        )

    def _listing(
        self, request: web.Request, template: str, fetch: str, filters: tuple[str, ...]
    ) -> web.Response:
        """A filtered page of one list: the query's ``filters``, ``offset`` and ``limit`` (50)
        passed to the reader's ``fetch``."""
        n, r = self.reader(request)
        q = request.query
        page = getattr(r, fetch)(
            **{name: q.get(name, "") for name in filters},
            offset=_int(request, "offset"),
            limit=_int(request, "limit", 50) or 50,
        )
        return self.render(
            request, template, n=n, label=self.label(n), page=page, f=r.filter_values()
        )

    async def memes(self, request: web.Request) -> web.Response:
        return self._listing(request, "memes.html.j2", "memes", ("q", "outcome", "model"))

    async def meme(self, request: web.Request) -> web.Response:
        n, r = self.reader(request)
        m = r.meme(request.query.get("id", ""))
        if m is None:
            raise ViewError("no such meme in this run")
        return self.render(request, "meme.html.j2", n=n, label=self.label(n), m=m)

    async def battles(self, request: web.Request) -> web.Response:
        filters = ("meme", "model", "judge", "criterion", "outcome")
        return self._listing(request, "battles.html.j2", "battles", filters)

    async def battle(self, request: web.Request) -> web.Response:
        n, r = self.reader(request)
        b = r.battle(request.query.get("coord", ""))
        if b is None:
            raise ViewError("no such battle in this run")
        return self.render(request, "battle.html.j2", n=n, label=self.label(n), b=b)

    async def calls(self, request: web.Request) -> web.Response:
        return self._listing(request, "calls.html.j2", "calls", ("model", "role", "status"))

    async def call(self, request: web.Request) -> web.Response:
        n, r = self.reader(request)
        try:
            c = r.call(int(request.match_info["id"]))
        except ValueError:
            c = None
        if c is None:
            raise ViewError("no such call in this run")
        endpoint = _endpoint((c.get("request") or {}).get("endpoint"))
        served = r.call_context(str(c.get("request_hash") or ""), str(c.get("role") or ""))
        return self.render(
            request,
            "call.html.j2",
            n=n,
            label=self.label(n),
            c=c,
            endpoint=endpoint,
            served=served,
        )

    async def image(self, request: web.Request) -> web.StreamResponse:
        _, r = self.reader(request)
        data = r.image_bytes(request.match_info["sha"])
        ctype = _image_type(data[:12]) if data else None
        if data is None or ctype is None:
            raise web.HTTPNotFound(text="image not on record")
        return web.Response(body=data, headers={"Content-Type": ctype})

    async def adapt(self, request: web.Request) -> web.Response:
        n, r = self.reader(request)
        adapt = r.board.get("adapt")
        if not isinstance(adapt, dict):
            raise ViewError("this run has no Adapt results")
        cats = list((adapt.get("by_category") or {}).keys())
        models = [str(m.get("model")) for m in adapt.get("models") or []]
        heat: dict[tuple[str, str], dict[str, Any]] = {}
        for cat, rows in (adapt.get("by_category") or {}).items():
            for row in rows or []:
                heat[(str(row.get("model")), str(cat))] = row
        lines = r.chain_lines()
        weaknesses = []
        for w in adapt.get("weaknesses") or []:
            if not isinstance(w, dict):
                continue
            try:
                key = (
                    str(w.get("model")),
                    str(w.get("category")),
                    int(w.get("repeat") or 0),
                    str(w.get("chain_seed") or w.get("meme")),
                    "conditional",
                )
            except (TypeError, ValueError):
                key = ("", "", 0, "", "")
            weaknesses.append({**w, "chain_line": lines.get(key)})
        threshold = adapt.get("failure_threshold")
        rule = adapt.get("failure_rule") or (
            f"score < {float(threshold):g}" if _finite(threshold) else None
        )
        return self.render(
            request,
            "adapt.html.j2",
            n=n,
            label=self.label(n),
            adapt=adapt,
            cats=cats,
            models=models,
            heat=heat,
            weaknesses=weaknesses,
            rule=rule,
        )

    async def adapt_records(self, request: web.Request) -> web.Response:
        n, r = self.reader(request)
        q = request.query
        match = {"target": q.get("model", ""), "category": q.get("category", "")}
        off = _int(request, "offset")
        scores = r.jsonl("adapt_scores", match, off, 50)
        chains = r.jsonl("adapt_chains", match, off, 50)
        return self.render(
            request,
            "adapt_records.html.j2",
            n=n,
            label=self.label(n),
            meme_pages=r.meme_ids(),
            scores=scores,
            chains=chains,
            f=r.filter_values(),
        )

    async def chain(self, request: web.Request) -> web.Response:
        n, r = self.reader(request)
        try:
            line = int(request.match_info["line"])
        except ValueError:
            line = 0
        chain = r.jsonl_line("adapt_chains", line)
        if chain is None:
            raise ViewError("no such chain in this run")
        steps = [st for st in chain.get("steps") or [] if isinstance(st, dict)]
        who = (str(chain.get("category")), str(chain.get("target")), int(chain.get("repeat") or 0))
        for st in steps:
            meme = str(st.get("meme"))
            text = st.get("text") if isinstance(st.get("text"), str) else None
            st["_answer"] = r.adapt_answer(meme, text, *who) if text else None
            original = r.adapt_answer(meme, None, *who)
            st["_original_image"] = (original or {}).get("image") or r.meme_image(meme)
            got = st.get("image")
            shown: dict[str, Any] = got if isinstance(got, dict) else {}
            st["_shown_image"] = (st["_answer"] or {}).get("image") or shown.get("sha256")
            st["_shown_source"] = shown.get("source")
        return self.render(
            request, "chain.html.j2", n=n, label=self.label(n), chain=chain, line=line
        )

    async def judge_audit(self, request: web.Request) -> web.Response:
        n, r = self.reader(request)
        ja = r.board.get("judge_audit")
        if not isinstance(ja, dict):
            raise ViewError("this run has no Judge audit results")
        rows = [r for r in ja.get("leaderboard") or [] if isinstance(r, dict)]
        shown = [f for f in _ORDER_FIELDS if any(isinstance(r.get(f), dict) for r in rows)]
        return self.render(
            request,
            "judge_audit.html.j2",
            n=n,
            label=self.label(n),
            ja=ja,
            rows=rows,
            columns=shown,
            order=_order_field(ja, rows),
        )

    async def ja_pairs(self, request: web.Request) -> web.Response:
        n, r = self.reader(request)
        q = request.query
        match = {"bias_type": q.get("bias_type", ""), "judge": q.get("judge", "")}
        page = r.jsonl("judge_audit_scores", match, _int(request, "offset"), 50)
        ja = r.board.get("judge_audit") or {}
        examples = (ja.get("examples") or {}).get(q.get("bias_type", "")) or []
        shown = [
            (str(s.get("image", "")), str(s.get("query", "")), str(s.get("response", "")))
            for e in examples
            for s in (e.get("unbiased") or {}, e.get("biased") or {})
        ]
        judges = sorted({j for e in examples for j in e.get("scores") or {}})
        found = r.score_replies(shown, judges)
        replies = [
            {"unbiased": found[2 * i], "biased": found[2 * i + 1]} for i in range(len(examples))
        ]
        return self.render(
            request,
            "ja_pairs.html.j2",
            n=n,
            label=self.label(n),
            page=page,
            ja=ja,
            examples=examples,
            replies=replies,
        )

    async def css(self, request: web.Request) -> web.Response:
        text = resources.files("memearena.view").joinpath("static/view.css").read_text("utf-8")
        return web.Response(text=text, content_type="text/css")


def make_app(root: Path, bind_host: str = "127.0.0.1", *, warm: bool = True) -> web.Application:
    """The viewer over one run directory or a folder of runs (ViewError when none is there).
    ``warm``: at start, compute each run's summaries and meme index in a worker thread (reads
    only), so the first pages of a large run open as fast as the next ones."""
    v = _Viewer(root)
    app = web.Application(middlewares=[_guard])
    app[BIND_HOST] = bind_host
    app[VIEWER] = v
    r = app.router
    r.add_get("/", v.runs)
    r.add_get("/static/view.css", v.css)
    r.add_get("/r/{run}/", v.overview)
    r.add_get("/r/{run}/arena", v.arena)
    r.add_get("/r/{run}/memes", v.memes)
    r.add_get("/r/{run}/meme", v.meme)
    r.add_get("/r/{run}/battles", v.battles)
    r.add_get("/r/{run}/battle", v.battle)
    r.add_get("/r/{run}/calls", v.calls)
    r.add_get("/r/{run}/call/{id}", v.call)
    r.add_get("/r/{run}/image/{sha}", v.image)
    r.add_get("/r/{run}/adapt", v.adapt)
    r.add_get("/r/{run}/adapt/records", v.adapt_records)
    r.add_get("/r/{run}/adapt/chain/{line}", v.chain)
    r.add_get("/r/{run}/judge-audit", v.judge_audit)
    r.add_get("/r/{run}/judge-audit/pairs", v.ja_pairs)

    async def close(_: web.Application) -> None:
        task = app.get(WARMING)
        if task is not None and not task.done():
            await asyncio.wait([task], timeout=30)
        for reader in v.readers.values():
            reader.close()

    async def start_warming(_: web.Application) -> None:
        app[WARMING] = asyncio.get_running_loop().create_task(asyncio.to_thread(v.warm))

    if warm:
        app.on_startup.append(start_warming)
    app.on_cleanup.append(close)
    return app


def page_links(page: Page) -> dict[str, int | None]:
    """Offsets of the previous and next pages (None at either end)."""
    prev = max(0, page.offset - page.limit) if page.offset > 0 else None
    return {"prev": prev, "next": page.offset + page.limit if page.more else None}
