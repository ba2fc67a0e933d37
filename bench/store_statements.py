"""SQLite cost per statement as the store grows: the simulated Arena (in-process, the demo
catalogue, memes cycled from the bundled set as in ``bench/scale.py``) at growing sizes, every
SQLite statement timed where it runs (the CPU time of the thread running it by default, so that
other processes on a shared machine, and other threads, do not count; ``--clock wall`` for wall
time).

Each size runs in its own process; there, ``sqlite3.connect`` hands out a connection whose
cursors time ``execute``/``executemany`` and every fetch (a SELECT's rows are stepped while they
are fetched) with the clock below; commits are ``COMMIT`` statements on the autocommit
connections the store and cache use, so they are counted too. Reported per size: statements
(an ``executemany`` counts once, its rows apart), total seconds inside SQLite, us per
statement, overall and per statement shape (the first words and the table), so a statement that
grows dearer with the store shows up by name. Target: us per statement flat (within noise) from
100 to 1,000 memes.

    nice python bench/store_statements.py [--sizes 100,300,1000] [--repeats 3] [--top 12]
    nice python bench/store_statements.py --cache-curve 258000   # the cache layouts alone
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_STATS: dict[str, list[float]] = {}  # shape -> [statements, rows, seconds]
_STATS_LOCK = threading.Lock()  # the pool's group commits run statements in a thread of their own
# CPU of the thread running the statement by default: on a shared machine, wall time inside a
# statement mostly measures how long other processes held the CPU (``--clock wall`` to see it
# anyway), and process CPU would count the other threads' work done meanwhile.
_clock = (
    time.perf_counter if os.environ.get("MEMEARENA_BENCH_CLOCK") == "wall" else time.thread_time
)
_WORDS = re.compile(r"\s+")


def _shape(sql: str) -> str:
    words = _WORDS.sub(" ", sql.strip()).split(" ")
    head = " ".join(words[:2]).upper()
    table = next(
        (words[i + 1] for i, w in enumerate(words[:-1]) if w.upper() in ("FROM", "INTO", "UPDATE")),
        "",
    )
    if head.startswith("UPDATE"):
        table = words[1] if len(words) > 1 else ""
    return f"{head} {table}".strip()


def _add(sql: str, rows: int, seconds: float, statements: int = 1, db: str = "") -> None:
    with _STATS_LOCK:
        s = _STATS.setdefault(f"{_shape(sql)} [{db}]", [0, 0, 0.0])
        s[0] += statements
        s[1] += rows
        s[2] += seconds


class TimedCursor(sqlite3.Cursor):
    """A cursor that adds the time spent in SQLite to its statement's shape."""

    _sql = ""

    def execute(self, sql: str, params: Any = (), /) -> TimedCursor:  # type: ignore[override]
        self._sql = sql
        t = _clock()
        try:
            return super().execute(sql, params)  # type: ignore[return-value]
        finally:
            _add(sql, 1, _clock() - t, db=self.connection.db_name)

    def executemany(self, sql: str, seq: Any, /) -> TimedCursor:  # type: ignore[override]
        self._sql = sql
        rows = list(seq)
        t = _clock()
        try:
            return super().executemany(sql, rows)  # type: ignore[return-value]
        finally:
            _add(sql, len(rows), _clock() - t, db=self.connection.db_name)

    def _fetch(self, fn: Any, *args: Any) -> Any:
        t = _clock()
        try:
            return fn(*args)
        finally:
            _add(self._sql, 0, _clock() - t, 0, self.connection.db_name)

    def fetchone(self) -> Any:
        return self._fetch(super().fetchone)

    def fetchall(self) -> list[Any]:
        return self._fetch(super().fetchall)  # type: ignore[no-any-return]

    def fetchmany(self, size: int | None = None) -> list[Any]:
        return self._fetch(super().fetchmany, size or self.arraysize)  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        return self._fetch(super().__next__)


