"""``memearena view`` page load times, and the store's bytes per call with requests kept.

For the demo run and a simulated Arena run of N memes (default 1,000; memes cycled from the
bundled set with distinct ids and texts, as in ``bench/scale.py``): the time to serve the
overview, a meme page and a filtered list (battles of one model by one judge; memes matching a
search), measured over HTTP against the viewer's aiohttp app in this process. The first load
of a run builds its meme index (each meme's text and image hash, from its context request) and
is shown apart, and so is each page as the very first request of a cold viewer ("cold") and of
a viewer started as ``memearena view`` starts it, once warmed ("warmed"); the other figures are
medians of the repeats after. Target: < 300 ms each, first loads included.

    nice python bench/view.py [--memes 1000] [--repeats 9] [--run DIR ...]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def build_demo(root: Path) -> Path:
    from rich.console import Console

    from memearena.demo import run_demo

    run = root / "demo"
    run_demo(run, console=Console(file=io.StringIO()), show_progress=False)
    return run


def build_arena(root: Path, n: int) -> Path:
    from scale import write_memes  # bench/scale.py

    from memearena.config import DatasetConfig
    from memearena.demo import demo_config
    from memearena.engine.lifecycle import run_method

    data = write_memes(root / f"data-{n}", n)
    cfg = demo_config(bootstrap=100)
    cfg = cfg.model_copy(
        update={"run": f"sim-{n}", "data": [DatasetConfig(format="demo", path=data)]}
    )
    run = root / f"sim-{n}"
    run_method("arena", cfg, run, show_progress=False)
    return run


def store_figures(run: Path) -> dict[str, float]:
    """run.db bytes per call, and the requests tables' share (SQLite pages, dbstat)."""
    db = sqlite3.connect(f"file:{run / 'run.db'}?mode=ro", uri=True)
    try:
        calls = int(db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]) or 1
        total = int(db.execute("SELECT SUM(pgsize) FROM dbstat").fetchone()[0] or 0)
        req = int(
            db.execute(
                "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN (SELECT name FROM"
                " sqlite_master WHERE tbl_name IN ('requests', 'request_dicts'))"
            ).fetchone()[0]
        )
        idx = int(
            db.execute(
                "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name='calls_request_hash'"
            ).fetchone()[0]
        )
    finally:
        db.close()
    return {
        "calls": calls,
        "db_per_call": total / calls,
        "req_per_call": req / calls,
        "index_per_call": idx / calls,
    }


async def cold_load(run: Path, url: str) -> float:
    """ms of ``url`` as the very first request of a cold viewer (no warming, nothing cached)."""
    from aiohttp.test_utils import TestClient, TestServer

    from memearena.view.app import make_app

    async with TestClient(TestServer(make_app(run, warm=False))) as client:
        t = time.perf_counter()
        resp = await client.get(url)
        await resp.read()
        ms = 1000 * (time.perf_counter() - t)
        assert resp.status == 200, (url, resp.status)
    return ms


async def warmed_load(run: Path, url: str) -> float:
    """ms of ``url`` as the first request of a viewer started as ``memearena view`` starts it
    (warming at start), once its warming has finished."""
    from aiohttp.test_utils import TestClient, TestServer

    from memearena.view.app import make_app
    from memearena.view.keys import WARMING

    async with TestClient(TestServer(make_app(run, warm=True))) as client:
        task = client.server.app.get(WARMING)
        if task is not None:
            await task
        t = time.perf_counter()
        resp = await client.get(url)
        await resp.read()
        ms = 1000 * (time.perf_counter() - t)
        assert resp.status == 200, (url, resp.status)
    return ms


async def time_pages(run: Path, repeats: int) -> dict[str, tuple[float, float, float, float]]:
    """(first load as a cold viewer's first request, as a warmed viewer's first request, first
    load after the pages above it, median of the rest) in ms per page."""
    from aiohttp.test_utils import TestClient, TestServer

    from memearena.methods.arena import pages as arena_pages
    from memearena.view import RunReader
    from memearena.view.app import make_app

    reader = RunReader(run)
    first = arena_pages.memes(reader, limit=1).rows
    meme = first[0]["uid"] if first else ""
    word = (first[0]["text"].split() or ["a"])[0] if first else "a"
    filt = arena_pages.filter_values(reader)
    model = filt["models"][0] if filt["models"] else ""
    judge = filt["judges"][-1] if filt["judges"] else ""
    reader.close()
    pages = {
        "overview": "/r/0/",
        "arena (leaderboards, pairwise)": "/r/0/arena",
        "meme page": f"/r/0/meme?id={meme}",
        "battles filtered (model, judge)": f"/r/0/battles?model={model}&judge={judge}",
        "memes searched": f"/r/0/memes?q={word}",
        "calls filtered (model)": f"/r/0/calls?model={model}",
    }
    out: dict[str, tuple[float, float, float, float]] = {}
    cold = {name: await cold_load(run, url) for name, url in pages.items()}
    warmed = {name: await warmed_load(run, url) for name, url in pages.items()}
    # Cold: no warming at start, so the first load pays for the run's summaries and meme index.
    async with TestClient(TestServer(make_app(run, warm=False))) as client:
        for name, url in pages.items():
            times = []
            for _ in range(repeats + 1):
                t = time.perf_counter()
                resp = await client.get(url)
                await resp.read()
                times.append(1000 * (time.perf_counter() - t))
                assert resp.status == 200, (url, resp.status)
            out[name] = (cold[name], warmed[name], times[0], statistics.median(times[1:]))
    return out


def report(label: str, run: Path, repeats: int) -> None:
    s = store_figures(run)
    print(
        f"\n{label}: {s['calls']:,} calls; run.db {s['db_per_call']:,.0f} B per call, of which "
        f"requests as sent {s['req_per_call']:,.0f} B and the calls(request_hash) index "
        f"{s['index_per_call']:,.0f} B (target: requests <= 1,500 B per call)"
    )
    res: dict[str, Any] = asyncio.run(time_pages(run, repeats))
    print(f"  {'page':<34} {'cold ms':>8} {'warmed ms':>10} {'first ms':>9} {'median ms':>10}")
    for name, (cold, warmed, first, med) in res.items():
        flag = "" if max(cold, warmed, med) < 300 else "  over the 300 ms target"
        print(f"  {name:<34} {cold:>8.1f} {warmed:>10.1f} {first:>9.1f} {med:>10.1f}{flag}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memes", type=int, default=1000, help="simulated Arena size (0: skip)")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--run", type=Path, action="append", help="time existing run dirs only")
    a = ap.parse_args()
    if a.run:
        for run in a.run:
            report(str(run), run, a.repeats)
        return
    with tempfile.TemporaryDirectory(prefix="memearena-view-") as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        demo = build_demo(root)
        print(f"built the demo in {time.perf_counter() - t:.0f} s", flush=True)
        report("demo", demo, a.repeats)
        if a.memes:
            t = time.perf_counter()
            run = build_arena(root, a.memes)
            print(f"\nbuilt a {a.memes:,}-meme Arena in {time.perf_counter() - t:.0f} s")
            report(f"{a.memes:,}-meme simulated Arena", run, a.repeats)
    print(
        "\ncold: the page as the first request of a cold viewer (it computes what the page "
        "needs of the run's summaries and meme index); warmed: as the first request of a viewer "
        "started as `memearena view` starts it, once its warming at start (in a worker thread) "
        "is done; first: its first load after the pages above it; median: of the "
        f"repeats after (load average {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    main()
