"""The viewer's pages over the demo run (HTTP only; the browser tests drive a real browser):
each renders, under a CSP forbidding remote loads, read-only, answering loopback names only;
search and filters narrow the lists; hostile text reaches the page escaped."""

from __future__ import annotations

import asyncio
import hashlib
import html
import re
import sqlite3
import subprocess
import sys
from collections.abc import Awaitable, Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from memearena.methods.arena import pages as arena
from memearena.methods.arena.pages import resolve_votes
from memearena.view import RunReader, ViewError, find_runs, make_app

from .conftest import PAYLOADS, make_hostile

PAGES = (
    "/",
    "/r/0/",
    "/r/0/arena",
    "/r/0/memes",
    "/r/0/meme?id=demo:m01",
    "/r/0/battles",
    "/r/0/battles?model=sim-aurora&judge=sim-judge-falcon&criterion=accuracy",
    "/r/0/calls",
    "/r/0/call/1",
    "/r/0/adapt",
    "/r/0/adapt/records?model=sim-aurora&category=Race",
    "/r/0/adapt/chain/1",
    "/r/0/judge-audit",
    "/r/0/judge-audit/pairs?bias_type=text_dominance",
)


def _with_client(root: Path, fn: Callable[[TestClient], Awaitable[Any]]) -> Any:
    async def go() -> Any:
        async with TestClient(TestServer(make_app(root))) as client:
            return await fn(client)

    return asyncio.run(go())


async def _get(client: TestClient, url: str, **kw: Any) -> tuple[int, str, Any]:
    resp = await client.get(url, **kw)
    return resp.status, await resp.text(), resp.headers


def test_every_page_renders_under_a_csp_that_forbids_remote_loads(demo_run: Path) -> None:
    async def fn(client: TestClient) -> list[tuple[str, int, str, Any]]:
        return [(u, *(await _get(client, u))) for u in PAGES]

    for url, status, body, headers in _with_client(demo_run, fn):
        assert status == 200, (url, body[:300])
        csp = headers["Content-Security-Policy"]
        assert "default-src 'self'" in csp and "img-src 'self' data:" in csp
        assert "script-src 'none'" in csp
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert "<script" not in body.lower(), url
        assert re.search(r"""(src|href)=["']?(https?:)?//""", body) is None, url


def test_overview_shows_status_spend_calls_and_the_simulated_banner(demo_run: Path) -> None:
    _, body, _ = _with_client(demo_run, lambda c: _get(c, "/r/0/"))
    assert 'class="state complete"' in body
    assert "upper bound" in body and "cached" in body
    assert "simulated" in body
    assert 'answer</td><td class="text">refusal' in body  # errors by reason


def test_capped_run_shows_a_banner_with_its_reasons(demo_run: Path, tmp_path: Path) -> None:
    import json
    import shutil

    run = tmp_path / "capped"
    shutil.copytree(demo_run, run, ignore=shutil.ignore_patterns("cache.sqlite", "run.lock"))
    board = json.loads((run / "leaderboard.json").read_text())
    board["status"] = {
        "complete": False,
        "problems": ["spend cap reached: $0.0100 spent of --max-cost $0.0100"],
        "spent_usd": 0.01,
        "spent_upper_bound_usd": 0.012,
        "max_cost": 0.01,
    }
    (run / "leaderboard.json").write_text(json.dumps(board))
    _, body, _ = _with_client(run, lambda c: _get(c, "/r/0/"))
    assert 'id="status-banner"' in body and "capped" in body
    assert "spend cap reached" in body


