"""``memearena view DIR --bundle OUT``: the viewer's pages written out as a static site.

The pages are the viewer's own: the app of :func:`memearena.view.app.make_app` is served on a
loopback port inside this process and crawled from its front page, following every same-site
link and image (so a page another module adds is bundled as soon as a page links to it). Each
URL becomes one file under OUT, named from its path (a query string becomes a readable part and
a hash of it: the same URL always gets the same name); links are then rewritten to relative
paths, so the site opens from disk (``file://``) or any static host. Filters and search need the
server: their forms are kept, disabled. Past ``max_pages`` linked URLs the crawl follows no
more links (a bundled page's images still come with it), and a link to a page left out opens
``not-bundled.html``, which says so.

Threats: file names come from URLs whose parts come from models and datasets (model names in
query strings), so every name is rebuilt from a safe alphabet (anything else is replaced and
the name made unique by a hash): no URL can name a file outside OUT. The pages keep the
viewer's Content-Security-Policy (as a ``<meta>``: no script, no remote load), and a bundle
replaces only a directory that is empty or an earlier bundle (its marker file)."""

from __future__ import annotations

import asyncio
import hashlib
import html
import os
import posixpath
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlencode, urljoin, urlsplit

from memearena.view.queries import ViewError, find_runs

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "DEFAULT_MAX_PAGES",
    "MARKER",
    "BundleSummary",
    "bundle_path",
    "print_bundle",
    "url_key",
    "write_bundle",
]

DEFAULT_MAX_PAGES = 50_000
"""Linked URLs (pages, downloads) a bundle holds at most, breadth first from the front page;
the images a bundled page shows are always bundled with it."""
MARKER = ".memearena-bundle"
"""The file that marks a directory as a bundle (a later bundle may replace it)."""
LEFT_OUT = "not-bundled.html"
"""Where a link to a page the crawl left out leads."""
CONCURRENCY = 4
"""Requests in flight while crawling (the app renders at most its ``heavy_pages`` at once)."""
_MEMO = 1 << 18
"""Rewritten links remembered (a few tens of MiB at most)."""
RETRIES = 5
"""Times a page answered 503 (the app busy) is asked again."""

META_CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'none'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; connect-src 'none'"
)
"""The viewer's policy as a page can carry it (``frame-ancestors`` has no effect in a meta)."""
_BUNDLE_CSS = (
    "\n/* bundle: the server's filters are shown, disabled */\n"
    "fieldset.bundle-off { border: 0; margin: 0; padding: 0; min-width: 0; display: contents; }\n"
)
_EXT = {
    "text/html": ".html",
    "text/css": ".css",
    "text/plain": ".txt",
    "application/json": ".json",
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
}
# Pages are rendered with autoescape: a quote inside an attribute value or in text is always an
# entity, so an attribute's value is exactly the text between its quotes.
_LINK = re.compile(r"""(\s(?:href|src)=)(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE)
_FORM_OPEN = re.compile(r"<form\b([^>]*)>", re.IGNORECASE)
_FORM_CLOSE = re.compile(r"</form\s*>", re.IGNORECASE)
_ACTION = re.compile(r"""\saction=(?:"[^"]*"|'[^']*')""", re.IGNORECASE)
_HEAD = re.compile(r"<head\b[^>]*>", re.IGNORECASE)
_SAFE_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,80}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_DISABLED = (
    '<fieldset class="bundle-off" disabled title="Filters and search need the live viewer '
    '(memearena view DIR)">'
)


@dataclass(frozen=True)
class BundleSummary:
    """What a bundle holds and what it cost."""

    out: Path
    """The bundle's directory (open ``index.html``)."""
    pages: int
    """HTML pages written."""
    files: int
    """Other files written (stylesheet, images, downloads)."""
    bytes: int
    """Everything written, in bytes."""
    left_out: int
    """Same-site URLs linked but not bundled (past ``max_pages``)."""
    failed: tuple[tuple[str, int], ...]
    """URLs the viewer answered with an error status (an HTML error page is still written)."""
    seconds: float
    """Wall time of the whole build."""
    crawl_seconds: float = 0.0
    """Of which rendering and fetching the pages (the rest: rewriting links, writing files)."""


