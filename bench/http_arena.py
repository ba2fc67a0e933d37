"""The Arena over HTTP: every demo model served by the simulated server in its own process
(``sim-serve``'s world, ``--latency-ms 200`` by default), memearena in this process talking to
it through the lean path (the default) or the SDK path (``client: sdk``).

Reported per run: wall time against the latency floor computed from the run's own calls (the
busiest model's calls x latency / its concurrency: no schedule can finish sooner), process CPU
per paid call and the CPU of the main thread (the event loop's: what the calls wait behind;
commits in the writer's thread do not count there) per paid call, and beside them the model
layer's own CPU per call measured in the same invocation (``ModelPool`` + cache + store over
the same transport, 0 ms latency, requests of the Arena's size: no pipeline). Runs are
interleaved; medians over repeats with their range. Target: wall <= 1.3x the floor.

With ``--src NAME=PATH`` (repeatable: e.g. this checkout's ``src`` and a baseline's), each run
is made by a child process importing memearena from that tree, against the same server, the
trees interleaved (the order alternates each round); ``NAME=PATH@thread`` runs that tree with
its group commits in the pool's writer thread (``ModelPool.commit_in_thread = True``, where the
tree has that switch; ``@inline``: on the event loop, the default); each run's set of request keys
(``calls.request_hash``) is digested and compared with the first tree's (a mismatch is printed).
Without it, this checkout's ``src``.

    nice python bench/http_arena.py [--memes 96] [--latency-ms 200] [--concurrency 32]
        [--repeats 2] [--clients lean,sdk] [--src new=src --src main=/work/main/src]
        [--src thread=src@thread] [--no-pipeline]

``--no-pipeline`` also sends the run's own numbers of calls per model, with no pipeline (no call
waiting on another, every model at once), through the model layer to a server of the same
latency: the wall time any schedule on this model layer, machine and transport could reach at
best, against the same floor. ``bench/arena_window.py`` gives the schedule's own figure (no CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


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
    t, c, m = time.perf_counter(), time.process_time(), time.thread_time()
    run_arena(cfg, run_dir, show_progress=False)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    main_cpu = time.thread_time() - m
    con = sqlite3.connect(run_dir / "run.db")
    try:
        per_model = dict(
            con.execute(
                "SELECT model, SUM(attempts) FROM calls WHERE status NOT IN ('cached', 'budget')"
                " GROUP BY model"
            ).fetchall()
        )
        errors = con.execute("SELECT COUNT(*) FROM calls WHERE status='error'").fetchone()[0]
        keys = hashlib.sha256()
        for (k,) in con.execute("SELECT DISTINCT request_hash FROM calls ORDER BY request_hash"):
            keys.update(str(k).encode() + b"\n")
    finally:
        con.close()
    sent = sum(per_model.values())
    floor = max(n for n in per_model.values()) * args.latency_ms / 1000 / args.concurrency
    return {
        "wall": wall,
        "cpu": cpu,
        "main_cpu": main_cpu,
        "per_model": per_model,
        "sent": sent,
        "floor": floor,
        "errors": errors,
        "keys": keys.hexdigest()[:16],
    }


def _arena_sized() -> tuple[Any, str]:
    """A demo meme's image part and a prompt of a judge request's size."""
    import base64
    import hashlib

    from memearena.data.demo import demo_dir
    from memearena.models import ImagePart

    img = sorted((demo_dir() / "img").glob("*.png"))[0].read_bytes()
    image = ImagePart(
        "data:image/png;base64," + base64.b64encode(img).decode(), hashlib.sha256(img).hexdigest()
    )
    return image, "Judge the two interpretations of this meme against the guideline. " * 40


async def _layer(base_url: str, calls: int, concurrency: int, client: str, tmp: Path) -> float:
    """CPU per call (s) of ModelPool + cache + store alone, on requests of the Arena's size."""
    from memearena.config import OpenAIModelConfig
    from memearena.models import Message, ModelPool, ResponseCache, TextPart
    from memearena.store import RunStore

    image, prompt = _arena_sized()
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
    c, m = time.process_time(), time.thread_time()
    await asyncio.gather(*(one(i) for i in range(calls)))
    cpu, main_cpu = time.process_time() - c, time.thread_time() - m
    await pool.aclose()
    store.close()
    cache.close()
    return cpu / calls, main_cpu / calls