def test_search_narrows_the_memes_to_those_holding_the_text(demo_run: Path) -> None:
    async def fn(client: TestClient) -> tuple[str, str, str]:
        everything = (await _get(client, "/r/0/memes"))[1]
        found = (await _get(client, "/r/0/memes?q=vellmarian"))[1]
        by_id = (await _get(client, "/r/0/memes?q=demo:m02"))[1]
        return everything, found, by_id

    everything, found, by_id = _with_client(demo_run, fn)
    rows = lambda body: re.findall(r'<td class="text">(.*?)</td>', body, re.S)  # noqa: E731
    assert 0 < len(rows(found)) < len(rows(everything))
    assert all("vellmarian" in html.unescape(t).lower() for t in rows(found))
    assert re.findall(r'class="meme-link"[^>]*>([^<]*)<', by_id) == ["demo:m02"]


def test_filters_narrow_battles_and_calls(demo_run: Path) -> None:
    async def fn(client: TestClient) -> tuple[str, str, str]:
        judged = (await _get(client, "/r/0/battles?judge=sim-judge-grove&model=sim-ember"))[1]
        refused = (await _get(client, "/r/0/memes?outcome=refusal"))[1]
        errors = (await _get(client, "/r/0/calls?status=refusal"))[1]
        return judged, refused, errors

    judged, refused, calls = _with_client(demo_run, fn)
    judges = re.findall(r'<td class="name">(sim-judge-[a-z]+)</td>', judged)
    assert judges and set(judges) == {"sim-judge-grove"}
    pairs = re.findall(r'<td class="name">([^<]*)<br>([^<]*)</td>', judged)
    assert pairs and all("sim-ember" in p for p in pairs)
    memes = re.findall(r'class="meme-link"[^>]*>([^<]*)<', refused)
    assert 0 < len(memes) <= 4  # the demo's four refused Arena answers
    statuses = re.findall(r"</td><td>([a-z]+)</td>\s*<td class=\"num\">", calls)
    assert statuses and set(statuses) == {"refusal"}


def test_pagination_pages_through_the_calls(demo_run: Path) -> None:
    async def fn(client: TestClient) -> tuple[str, str]:
        first = (await _get(client, "/r/0/calls?limit=20"))[1]
        second = (await _get(client, "/r/0/calls?limit=20&offset=20"))[1]
        return first, second

    first, second = _with_client(demo_run, fn)
    ids = lambda body: [int(i) for i in re.findall(r'class="call" href="[^"]*">(\d+)<', body)]  # noqa: E731
    assert ids(first) == list(range(1, 21)) and ids(second) == list(range(21, 41))
    assert 'rel="next"' in first and 'rel="prev"' in second


def test_battle_page_links_both_orders_to_the_exact_requests(demo_run: Path) -> None:
    async def fn(client: TestClient) -> tuple[str, str]:
        listing = (await _get(client, "/r/0/battles?model=sim-aurora"))[1]
        href = html.unescape(re.search(r'class="battle-link" href="([^"]+)"', listing).group(1))
        battle = (await _get(client, href))[1]
        calls = re.findall(r'href="(/r/0/call/\d+)">the exact request', battle)
        assert len(calls) == 2
        return battle, (await _get(client, calls[0]))[1]

    battle, call = _with_client(demo_run, fn)
    assert 'id="raw-forward"' in battle and 'id="raw-backward"' in battle
    assert "arena.judge" in call
    assert "Response A" in html.unescape(call) or "response_a" in call.lower()
    assert re.search(r"image <span class=\"mono\">[0-9a-f]{64}</span>", call)


def test_reader_never_writes_the_run(demo_run: Path) -> None:
    db = demo_run / "run.db"
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    r = RunReader(demo_run)
    r.overview()
    arena.meme(r, "demo:m01")
    arena.battles(r, model="sim-aurora")
    # A method's queries are the reader's too, as they were before they moved to its package.
    assert r.meme("demo:m01") == arena.meme(r, "demo:m01")
    assert (
        r.battles(model="sim-aurora", limit=3).rows
        == arena.battles(r, model="sim-aurora", limit=3).rows
    )
    assert {"models", "judges", "criteria", "adapt_models", "categories", "roles"} <= set(
        r.filter_values()
    )
    with pytest.raises(AttributeError, match="no attribute or query 'no_such_query'"):
        r.no_such_query()
    assert r._db is not None
    with pytest.raises(sqlite3.OperationalError, match=r"readonly|read-only|query_only"):
        r._db.execute("DELETE FROM calls")
    r.close()
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_only_loopback_host_names_and_reads_are_answered(demo_run: Path) -> None:
    async def fn(client: TestClient) -> tuple[int, int]:
        other = await client.get("/r/0/", headers={"Host": "evil.example:8765"})
        post = await client.post("/r/0/")
        return other.status, post.status

    assert _with_client(demo_run, fn) == (421, 405)