@dataclass
class _Crawl:
    max_pages: int
    files: dict[str, str] = field(default_factory=dict)
    """URL key (path and canonical query) -> file path under OUT (POSIX, relative)."""
    pages: list[str] = field(default_factory=list)
    """URL keys written as HTML (rewritten in the second pass)."""
    queued: set[str] = field(default_factory=set)
    rewritten: dict[tuple[str, str], str | None] = field(default_factory=dict)
    """(folder, root-relative link) -> the link as rewritten there (at most ``_MEMO``)."""
    linked: int = 0
    """URLs queued as links (the bound counts these; what a page shows is not counted)."""
    left_out: set[str] = field(default_factory=set)
    failed: list[tuple[str, int]] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    """File paths taken (lower case: a case-insensitive disk must not merge two)."""


def url_key(url: str) -> str:
    """A same-site URL as the crawl keys it: its path, and its query with the parameters in
    a fixed order (the same page reached by two spellings is one file)."""
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    query = urlencode(sorted(pairs, key=lambda kv: kv[0]))
    return (parts.path or "/") + (f"?{query}" if query else "")


def _digest(text: str, n: int = 10) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:n]


def _segment(raw: str) -> str:
    """One path segment as a file name: kept when it is made of the safe alphabet, else
    rebuilt from it with a hash of the original (never ``..``, a slash or a control)."""
    if _SAFE_SEGMENT.fullmatch(raw) and not raw.endswith("."):
        return raw
    slug = _UNSAFE.sub("_", raw).strip("._")[:40] or "x"
    return f"{slug}-{_digest(raw)}"


def bundle_path(key: str, content_type: str) -> str:
    """The file (POSIX path under OUT) a URL key is written to, by its content type: ``/`` is
    ``index.html``, ``/r/0/`` is ``r/0/index.html``, ``/r/0/arena`` is ``r/0/arena.html``,
    ``/r/0/meme?id=demo:m01`` is ``r/0/meme__id_demo_m01-<hash>.html``."""
    path, _, query = key.partition("?")
    parts = [_segment(unquote(s)) for s in path.split("/") if s]
    if path.endswith("/") or not parts:
        parts.append("index")
    name = parts[-1]
    if query:
        slug = _UNSAFE.sub("_", unquote(query)).strip("._")[:60]
        name = f"{name}__{slug}-{_digest(query)}"
    ext = _EXT.get(content_type, ".bin")
    if not name.lower().endswith(ext):
        name += ext
    parts[-1] = name
    return "/".join(parts)


def _claim(crawl: _Crawl, key: str, rel: str) -> str:
    """``rel``, or (when another URL took it) ``rel`` with a hash of ``key``."""
    if rel.lower() in crawl.used:
        stem, dot, ext = rel.rpartition(".")
        rel = f"{stem}-{_digest(key)}.{ext}" if dot else f"{rel}-{_digest(key)}"
    crawl.used.add(rel.lower())
    return rel


def _links(text: str, page_url: str, base: str) -> list[tuple[str, bool]]:
    """The same-site URL keys a page links to, each with whether the page shows it (an image,
    a stylesheet: True) rather than links to it."""
    out = []
    for m in _LINK.finditer(text):
        raw = html.unescape(m.group(2) if m.group(2) is not None else m.group(3))
        key = _same_site(raw, page_url, base)
        if key is not None:
            start = text.rfind("<", 0, m.start()) + 1
            tag = text[start : m.start()].split(maxsplit=1)[0].lower() if start else ""
            shown = m.group(1).strip().lower().startswith("src") or tag == "link"
            out.append((key, shown))
    return out


def _same_site(raw: str, page_url: str, base: str) -> str | None:
    if not raw or raw.startswith("#"):
        return None
    full = urljoin(page_url, raw)
    if not full.startswith(base + "/"):
        return None
    return url_key(full[len(base) :])


