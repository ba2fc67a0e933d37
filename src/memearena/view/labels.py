"""Labelling in the viewer (``memearena view DIR --label``): queues a person works through
with the keyboard, the labels written to the run's ``labels.sqlite`` (``memearena.labels``),
and the agreement of the judges with the people who labelled.

Threats, besides the viewer's own (``memearena.view.app``):

- A web page elsewhere must not write a label through the annotator's browser: a write is a
  POST whose ``Origin`` (else ``Referer``) is this server's own loopback origin, carrying the
  session's token (an HMAC of the session cookie under a key made when the process starts; a
  cookie set by another program on another port of the same host holds no valid token). The
  labelling pages send their origin with a POST (``Referrer-Policy: same-origin``; the rest of
  the viewer sends none).
- The pages run one script, this package's ``static/label.js`` (keyboard shortcuts): the CSP
  of a labelling page allows scripts from this origin only (``script-src 'self'``), no inline
  script, and every other response of the viewer is text, HTML, CSS, JSON or an image served
  with ``nosniff``, so no run data can be loaded as a script.
- A person must answer blind: a page never holds an item's ``hidden`` fields (model names, a
  judge's verdict) until that person's label of the item is on record.
- ``run.db`` stays read-only: labels go to ``labels.sqlite`` only, through ``LabelStore``, and
  only when it is the run's own file (a link out of the run directory is refused).
- Names and answers are untrusted: an annotator's name is bounded and free of control
  characters; an answer names only a field and a choice the item offers."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import re
import secrets
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlencode, urlsplit

from aiohttp import web

from memearena.labels import (
    ORDERS,
    LabelError,
    LabelQueue,
    LabelStore,
    available_queues,
    label_queues,
    queue_items,
)
from memearena.view.keys import ALLOWED_HOSTS, CSP, VIEWER
from memearena.view.queries import ViewError

__all__ = [
    "ANNOTATOR_COOKIE",
    "LABEL_CSP",
    "MAX_NAME_CHARS",
    "install",
]

LABEL_CSP = CSP.replace("script-src 'none'", "script-src 'self'")
"""The viewer's CSP with scripts from this origin allowed (``static/label.js``), nothing else."""
ANNOTATOR_COOKIE = "memearena_annotator"
"""The cookie holding the annotator's name (asked once, shown on every labelling page)."""
MAX_NAME_CHARS = 64
"""The longest annotator name accepted."""
MAX_FIELDS = 32
"""The most answers one label may hold."""
LABEL_PAGES = 2
"""Labelling pages rendered at once (each in a worker thread over the run's files)."""
AGREEMENT_BOOTSTRAP = 1000
"""Bootstrap rounds of each agreement figure's interval on the agreement page."""
AGREEMENT_REFRESH_S = 15
"""The agreement page reloads itself this often (the figures follow the labels)."""


def _queue(name: str) -> LabelQueue | None:
    return label_queues().get(name)


def queue_titles() -> dict[str, str]:
    """Each registered queue's heading, by name (its method declares it)."""
    return {name: q.title or name for name, q in label_queues().items()}


def _help(name: str) -> str:
    q = _queue(name)
    return q.help if q else ""


def _figure_title(queue: str, figure: str) -> str:
    q = _queue(queue)
    return dict(q.figure_titles if q else ()).get(figure, figure.replace("_", " "))


"""Figures whose ``judge`` column names an Adapt target."""

log = logging.getLogger("memearena.view")

_LABEL_PATH = re.compile(r"/(label(/[a-z-]*)?|r/[0-9]{1,9}/label(/[a-z-]*)?)")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_SESSION = re.compile(r"[A-Za-z0-9_-]{20,64}")


def clean_name(raw: str) -> str:
    """An annotator's name as given, trimmed; ValueError (one line) when empty, longer than
    ``MAX_NAME_CHARS`` or holding a control or format character."""
    name = unicodedata.normalize("NFC", raw).strip()
    if not name:
        raise ValueError("the annotator's name is empty")
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"the annotator's name is longer than {MAX_NAME_CHARS} characters")
    if any(unicodedata.category(c)[0] in "CZ" and c != " " for c in name):
        raise ValueError("the annotator's name holds a control, format or separator character")
    return name


def _origin_of(url: str) -> str | None:
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}".lower()


def _host_of(host_header: str) -> str:
    raw = host_header.lower()
    return raw.split("]")[0] + "]" if raw.startswith("[") else raw.rsplit(":", 1)[0]


