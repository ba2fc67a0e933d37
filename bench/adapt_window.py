"""How full Adapt keeps its window, on a virtual clock: the demo's Adapt config (``--memes``
demo memes cycled, every model simulated in process with ``--latency-ms`` per call and
``--concurrency`` requests in flight per model) run on an event loop whose clock jumps to the
next timer whenever nothing is ready. CPU time costs no virtual time, so the figures are the
schedule's alone, the same on a loaded machine as on an idle one, and the same on every run.

Printed per source tree (``--src NAME=PATH``, each run in its own process):

* virtual wall time against the window floor (calls x latency / ``adapt.window``: no schedule
  of those calls through that window can end sooner) and against the per-model floor (the
  busiest model's calls x latency / its concurrency);
* calls in flight on average (the calls' summed virtual duration over the virtual wall), and
  their average in each tenth of the run. ``adapt.window`` bounds the jobs in flight, and a job
  may ask several calls at once (reference candidates, an original's two answers), so calls
  in flight can pass the window: the window floor is the issue's yardstick, not a bound;
* calls per role, and a digest of every request key and of the results (each original's score,
  each chain's steps): a change of schedule must leave both equal to the baseline's.

    python bench/adapt_window.py [--memes 48] [--latency-ms 200] [--concurrency 32]
        [--src new=src --src main=/work/main/src]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import selectors
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))


class _VirtualSelector(selectors.DefaultSelector):
    """Polls without waiting; a wait on timers only moves the virtual clock."""

    clock = 0.0

    def select(self, timeout: float | None = None) -> list[Any]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:  # nothing scheduled: only a thread or a socket can wake the loop
            return super().select(None)
        _VirtualSelector.clock += timeout
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop on the virtual clock."""

    def __init__(self) -> None:
        super().__init__(_VirtualSelector())

    def time(self) -> float:
        return _VirtualSelector.clock


