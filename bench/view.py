"""``memearena view`` page load times, and the store's bytes per call with requests kept.

For the demo run and a simulated Arena run of N memes (default 1,000; memes cycled from the
bundled set with distinct ids and texts, as in ``bench/scale.py``): the time to serve the
overview, the Arena page, a meme page, filtered lists (battles of one model by one judge; memes
matching a search; calls of one model) and the run list, measured over HTTP against the viewer's
aiohttp app. Each page is timed as the very first request of a cold viewer ("cold": no warming,
nothing cached; the median of ``--cold-repeats`` fresh viewers), as the first request of a viewer
started as ``memearena view`` starts it, once warmed ("warmed"), and then the first load and
the median of ``--repeats`` more in one viewer. Wall-clock ms and process CPU ms (user + sys of
the timing process, all its threads: robust to other load on the machine) are both given.
Target: < 300 ms each, first loads included.

Each source tree (``--src``, and ``--baseline-src`` when given) is timed in processes of its own,
interleaved round by round (``--rounds``), on the same run directories, built once with
``--src``. The Arena run is also timed as a run written before the run's usage was stored with
its leaderboard (a copy, hard-linked, whose leaderboard.json lacks that record: the viewer's
fallback). With a baseline, each page's HTML from both trees is compared byte for byte.

    nice python bench/view.py [--memes 1000] [--src src] [--baseline-src /work/main/src]
        [--rounds 3] [--cold-repeats 3] [--repeats 9] [--run DIR ...] [--keep DIR]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote as q

BENCH = Path(__file__).resolve().parent

CHILD = r"""
import asyncio, hashlib, json, sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from aiohttp.test_utils import TestClient, TestServer
from memearena.view.app import make_app
from memearena.view.keys import WARMING

run, pages = Path(sys.argv[2]), json.loads(sys.argv[3])
cold_repeats, repeats = int(sys.argv[4]), int(sys.argv[5])

async def get(client, url):
    c, t = time.process_time(), time.perf_counter()
    resp = await client.get(url)
    body = await resp.read()
    wall, cpu = 1000 * (time.perf_counter() - t), 1000 * (time.process_time() - c)
    assert resp.status == 200, (url, resp.status)
    return wall, cpu, body

async def fresh(url, warm):
    async with TestClient(TestServer(make_app(run, warm=warm))) as client:
        task = client.server.app.get(WARMING)
        if task is not None:
            await task
        return await get(client, url)

async def main():
    out = {}
    for name, url in pages.items():  # each a cold viewer's very first request
        cold = [await fresh(url, False) for _ in range(cold_repeats)]
        warmed = await fresh(url, True)
        out[name] = {
            "cold": [c[:2] for c in cold],
            "warmed": warmed[:2],
            "html": hashlib.sha256(cold[0][2]).hexdigest(),
        }
    async with TestClient(TestServer(make_app(run, warm=False))) as client:
        for name, url in pages.items():
            times = [await get(client, url) for _ in range(repeats + 1)]
            out[name]["first"] = times[0][:2]
            out[name]["rest"] = [t[:2] for t in times[1:]]
    print(json.dumps(out))

asyncio.run(main())
"""


def build_demo(root: Path) -> Path:
    from rich.console import Console

    from memearena.demo import run_demo

    run = root / "demo"
    run_demo(run, console=Console(file=io.StringIO()), show_progress=False)
    return run


def build_arena(root: Path, n: int) -> Path:
    sys.path.insert(0, str(BENCH))
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


def written_before(run: Path, dst: Path) -> Path | None:
    """A copy of ``run`` (files hard-linked; leaderboard.json rewritten) as a run written
    before its calls' usage was stored with the leaderboard; None when it holds none."""
    board = json.loads((run / "leaderboard.json").read_text(encoding="utf-8"))
    if not any(isinstance(s, dict) and "run_usage" in s for s in board.values()):
        return None
    for s in board.values():
        if isinstance(s, dict):
            s.pop("run_usage", None)
    shutil.copytree(
        run,
        dst,
        copy_function=os.link,
        ignore=shutil.ignore_patterns("run.lock", "leaderboard.json", "cache.sqlite*"),
    )
    (dst / "leaderboard.json").write_text(json.dumps(board, indent=2), encoding="utf-8")
    return dst


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


def page_urls(run: Path) -> dict[str, str]:
    """The pages timed, their parameters read from the run (the first meme, a word of its
    text, the first model and the last judge)."""
    from memearena.methods.arena import pages as arena_pages
    from memearena.view import RunReader

    reader = RunReader(run)
    try:
        first = arena_pages.memes(reader, limit=1).rows
        filt = arena_pages.filter_values(reader)
    finally:
        reader.close()
    meme = first[0]["uid"] if first else ""
    word = (first[0]["text"].split() or ["a"])[0] if first else "a"
    model = filt["models"][0] if filt["models"] else ""
    judge = filt["judges"][-1] if filt["judges"] else ""
    return {
        "overview": "/r/0/",
        "arena (leaderboards, pairwise)": "/r/0/arena",
        "meme page": f"/r/0/meme?id={q(meme)}",
        "battles filtered (model, judge)": f"/r/0/battles?model={q(model)}&judge={q(judge)}",
        "memes searched": f"/r/0/memes?q={q(word)}",
        "calls filtered (model)": f"/r/0/calls?model={q(model)}",
        "run list": "/",
    }