async def _no_pipeline(
    base_url: str, per_model: dict[str, int], concurrency: int, client: str, tmp: Path
) -> float:
    """Wall time of the run's own numbers of calls per model, requests of the Arena's size, sent
    through ModelPool + store (no cache) to a server with the run's latency, every model at once
    and no call waiting on another: what any pipeline on this model layer, machine and transport
    could reach at best (its ratio to the same floor is the design's own)."""
    from memearena.config import OpenAIModelConfig
    from memearena.models import Message, ModelPool, TextPart
    from memearena.store import RunStore

    image, prompt = _arena_sized()
    cfgs = {
        name: OpenAIModelConfig(
            provider="openai",
            model=name,
            base_url=base_url,
            max_concurrency=concurrency,
            client=client,  # type: ignore[arg-type]
        )
        for name in per_model
    }
    store = RunStore(tmp / f"nopipe-{client}.db")
    pool = ModelPool(cfgs, store=store, cache=None)

    async def model(name: str, n: int) -> None:
        sem = asyncio.Semaphore(concurrency * 2)

        async def one(i: int) -> None:
            async with sem:
                msgs = [Message("user", (TextPart(f"{name} {i} {prompt}"), image))]
                await pool.complete(name, msgs, role="echo")

        await asyncio.gather(*(one(i) for i in range(n)))

    t = time.perf_counter()
    await asyncio.gather(*(model(name, n) for name, n in per_model.items()))
    wall = time.perf_counter() - t
    await pool.aclose()
    store.close()
    return wall


def _child(args: Any) -> None:
    """One Arena run and one model-layer measure in this process (the tree on its path)."""
    data, base_url, echo_url, tmp = (
        Path(args.child[0]),
        args.child[1],
        args.child[2],
        Path(args.child[3]),
    )
    tmp = Path(tempfile.mkdtemp(dir=tmp))  # a fresh store and cache: no call served cached
    commits = os.environ.get("MEMEARENA_BENCH_COMMITS")
    if commits:
        from memearena.models import ModelPool

        ModelPool.commit_in_thread = commits == "thread"  # type: ignore[misc]
    run = arena_run(data, base_url, args, args.clients, tmp)
    layer, layer_main = asyncio.run(
        _layer(echo_url, args.layer_calls, args.concurrency, args.clients, tmp)
    )
    nopipe = None
    if args.no_pipeline_url:
        nopipe = asyncio.run(
            _no_pipeline(
                args.no_pipeline_url, run["per_model"], args.concurrency, args.clients, tmp
            )
        )
    print(json.dumps({**run, "layer": layer, "layer_main": layer_main, "no_pipeline": nopipe}))


