"""The viewer against hostile input, as figures: what a foreign Host, a link out of the run,
a crafted row, a huge integer, a damaged record, a decompression bomb, a huge reply, idle
half-open connections and a flood of heavy pages do to it. Loopback only; it copies the run
it is given and damages the copies.

    python bench/view_hostile.py --run DIR [--sockets 1500] [--flood 400]

DIR: a demo run (``memearena demo --out DIR``). Each line prints one figure; run it against
two versions of the code (``PYTHONPATH``) to compare them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import socket
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PAGES = (
    "/",
    "/r/0/",
    "/r/0/arena",
    "/r/0/memes",
    "/r/0/meme?id=demo:m01",
    "/r/0/battles",
    "/r/0/calls",
    "/r/0/call/1",
    "/r/0/adapt",
    "/r/0/adapt/records?model=sim-aurora&category=Race",
    "/r/0/adapt/chain/1",
    "/r/0/judge-audit",
    "/r/0/judge-audit/pairs?bias_type=text_dominance",
)


def zstd_bomb(size: int) -> bytes:
    """A Zstandard frame declaring and holding ``size`` bytes in 128 KiB RLE blocks."""
    block = 128 * 1024
    n = size // block
    head = b"\x28\xb5\x2f\xfd" + bytes([0xA0]) + struct.pack("<I", size)
    words = (struct.pack("<I", (i == n - 1) | (1 << 1) | (block << 3))[:3] + b"x" for i in range(n))
    return head + b"".join(words)


def copy(run: Path, dst: Path) -> Path:
    shutil.copytree(run, dst, ignore=shutil.ignore_patterns("run.lock", "cache.sqlite"))
    return dst


async def fetch(app: Any, urls: list[str], headers: dict[str, str] | None = None) -> list[Any]:
    from aiohttp.test_utils import TestClient, TestServer

    out = []
    async with TestClient(TestServer(app)) as client:
        for u in urls:
            t = time.perf_counter()
            resp = await client.get(u, headers=headers or {})
            body = (await resp.read()).decode("utf-8", "replace")
            out.append((resp.status, body, time.perf_counter() - t))
    return out


def make(run: Path, host: str = "127.0.0.1", **kw: Any) -> Any:
    from memearena.view import make_app

    return make_app(run, host, warm=False, **kw)


def first_call(run: Path) -> tuple[int, str]:
    db = sqlite3.connect(run / "run.db")
    row = db.execute(
        "SELECT c.id, c.request_hash FROM calls c JOIN requests r ON r.key=c.request_hash"
        " ORDER BY c.id LIMIT 1"
    ).fetchone()
    db.close()
    return int(row[0]), str(row[1])


def hosts(run: Path) -> None:
    for host in ("0.0.0.0", "::", "127.0.0.2"):
        try:
            app = make(run, host)
        except Exception as e:
            print(f"--host {host}: refused ({type(e).__name__}: {str(e)[:90]})")
            continue
        ((status, _, _),) = asyncio.run(fetch(app, ["/r/0/"], {"Host": "evil.example"}))
        print(f"--host {host}: accepted; Host: evil.example -> {status}")


def links(run0: Path, tmp: Path) -> None:
    from PIL import Image

    run = copy(run0, tmp / "links")
    board = json.loads((run / "leaderboard.json").read_text(encoding="utf-8"))
    board["arena"]["overall"][0]["model"] = "SECRET-OUTSIDE-MODEL"
    (tmp / "outside.json").write_text(json.dumps(board), encoding="utf-8")
    (run / "leaderboard.json").unlink()
    os.symlink(tmp / "outside.json", run / "leaderboard.json")
    secret = tmp / "secret.png"
    Image.new("RGB", (8, 8), "blue").save(secret)
    os.symlink(secret, run / "judge_audit" / "images" / f"{'a' * 64}.png")
    st = secret.stat()
    db = sqlite3.connect(run / "run.db")
    recipe = db.execute("SELECT recipe FROM image_hashes LIMIT 1").fetchone()[0]
    db.execute(
        "INSERT INTO image_hashes (path, size, mtime_ns, recipe, sha256) VALUES (?, ?, ?, ?, ?)",
        (str(secret), st.st_size, st.st_mtime_ns, recipe, "b" * 64),
    )
    db.commit()
    db.close()
    urls = ["/r/0/arena", f"/r/0/image/{'a' * 64}", f"/r/0/image/{'b' * 64}"]
    (s1, b1, _), (s2, _, _), (s3, _, _) = asyncio.run(fetch(make(run), urls))
    print(f"symlinked leaderboard.json: {s1}, outside content shown: {'SECRET' in b1}")
    print(f"symlinked audit image -> outside PNG: {s2}")
    print(f"crafted image_hashes row -> outside PNG: {s3}")


def integers(run: Path) -> None:
    huge = "9" * 40
    urls = [
        f"/r/0/calls?offset={huge}",
        f"/r/0/memes?offset={huge}",
        f"/r/0/battles?offset={huge}",
        f"/r/0/call/{huge}",
        f"/r/0/call/{2**63}",
        f"/r/0/adapt/chain/{huge}",
    ]
    got = asyncio.run(fetch(make(run), urls))
    print(f"huge integers: statuses {[s for s, _, _ in got]}")


def deep_board(run0: Path, tmp: Path) -> None:
    run = copy(run0, tmp / "deep")
    d = 100_000
    (run / "leaderboard.json").write_text('{"arena": ' + "[" * d + "]" * d + "}", encoding="utf-8")
    got = asyncio.run(fetch(make(run), list(PAGES)))
    print(f"100k-deep leaderboard.json: {sum(s == 500 for s, _, _ in got)} of {len(got)} pages 500")


def missing_dict(run0: Path, tmp: Path) -> None:
    from memearena.view.queries import RunReader

    run = copy(run0, tmp / "dict")
    call_id, key = first_call(run)
    db = sqlite3.connect(run / "run.db")
    db.execute("UPDATE requests SET dict=987654 WHERE key=?", (key,))
    db.commit()
    db.close()
    r = RunReader(run)
    try:
        r.call(call_id)
        print("missing dictionary: no exception")
    except RecursionError:
        print("missing dictionary: RecursionError")
    except Exception as e:
        print(f"missing dictionary: {type(e).__name__}")
    ((status, _, _),) = asyncio.run(fetch(make(run), [f"/r/0/call/{call_id}"]))
    print(f"missing dictionary: call page {status}")


def bomb() -> None:
    code = (
        "import resource, sys, struct\n"
        "sys.path.insert(0, 'bench')\n"
        "from view_hostile import zstd_bomb\n"
        "from memearena.store.requests import unpack\n"
        "b = zstd_bomb(2 * 1024**3)\n"
        "try:\n    unpack(b, None); out = 'decoded'\n"
        "except Exception as e:\n    out = type(e).__name__\n"
        "print(out, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    print(f"zstd frame declaring 2 GiB: {res.stdout.strip()} MB peak RSS {res.stderr[-200:]}")


def huge_reply(run0: Path, tmp: Path, mb: int) -> None:
    run = copy(run0, tmp / "reply")
    call_id, _ = first_call(run)
    db = sqlite3.connect(run / "run.db")
    db.execute("UPDATE calls SET response=? WHERE id=?", ("A" * (mb * 1_000_000), call_id))
    db.commit()
    db.close()
    ((status, body, took),) = asyncio.run(fetch(make(run), [f"/r/0/call/{call_id}"]))
    print(f"{mb} MB reply: call page {status} in {took:.2f} s, {len(body) / 1e6:.2f} MB of HTML")


def serve(run: Path, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "memearena", "view", str(run), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # the banner: listening
    return proc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def half_open(run: Path, n: int) -> None:
    port = free_port()
    proc = serve(run, port)
    try:
        socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            socks.append(s)
        time.sleep(7)
        held = 0
        for s in socks:
            s.setblocking(False)
            try:
                held += s.recv(10) == b"x"  # never: b"" is closed
            except BlockingIOError:
                held += 1
            except OSError:
                pass
            s.close()
        print(f"{n} half-open connections: {held} still held after 7 s")
    finally:
        proc.terminate()
        proc.wait(30)


def flood(run: Path, n: int) -> None:
    import aiohttp

    port = free_port()
    proc = serve(run, port)

    async def go() -> None:
        conn = aiohttp.TCPConnector(limit=0)
        timeout = aiohttp.ClientTimeout(total=600)
        async with aiohttp.ClientSession(connector=conn, timeout=timeout) as s:
            base = f"http://127.0.0.1:{port}"

            async def one(url: str) -> tuple[int, float]:
                t = time.perf_counter()
                async with s.get(base + url) as r:
                    await r.read()
                    return r.status, time.perf_counter() - t

            await one("/r/0/calls")
            jobs = [
                asyncio.ensure_future(one(f"/r/0/calls?offset={i % 50}&limit=200"))
                for i in range(n)
            ]
            await asyncio.sleep(0.2)
            css = await one("/static/view.css")
            got = await asyncio.gather(*jobs)
        ok = [t for st, t in got if st == 200]
        busy = sum(st == 503 for st, _ in got)
        med = statistics.median(t for _, t in got)
        med_ok = statistics.median(ok) if ok else float("nan")
        print(
            f"{n} heavy pages at once: median {med:.2f} s (200s: {len(ok)}, median {med_ok:.2f} s;"
            f" 503s: {busy}); a stylesheet during it: {css[1]:.2f} s"
        )

    try:
        asyncio.run(go())
    finally:
        proc.terminate()
        proc.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--sockets", type=int, default=1500)
    ap.add_argument("--flood", type=int, default=400)
    ap.add_argument("--reply-mb", type=int, default=30)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, a.sockets + 500)), hard))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        hosts(a.run)
        links(a.run, tmp)
        integers(a.run)
        deep_board(a.run, tmp)
        missing_dict(a.run, tmp)
        bomb()
        huge_reply(a.run, tmp, a.reply_mb)
        half_open(a.run, a.sockets)
        flood(a.run, a.flood)


if __name__ == "__main__":
    main()