class TimedConnection(sqlite3.Connection):
    """A connection whose shortcuts (``execute``, ``executemany``) go through a TimedCursor."""

    def __init__(self, database: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(database, *args, **kwargs)
        self.db_name = Path(str(database)).name

    def cursor(self, factory: Any = TimedCursor) -> Any:  # type: ignore[override]
        return super().cursor(factory)

    def execute(self, sql: str, params: Any = (), /) -> Any:  # type: ignore[override]
        return self.cursor().execute(sql, params)

    def executemany(self, sql: str, seq: Any, /) -> Any:  # type: ignore[override]
        return self.cursor().executemany(sql, seq)


def child(n: int) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).parent))
    from scale import write_memes

    connect = sqlite3.connect

    def timed_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        kwargs.setdefault("factory", TimedConnection)
        return connect(*args, **kwargs)

    sqlite3.connect = timed_connect  # type: ignore[assignment]

    from memearena.api import run_arena
    from memearena.config import DatasetConfig
    from memearena.demo import demo_config

    with tempfile.TemporaryDirectory(prefix="memearena-stmt-") as tmp:
        root = Path(tmp)
        data = write_memes(root / "data", n)
        cfg = demo_config(bootstrap=50)
        cfg = cfg.model_copy(
            update={"run": "stmt", "data": [DatasetConfig(format="demo", path=data)]}
        )
        t, c = time.perf_counter(), time.process_time()
        done = run_arena(cfg, root / "run", show_progress=False)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
    return {"memes": n, "calls": done.new_calls, "wall_s": wall, "cpu_s": cpu, "stats": _STATS}


_LAYOUTS = {
    "hash-keyed (WITHOUT ROWID, before)": (
        "CREATE TABLE responses (key TEXT PRIMARY KEY, value TEXT NOT NULL,"
        " created_at REAL NOT NULL) WITHOUT ROWID"
    ),
    "rowid + key index (now)": (
        "CREATE TABLE responses (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE,"
        " value TEXT NOT NULL, created_at REAL NOT NULL)"
    ),
}