def test_hostile_text_reaches_the_page_escaped(demo_run: Path, tmp_path: Path) -> None:
    run = make_hostile(demo_run, tmp_path / "hostile", "http://127.0.0.1:9")

    async def fn(client: TestClient) -> list[str]:
        urls = ["/r/0/", "/r/0/arena", "/r/0/memes?q=HOSTILE", "/r/0/meme?id=demo:m01"]
        urls.append("/r/0/battles?outcome=&model=" + "sim-aurora")
        urls.append("/r/0/calls")
        return [(await _get(client, u))[1] for u in urls]

    bodies = _with_client(run, fn)
    for body in bodies:
        tags = _Tags()
        tags.feed(body)
        assert "script" not in tags.names
        assert _only_our_svgs(body)
        assert not tags.handlers, tags.handlers
        assert all(src.startswith("/r/0/image/") for src in tags.img_srcs), tags.img_srcs
        assert not [h for h in tags.hrefs if not h.startswith(("/", "?", "data:,"))], tags.hrefs
    shown = html.unescape(bodies[2]) + html.unescape(bodies[3])
    for payload in PAYLOADS:  # shown as text, whole
        assert payload.replace("__BEACON__", "http://127.0.0.1:9") in shown


class _Tags(HTMLParser):
    """Every element, event-handler attribute, image source and link of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []
        self.handlers: list[tuple[str, str]] = []
        self.img_srcs: list[str] = []
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.names.append(tag)
        for k, v in attrs:
            if k.startswith("on"):
                self.handlers.append((tag, k))
            if tag == "img" and k == "src":
                self.img_srcs.append(v or "")
            if k == "href":
                self.hrefs.append(v or "")


def _only_our_svgs(body: str) -> bool:
    """Every svg on the page is one of the viewer's own charts (interval bars, swatches)."""
    return all('role="img"' in m for m in re.findall(r"<svg[^>]*>", body))


def test_viewer_resolution_matches_the_pipeline() -> None:
    from memearena.methods.arena.resolve import resolve_pair

    options = [None, "A", "B", "tie"]
    for f in options:
        for b in options:
            for policy in ("tie", "both"):
                assert resolve_votes(f, b, policy) == resolve_pair(f, b, policy)  # type: ignore[arg-type]


def test_a_folder_of_runs_lists_each(demo_run: Path) -> None:
    runs = find_runs(demo_run.parent)
    assert demo_run in runs
    assert (demo_run / "adapt-null-world") in runs