_LOOPBACK = frozenset({"127.0.0.1", "localhost", "[::1]"})


def same_loopback_origin(request: web.Request) -> str | None:
    """Why a write's origin is refused, or None when its ``Origin`` (else its ``Referer``) is
    this server's own origin at a loopback name (a page of another site, or of another port,
    cannot write)."""
    own = f"{request.scheme}://{request.host}".lower()
    if _host_of(request.host or "") not in _LOOPBACK:
        return "labels are written only through a loopback address (127.0.0.1, localhost, [::1])"
    origin = request.headers.get("Origin")
    if origin is not None and origin != "null":
        return None if _origin_of(origin) == own else "a write from another origin"
    referer = request.headers.get("Referer")
    if referer is not None:
        return None if _origin_of(referer) == own else "a write from another origin"
    return "a write that names no origin"


@dataclass(frozen=True)
class _Shown:
    """One item as a page shows it before an answer: no hidden field."""

    key: str
    title: str
    rows: list[list[tuple[str, str]]]
    """The texts, those of one pair (``answer_a``/``answer_b``, ``query_original``/
    ``query_perturbed``) in one row, side by side."""
    images: list[tuple[str, str | None]]
    fields: list[dict[str, Any]]


_CACHE: OrderedDict[tuple[Any, ...], tuple[tuple[Any, ...], Any]] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHED = 32
"""Queue lists and item lists kept (each a run's queue: a few MiB at most)."""


def _cached(run_dir: Path, what: tuple[str, ...], compute: Callable[[], Any]) -> Any:
    """``compute()``, kept while the run's files are unchanged (the items of a queue are a
    function of them: every viewer of this process shares them)."""
    stamp: list[Any] = []
    for name in ("run.db", "run.db-wal", "leaderboard.json", "battles.jsonl", "adapt_chains.jsonl"):
        try:
            st = (run_dir / name).stat()
            stamp.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            stamp.append(None)
    key = (str(run_dir.resolve()), *what)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None and hit[0] == tuple(stamp):
            _CACHE.move_to_end(key)
            return hit[1]
    got = compute()
    with _CACHE_LOCK:
        _CACHE[key] = (tuple(stamp), got)
        while len(_CACHE) > _CACHED:
            _CACHE.popitem(last=False)
    return got