async def _fetch_all(root: Path, tmp: Path, crawl: _Crawl) -> None:
    import aiohttp
    from aiohttp import web
    from yarl import URL

    from memearena.view.app import make_app

    # One page at a time: the crawl needs no parallel rendering, and pages rendered in one
    # thread share nothing between threads (a run's readers are not all thread-safe).
    app = make_app(root, "127.0.0.1", warm=False, heavy_pages=1)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    queue: asyncio.Queue[str] = asyncio.Queue()

    def offer(key: str, shown: bool = False) -> None:
        # What a bundled page shows (its images) is always bundled: the bound cuts links only.
        if key in crawl.queued:
            return
        if not shown and crawl.linked >= crawl.max_pages:
            crawl.left_out.add(key)
            return
        crawl.queued.add(key)
        crawl.linked += not shown
        queue.put_nowait(key)

    async def one(session: aiohttp.ClientSession, key: str) -> None:
        for attempt in range(RETRIES + 1):
            async with session.get(URL(base + key, encoded=True), allow_redirects=False) as resp:
                if resp.status == 503 and attempt < RETRIES:
                    await asyncio.sleep(0.5 * (attempt + 1))
                    continue
                ctype = resp.content_type
                body = await resp.read()
                status = resp.status
            break
        if status >= 400:
            crawl.failed.append((key, status))
            if ctype != "text/html":
                return
        rel = _claim(crawl, key, bundle_path(key, ctype))
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if ctype == "text/css":
            body += _BUNDLE_CSS.encode()
        target.write_bytes(body)
        crawl.files[key] = rel
        if ctype == "text/html":
            crawl.pages.append(key)
            for link, shown in _links(body.decode("utf-8", "replace"), base + key, base):
                offer(link, shown)

    async def worker(session: aiohttp.ClientSession) -> None:
        while True:
            key = await queue.get()
            try:
                await one(session, key)
            finally:
                queue.task_done()

    try:
        sock.bind(("127.0.0.1", 0))
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        await web.SockSite(runner, sock).start()
        offer("/")
        timeout = aiohttp.ClientTimeout(total=None, sock_read=300)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            workers = [asyncio.create_task(worker(session)) for _ in range(CONCURRENCY)]
            done = asyncio.create_task(queue.join())
            # A worker's failure (the app gone, a full disk) ends the crawl with its error.
            await asyncio.wait([done, *workers], return_when=asyncio.FIRST_COMPLETED)
            for w in workers:
                if w.done() and w.exception() is not None:
                    done.cancel()
                    raise w.exception()  # type: ignore[misc]
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
    finally:
        await runner.cleanup()
        sock.close()
    crawl.left_out -= set(crawl.files)


def _relative(raw: str, page_url: str, base: str, here: str, crawl: _Crawl) -> str | None:
    """A same-site link as a quoted attribute value relative to the folder ``here`` (None: not
    same-site, kept as it is)."""
    target = _same_site(raw, page_url, base)
    if target is None:
        return None
    frag = raw.partition("#")[2]
    rel = crawl.files.get(target, LEFT_OUT)
    new = posixpath.relpath(rel, here or ".") + (f"#{frag}" if frag else "")
    return f'"{html.escape(new, quote=True)}"'


def _rewrite(text: str, key: str, crawl: _Crawl) -> str:
    """A page with its same-site links made relative to its own file, its forms disabled and
    the viewer's policy in its head."""
    here = posixpath.dirname(crawl.files[key])
    page_url = "http://bundle.invalid" + key
    base = "http://bundle.invalid"

    def link(m: re.Match[str]) -> str:
        raw = m.group(2) if m.group(2) is not None else m.group(3)
        # A link from the site's root reads the same from every page of one folder.
        memo = (here, raw) if raw.startswith("/") else None
        if memo is not None and memo in crawl.rewritten:
            new = crawl.rewritten[memo]
        else:
            new = _relative(html.unescape(raw), page_url, base, here, crawl)
            if memo is not None and len(crawl.rewritten) < _MEMO:
                crawl.rewritten[memo] = new
        return m.group(0) if new is None else f"{m.group(1)}{new}"

    def form(m: re.Match[str]) -> str:
        return f"<form{_ACTION.sub('', m.group(1))}>{_DISABLED}"

    text = _LINK.sub(link, text)
    text = _FORM_CLOSE.sub("</fieldset></form>", _FORM_OPEN.sub(form, text))
    meta = (
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(META_CSP)}">'
        '<meta name="referrer" content="no-referrer">'
    )
    return _HEAD.sub(lambda m: m.group(0) + meta, text, count=1)


