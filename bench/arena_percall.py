"""Bench: the Arena pipeline's CPU per call beside the model layer's on the same calls.

One in-process Arena run over ``--memes`` demo memes (simulated models, cycled memes with
distinct ids and texts, so every request is new) with its calls recorded, then those calls
replayed through a fresh ``ModelPool`` (simulated backend, run store, response cache, the same
window) with no pipeline (``bench/percall.py``). ``ArenaPipeline.run`` is timed alone (the
analysis and status are not in it), in process CPU and in the CPU of the event loop's thread
alone (what calls wait behind; the store's group commits run in a thread of their own). The
difference is what the Arena's step code adds per call (rendering, key hashing, artifacts,
member views, verdict parsing); each size runs in its own process, repeated, and the load
average is printed (the machine may be shared). With ``--baseline-src DIR`` (another
checkout's ``src``), the same runs for it, interleaved.

    nice python bench/arena_percall.py [--memes 48] [--repeats 3] [--baseline-src DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def child(n: int) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    from percall import Recorder, replay, timed_method
    from scale import write_memes

    from memearena.config import DatasetConfig
    from memearena.demo import demo_config
    from memearena.engine.lifecycle import run_method
    from memearena.engine.pool import open_pool, sim_world
    from memearena.engine.rundir import load_memes
    from memearena.methods.arena.stages import ArenaPipeline, meme_window
    from memearena.store import RunStore

    acc: dict[str, float] = {}
    timed_method(ArenaPipeline, "run", acc)
    with tempfile.TemporaryDirectory(prefix="memearena-bench-arena-") as tmp:
        root = Path(tmp)
        data = DatasetConfig(format="demo", path=write_memes(root / "data", n))
        cfg = demo_config(bootstrap=20).model_copy(
            update={"run": "percall", "data": [data], "cache": False}
        )
        rec = Recorder().install()
        res = run_method("arena", cfg, root / "run", show_progress=False)
        rec.uninstall()
        store = RunStore(root / "replay.db")
        memes = load_memes(cfg, store).memes

        def make_pool() -> Any:
            world = sim_world(cfg, memes)
            return open_pool(cfg, world, store, cache_path=root / "replay.sqlite", max_cost=None)

        main: dict[str, float] = {}
        base = replay(make_pool, rec.calls, meme_window(cfg) * 16, main)
        store.close()
    return {
        "calls": len(rec.calls),
        "new_calls": res.new_calls,
        "pipeline_cpu_s": acc["run"],
        "model_layer_cpu_s": base,
        "pipeline_main_cpu_s": acc["run_main"],
        "model_layer_main_cpu_s": main["cpu"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--memes", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--baseline-src", help="another checkout's src folder (e.g. main's)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        print(json.dumps(child(a.child)))
        return
    trees = {"this": str(HERE.parent / "src")}
    if a.baseline_src:
        trees = {"baseline": a.baseline_src, **trees}
    runs: dict[str, list[dict[str, Any]]] = {t: [] for t in trees}
    loads = [os.getloadavg()[0]]
    for r in range(a.repeats):
        for name, src in trees.items() if r % 2 == 0 else reversed(trees.items()):
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(a.memes)],
                capture_output=True,
                text=True,
                check=True,
                env=dict(os.environ, PYTHONPATH=src),
            )
            runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
            loads.append(os.getloadavg()[0])
            print(name, runs[name][-1], flush=True)
    print(
        f"Arena pipeline CPU per call (ArenaPipeline.run) beside the model layer on the same "
        f"calls replayed; {a.memes} memes, median of {a.repeats}"
    )
    for name, rs in runs.items():
        for what, sfx in (("process", ""), ("main thread", "_main")):
            pipe = [1e6 * r[f"pipeline{sfx}_cpu_s"] / r["calls"] for r in rs]
            layer = [1e6 * r[f"model_layer{sfx}_cpu_s"] / r["calls"] for r in rs]
            extra = [p - q for p, q in zip(pipe, layer, strict=True)]
            print(
                f"  {name:<8} {what:<11}: {rs[0]['calls']:,} calls; pipeline "
                f"{statistics.median(pipe):.0f} µs per call ({min(pipe):.0f}-{max(pipe):.0f}), "
                f"model layer {statistics.median(layer):.0f} µs ({min(layer):.0f}-"
                f"{max(layer):.0f}), step code {statistics.median(extra):.0f} µs "
                f"({min(extra):.0f}-{max(extra):.0f}), ratio "
                f"{statistics.median(p / q for p, q in zip(pipe, layer, strict=True)):.2f}"
            )
    print(f"  load average: {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cpus")


if __name__ == "__main__":
    main()