class _Labeller:
    """The labelling pages of one viewer (its runs, its render helper, its run readers)."""

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self.viewer = app[VIEWER]
        self.secret = secrets.token_bytes(32)
        self._slots: asyncio.Semaphore | None = None
        self.post_routes: set[web.AbstractRoute] = set()
        self.warming: asyncio.Task[None] | None = None

    def warm(self) -> None:
        """Read every run's queues and items (a failure is left for the page that needs it)."""
        for path in self.viewer.paths:
            try:
                for queue in self.queues(Path(path)):
                    self.items(Path(path), queue)
            except Exception:
                continue

    # ------------------------------------------------------------------ plumbing
    async def offload(self, fn: Callable[[], web.StreamResponse]) -> web.StreamResponse:
        """A page rendered in a worker thread, at most ``LABEL_PAGES`` at once."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(LABEL_PAGES)
        async with self._slots:
            return await asyncio.to_thread(fn)

    def run(self, request: web.Request) -> tuple[int, Path]:
        n, reader = self.viewer.reader(request)
        return n, Path(reader.dir)

    def labels_file(self, request: web.Request) -> Path:
        """The run's ``labels.sqlite``: ViewError when it is a link out of the run."""
        _, reader = self.viewer.reader(request)
        path = reader.dir / "labels.sqlite"
        if path.is_symlink() or (path.exists() and reader.inside("labels.sqlite") is None):
            raise ViewError(f"{path}: a link, not the run's own file; labels are not read there")
        return path

    def session(self, request: web.Request) -> tuple[str, bool]:
        """The session id of the request's cookie, or a new one (True: to be set)."""
        sid = request.cookies.get(self.cookie_name(request), "")
        if _SESSION.fullmatch(sid):
            return sid, False
        return secrets.token_urlsafe(32), True

    @staticmethod
    def cookie_name(request: web.Request) -> str:
        # One cookie per port: cookies do not tell ports apart, two viewers must not collide.
        port = request.url.port or 0
        return f"memearena_session_{port}"

    def token(self, sid: str) -> str:
        return hmac.new(self.secret, sid.encode(), hashlib.sha256).hexdigest()

    def check_token(self, request: web.Request, form: Mapping[str, Any]) -> str | None:
        """Why the form's token is refused, or None."""
        sid = request.cookies.get(self.cookie_name(request), "")
        given = form.get("csrf")
        if not _SESSION.fullmatch(sid) or not isinstance(given, str):
            return "no session token (reload the page)"
        if not hmac.compare_digest(given.encode(), self.token(sid).encode()):
            return "the session token does not match (reload the page)"
        return None

    @staticmethod
    def annotator(request: web.Request) -> str | None:
        raw = request.cookies.get(ANNOTATOR_COOKIE)
        if not raw:
            return None
        try:
            return clean_name(unquote(raw, errors="strict"))
        except (ValueError, UnicodeDecodeError):
            return None

    def page(
        self, request: web.Request, template: str, *, status: int = 200, **ctx: Any
    ) -> web.Response:
        """A labelling page in the viewer's frame, with the annotator and the session token."""
        sid, new = self.session(request)
        # The run's number as ``rn``, not ``n``: the frame then leaves out the viewer's
        # navigation, whose pages name models and verdicts (a labeller stays blind).
        n = ctx.pop("n", None)
        ctx["rn"] = n
        ctx["run_label"] = self.viewer.label(n) if isinstance(n, int) else ""
        resp: web.Response = self.viewer.render(
            request,
            template,
            status=status,
            annotator=self.annotator(request),
            csrf=self.token(sid),
            queue_titles=queue_titles(),
            **ctx,
        )
        if new:
            resp.set_cookie(
                self.cookie_name(request), sid, httponly=True, samesite="Strict", path="/"
            )
        return resp

    @staticmethod
    def queues(run_dir: Path) -> list[str]:
        """The queues this run has something to label in."""
        got: list[str] = _cached(run_dir, ("queues",), lambda: available_queues(run_dir))
        return got

    @staticmethod
    def items(run_dir: Path, queue: str, order: str = "run") -> list[Any]:
        """The queue's items in ``order``, one per key (a label names its item by key)."""

        def compute() -> list[Any]:
            got: list[Any] = []
            seen: set[str] = set()
            for it in queue_items(run_dir, queue, order=order):
                if str(it.key) not in seen:
                    seen.add(str(it.key))
                    got.append(it)
            return got

        items: list[Any] = _cached(run_dir, ("items", queue, order), compute)
        return items

    def store(self, request: web.Request, *, create: bool) -> LabelStore:
        """The run's label store (reads empty when it has none yet and ``create`` is False)."""
        self.labels_file(request)
        _, run_dir = self.run(request)
        return LabelStore(run_dir, create=create)

    def done(self, request: web.Request, queue: str, annotator: str) -> set[str]:
        store = self.store(request, create=False)
        try:
            return set(store.done_keys(queue, annotator))
        finally:
            store.close()

    def queue_name(self, request: web.Request, run_dir: Path) -> str:
        queue = request.match_info["queue"]
        if queue not in label_queues():
            raise web.HTTPNotFound(text="no such queue")
        if queue not in self.queues(run_dir):
            raise ViewError(f"this run has nothing to label in the {queue} queue")
        return queue

    # ------------------------------------------------------------------ pages
    def runs(self, request: web.Request) -> web.StreamResponse:
        paths = self.viewer.paths
        if len(paths) == 1:
            raise web.HTTPSeeOther("/r/0/label")
        rows = [{"n": i, "label": self.viewer.label(i)} for i in range(len(paths))]
        return self.page(request, "label_runs.html.j2", rows=rows)

    def home(self, request: web.Request) -> web.StreamResponse:
        """The run's queues with the annotator's done and left counts, and what was labelled
        of items no longer in the run."""
        n, run_dir = self.run(request)
        who = self.annotator(request)
        queues = []
        store = self.store(request, create=False)
        try:
            for q in self.queues(run_dir):
                keys = {it.key for it in self.items(run_dir, q)}
                mine = set(store.done_keys(q, who)) if who else set()
                all_labels = store.labels(q)
                gone = {lb.item_key for lb in all_labels if lb.item_key not in keys}
                queues.append(
                    {
                        "name": q,
                        "title": queue_titles().get(q, q),
                        "help": _help(q),
                        "items": len(keys),
                        "done": len(mine & keys),
                        "left": len(keys - mine),
                        "labels": len(all_labels),
                        "annotators": len({lb.annotator for lb in all_labels}),
                        "gone": len(gone),
                        "gone_mine": len(mine - keys),
                    }
                )
        finally:
            store.close()
        return self.page(request, "label_home.html.j2", n=n, queues=queues)

    def _shown(self, n: int, item: Any) -> _Shown:
        images = []
        for name, ref in dict(item.images).items():
            sha = str(ref).removeprefix("sha256:").lower()
            images.append((_caption(str(name)), sha if _SHA256.fullmatch(sha) else None))
        fields = [
            {
                "name": str(f.name),
                "label": str(f.label),
                "choices": [
                    {"value": str(c), "key": str(k) if k else ""}
                    for c, k in zip(f.choices, tuple(f.keys) + ("",) * len(f.choices), strict=False)
                ],
            }
            for f in item.fields
        ]
        rows: list[list[tuple[str, str]]] = []
        last = None
        for name, text in dict(item.texts).items():
            stem, _, end = str(name).rpartition("_")
            paired = end in _PAIRED and bool(stem)
            if paired and last == stem and len(rows[-1]) < 2:
                rows[-1].append((_caption(str(name)), str(text)))
            else:
                rows.append([(_caption(str(name)), str(text))])
            last = stem if paired else None
        return _Shown(str(item.key), str(item.title), rows, images, fields)

    def queue(self, request: web.Request) -> web.StreamResponse:
        """The annotator's next unlabelled item (``after``: the next one past that key); with
        ``answered``, what was hidden of that item, once this annotator's label of it is on
        record."""
        n, run_dir = self.run(request)
        queue = self.queue_name(request, run_dir)
        who = self.annotator(request)
        if who is None:
            raise web.HTTPSeeOther(f"/r/{n}/label?{urlencode({'queue': queue})}")
        return self._queue_page(request, n, run_dir, queue, who, _order(request.query))

    def _queue_page(
        self,
        request: web.Request,
        n: int,
        run_dir: Path,
        queue: str,
        who: str,
        order: str,
        *,
        error: str | None = None,
        failed: str | None = None,
        status: int = 200,
    ) -> web.Response:
        """The queue's page; with ``error``, the item ``failed`` shown again with it."""
        items = self.items(run_dir, queue, order)
        done = self.done(request, queue, who)
        keys = [str(it.key) for it in items]
        left = [it for it in items if str(it.key) not in done]
        after = request.query.get("after", "")
        current = None
        if failed is not None:
            current = next((it for it in items if str(it.key) == failed), None)
        if current is None and after in keys:
            start = keys.index(after) + 1
            ordered = items[start:] + items[:start]
            current = next((it for it in ordered if str(it.key) not in done), None)
        if current is None and left:
            current = left[0]
        answered = None
        key = request.query.get("answered", "")
        if key and key in done:
            answered = self._revealed(request, queue, who, key, items)
        return self.page(
            request,
            "label_item.html.j2",
            status=status,
            n=n,
            queue=queue,
            title=queue_titles().get(queue, queue),
            help=_help(queue),
            item=self._shown(n, current) if current is not None else None,
            done=len(done & set(keys)),
            left=len(left),
            total=len(items),
            answered=answered,
            error=error,
            order=order,
            orders=ORDERS,
        )

    def _revealed(
        self, request: web.Request, queue: str, who: str, key: str, items: list[Any]
    ) -> dict[str, Any]:
        """An item the annotator has labelled: their answer and what was hidden from them."""
        item = next((it for it in items if str(it.key) == key), None)
        store = self.store(request, create=False)
        try:
            mine = [lb for lb in store.labels(queue) if lb.item_key == key and lb.annotator == who]
        finally:
            store.close()
        last = mine[-1] if mine else None
        return {
            "key": key,
            "title": str(item.title) if item is not None else key,
            "answer": dict(last.answer) if last is not None else {},
            "hidden": dict(item.hidden) if item is not None else {},
            "gone": item is None,
        }

    def agreement(self, request: web.Request) -> web.StreamResponse:
        """Every agreement figure of the run's labels, with its interval, grouped by figure."""
        from memearena.labels.agreement import compute_agreement  # numpy: when first asked

        n, run_dir = self.run(request)
        _, reader = self.viewer.reader(request)
        store = self.store(request, create=False)
        try:
            # The store is append-only: its row count names its state, and a reload with no
            # new label reuses the figures (the page reloads itself).
            written = store.count()
            labels = store.labels()
        finally:
            store.close()

        def compute() -> Any:
            labelled = {lb.queue for lb in labels}
            items = {q: self.items(run_dir, q) for q in self.queues(run_dir) if q in labelled}
            return compute_agreement(items, labels, reader.board, n_boot=AGREEMENT_BOOTSTRAP)

        try:  # a store replaced by another file starts its count again
            made = str((run_dir / "labels.sqlite").stat().st_ino)
        except OSError:
            made = ""
        got = _cached(run_dir, ("agreement", made, str(written)), compute)
        figures: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in got.rows:
            figures.setdefault((str(row["queue"]), str(row["figure"])), []).append(row)
        groups = [_figure_group(q, f, rows) for (q, f), rows in figures.items()]
        resp = self.page(
            request,
            "label_agreement.html.j2",
            n=n,
            groups=groups,
            summary=got.queues,
            orphans={q: len(keys) for q, keys in got.orphans.items()},
            widest=got.widest,
            bootstrap=got.bootstrap,
        )
        # The figures follow the labels as they arrive.
        resp.headers["Refresh"] = str(AGREEMENT_REFRESH_S)
        return resp

    # ------------------------------------------------------------------ writes
    def name(self, request: web.Request, form: Mapping[str, Any]) -> web.StreamResponse:
        n, _ = self.run(request)
        target = f"/r/{n}/label"
        queue = form.get("queue")
        if isinstance(queue, str) and queue in label_queues():
            target += f"/{queue}"
        try:
            name = clean_name(str(form.get("name", "")))
        except ValueError as e:
            return self.viewer.error_page(request, 400, "Annotator's name refused", str(e))
        resp = web.Response(status=303, headers={"Location": target})
        resp.set_cookie(
            ANNOTATOR_COOKIE, quote(name, safe=""), httponly=True, samesite="Strict", path="/"
        )
        return resp

    def write(self, request: web.Request, form: Mapping[str, Any]) -> web.StreamResponse:
        """One label: the item's key and one choice per answered field; then the next item."""
        n, run_dir = self.run(request)
        queue = self.queue_name(request, run_dir)
        who = self.annotator(request)
        if who is None:
            return self.viewer.error_page(
                request, 400, "Label refused", "no annotator's name: give it on the queue page"
            )
        key = form.get("item")
        if not isinstance(key, str) or not key or len(key) > 4096:
            return self.viewer.error_page(request, 400, "Label refused", "no item named")
        order = _order(form)
        # The store checks each field and choice against the queue's (a label of an item gone
        # from the run is still checked, and kept).
        answer = {
            name[2:]: value
            for name, value in form.items()
            if name.startswith("f.") and isinstance(value, str) and value
        }
        if len(answer) > MAX_FIELDS:
            answer = {}
        if not answer:
            return self._queue_page(
                request,
                n,
                run_dir,
                queue,
                who,
                order,
                status=400,
                failed=key,
                error="no answer given: pick a choice in at least one question",
            )
        try:
            store = self.store(request, create=True)
        except LabelError as e:
            return self.viewer.error_page(request, 500, "Label not recorded", str(e))
        try:
            store.add(queue=queue, item_key=key, annotator=who, answer=answer)
        except LabelError as e:
            return self._queue_page(
                request,
                n,
                run_dir,
                queue,
                who,
                order,
                status=400,
                failed=key,
                error=str(e).splitlines()[0],
            )
        finally:
            store.close()
        query = {"answered": key, "after": key}
        if order != "run":
            query["order"] = order
        raise web.HTTPSeeOther(f"/r/{n}/label/{queue}?{urlencode(query)}")