def child(memes: int, latency_ms: float, concurrency: int) -> dict[str, Any]:
    """One Adapt run on the virtual clock; its figures as JSON."""
    from scale import write_memes

    from memearena.config import DatasetConfig
    from memearena.data import load_dataset
    from memearena.demo import adapt_demo_config
    from memearena.engine.pool import sim_world
    from memearena.engine.registry import get_method
    from memearena.methods.adapt.stages import AdaptPipeline
    from memearena.models import ModelPool
    from memearena.models import backends as be
    from memearena.store import RunStore

    tmp = Path(tempfile.mkdtemp(prefix="memearena-adapt-window-"))
    data = write_memes(tmp / "data", memes)
    cfg = adapt_demo_config(bootstrap=50)
    models = {
        n: m.model_copy(update={"latency_ms": latency_ms, "max_concurrency": concurrency})
        for n, m in cfg.models.items()
    }
    cfg = cfg.model_copy(
        update={
            "models": models,
            "data": [DatasetConfig(format="demo", path=data)],
            "cache": False,
        }
    )
    assert cfg.adapt is not None
    loaded = load_dataset(DatasetConfig(format="demo", path=data), check_images=False).memes
    get_method("adapt")  # registers Adapt's part of the simulated world
    world = sim_world(cfg, loaded)
    flight = {"now": 0, "area": 0.0, "last": 0.0, "calls": 0}
    marks: list[tuple[float, float]] = []  # (virtual time, area so far)
    by_role: dict[str, float] = {}
    real_chat = be.SimBackend.chat

    def tick() -> float:
        now = _VirtualSelector.clock
        flight["area"] += flight["now"] * (now - flight["last"])
        flight["last"] = now
        marks.append((now, flight["area"]))
        return now

    async def chat(self: Any, messages: Any, params: Any, role: str) -> Any:
        t0 = tick()
        flight["now"] += 1
        flight["calls"] += 1
        try:
            return await real_chat(self, messages, params, role)
        finally:
            by_role[role] = by_role.get(role, 0.0) + tick() - t0
            flight["now"] -= 1

    be.SimBackend.chat = chat  # type: ignore[method-assign]
    store = RunStore(tmp / "run.db")
    pool = ModelPool(cfg.models, store=store, cache=None, responder=world)

    async def go() -> Any:
        try:
            return await AdaptPipeline(
                cfg, loaded, pool, store, on_image=world.adapt.register_image
            ).run()
        finally:
            await pool.aclose()

    loop = VirtualLoop()
    t = time.perf_counter()
    try:
        out = loop.run_until_complete(go())
    finally:
        loop.close()
    real = time.perf_counter() - t
    wall = tick()
    store.close()
    con = sqlite3.connect(tmp / "run.db")
    keys = sorted(r[0] for r in con.execute("SELECT request_hash FROM calls"))
    roles = dict(con.execute("SELECT role, COUNT(*) FROM calls GROUP BY role ORDER BY role"))
    per_model = [r[0] for r in con.execute("SELECT COUNT(*) FROM calls GROUP BY model")]
    con.close()
    results = {
        "originals": sorted(
            json.dumps([o["target"], o["category"], o["meme"], o["repeat"], o.get("score")])
            for o in out.originals
        ),
        "chains": sorted(
            json.dumps(
                [c["target"], c["category"], c["repeat"], c["mode"], c["seed"], c["stop"]]
                + [[s["meme"], s.get("text"), s.get("score_after")] for s in c["steps"]]
            )
            for c in out.chains
        ),
        "pending": out.pending,
    }
    latency = latency_ms / 1000
    calls = len(keys)
    timeline = []
    for k in range(10):
        lo, hi = wall * k / 10, wall * (k + 1) / 10
        a0 = max((a for t, a in marks if t <= lo), default=0.0)
        a1 = max((a for t, a in marks if t <= hi), default=0.0)
        timeline.append(round((a1 - a0) / (hi - lo), 1))
    return {
        "calls": calls,
        "virtual_wall": wall,
        "window_floor": calls * latency / cfg.adapt.window,
        "model_floor": max(per_model) * latency / concurrency,
        "in_flight": flight["area"] / wall,
        "stage_calls": out.stage_calls,
        "timeline": timeline,
        "roles": roles,
        "keys": hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16],
        "results": hashlib.sha256(json.dumps(results).encode()).hexdigest()[:16],
        "real_s": real,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memes", type=int, default=48)
    ap.add_argument("--latency-ms", type=float, default=200.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--src", action="append", default=None, help="NAME=PATH (repeatable)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.memes, a.latency_ms, a.concurrency)))
        return
    srcs = dict(s.split("=", 1) for s in (a.src or [f"this={ROOT / 'src'}"]))
    got: dict[str, dict[str, Any]] = {}
    for name, src in srcs.items():
        proc = subprocess.run(
            [sys.executable, __file__, "--child", "--memes", str(a.memes), "--latency-ms",
             str(a.latency_ms), "--concurrency", str(a.concurrency)],
            env=dict(os.environ, PYTHONPATH=str(Path(src).resolve())),
            capture_output=True,
            text=True,
        )  # fmt: skip
        if proc.returncode != 0:
            raise SystemExit(f"{name}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
        got[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(
        f"Adapt's window on a virtual clock: {a.memes} memes, {a.latency_ms:g} ms a call, "
        f"{a.concurrency} per model, window 64"
    )
    for name, g in got.items():
        ratio = g["virtual_wall"] / g["window_floor"]
        print(
            f"  {name:<6} calls {g['calls']:,}  virtual wall {g['virtual_wall']:7.1f} s  "
            f"window floor {g['window_floor']:6.1f} s ({ratio:.2f}x)  model floor "
            f"{g['model_floor']:6.1f} s  in flight {g['in_flight']:4.1f} of 64  keys {g['keys']}"
            f"  results {g['results']}  ({g['real_s']:.0f} s real)"
        )
        print(f"         in flight over time (tenths): {g['timeline']}")
        print(f"         stage calls {json.dumps(g['stage_calls'])}")
    base = list(got)[-1]
    for name, g in got.items():
        same = g["keys"] == got[base]["keys"] and g["results"] == got[base]["results"]
        print(
            f"  {name}: request keys and results {'equal to' if same else 'DIFFER from'} {base}'s"
        )


if __name__ == "__main__":
    main()