def time_tree(src: str, run: Path, urls: dict[str, str], args: argparse.Namespace) -> Any:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            str(Path(src).resolve()),
            str(run),
            json.dumps(urls),
            str(args.cold_repeats),
            str(args.repeats),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode:
        raise SystemExit(f"{src} on {run}: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout)


def _med(pairs: list[list[float]], i: int) -> float:
    return statistics.median(p[i] for p in pairs)


def report(label: str, run: Path, trees: dict[str, str], args: argparse.Namespace) -> None:
    s = store_figures(run)
    print(
        f"\n{label}: {s['calls']:,} calls; run.db {s['db_per_call']:,.0f} B per call, of which "
        f"requests as sent {s['req_per_call']:,.0f} B and the calls(request_hash) index "
        f"{s['index_per_call']:,.0f} B (target: requests <= 1,500 B per call)",
        flush=True,
    )
    urls = page_urls(run)
    runs: dict[str, list[Any]] = {name: [] for name in trees}
    for _ in range(args.rounds):  # interleaved: the trees meet the same load
        for name, src in trees.items():
            runs[name].append(time_tree(src, run, urls, args))
    load = os.getloadavg()
    print(
        f"  ms, wall / CPU; cold: median of {args.rounds} x {args.cold_repeats} cold viewers; "
        f"warmed, first: medians of {args.rounds}; median: of {args.rounds} x {args.repeats} "
        f"(load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f})"
    )
    head = f"  {'page':<32} {'tree':<9} {'cold':>13} {'warmed':>11} {'first':>13} {'median':>11}"
    print(head)
    for page in urls:
        for name in trees:
            got = [r[page] for r in runs[name]]
            cold = [c for g in got for c in g["cold"]]
            warmed = [g["warmed"] for g in got]
            first = [g["first"] for g in got]
            rest = [t for g in got for t in g["rest"]]
            worst = max(_med(cold, 0), _med(warmed, 0), _med(rest, 0))
            flag = "" if worst < 300 else "  over the 300 ms target"
            print(
                f"  {page:<32} {name:<9} {_med(cold, 0):>6.0f} /{_med(cold, 1):>5.0f}"
                f" {_med(warmed, 0):>4.0f} /{_med(warmed, 1):>4.0f}"
                f" {_med(first, 0):>6.0f} /{_med(first, 1):>5.0f}"
                f" {_med(rest, 0):>4.0f} /{_med(rest, 1):>4.0f}{flag}"
            )
    if len(trees) > 1:
        names = list(trees)
        differ = [p for p in urls if len({r[p]["html"] for name in names for r in runs[name]}) > 1]
        print(
            f"  HTML of every page identical across {' and '.join(names)}"
            if not differ
            else f"  HTML DIFFERS on: {', '.join(differ)}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memes", type=int, default=1000, help="simulated Arena size (0: skip)")
    ap.add_argument("--src", default=str(BENCH.parent / "src"), help="the tree timed")
    ap.add_argument("--baseline-src", help="a tree to time against, on the same run dirs")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cold-repeats", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--no-demo", action="store_true", help="skip the demo run")
    ap.add_argument("--run", type=Path, action="append", help="time existing run dirs only")
    ap.add_argument("--keep", type=Path, help="build the runs here and keep them")
    a = ap.parse_args()
    sys.path.insert(0, str(Path(a.src).resolve()))
    trees = {"src": a.src, **({"baseline": a.baseline_src} if a.baseline_src else {})}
    if a.run:
        for run in a.run:
            report(str(run), run, trees, a)
        return
    root = a.keep or Path(tempfile.mkdtemp(prefix="memearena-view-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        if not a.no_demo:
            t = time.perf_counter()
            demo = root / "demo" if (root / "demo" / "run.db").exists() else build_demo(root)
            print(f"built the demo in {time.perf_counter() - t:.0f} s", flush=True)
            report("demo", demo, trees, a)
        if a.memes:
            t = time.perf_counter()
            run = root / f"sim-{a.memes}"
            if not (run / "leaderboard.json").exists():
                run = build_arena(root, a.memes)
            print(f"\nbuilt a {a.memes:,}-meme Arena in {time.perf_counter() - t:.0f} s")
            report(f"{a.memes:,}-meme simulated Arena", run, trees, a)
            older = root / f"sim-{a.memes}-older" / run.name
            if not older.exists():
                older.parent.mkdir(parents=True, exist_ok=True)
                written_before(run, older)
            if older.exists():
                report(
                    f"{a.memes:,}-meme simulated Arena as written before its usage was stored",
                    older,
                    trees,
                    a,
                )
    finally:
        if a.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(
        "\ncold: the page as the first request of a cold viewer (it computes what the page "
        "needs of the run's summaries and meme index); warmed: as the first request of a viewer "
        "started as `memearena view` starts it, once its warming at start (in a worker thread) "
        "is done; first: its first load after the pages above it; median: of the repeats after"
    )


if __name__ == "__main__":
    main()