def _figure_group(queue: str, figure: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One figure's rows for its table: the columns that vary; with two, also as a matrix
    (the first column's values down, the second's across), each cell its row."""
    columns = [c for c in ("judge", "field", "group") if any(r[c] for r in rows)]
    q = _queue(queue)
    targets = q.target_figures if q else frozenset()
    names = {c: ("target" if c == "judge" and figure in targets else c) for c in columns}
    matrix = None
    if len(columns) == 2:
        down = list(dict.fromkeys(str(r[columns[0]]) for r in rows))
        across = list(dict.fromkeys(str(r[columns[1]]) for r in rows))
        cells = {(str(r[columns[0]]), str(r[columns[1]])): r for r in rows}
        if len(cells) == len(rows) and len(across) > 1:
            matrix = {"down": down, "across": across, "cells": cells}
    return {
        "queue": queue,
        "figure": figure,
        "title": _figure_title(queue, figure),
        "rows": rows,
        "columns": columns,
        "names": names,
        "matrix": matrix,
    }


def _order(params: Mapping[str, Any]) -> str:
    """The queue order a query or form names (the run's order when none or unknown)."""
    got = params.get("order")
    return got if isinstance(got, str) and got in ORDERS else "run"


_PAIRED = frozenset({"a", "b", "original", "perturbed"})


def _caption(name: str) -> str:
    """A text's name as a heading: ``answer_a`` → ``Answer A``, ``meme_text`` → ``Meme text``."""
    words = name.replace("_", " ").split()
    if not words:
        return name
    if len(words[-1]) == 1:
        words[-1] = words[-1].upper()
    return " ".join(words)[:1].upper() + " ".join(words)[1:]


def install(app: web.Application, *, warm: bool = True) -> None:
    """Add the labelling pages to a viewer made by ``make_app``: ``/label``,
    ``/r/{run}/label`` (the queues), ``/r/{run}/label/{queue}`` (one item; POST writes a
    label), ``/r/{run}/label/agreement`` and ``POST /r/{run}/label/annotator``."""
    lab = _Labeller(app)

    def threaded(page: Callable[[web.Request], web.StreamResponse]) -> Any:
        async def handler(request: web.Request) -> web.StreamResponse:
            return await lab.offload(lambda: page(request))

        return handler

    def posted(
        write: Callable[[web.Request, Mapping[str, Any]], web.StreamResponse],
    ) -> Any:
        async def handler(request: web.Request) -> web.StreamResponse:
            form = await request.post()
            why = lab.check_token(request, form)
            if why is not None:
                return web.Response(status=403, text=f"label refused: {why}")
            return await lab.offload(lambda: write(request, form))

        return handler

    async def static(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        types = {"label.js": "text/javascript", "label.css": "text/css"}
        if name not in types:
            raise web.HTTPNotFound(text="no such file")
        text = resources.files("memearena.view").joinpath(f"static/{name}").read_text("utf-8")
        return web.Response(text=text, content_type=types[name])

    r = app.router
    r.add_get("/static/{name:label\\.(?:js|css)}", static)
    r.add_get("/label", threaded(lab.runs))
    r.add_get("/r/{run}/label", threaded(lab.home))
    r.add_get("/r/{run}/label/agreement", threaded(lab.agreement))
    lab.post_routes.add(r.add_post("/r/{run}/label/annotator", posted(lab.name)))
    r.add_get("/r/{run}/label/{queue}", threaded(lab.queue))
    lab.post_routes.add(r.add_post("/r/{run}/label/{queue}", posted(lab.write)))

    @web.middleware
    async def label_guard(request: web.Request, handler: Any) -> web.StreamResponse:
        """Outside the viewer's guard: a labelling POST is checked here (host, origin, then
        the token in its handler) and answered without that guard's read-only refusal; a
        labelling page gets the labelling CSP and sends its origin with a POST."""
        if not _LABEL_PATH.fullmatch(request.path):
            return await handler(request)
        if request.method == "POST" and request.match_info.route in lab.post_routes:
            host = _host_of(request.host or "")
            if host not in request.app[ALLOWED_HOSTS]:
                return web.Response(status=421, text="misdirected request")
            why = same_loopback_origin(request)
            if why is not None:
                resp: web.StreamResponse = web.Response(status=403, text=f"label refused: {why}")
            else:
                try:
                    resp = await request.match_info.handler(request)
                except web.HTTPException:
                    raise
                except ViewError as e:
                    resp = lab.viewer.error_page(request, 404, "Not found", str(e))
                except Exception as e:  # a damaged run file: its error panel, on one line
                    reason = f"{type(e).__name__}: {str(e)[:300]}"
                    log.warning("%s: %s", request.path[:200], reason)
                    resp = lab.viewer.error_page(request, 500, "Label not recorded", reason)
        else:
            resp = await handler(request)
        resp.headers["Content-Security-Policy"] = LABEL_CSP
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["Referrer-Policy"] = "same-origin"
        resp.headers["X-Frame-Options"] = "DENY"
        resp.headers["Cache-Control"] = "no-store"
        return resp

    app.middlewares.insert(0, label_guard)

    async def start_warming(_: web.Application) -> None:
        lab.warming = asyncio.get_running_loop().create_task(asyncio.to_thread(lab.warm))

    async def stop_warming(_: web.Application) -> None:
        if lab.warming is not None and not lab.warming.done():
            await asyncio.wait([lab.warming], timeout=30)

    if warm:
        app.on_startup.append(start_warming)
        app.on_cleanup.append(stop_warming)
