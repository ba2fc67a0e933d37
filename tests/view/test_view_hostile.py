"""The viewer against hostile input (loopback only): foreign hosts, links out of the run,
crafted rows, huge integers, damaged records, decompression bombs, huge replies, idle
connections and floods of heavy pages."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sqlite3
import struct
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from PIL import Image

from memearena.store.requests import PayloadTooLarge, unpack
from memearena.view import ViewError, make_app
from memearena.view.app import server_options
from memearena.view.queries import RunReader

from .conftest import PAGES


def _copy(demo_run: Path, dst: Path) -> Path:
    shutil.copytree(demo_run, dst, ignore=shutil.ignore_patterns("run.lock", "cache.sqlite"))
    return dst


def _with_client(
    app: web.Application, fn: Callable[[TestClient], Awaitable[Any]], **server: Any
) -> Any:
    async def go() -> Any:
        test_server = TestServer(app)
        await test_server.start_server(**server)  # the runner's settings (TestClient has none)
        async with TestClient(test_server) as client:
            return await fn(client)

    return asyncio.run(go())


async def _statuses(client: TestClient, urls: tuple[str, ...]) -> dict[str, tuple[int, str]]:
    out = {}
    for url in urls:
        resp = await client.get(url)
        out[url] = (resp.status, await resp.text())
    return out


# --- hosts ---------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "127.0.0.2", "192.0.2.7"])
def test_a_non_loopback_host_is_refused_unless_remote_is_allowed(demo_run: Path, host: str) -> None:
    with pytest.raises(ViewError, match="--allow-remote"):
        make_app(demo_run, host, warm=False)


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.2"])
def test_the_cli_refuses_a_non_loopback_host_in_one_line(demo_run: Path, host: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "memearena", "view", str(demo_run), "--host", host, "--port", "1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    assert "--allow-remote" in out.stderr and out.stderr.strip().count("\n") == 0
    assert "http://" not in out.stdout


def test_with_remote_allowed_the_host_check_stays_on(demo_run: Path) -> None:
    app = make_app(demo_run, "0.0.0.0", warm=False, allow_remote=True, allowed_hosts=["viewer.lan"])

    async def fn(client: TestClient) -> list[int]:
        out = []
        for host in ("evil.example", "evil.example:8765", "viewer.lan:8765", "127.0.0.1:1"):
            resp = await client.get("/r/0/", headers={"Host": host})
            out.append(resp.status)
        return out

    assert _with_client(app, fn) == [421, 421, 200, 200]


# --- files only from inside the run ----------------------------------------------------------


def test_a_leaderboard_linked_out_of_the_run_is_not_read(demo_run: Path, tmp_path: Path) -> None:
    run = _copy(demo_run, tmp_path / "run")
    outside = tmp_path / "elsewhere.json"
    board = json.loads((run / "leaderboard.json").read_text(encoding="utf-8"))
    board["arena"]["overall"][0]["model"] = "SECRET-OUTSIDE-MODEL"
    outside.write_text(json.dumps(board), encoding="utf-8")
    (run / "leaderboard.json").unlink()
    os.symlink(outside, run / "leaderboard.json")

    got = _with_client(make_app(run, warm=False), lambda c: _statuses(c, ("/r/0/", "/r/0/arena")))
    for status, body in got.values():
        assert status != 500
        assert "SECRET-OUTSIDE-MODEL" not in body
    assert "outside the run directory" in got["/r/0/"][1]


def test_an_audit_image_linked_out_of_the_run_is_not_served(demo_run: Path, tmp_path: Path) -> None:
    run = _copy(demo_run, tmp_path / "run")
    secret = tmp_path / "secret.png"
    Image.new("RGB", (8, 8), "blue").save(secret)
    sha = "a" * 64
    os.symlink(secret, run / "judge_audit" / "images" / f"{sha}.png")
    got = _with_client(make_app(run, warm=False), lambda c: _statuses(c, (f"/r/0/image/{sha}",)))
    assert got[f"/r/0/image/{sha}"][0] == 404


def test_a_crafted_image_hashes_row_serves_no_file_of_the_machine(
    demo_run: Path, tmp_path: Path
) -> None:
    run = _copy(demo_run, tmp_path / "run")
    secret = tmp_path / "private.png"
    Image.new("RGB", (16, 16), "green").save(secret)
    st = secret.stat()
    db = sqlite3.connect(run / "run.db")
    recipe = db.execute("SELECT recipe FROM image_hashes LIMIT 1").fetchone()[0]
    db.execute(
        "INSERT INTO image_hashes (path, size, mtime_ns, recipe, sha256) VALUES (?, ?, ?, ?, ?)",
        (str(secret), st.st_size, st.st_mtime_ns, recipe, "b" * 64),
    )
    db.commit()
    db.close()
    url = f"/r/0/image/{'b' * 64}"
    got = _with_client(make_app(run, warm=False), lambda c: _statuses(c, (url,)))
    assert got[url][0] == 404


# --- bounded integers ------------------------------------------------------------------------


def test_huge_integers_are_a_400_or_404_never_a_500(demo_run: Path) -> None:
    huge = "9" * 40
    urls = (
        f"/r/0/calls?offset={huge}",
        f"/r/0/calls?limit={huge}",
        f"/r/0/memes?offset={huge}",
        f"/r/0/battles?offset={huge}",
        f"/r/0/adapt/records?offset={huge}",
        f"/r/0/judge-audit/pairs?offset={huge}",
        f"/r/0/call/{huge}",
        f"/r/0/call/{2**63}",
        f"/r/0/call/-{huge}",
        f"/r/0/adapt/chain/{huge}",
        f"/r/{huge}/",
    )
    odd = (
        "/r/0/calls?offset=%2B-5",
        "/r/0/calls?offset=-7",
        "/r/0/calls?offset=%D9%A3",
        "/r/0/calls?limit=x",
    )
    got = _with_client(make_app(demo_run, warm=False), lambda c: _statuses(c, urls + odd))
    for url, (status, body) in got.items():
        # Past the bound: 400 (a query) or 404 (a path); not a number at all: the default.
        assert status in ((200,) if url in odd else (400, 404)), (url, status, body[:300])
        assert "Traceback" not in body


# --- damaged records -------------------------------------------------------------------------


def test_a_deeply_nested_leaderboard_degrades_every_page_to_an_error_panel(
    demo_run: Path, tmp_path: Path
) -> None:
    run = _copy(demo_run, tmp_path / "run")
    depth = 100_000
    (run / "leaderboard.json").write_text(
        '{"arena": ' + "[" * depth + "]" * depth + "}", encoding="utf-8"
    )
    got = _with_client(make_app(run, warm=False), lambda c: _statuses(c, PAGES))
    for url, (status, body) in got.items():
        assert status != 500, (url, body[:300])
        assert "Traceback" not in body
    assert got["/r/0/"][0] == 200
    assert "leaderboard.json" in got["/r/0/"][1] and "nested deeper" in got["/r/0/"][1]
    # A page made of the leaderboard's numbers says why it has none.
    assert 'id="damage"' in got["/r/0/arena"][1] and 'id="damage"' in got["/r/0/adapt"][1]


def _first_call_with_request(run: Path) -> tuple[int, str]:
    db = sqlite3.connect(run / "run.db")
    call_id, key = db.execute(
        "SELECT c.id, c.request_hash FROM calls c JOIN requests r ON r.key=c.request_hash"
        " ORDER BY c.id LIMIT 1"
    ).fetchone()
    db.close()
    return int(call_id), str(key)


def test_a_request_naming_a_missing_dictionary_is_an_error_panel(
    demo_run: Path, tmp_path: Path
) -> None:
    run = _copy(demo_run, tmp_path / "run")
    call_id, key = _first_call_with_request(run)
    db = sqlite3.connect(run / "run.db")
    db.execute("UPDATE requests SET dict=987654 WHERE key=?", (key,))
    db.commit()
    db.close()
    reader = RunReader(run)
    c = reader.call(call_id)  # no RecursionError
    reader.close()
    assert c is not None and c["request"] is None and "987654" in c["request_damage"]
    url = f"/r/0/call/{call_id}"
    got = _with_client(make_app(run, warm=False), lambda cl: _statuses(cl, (url,)))
    status, body = got[url]
    assert status == 200 and 'id="damage"' in body and "987654" in body


def _zstd_bomb(size: int) -> bytes:
    """A Zstandard frame of about size/32 Ki bytes declaring (and holding) ``size`` bytes:
    RLE blocks of 128 KiB each."""
    block = 128 * 1024
    assert size % block == 0
    header = b"\x28\xb5\x2f\xfd" + bytes([0xA0]) + struct.pack("<I", size)  # 4-byte FCS
    blocks = []
    n = size // block
    for i in range(n):
        last = 1 if i == n - 1 else 0
        word = last | (1 << 1) | (block << 3)  # RLE block of ``block`` bytes
        blocks.append(struct.pack("<I", word)[:3] + b"x")
    return header + b"".join(blocks)


def test_a_zstd_frame_declaring_2_gib_is_refused_past_the_bound() -> None:
    bomb = _zstd_bomb(2 * 1024**3)
    assert len(bomb) < 100_000
    t = time.perf_counter()
    with pytest.raises(PayloadTooLarge, match="bytes"):
        unpack(bomb, None)
    assert time.perf_counter() - t < 5
    # The same bound holds for a zlib body (older runs).
    import zlib

    with pytest.raises(PayloadTooLarge):
        unpack(zlib.compress(b"\0" * (80 * 1024**2)), None)
    # A small body still reads.
    import zstandard

    assert unpack(zstandard.ZstdCompressor().compress(b'"ok"'), None) == '"ok"'


def test_a_bombed_request_row_is_an_error_panel_on_its_call_page(
    demo_run: Path, tmp_path: Path
) -> None:
    run = _copy(demo_run, tmp_path / "run")
    call_id, key = _first_call_with_request(run)
    db = sqlite3.connect(run / "run.db")
    db.execute("UPDATE requests SET dict=0, body=? WHERE key=?", (_zstd_bomb(2 * 1024**3), key))
    db.commit()
    db.close()
    url = f"/r/0/call/{call_id}"
    got = _with_client(make_app(run, warm=False), lambda cl: _statuses(cl, (url,)))
    status, body = got[url]
    assert status == 200 and 'id="damage"' in body


# --- large replies ---------------------------------------------------------------------------


def test_a_huge_reply_is_shown_truncated_with_a_download_link(
    demo_run: Path, tmp_path: Path
) -> None:
    run = _copy(demo_run, tmp_path / "run")
    call_id, _ = _first_call_with_request(run)
    reply = "A" * 5_000_000 + "THE-END"
    db = sqlite3.connect(run / "run.db")
    db.execute("UPDATE calls SET response=? WHERE id=?", (reply, call_id))
    db.commit()
    db.close()

    async def fn(client: TestClient) -> tuple[int, str, int, str, str]:
        page = await client.get(f"/r/0/call/{call_id}")
        body = await page.text()
        full = await client.get(f"/r/0/call/{call_id}/reply")
        return page.status, body, full.status, await full.text(), full.headers["Content-Type"]

    status, body, full_status, full, ctype = _with_client(make_app(run, warm=False), fn)
    assert status == 200
    assert len(body) < 1_000_000 and "THE-END" not in body
    assert f'href="/r/0/call/{call_id}/reply"' in body
    assert full_status == 200 and full == reply and ctype.startswith("text/plain")


# --- connections and load --------------------------------------------------------------------


def test_connections_that_never_finish_their_headers_are_closed(demo_run: Path) -> None:
    app = make_app(demo_run, warm=False)

    async def fn(client: TestClient) -> list[bytes]:
        port = client.server.port
        assert port is not None
        socks = []
        for _ in range(50):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never finished
            s.setblocking(False)
            socks.append(s)
        await asyncio.sleep(2.5)
        out = []
        for s in socks:
            try:
                out.append(s.recv(100))
            except BlockingIOError:
                out.append(b"still open")
            except OSError:
                out.append(b"")
            s.close()
        return out

    got = _with_client(app, fn, **server_options(header_timeout=0.5))
    assert got.count(b"still open") == 0


def test_heavy_pages_are_bounded_and_light_ones_stay_answered(
    demo_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = RunReader.calls

    def calls(self: RunReader, **kw: Any) -> Any:
        time.sleep(0.5)
        return slow(self, **kw)

    monkeypatch.setattr(RunReader, "calls", calls)
    app = make_app(demo_run, warm=False, heavy_pages=1, max_waiting=4)

    async def fn(client: TestClient) -> tuple[list[int], float, list[str]]:
        heavy = [asyncio.ensure_future(client.get("/r/0/calls")) for _ in range(20)]
        await asyncio.sleep(0.1)
        t = time.perf_counter()
        css = await client.get("/static/view.css")
        light = time.perf_counter() - t
        assert css.status == 200
        resps = await asyncio.gather(*heavy)
        return [r.status for r in resps], light, [r.headers.get("Retry-After", "") for r in resps]

    statuses, light, retry = _with_client(app, fn)
    assert set(statuses) <= {200, 503}
    assert statuses.count(200) <= 5 and statuses.count(503) >= 15
    assert all(retry[i] for i, s in enumerate(statuses) if s == 503)
    assert light < 0.4


def test_a_page_past_the_request_timeout_is_a_503(
    demo_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = RunReader.calls

    def calls(self: RunReader, **kw: Any) -> Any:
        time.sleep(2.0)
        return slow(self, **kw)

    monkeypatch.setattr(RunReader, "calls", calls)
    app = make_app(demo_run, warm=False, request_timeout=0.3)

    async def fn(client: TestClient) -> tuple[int, float]:
        t = time.perf_counter()
        resp = await client.get("/r/0/calls")
        return resp.status, time.perf_counter() - t

    status, took = _with_client(app, fn)
    assert status == 503 and took < 1.5


def test_damaged_artifacts_give_error_panels_not_500s(demo_run: Path, tmp_path: Path) -> None:
    run = _copy(demo_run, tmp_path / "run")
    db = sqlite3.connect(run / "run.db")
    deep = '{"a": ' + "[" * 50_000 + "]" * 50_000 + "}"
    db.execute("UPDATE artifacts SET value='{not json' WHERE kind IN ('verdict', 'answer')")
    db.execute("UPDATE artifacts SET value=? WHERE kind='context'", (deep,))
    db.commit()
    db.close()
    got = _with_client(make_app(run, warm=False), lambda c: _statuses(c, PAGES))
    for url, (status, body) in got.items():
        assert status != 500, (url, body[:300])
        assert "Traceback" not in body
    assert any('id="error"' in body for _, body in got.values())


def test_long_guideline_rounds_are_shown_replaced_not_compared() -> None:
    from memearena.methods.arena.pages import DIFF_MAX_UNITS, word_diff

    old = " ".join(f"w{i % 97}" for i in range(DIFF_MAX_UNITS))
    new = " ".join(f"w{i % 89}" for i in range(DIFF_MAX_UNITS))
    assert word_diff(old, new) == [("-", old), ("+", new)]
    assert word_diff("a b c", "a x c") == [("=", "a "), ("-", "b"), ("+", "x"), ("=", " c")]
