"""The Arena over HTTP: every demo model served by the simulated server in its own process
(``sim-serve``'s world, ``--latency-ms 200`` by default), memearena in this process talking to
it through the lean path (the default) or the SDK path (``client: sdk``).

Reported per run: wall time against the latency floor computed from the run's own calls (the
busiest model's calls x latency / its concurrency: no schedule can finish sooner), process CPU
per paid call, and beside it the model layer's own CPU per call measured in the same
invocation (``ModelPool`` + cache + store over the same transport, 0 ms latency, requests of
the Arena's size: no pipeline). Runs are interleaved; medians over repeats. Target: wall <= 1.3x
the floor.

    nice python bench/http_arena.py [--memes 96] [--latency-ms 200] [--concurrency 32]
        [--repeats 2] [--clients lean,sdk]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))


def _world_server(data: Path, latency_ms: float) -> Any:
    from memearena.config import DatasetConfig
    from memearena.data import demo_annotations, load_dataset
    from memearena.sim.catalogue import demo_models
    from memearena.sim.server import BackgroundServer
    from memearena.sim.world import SimWorld

    memes = load_dataset(DatasetConfig(format="demo", path=data), check_images=False).memes
    world = SimWorld(demo_models(), demo_annotations(memes), seed=0)
    return BackgroundServer(world, process=True, latency_ms=latency_ms, models=list(demo_models()))


def _http_config(data: Path, base_url: str, concurrency: int, client: str) -> Any:
    from memearena.config import DatasetConfig, OpenAIModelConfig
    from memearena.demo import demo_config

    cfg = demo_config(bootstrap=50)
    models = {
        name: OpenAIModelConfig(
            provider="openai",
            model=name,
            base_url=base_url,
            family=getattr(m, "family", None),
            max_concurrency=concurrency,
            timeout=60,
            client=client,  # type: ignore[arg-type]
        )
        for name, m in cfg.models.items()
    }
    return cfg.model_copy(
        update={
            "run": "http",
            "models": models,
            "data": [DatasetConfig(format="demo", path=data)],
        }
    )


def arena_run(data: Path, base_url: str, args: Any, client: str, tmp: Path) -> dict[str, Any]:
    from memearena.api import run_arena

    cfg = _http_config(data, base_url, args.concurrency, client)
    run_dir = tmp / f"run-{client}-{time.monotonic_ns()}"
    t, c = time.perf_counter(), time.process_time()
    run_arena(cfg, run_dir, show_progress=False)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    con = sqlite3.connect(run_dir / "run.db")
    try:
        per_model = dict(
            con.execute(
                "SELECT model, SUM(attempts) FROM calls WHERE status NOT IN ('cached', 'budget')"
                " GROUP BY model"
            ).fetchall()
        )
        errors = con.execute("SELECT COUNT(*) FROM calls WHERE status='error'").fetchone()[0]
    finally:
        con.close()
    sent = sum(per_model.values())
    floor = max(n for n in per_model.values()) * args.latency_ms / 1000 / args.concurrency
    return {"wall": wall, "cpu": cpu, "sent": sent, "floor": floor, "errors": errors}


async def _layer(base_url: str, calls: int, concurrency: int, client: str, tmp: Path) -> float:
    """CPU per call (s) of ModelPool + cache + store alone, on requests of the Arena's size."""
    import base64

    from memearena.config import OpenAIModelConfig
    from memearena.data.demo import demo_dir
    from memearena.models import ImagePart, Message, ModelPool, ResponseCache, TextPart
    from memearena.store import RunStore

    img = sorted((demo_dir() / "img").glob("*.png"))[0].read_bytes()
    import hashlib

    image = ImagePart(
        "data:image/png;base64," + base64.b64encode(img).decode(), hashlib.sha256(img).hexdigest()
    )
    prompt = "Judge the two interpretations of this meme against the guideline. " * 40
    cfg = OpenAIModelConfig(
        provider="openai",
        model="sim-aurora",
        base_url=base_url,
        max_concurrency=concurrency,
        client=client,  # type: ignore[arg-type]
    )
    store = RunStore(tmp / f"layer-{client}.db")
    cache = ResponseCache(tmp / f"layer-{client}-cache.db")
    pool = ModelPool({"m": cfg}, store=store, cache=cache)
    sem = asyncio.Semaphore(concurrency * 4)

    async def one(i: int) -> None:
        async with sem:
            msgs = [Message("user", (TextPart(f"{i} {prompt}"), image))]
            await pool.complete("m", msgs, role="echo")

    await asyncio.gather(*(one(-1 - i) for i in range(50)))
    c = time.process_time()
    await asyncio.gather(*(one(i) for i in range(calls)))
    cpu = time.process_time() - c
    await pool.aclose()
    store.close()
    cache.close()
    return cpu / calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memes", type=int, default=96)
    ap.add_argument("--latency-ms", type=float, default=200.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--clients", default="lean,sdk")
    ap.add_argument("--layer-calls", type=int, default=2000)
    a = ap.parse_args()
    from scale import write_memes

    from memearena.sim.server import BackgroundServer

    clients = a.clients.split(",")
    with tempfile.TemporaryDirectory(prefix="memearena-http-") as d:
        tmp = Path(d)
        data = write_memes(tmp / "data", a.memes)
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
        layer: dict[str, list[float]] = {c: [] for c in clients}
        load = [os.getloadavg()[0]]
        with _world_server(data, a.latency_ms) as srv, BackgroundServer(process=True) as echo:
            for r in range(a.repeats):
                for client in clients if r % 2 == 0 else clients[::-1]:
                    runs[client].append(arena_run(data, srv.base_url, a, client, tmp))
                    layer[client].append(
                        asyncio.run(
                            _layer(echo.base_url, a.layer_calls, a.concurrency, client, tmp)
                        )
                    )
                    load.append(os.getloadavg()[0])
                    print(json.dumps({"client": client, **runs[client][-1]}), flush=True)
    print(
        f"Arena over HTTP: {a.memes} memes, server latency {a.latency_ms:g} ms, per-model "
        f"concurrency {a.concurrency}; median of {a.repeats} interleaved runs"
    )
    for client in clients:
        rs = runs[client]
        wall = statistics.median(r["wall"] for r in rs)
        floor = statistics.median(r["floor"] for r in rs)
        sent = statistics.median(r["sent"] for r in rs)
        cpu_call = statistics.median(1000 * r["cpu"] / r["sent"] for r in rs)
        base = 1000 * statistics.median(layer[client])
        ratios = ", ".join(f"{r['wall'] / r['floor']:.2f}" for r in rs)
        print(
            f"  {client:<4}: wall {wall:6.1f} s, floor {floor:5.1f} s, wall/floor "
            f"{wall / floor:4.2f} (runs: {ratios}; target <= 1.3); {sent:,.0f} requests sent; "
            f"CPU {cpu_call:.2f} ms per request, model layer alone {base:.2f} ms "
            f"({cpu_call / base:.1f}x)"
        )
    print(f"  load average: {min(load):.2f}-{max(load):.2f} on {os.cpu_count()} cpus")


if __name__ == "__main__":
    main()