def _rng(values: list[float], fmt: str = ".2f") -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--memes", type=int, default=96)
    ap.add_argument("--latency-ms", type=float, default=200.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--clients", default="lean,sdk")
    ap.add_argument("--layer-calls", type=int, default=2000)
    ap.add_argument(
        "--src",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a source tree to run (repeatable); default: this checkout's src",
    )
    ap.add_argument(
        "--no-pipeline",
        action="store_true",
        help="also time the run's calls per model sent with no pipeline (no call waiting on "
        "another) through the model layer to a server of the same latency",
    )
    ap.add_argument("--no-pipeline-url", help=argparse.SUPPRESS)
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        _child(a)
        return
    from scale import write_memes

    from memearena.sim.server import BackgroundServer

    trees = dict(t.split("=", 1) for t in a.src) or {"this": str(HERE.parent / "src")}
    commits = {
        name: path.rsplit("@", 1)[1]
        for name, path in trees.items()
        if path.endswith(("@inline", "@thread"))
    }
    trees = {name: path.split("@", 1)[0] for name, path in trees.items()}
    clients = a.clients.split(",")
    variants = [(t, c) for t in trees for c in clients]
    with tempfile.TemporaryDirectory(prefix="memearena-http-") as d:
        tmp = Path(d)
        data = write_memes(tmp / "data", a.memes)
        runs: dict[tuple[str, str], list[dict[str, Any]]] = {v: [] for v in variants}
        load = [os.getloadavg()[0]]
        slow = (
            BackgroundServer(process=True, latency_ms=a.latency_ms)
            if a.no_pipeline
            else contextlib.nullcontext()
        )
        with (
            _world_server(data, a.latency_ms) as srv,
            BackgroundServer(process=True) as echo,
            slow as slow_echo,
        ):
            for r in range(a.repeats):
                for tree, client in variants if r % 2 == 0 else variants[::-1]:
                    out = subprocess.run(
                        [
                            sys.executable,
                            __file__,
                            "--memes",
                            str(a.memes),
                            "--latency-ms",
                            str(a.latency_ms),
                            "--concurrency",
                            str(a.concurrency),
                            "--clients",
                            client,
                            "--layer-calls",
                            str(a.layer_calls),
                            *(["--no-pipeline-url", slow_echo.base_url] if a.no_pipeline else []),
                            "--child",
                            str(data),
                            srv.base_url,
                            echo.base_url,
                            str(tmp),
                        ],
                        capture_output=True,
                        text=True,
                        env=dict(
                            os.environ,
                            PYTHONPATH=trees[tree],
                            MEMEARENA_BENCH_COMMITS=commits.get(tree, ""),
                        ),
                    )
                    if out.returncode != 0:
                        sys.exit(f"{tree}/{client} run failed:\n{out.stderr[-3000:]}")
                    runs[(tree, client)].append(json.loads(out.stdout.strip().splitlines()[-1]))
                    load.append(os.getloadavg()[0])
                    print(json.dumps({"tree": tree, "client": client, **runs[(tree, client)][-1]}))
    print(
        f"Arena over HTTP: {a.memes} memes, server latency {a.latency_ms:g} ms, per-model "
        f"concurrency {a.concurrency}; median (range) of {a.repeats} interleaved runs"
    )
    first_keys = {c: runs[(next(iter(trees)), c)][0]["keys"] for c in clients}
    for tree, client in variants:
        rs = runs[(tree, client)]
        floor = statistics.median(r["floor"] for r in rs)
        sent = statistics.median(r["sent"] for r in rs)
        same = all(r["keys"] == first_keys[client] for r in rs)
        print(
            f"  {tree}/{client}: wall/floor {_rng([r['wall'] / r['floor'] for r in rs])} "
            f"(floor {floor:.1f} s; target <= 1.3); {sent:,.0f} requests sent, errors "
            f"{max(r['errors'] for r in rs)}; request keys "
            f"{'equal to ' + next(iter(trees)) + chr(39) + 's' if same else 'DIFFER'}\n"
            f"      per paid call: process CPU "
            f"{_rng([1000 * r['cpu'] / r['sent'] for r in rs], '.3f')} ms, main thread "
            f"{_rng([1000 * r['main_cpu'] / r['sent'] for r in rs], '.3f')} ms; model layer "
            f"alone {_rng([1000 * r['layer'] for r in rs], '.3f')} ms, main thread "
            f"{_rng([1000 * r['layer_main'] for r in rs], '.3f')} ms"
        )
        if a.no_pipeline:
            print(
                f"      the same calls per model with no pipeline (model layer, same latency, "
                f"no call waiting on another): wall/floor "
                f"{_rng([r['no_pipeline'] / r['floor'] for r in rs])}"
            )
    print(f"  load average: {min(load):.2f}-{max(load):.2f} on {os.cpu_count()} cpus")


if __name__ == "__main__":
    main()