def _left_out_page(crawl: _Crawl) -> str:
    css = crawl.files.get("/static/view.css")
    link = f'<link rel="stylesheet" href="{html.escape(css)}">' if css else ""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(META_CSP)}">'
        f"<title>Not in this bundle</title>{link}</head><body><main><h1>Not in this bundle</h1>"
        f"<p>This bundle holds the first {crawl.max_pages:,} pages of the viewer; the "
        "page this link leads to is not among them. Open the run itself with "
        "<code>memearena view DIR</code>, or bundle it again with a larger "
        '<code>--max-pages</code>.</p><p><a href="index.html">Back to the runs</a></p>'
        "</main></body></html>\n"
    )


def _prepare_out(out: Path) -> None:
    """Refuse an OUT that holds anything but an earlier bundle."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise ViewError(f"--bundle {out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise ViewError(f"--bundle {out}: not empty and not a memearena bundle; pick another")


def _run(crawl: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run the crawl on an event loop of its own (in a worker thread when this thread already
    runs one: a notebook, a browser test)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(crawl())
        return
    with ThreadPoolExecutor(1) as ex:
        ex.submit(lambda: asyncio.run(crawl())).result()


def write_bundle(root: Path, out: Path, *, max_pages: int = DEFAULT_MAX_PAGES) -> BundleSummary:
    """Write the viewer of ``root`` (a run directory or a folder of runs) as a static site in
    ``out``: every page reachable from the front page, at most ``max_pages`` of them (breadth
    first; downloads count as pages), with every image and stylesheet they show.
    ``out`` must be absent, empty or an earlier bundle (replaced whole, only once the new one
    is complete). ViewError when ``root`` holds no run or ``out`` cannot be used."""
    if max_pages < 1:
        raise ViewError(f"--max-pages: must be at least 1, got {max_pages}")
    started = time.perf_counter()
    root, out = Path(root), Path(out)
    find_runs(root)  # no run there: one line, before anything is written
    _prepare_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        os.chmod(tmp, 0o755)
        crawl = _Crawl(max_pages=max_pages)
        _run(lambda: _fetch_all(root, tmp, crawl))
        crawled = time.perf_counter() - started
        for key in crawl.pages:
            path = tmp / crawl.files[key]
            path.write_text(
                _rewrite(path.read_text(encoding="utf-8"), key, crawl), encoding="utf-8"
            )
        (tmp / LEFT_OUT).write_text(_left_out_page(crawl), encoding="utf-8")
        (tmp / MARKER).write_text("a static bundle of memearena view\n", encoding="utf-8")
        size = sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file())
        _prepare_out(out)
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return BundleSummary(
        out=out,
        pages=len(crawl.pages),
        files=len(crawl.files) - len(crawl.pages),
        bytes=size,
        left_out=len(crawl.left_out),
        failed=tuple(crawl.failed),
        seconds=time.perf_counter() - started,
        crawl_seconds=crawled,
    )


def print_bundle(console: Console, summary: BundleSummary) -> None:
    """What a bundle holds, where, its size and build time; what it left out."""
    from memearena.report.safe import console_safe

    mib = summary.bytes / 2**20
    console.print(
        f"wrote {summary.pages:,} pages and {summary.files:,} files ({mib:,.1f} MiB) to "
        f"{console_safe(summary.out)}/ in {summary.seconds:,.1f} s: open "
        f"{console_safe(summary.out / 'index.html')}",
        highlight=False,
    )
    if summary.left_out:
        console.print(
            f"{summary.left_out:,} linked pages left out (past --max-pages); their links open "
            f"{LEFT_OUT}",
            highlight=False,
        )
    if summary.failed:
        shown = ", ".join(f"{console_safe(u, max_chars=80)} ({s})" for u, s in summary.failed[:5])
        console.print(f"{len(summary.failed):,} pages answered an error: {shown}", highlight=False)
    console.print(
        "The bundle holds every request, reply and image it shows: share it as you would the run.",
        highlight=False,
    )