def cache_curve(total: int, batch: int, value_bytes: int) -> None:
    """The response cache's two layouts side by side in one process, batch for batch (so the
    machine's load hits both alike): a miss lookup per entry, then the batch inserted in key
    order in one transaction, as ``ModelPool`` does; CPU us per entry between marks."""
    import hashlib

    from memearena.models.cache import _INSERT
    from memearena.store.runstore import PAGE_CACHE_KIB

    marks = sorted({total // 10, total // 3, total // 2, total})
    with tempfile.TemporaryDirectory(prefix="memearena-cache-") as tmp:
        dbs = {}
        for i, (name, ddl) in enumerate(_LAYOUTS.items()):
            db = sqlite3.connect(Path(tmp) / f"c{i}.sqlite", isolation_level=None)
            for pragma in (
                "journal_mode=WAL",
                "synchronous=NORMAL",
                f"cache_size=-{PAGE_CACHE_KIB}",
            ):
                db.execute(f"PRAGMA {pragma}")
            db.execute(ddl)
            dbs[name] = db
        spent = dict.fromkeys(dbs, 0.0)
        done, last, curve = 0, 0, {name: [] for name in dbs}
        value = "v" * value_bytes
        while done < total:
            keys = [hashlib.sha256(f"{done + i}".encode()).hexdigest() for i in range(batch)]
            rows = sorted((k, value + k[:8], time.time()) for k in keys)
            for name, db in dbs.items():
                c = time.process_time()
                for k in keys:
                    db.execute("SELECT value FROM responses WHERE key=?", (k,)).fetchone()
                db.execute("BEGIN IMMEDIATE")
                db.executemany(_INSERT, rows)
                db.execute("COMMIT")
                spent[name] += time.process_time() - c
            done += batch
            if marks and done >= marks[0]:
                marks.pop(0)
                for name in dbs:
                    curve[name].append((done, 1e6 * spent[name] / (done - last)))
                    spent[name] = 0.0
                last = done
        sizes = {name: (Path(tmp) / f"c{i}.sqlite").stat().st_size for i, name in enumerate(dbs)}
        for db in dbs.values():
            db.close()
    print(
        f"response cache, {batch} entries a commit, {value_bytes}-byte replies: CPU us per entry "
        "(miss lookup + insert + commit) over each stretch"
    )
    for name, points in curve.items():
        cells = "  ".join(f"{n:>8,}: {us:6.1f}" for n, us in points)
        print(f"  {name:<36} {cells}   file {sizes[name] / 1e6:,.0f} MB")


def run_child(n: int, src: str | None = None, clock: str = "cpu") -> dict[str, Any]:
    env = {**os.environ, "MEMEARENA_BENCH_CLOCK": clock}
    if src is not None:
        env["PYTHONPATH"] = src
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(n)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if out.returncode != 0:
        raise SystemExit(f"child {n} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,300,1000")
    ap.add_argument("--repeats", type=int, default=3, help="runs per size, interleaved")
    ap.add_argument("--top", type=int, default=12, help="statement shapes listed")
    ap.add_argument(
        "--baseline-src",
        help="a src/ folder of another version (e.g. from git archive): run it too, interleaved",
    )
    ap.add_argument("--clock", choices=["cpu", "wall"], default="cpu", help="what is timed")
    ap.add_argument(
        "--cache-curve",
        type=int,
        metavar="ENTRIES",
        help="instead: the response cache's layouts, before and now, up to ENTRIES entries",
    )
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        print(json.dumps(child(a.child)))
        return
    if a.cache_curve:
        cache_curve(a.cache_curve, batch=200, value_bytes=1200)
        return
    sizes = [int(s) for s in a.sizes.split(",")]
    versions = {"this tree": None} | ({"baseline": a.baseline_src} if a.baseline_src else {})
    all_runs: dict[str, dict[int, list[dict[str, Any]]]] = {
        v: {n: [] for n in sizes} for v in versions
    }
    for _ in range(a.repeats):  # interleaved: a change in the machine's load hits all alike
        for n in sizes:
            for v, src in versions.items():
                r = run_child(n, src, a.clock)
                all_runs[v][n].append(r)
                secs = sum(st[2] for st in r["stats"].values())
                stmts = sum(st[0] for st in r["stats"].values())
                print(
                    f"# {v}: {n} memes, {r['calls']:,} calls, {stmts:,} statements, "
                    f"{1e6 * secs / max(1, stmts):.1f} us/stmt, wall {r['wall_s']:.0f} s",
                    flush=True,
                )
    for v in versions:
        if len(versions) > 1:
            print(f"\n=== {v} ({versions[v] or 'PYTHONPATH as set'}) ===")
        report(all_runs[v], sizes, a)


def report(runs: dict[int, list[dict[str, Any]]], sizes: list[int], a: Any) -> None:

    def per_stmt(r: dict[str, Any], shape: str | None = None) -> tuple[float, float, float]:
        items = [r["stats"][shape]] if shape else list(r["stats"].values())
        stmts = sum(s[0] for s in items if s)
        secs = sum(s[2] for s in items if s)
        return stmts, secs, 1e6 * secs / max(1, stmts)

    print(
        f"SQLite per statement ({a.clock} time), simulated Arena, median of {a.repeats} "
        "interleaved runs a size:"
    )
    cols = ("memes", 6), ("calls", 8), ("statements", 10), ("rows", 9), ("SQLite s", 9)
    cols += ("us/stmt", 8), ("stmt/call", 9)
    print(" ".join(f"{name:>{width}}" for name, width in cols))
    for n in sizes:
        rs = runs[n]
        stmts = statistics.median(per_stmt(r)[0] for r in rs)
        rows = statistics.median(sum(s[1] for s in r["stats"].values()) for r in rs)
        secs = statistics.median(per_stmt(r)[1] for r in rs)
        us = statistics.median(per_stmt(r)[2] for r in rs)
        calls = statistics.median(r["calls"] for r in rs)
        print(
            f"{n:>6,} {calls:>8,.0f} {stmts:>10,.0f} {rows:>9,.0f} {secs:>9.2f} {us:>8.1f} "
            f"{stmts / max(1, calls):>9.2f}"
        )
    last = runs[sizes[-1]]
    shapes = sorted(
        last[0]["stats"],
        key=lambda k: -statistics.median(r["stats"].get(k, [0, 0, 0])[2] for r in last),
    )[: a.top]
    print(
        "\nby statement shape (us per statement at each size; share of SQLite time at the largest):"
    )
    print(f"{'shape':<44} " + " ".join(f"{n:>9,}" for n in sizes) + f" {'share':>6}")
    total_last = statistics.median(per_stmt(r)[1] for r in last)
    for shape in shapes:
        cells = []
        for n in sizes:
            vals = [per_stmt(r, shape) for r in runs[n] if shape in r["stats"]]
            cells.append(f"{statistics.median(v[2] for v in vals):>9.1f}" if vals else f"{'-':>9}")
        share = statistics.median(per_stmt(r, shape)[1] for r in last if shape in r["stats"])
        print(f"{shape[:44]:<44} " + " ".join(cells) + f" {share / total_last:>6.1%}")


if __name__ == "__main__":
    main()
