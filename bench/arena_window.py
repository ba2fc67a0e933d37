"""How close the Arena's schedule comes to its latency floor, on a virtual clock: the demo's
Arena config (``--memes`` demo memes cycled with distinct ids and texts, every model simulated in
process with ``--latency-ms`` per call and ``--concurrency`` requests in flight per model) run
through ``memearena``'s own lifecycle on an event loop whose clock jumps to the next timer
whenever nothing is ready. CPU costs no virtual time, so the figures are the schedule's alone:
the same on a loaded machine as on an idle one. Set beside ``bench/http_arena.py`` (the same run
over HTTP, in real time), the gap between the two is what CPU adds; the virtual figure is what
a client with free CPU would reach.

Printed per source tree (``--src NAME=PATH``, each run in its own process):

* virtual wall time of the model stages (first call's start to last call's end) against the
  busiest-model floor (the busiest model's calls x latency / its concurrency: no schedule can
  finish sooner), and the ratio;
* the busiest model's calls in flight on average, and in each tenth of the run (its ceiling is
  ``--concurrency``);
* calls, and a digest of every request key: a change of schedule must leave it equal.

    python bench/arena_window.py [--memes 96] [--latency-ms 200] [--concurrency 32]
        [--src new=src --src main=/work/main/src]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from adapt_window import VirtualLoop, _VirtualSelector  # bench/adapt_window.py

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))


class _VirtualPolicy(asyncio.DefaultEventLoopPolicy):
    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return VirtualLoop()


def child(memes: int, latency_ms: float, concurrency: int) -> dict[str, Any]:
    """One Arena run on the virtual clock; its figures as JSON."""
    from rich.console import Console
    from scale import write_memes

    from memearena.config import DatasetConfig
    from memearena.demo import demo_config
    from memearena.engine.lifecycle import run_method
    from memearena.models import backends as be

    tmp = Path(tempfile.mkdtemp(prefix="memearena-arena-window-"))
    data = write_memes(tmp / "data", memes)
    cfg = demo_config(bootstrap=20)
    models = {
        n: m.model_copy(update={"latency_ms": latency_ms, "max_concurrency": concurrency})
        for n, m in cfg.models.items()
    }
    cfg = cfg.model_copy(
        update={
            "run": "window",
            "models": models,
            "data": [DatasetConfig(format="demo", path=data)],
            "cache": False,
        }
    )
    spans: dict[str, list[tuple[float, float]]] = {}
    real_chat = be.SimBackend.chat

    async def chat(self: Any, messages: Any, params: Any, role: str) -> Any:
        t0 = _VirtualSelector.clock
        try:
            return await real_chat(self, messages, params, role)
        finally:
            spans.setdefault(self.name, []).append((t0, _VirtualSelector.clock))

    be.SimBackend.chat = chat  # type: ignore[method-assign]
    asyncio.set_event_loop_policy(_VirtualPolicy())
    t = time.perf_counter()
    run_method("arena", cfg, tmp / "run", console=Console(file=io.StringIO()), show_progress=False)
    real = time.perf_counter() - t
    con = sqlite3.connect(tmp / "run" / "run.db")
    keys = sorted(r[0] for r in con.execute("SELECT request_hash FROM calls"))
    con.close()
    every = [s for v in spans.values() for s in v]
    start, end = min(s[0] for s in every), max(s[1] for s in every)
    wall = end - start
    busiest = max(spans, key=lambda m: len(spans[m]))
    latency = latency_ms / 1000
    floor = len(spans[busiest]) * latency / concurrency
    timeline = []
    for k in range(10):
        lo, hi = start + wall * k / 10, start + wall * (k + 1) / 10
        area = sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in spans[busiest])
        timeline.append(round(area / (hi - lo), 1))
    return {
        "calls": len(keys),
        "busiest": busiest,
        "busiest_calls": len(spans[busiest]),
        "virtual_wall": wall,
        "floor": floor,
        "in_flight": sum(b - a for a, b in spans[busiest]) / wall,
        "timeline": timeline,
        "keys": hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16],
        "real_s": real,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--memes", type=int, default=96)
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
            [
                sys.executable,
                __file__,
                "--child",
                *("--memes", str(a.memes), "--latency-ms", str(a.latency_ms)),
                *("--concurrency", str(a.concurrency)),
            ],
            env={**os.environ, "PYTHONPATH": str(Path(src).resolve())},
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            sys.exit(f"{name}: the run failed\n{proc.stderr[-3000:]}")
        got[name] = json.loads(proc.stdout.strip().splitlines()[-1])
    print(
        f"Arena on a virtual clock: {a.memes} memes, {a.latency_ms:g} ms per call, "
        f"{a.concurrency} in flight per model"
    )
    for name, r in got.items():
        print(
            f"  {name}: {r['calls']:,} calls; busiest model {r['busiest']} "
            f"({r['busiest_calls']:,} calls): floor {r['floor']:.1f} s, virtual wall "
            f"{r['virtual_wall']:.1f} s = {r['virtual_wall'] / r['floor']:.2f}x the floor; "
            f"its calls in flight {r['in_flight']:.1f} of {a.concurrency} "
            f"(by tenths: {' '.join(str(x) for x in r['timeline'])}); keys {r['keys']}; "
            f"real {r['real_s']:.0f} s"
        )
    if len({r["keys"] for r in got.values()}) > 1:
        print("  request keys DIFFER between trees")


if __name__ == "__main__":
    main()
