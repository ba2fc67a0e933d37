"""Batched Arena runs against sim-serve's batch endpoints with 500s injected at one step:
batches created, replies billed and distinct requests counted at the server, and whether the
run completed. ``python bench/batch_faults.py [STEP=N ...]`` (default: each step alone).

``python bench/batch_faults.py --runs 30 [--side-by-side 15]``: that many uninterrupted
batched runs against one server, so many at once, each given 120 s: runs that hung (did not
end), runs that stopped early, and requests billed against runs × distinct requests (each run
has its own directory, ledger and cache, so each pays every request once)."""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from memearena.config import load_config
from memearena.engine.lifecycle import run_method
from memearena.sim.catalogue import DEMO_JUDGES, DEMO_TARGETS
from memearena.sim.serve import demo_world
from memearena.sim.server import BackgroundServer

TARGETS = ["sim-aurora", "sim-cirrus", "sim-ember"]
JUDGES = ["sim-judge-falcon", "sim-judge-grove"]


def one(faults: dict[str, int], tmp: Path) -> dict[str, object]:
    with BackgroundServer(
        demo_world(seed=0), process=True, batch_delay_s=0.1, batch_faults=faults
    ) as srv:
        catalogue = {**DEMO_TARGETS, **DEMO_JUDGES}
        models = {
            n: {
                "provider": "openai",
                "base_url": srv.base_url,
                "model": n,
                "family": catalogue[n].family,
                "price": {"input": 2.0, "output": 8.0},
                "batch": True,
                "batch_poll_s": 0.05,
                "max_retries": 2,
            }
            for n in TARGETS + JUDGES
        }
        cfg = {
            "run": "b",
            "seed": 0,
            "models": models,
            "data": [{"format": "demo", "limit": 1}],
            "arena": {
                "targets": TARGETS,
                "judges": JUDGES,
                "context_model": JUDGES[0],
                "fusion_rounds": 2,
                "bootstrap": 10,
            },
        }
        path = tmp / "c.yaml"
        path.write_text(yaml.safe_dump(cfg))
        t0 = time.perf_counter()
        out = run_method("arena", load_config(path), tmp / "out", show_progress=False)
        wall = time.perf_counter() - t0
        with urllib.request.urlopen(f"{srv.base_url}/batch_stats", timeout=10) as r:
            stats = json.loads(r.read())
    rows = len(out.leaderboard.get("arena", {}).get("overall", []))
    return {
        "faults": faults,
        "batches": stats["batches"],
        "billed": stats["billed_requests"],
        "distinct": stats["distinct_requests"],
        "leaderboard_rows": rows,
        "stopped": out.stopped,
        "wall_s": round(wall, 1),
    }


def _runs_within(cfgs: list[tuple[Any, Path]], seconds: float) -> list[Any]:
    """Each run's result (one thread each, side by side), or None for one still going after
    ``seconds`` (a hang)."""
    results: list[list[Any]] = [[] for _ in cfgs]
    threads = [
        threading.Thread(
            target=lambda out=out, cfg=cfg, d=d: out.append(
                run_method("arena", cfg, d, show_progress=False)
            ),
            daemon=True,
        )
        for out, (cfg, d) in zip(results, cfgs, strict=True)
    ]
    for t in threads:
        t.start()
    deadline = time.monotonic() + seconds
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return [out[0] if out else None for out in results]


def many(runs: int, side_by_side: int, tmp: Path) -> dict[str, object]:
    hung = stopped = 0
    t0 = time.perf_counter()
    with BackgroundServer(demo_world(seed=0), process=True, batch_delay_s=0.05) as srv:
        for start in range(0, runs, side_by_side):
            group = []
            for k in range(start, min(runs, start + side_by_side)):
                path = write_config(tmp / f"{k}.yaml", srv.base_url)
                group.append((load_config(path), tmp / f"out{k}"))
            for out in _runs_within(group, 120):
                hung += out is None
                stopped += out is not None and (
                    out.stopped is not None or not out.leaderboard["arena"]["overall"]
                )
        with urllib.request.urlopen(f"{srv.base_url}/batch_stats", timeout=10) as r:
            stats = json.loads(r.read())
    return {
        "runs": runs,
        "side_by_side": side_by_side,
        "hung": hung,
        "stopped_or_empty": stopped,
        "billed": stats["billed_requests"],
        "expected_billed": runs * stats["distinct_requests"],
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def write_config(path: Path, base_url: str) -> Path:
    catalogue = {**DEMO_TARGETS, **DEMO_JUDGES}
    models = {
        n: {
            "provider": "openai",
            "base_url": base_url,
            "model": n,
            "family": catalogue[n].family,
            "max_concurrency": 64,
            "price": {"input": 2.0, "output": 8.0},
            "batch": True,
            "batch_poll_s": 0.05,
        }
        for n in TARGETS + JUDGES
    }
    cfg = {
        "run": "batch",
        "seed": 0,
        "models": models,
        "data": [{"format": "demo", "limit": 1}],
        "arena": {
            "targets": TARGETS,
            "judges": JUDGES,
            "context_model": JUDGES[0],
            "fusion_rounds": 2,
            "bootstrap": 10,
        },
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def main() -> None:
    args = sys.argv[1:]
    if args and args[0] == "--runs":
        runs = int(args[1])
        side = int(args[3]) if len(args) > 3 and args[2] == "--side-by-side" else 15
        with tempfile.TemporaryDirectory() as d:
            print(json.dumps(many(runs, side, Path(d))), flush=True)
        return
    plans = (
        [dict((a.split("=")[0], int(a.split("=")[1])) for a in args)]
        if args
        else [{}, {"file_create": 1}, {"batch_create": 1}, {"poll": 1}, {"output_read": 1}]
    )
    for plan in plans:
        with tempfile.TemporaryDirectory() as d:
            print(json.dumps(one(plan, Path(d))), flush=True)


if __name__ == "__main__":
    main()
