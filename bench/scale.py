"""The Arena at scale, in-process on the simulated world: wall time, calls/s, CPU per call, peak
RSS, store size, and the no-op re-run, for growing numbers of memes (5 targets, 4 judges, the
demo catalogue; memes cycled from the bundled demo set with distinct ids and texts, so every
request is new).

Baseline, measured in the same invocation: the model layer's own CPU per call (``ModelPool`` with
the simulated backend, run store and response cache; no pipeline), on requests shaped like the
Arena's (9 judge calls for 1 answer call, real templates, distinct texts).

Each size runs in its own process (peak RSS is per process). Targets: peak RSS under 1 GB at
10,000 memes; pipeline CPU per call within 2x of the model layer's; a no-op re-run under 5% of
the fresh run's wall time; the requests kept as sent (``requests`` and ``request_dicts``
tables) at most 1.5 KB per call on record.

    nice python bench/scale.py [--sizes 100,1000] [--bootstrap 200] [--baseline-calls 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def write_memes(folder: Path, n: int) -> Path:
    """``n`` demo-format memes cycled from the bundled set (distinct ids and texts)."""
    from memearena.data.demo import demo_dir

    src = demo_dir()
    rows = [json.loads(line) for line in (src / "memes.jsonl").read_text().splitlines() if line]
    shutil.copytree(src / "img", folder / "img", dirs_exist_ok=True)
    with (folder / "memes.jsonl").open("w") as f:
        for i in range(n):
            row = dict(rows[i % len(rows)])
            row["id"] = f"{row['id']}-{i}"
            row["text"] = f"{row['text']} #{i}"
            f.write(json.dumps(row) + "\n")
    return folder / "memes.jsonl"


def _size(run_dir: Path) -> int:
    return sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())


def table_bytes(db_path: Path, names: tuple[str, ...]) -> int:
    """Bytes of the pages the named tables and indexes take in an SQLite file (dbstat)."""
    import sqlite3

    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        marks = ",".join("?" for _ in names)
        row = db.execute(
            f"SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN ({marks})", names
        ).fetchone()
        return int(row[0])
    finally:
        db.close()


def _timed(module: Any, name: str, acc: dict[str, float]) -> None:
    """Wrap ``module.name`` to add its CPU seconds to ``acc[name]``."""
    fn = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        acc.setdefault(f"{name}_peak_rss_before", rss)  # the first call's
        c = time.process_time()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[name] = acc.get(name, 0.0) + time.process_time() - c

    setattr(module, name, wrapper)


def child_arena(n: int, bootstrap: int) -> dict[str, Any]:
    import memearena.methods.arena.analysis as analysis
    import memearena.methods.arena.method as runner
    from memearena.config import DatasetConfig
    from memearena.demo import demo_config
    from memearena.engine.lifecycle import run_method

    # The analysis (statistics) and the run status are timed apart from the pipeline.
    acc: dict[str, float] = {}
    _timed(analysis, "arena_leaderboard", acc)
    _timed(runner, "arena_status", acc)

    with tempfile.TemporaryDirectory(prefix="memearena-scale-") as tmp:
        root = Path(tmp)
        data = write_memes(root / "data", n)
        cfg = demo_config(bootstrap=bootstrap)
        cfg = cfg.model_copy(
            update={"run": "scale", "data": [DatasetConfig(format="demo", path=data)]}
        )
        run_dir = root / "run"
        t, c = time.perf_counter(), time.process_time()
        fresh = run_method("arena", cfg, run_dir, show_progress=False)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        fresh_acc = dict(acc)
        acc.clear()
        # What keeping every request as sent adds to the store, per call on record.
        calls_on_record = _count_calls(run_dir / "run.db")
        request_bytes = table_bytes(
            run_dir / "run.db", ("requests", "request_dicts", "calls_request_hash")
        )
        rss_fresh = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        t, c = time.perf_counter(), time.process_time()
        again = run_method("arena", cfg, run_dir, show_progress=False)
        re_wall, re_cpu = time.perf_counter() - t, time.process_time() - c
        assert again.new_calls == 0, "a no-op re-run made calls"
        assert again.leaderboard["arena"]["overall"] == fresh.leaderboard["arena"]["overall"]
        return {
            "memes": n,
            "calls": fresh.new_calls,
            "wall_s": wall,
            "cpu_s": cpu,
            "analysis_cpu_s": fresh_acc.get("arena_leaderboard", 0.0),
            "status_cpu_s": fresh_acc.get("arena_status", 0.0),
            "rerun_status_cpu_s": acc.get("arena_status", 0.0),
            "peak_rss_mb": rss_fresh,
            "pipeline_peak_rss_mb": fresh_acc.get("arena_status_peak_rss_before", rss_fresh),
            "store_mb": _size(run_dir) / 1e6,
            "store_bytes_per_call": _size(run_dir) / max(1, calls_on_record),
            "request_bytes_per_call": request_bytes / max(1, calls_on_record),
            "rerun_wall_s": re_wall,
            "rerun_cpu_s": re_cpu,
            "rerun_kept_leaderboard": again.analysis_reused,
            "battles": fresh.leaderboard["arena"].get("battles"),
        }


def _count_calls(db_path: Path) -> int:
    import sqlite3

    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return int(db.execute("SELECT COUNT(*) FROM calls").fetchone()[0])
    finally:
        db.close()


def child_baseline(calls: int) -> dict[str, Any]:
    """CPU per call of the model layer alone on Arena-shaped requests."""
    from memearena.demo import demo_config
    from memearena.engine.pool import sim_world
    from memearena.engine.steps import bounded_map
    from memearena.models import ModelPool, ResponseCache
    from memearena.prompts import build_messages
    from memearena.store import RunStore

    cfg = demo_config()
    assert cfg.arena is not None
    targets, judges = list(cfg.arena.targets), list(cfg.arena.judges)
    with tempfile.TemporaryDirectory(prefix="memearena-base-") as tmp:
        from memearena.data import load_datasets

        memes = load_datasets(cfg.data, cfg.image).memes
        store = RunStore(Path(tmp) / "run.db")
        cache = ResponseCache(Path(tmp) / "cache.sqlite")
        pool = ModelPool(cfg.models, store=store, cache=cache, responder=sim_world(cfg, memes))
        answer = (
            "[Background Knowledge]\nThe meme refers to a fictional group and place; "
            "several statements about them are stated as facts.\n[Reasoning]\nThe caption "
            "pairs a stereotype with the group, which makes the meme demeaning. "
        )

        def request(i: int) -> tuple[str, str, Any]:
            meme = memes[i % len(memes)]
            text = f"{meme.text} #{i}"
            if i % 10 == 0:
                msgs = build_messages(
                    "arena/answer.j2", meme_text=text, background="context", task="explain"
                )
                return targets[i % len(targets)], "arena.answer", msgs
            msgs = build_messages(
                "arena/judge_pairwise.j2",
                meme_text=text,
                background="context",
                task="explain",
                guideline="Judge the background and the reasoning. " * 8,
                response_a=answer * 3 + str(i),
                response_b=answer * 2 + str(-i),
                criteria=list(cfg.arena.criteria),
            )
            return judges[i % len(judges)], "arena.judge", msgs

        async def go() -> float:
            async def one(i: int) -> None:
                model, role, msgs = request(i)
                await pool.complete(model, msgs, role=role)

            t = time.process_time()
            async for _ in bounded_map(one, range(calls), 256):
                pass
            cpu = time.process_time() - t
            await pool.aclose()
            return cpu

        cpu = asyncio.run(go())
        store.close()
        cache.close()
    return {"calls": calls, "cpu_per_call_ms": 1000 * cpu / calls}


def run_child(args: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,1000", help="comma-separated meme counts")
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--baseline-calls", type=int, default=20000)
    ap.add_argument("--child", choices=["arena", "baseline"], help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child == "arena":
        print(json.dumps(child_arena(a.n, a.bootstrap)))
        return
    if a.child == "baseline":
        print(json.dumps(child_baseline(a.n)))
        return

    base = run_child(["--child", "baseline", "--n", str(a.baseline_calls)])
    per_call = base["cpu_per_call_ms"]
    print(
        f"baseline: model layer alone (ModelPool + simulated backend + store + cache), "
        f"{base['calls']:,} Arena-shaped calls: {per_call:.3f} ms CPU per call"
    )
    print(
        "CPU/call: the whole run's CPU per call; pipeline: without the statistics (analysis) "
        "and the run status; x base: pipeline CPU/call over the model layer's; peak RSS: the "
        "whole run's, and (pipeline) before the status and statistics start"
    )
    header = (
        f"{'memes':>7} {'calls':>10} {'wall s':>8} {'calls/s':>8} {'CPU s':>7} "
        f"{'CPU/call ms':>11} {'pipeline':>8} {'x base':>6} {'analysis s':>10} "
        f"{'peak RSS MB':>11} {'pipeline':>8} {'store MB':>9} {'req B/call':>10} "
        f"{'no-op s':>8} {'no-op CPU s':>11} {'no-op %':>8}"
    )
    print(header)
    rows = []
    for n in (int(s) for s in a.sizes.split(",")):
        r = run_child(["--child", "arena", "--n", str(n), "--bootstrap", str(a.bootstrap)])
        rows.append(r)
        calls = max(1, r["calls"])
        cpc = 1000 * r["cpu_s"] / calls
        pipe = 1000 * (r["cpu_s"] - r["analysis_cpu_s"] - r["status_cpu_s"]) / calls
        print(
            f"{r['memes']:>7,} {r['calls']:>10,} {r['wall_s']:>8.1f} "
            f"{r['calls'] / r['wall_s']:>8,.0f} {r['cpu_s']:>7.1f} {cpc:>11.3f} {pipe:>8.3f} "
            f"{pipe / per_call:>6.2f} {r['analysis_cpu_s']:>10.1f} "
            f"{r['peak_rss_mb']:>11.0f} {r['pipeline_peak_rss_mb']:>8.0f} {r['store_mb']:>9.1f} "
            f"{r['request_bytes_per_call']:>10.0f} "
            f"{r['rerun_wall_s']:>8.2f} "
            f"{r['rerun_cpu_s']:>11.2f} {100 * r['rerun_wall_s'] / r['wall_s']:>7.1f}%",
            flush=True,
        )
    print(
        "targets: peak RSS < 1,000 MB at 10,000 memes; pipeline CPU/call <= 2x the model "
        "layer's; no-op re-run < 5% of the fresh run (wall; CPU shown too: the machine is shared); "
        "requests as sent (req B/call: the pages of the requests tables and of the index linking "
        "calls to them, per call on record) <= 1,500"
    )
    if len(rows) > 1:
        a0, a1 = rows[0], rows[-1]
        growth = (a1["peak_rss_mb"] - a0["peak_rss_mb"]) / (a1["memes"] - a0["memes"])
        print(
            f"peak RSS growth {growth * 1000:.1f} MB per 1,000 memes "
            f"({a0['memes']:,} -> {a1['memes']:,} memes)"
        )


if __name__ == "__main__":
    main()