def test_missing_or_non_run_directory_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ViewError, match="no such directory"):
        find_runs(tmp_path / "missing")
    with pytest.raises(ViewError, match="not a run directory"):
        find_runs(tmp_path)
    for arg in (str(tmp_path / "missing"), str(tmp_path)):
        out = subprocess.run(
            [sys.executable, "-m", "memearena", "view", arg],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == 2
        assert out.stderr.strip().count("\n") == 0 and "error:" in out.stderr


def test_meme_page_shows_every_answer_round_and_battle(demo_run: Path) -> None:
    _, body, _ = _with_client(demo_run, lambda c: _get(c, "/r/0/meme?id=demo:m01"))
    reader = RunReader(demo_run)
    m = arena.meme(reader, "demo:m01")
    reader.close()
    assert m is not None
    assert {len(rows) for rows in m["answers"].values()} == {5}  # five targets per context
    assert set(m["answers"]) == {"high", "moderate", "unrelated"}
    assert len(m["contexts"]) == 3 and m["image"] and "VELLMARIAN" in m["text"]
    assert m["rounds"] and any(r["changed"] for r in m["rounds"][1:])
    assert "<ins>" in body  # what a guideline round added
    assert len(m["battles"]) == 3 * 10 * 4  # levels x pairs x judges
    assert body.count('class="battle-link"') == len(m["battles"])


def test_images_are_served_by_hash_and_only_images(demo_run: Path, tmp_path: Path) -> None:
    import shutil

    reader = RunReader(demo_run)
    sha = arena.meme_image(reader, "demo:m01")
    reader.close()
    assert sha
    run = tmp_path / "run"
    shutil.copytree(demo_run, run, ignore=shutil.ignore_patterns("cache.sqlite", "run.lock"))
    secret = tmp_path / "secret.png"
    secret.write_text("not an image")
    st = secret.stat()
    db = sqlite3.connect(run / "run.db")
    db.execute(
        "INSERT INTO image_hashes (path, size, mtime_ns, recipe, sha256) VALUES (?, ?, ?, 'x', ?)",
        (str(secret), st.st_size, st.st_mtime_ns, "f" * 64),
    )
    db.commit()
    db.close()
    # An image outside the run directory, linked into its image store under its own hash.
    outside = tmp_path / "outside.png"
    outside.write_bytes(b"\x89PNG\r\n\x1a\n" + b"outside" * 8)
    linked = hashlib.sha256(outside.read_bytes()).hexdigest()
    (run / "images" / linked[:2]).mkdir(parents=True, exist_ok=True)
    (run / "images" / linked[:2] / f"{linked}.png").symlink_to(outside)

    async def fn(client: TestClient) -> list[tuple[int, str]]:
        out = []
        urls = (f"/r/0/image/{sha}", f"/r/0/image/{'f' * 64}", "/r/0/image/..%2f..%2fetc")
        for url in (*urls, f"/r/0/image/{linked}"):
            resp = await client.get(url)
            out.append((resp.status, resp.headers.get("Content-Type", "")))
        return out

    (ok, ctype), (fake, _), (bad, _), (escaped, _) = _with_client(run, fn)
    assert ok == 200 and ctype == "image/png"
    assert fake == 404 and bad == 404
    assert escaped == 404  # a link out of the run directory is never followed


def test_a_busy_port_is_a_one_line_error(demo_run: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "memearena", "view", str(demo_run), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert out.returncode == 2
    assert "cannot listen on 127.0.0.1" in out.stderr and out.stderr.strip().count("\n") == 0
    # Nothing announces a viewer that never listened, and the reason is prose, not a repr.
    assert "http://" not in out.stdout
    assert "('127.0.0.1'" not in out.stderr
    for bad in ("0", "70000"):
        out = subprocess.run(
            [sys.executable, "-m", "memearena", "view", str(demo_run), "--port", bad],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == 2 and "--port: must be between 1 and 65535" in out.stderr


def test_adapt_heatmap_cells_open_the_records_and_chains_behind_them(demo_run: Path) -> None:
    async def fn(client: TestClient) -> tuple[str, str, str]:
        adapt = (await _get(client, "/r/0/adapt"))[1]
        cell = html.unescape(re.search(r'class="cell" href="([^"]+)"', adapt).group(1))
        records = (await _get(client, cell))[1]
        chain = re.search(r'class="chain" href="([^"]+)"', records).group(1)
        return cell, records, (await _get(client, chain))[1]

    cell, records, chain = _with_client(demo_run, fn)
    assert "model=" in cell and "category=" in cell
    assert 'id="scores"' in records and "No scored answer matches" not in records
    assert "target&#39;s answer to the rewrite" in chain or "target's answer" in chain
    assert "no answer on record" not in chain and 'class="call"' in chain
