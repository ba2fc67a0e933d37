"""Batched Arena runs against sim-serve's batch endpoints with 500s injected at one step:
batches created, replies billed and distinct requests counted at the server, and whether the
run completed. ``python bench/batch_faults.py [STEP=N ...]`` (default: each step alone)."""

from __future__ import annotations

import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

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


def main() -> None:
    args = sys.argv[1:]
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
