"""Cost and time of the Adapt method on the simulated world: the demo-size run (the bundled 24
memes) against a run ``--scale`` times larger (each demo meme cloned with its own image), both
with the demo's Adapt config, no cache, fresh run directories.

Prints model calls and wall time for each size: calls per meme of the per-meme stages (mining,
misbeliefs, references, scoring), which should stay flat (cost linear in memes), and calls per
refinement chain (refinement draws a fixed number of seeds per target x category x repeat, so
its cost follows chains). Ratios large/small; figures are medians of ``--repeats``.

With ``--percall``: the pipeline's CPU per call (``AdaptPipeline.run``, analysis excluded)
beside the model layer's on the same calls replayed (``bench/percall.py``: the run's recorded
requests, and the images it registered with the simulated world, through a fresh pool with the
simulated backend, store and cache, no pipeline), at demo size and at ``--scale`` times the demo
(memes cycled with distinct ids and texts), each run in its own process. Target: at most 1.3x.
``--breakdown`` adds where the pipeline's CPU goes, in µs per call (process CPU of each part's
own functions, timed by wrappers that cost the run about a microsecond each): rendering,
request keys, parsing replies, image preparation, step commits (queued and written), and the
model layer's group commits in the run beside the replay's (their number and CPU: a pipeline
whose calls end in smaller bursts commits more often).
``--floor`` adds the ideal pipeline's ratio (``bench/percall.py``'s ``Essentials``): the same
calls replayed with only the work the method cannot do without redone around them (its prompts
rendered, its replies parsed, its step outcomes queued) plus the CPU of its image work as
measured in the run, and no dependency between calls: the lowest ratio a pipeline on this model
layer and store can reach for these calls. ``--priced`` prices every simulated model, so every
call takes a paid call's path (``bench/percall.py``'s ``priced``); unpriced, they are free.

    python bench/adapt.py [--scale 10] [--repeats 2] [--percall [--breakdown] [--floor] [--priced]]
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image

from memearena.config import DatasetConfig, RunConfig
from memearena.data.demo import demo_dir
from memearena.demo import adapt_demo_config
from memearena.engine.lifecycle import run_method


def cloned_set(root: Path, scale: int) -> Path:
    """An FHM-format copy of the demo set with every meme ``scale`` times, each clone on its
    own image (one pixel changed), so no two requests are the same."""
    src = demo_dir()
    rows = [json.loads(x) for x in (src / "memes.jsonl").read_text().splitlines() if x.strip()]
    (root / "img").mkdir(parents=True, exist_ok=True)
    out = []
    for k in range(scale):
        for row in rows:
            clone = dict(row, id=f"c{k}{row['id']}", img=f"img/c{k}{row['id']}.png")
            with Image.open(src / row["img"]) as im:
                img = im.convert("RGB")
            img.putpixel((0, 0), (k % 256, (k * 7) % 256, (k * 13) % 256))
            img.save(root / clone["img"])
            out.append(json.dumps(clone))
    path = root / "memes.jsonl"
    path.write_text("\n".join(out) + "\n")
    return path


def config(data: DatasetConfig) -> RunConfig:
    cfg = adapt_demo_config(bootstrap=200)
    return cfg.model_copy(update={"data": [data], "cache": False})


def one_run(cfg: RunConfig, memes: int) -> tuple[float, int, int, int, int]:
    """(wall s, calls, calls of the per-meme stages, refinement calls, refinement chains)."""
    with tempfile.TemporaryDirectory(prefix="memearena-bench-adapt-") as tmp:
        t0 = time.perf_counter()
        res = run_method("adapt", cfg, Path(tmp) / "run", show_progress=False)
        wall = time.perf_counter() - t0
    assert res.section["models"], "the run produced no result"
    stages = res.outcome.stage_calls
    refine = stages.get("refinement", 0)
    return wall, res.new_calls, sum(stages.values()) - refine, refine, len(res.outcome.chains)


class Breakdown:
    """Process CPU of named functions, summed per part while ``phase`` holds its name (the
    pipeline's run, then the replay), with their call counts."""

    def __init__(self) -> None:
        self.phase = "pipeline"
        self._lock = threading.Lock()
        self.cpu: dict[str, dict[str, float]] = {}
        self.calls: dict[str, dict[str, int]] = {}

    def _add(self, part: str, dt: float) -> None:
        # Worker threads add too: one dict update at a time.
        with self._lock:
            self._add_locked(part, dt)

    def _add_locked(self, part: str, dt: float) -> None:
        by = self.cpu.setdefault(self.phase, {})
        by[part] = by.get(part, 0.0) + dt
        n = self.calls.setdefault(self.phase, {})
        n[part] = n.get(part, 0) + 1

    def wrap(
        self, owner: Any, name: str, part: str, clock: Callable[[], float] = time.process_time
    ) -> None:
        """Time ``owner.name`` (a function, or a coroutine function that never suspends) by
        ``clock`` (``time.thread_time`` for work in worker threads)."""
        fn = getattr(owner, name)
        if inspect.iscoroutinefunction(fn):

            async def timed_async(*a: Any, **kw: Any) -> Any:
                c = clock()
                try:
                    return await fn(*a, **kw)
                finally:
                    self._add(part, clock() - c)

            setattr(owner, name, timed_async)
            return

        def timed(*a: Any, **kw: Any) -> Any:
            c = clock()
            try:
                return fn(*a, **kw)
            finally:
                self._add(part, clock() - c)

        static = isinstance(inspect.getattr_static(owner, name), staticmethod)
        setattr(owner, name, staticmethod(timed) if static else timed)

    def timed_parser(self, parser: Callable[[str], Any]) -> Callable[[str], Any]:
        def timed(text: str) -> Any:
            c = time.process_time()
            try:
                return parser(text)
            finally:
                self._add("parsing replies", time.process_time() - c)

        return timed

    def install_common(self) -> None:
        """The parts every pipeline has: request keys, step commits, group commits."""
        from memearena.models import ModelPool
        from memearena.store import RunStore

        self.wrap(ModelPool, "request_key", "request keys")
        self.wrap(RunStore, "commit_step", "step commits (queued)")
        self.wrap(RunStore, "_take_steps", "group commits: step rows")
        self.wrap(RunStore, "write_steps", "group commits: step rows")
        self.wrap(ModelPool, "_flush", "group commits (all rows)")

    def record(self) -> dict[str, Any]:
        return {"cpu": self.cpu, "calls": self.calls}


def print_breakdown(runs: list[dict[str, Any]], indent: str = "      ") -> None:
    """Median µs per call of each part over ``runs`` (children with a ``breakdown``)."""
    parts = sorted({p for r in runs for p in r["breakdown"]["cpu"].get("pipeline", {})})
    for part in parts:
        line = f"{indent}{part:<30}"
        for phase in ("pipeline", "replay"):
            vals = [
                1e6 * r["breakdown"]["cpu"].get(phase, {}).get(part, 0.0) / r["calls"] for r in runs
            ]
            n = statistics.median(r["breakdown"]["calls"].get(phase, {}).get(part, 0) for r in runs)
            if phase == "pipeline" or n:
                line += f" {phase} {statistics.median(vals):6.1f} µs/call ({n:6.0f} x)"
        print(line)


def child_percall(
    n: int, breakdown: bool = False, floor: bool = False, paid: bool = False
) -> dict[str, Any]:
    """One Adapt run over ``n`` memes with its calls recorded, then those calls replayed (and,
    with ``floor``, replayed again with the run's essential work around them)."""
    from percall import Essentials, Recorder, priced, replay, timed_method
    from scale import write_memes

    import memearena.methods.adapt.common as common
    import memearena.methods.adapt.erase as erase
    from memearena.engine.pool import open_pool, sim_world
    from memearena.engine.rundir import load_memes
    from memearena.methods.adapt.sim import AdaptWorld
    from memearena.methods.adapt.stages import AdaptPipeline
    from memearena.store import RunStore

    acc: dict[str, float] = {}
    timed_method(AdaptPipeline, "run", acc)
    parts = Breakdown()
    if breakdown:
        parts.install_common()
        parts.wrap(common.AdaptContext, "_messages", "rendering prompts")
        parts.wrap(common, "prepare_image", "image preparation")
        ask = common.ask

        def asking(*a: Any, **kw: Any) -> Any:
            a = (*a[:4], parts.timed_parser(a[4]), *a[5:])
            return ask(*a, **kw)

        common.ask = asking  # type: ignore[assignment]
    essentials = Essentials()
    if floor:
        essentials.install()
        essentials.renderer(common, "build_messages")
        essentials.asker(common)
        essentials.image_work(common, "prepare_image", time.process_time)
        essentials.image_work(erase, "prepare_image", time.process_time)
        essentials.image_work(erase.TextEraser, "erase", time.thread_time)
    # The images the run told the simulated world about, so the replay's world knows them too.
    images: list[tuple[str, str, str | None]] = []
    register = AdaptWorld.register_image

    def recording(self: Any, sha256: str, meme_text: str, caption: str | None = None) -> None:
        images.append((sha256, meme_text, caption))
        register(self, sha256, meme_text, caption)

    AdaptWorld.register_image = recording  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory(prefix="memearena-bench-adapt-") as tmp:
        root = Path(tmp)
        data = DatasetConfig(format="demo", path=write_memes(root / "data", n))
        cfg = adapt_demo_config(bootstrap=200).model_copy(update={"data": [data]})
        if paid:
            cfg = priced(cfg)
        rec = Recorder().install()
        res = run_method("adapt", cfg, root / "run", show_progress=False)
        rec.uninstall()
        essentials.uninstall()
        AdaptWorld.register_image = register  # type: ignore[method-assign]
        store = RunStore(root / "replay.db")
        memes = load_memes(cfg, store).memes

        def make_pool() -> Any:
            world = sim_world(cfg, memes)
            for x, y, c in images:
                world.adapt.register_image(x, y, c)
            return open_pool(cfg, world, store, cache_path=root / "replay.sqlite", max_cost=None)

        assert cfg.adapt is not None
        parts.phase = "replay"
        base = replay(make_pool, rec.calls, cfg.adapt.window)
        store.close()
        ideal = None
        if floor:
            store = RunStore(root / "floor.db")
            (root / "replay.sqlite").unlink(missing_ok=True)
            ideal = replay(make_pool, rec.calls, cfg.adapt.window, floor=essentials, store=store)
            store.close()
    return {
        "memes": n,
        "calls": len(rec.calls),
        "pipeline_cpu_s": acc["run"],
        "model_layer_cpu_s": base,
        "models": len(res.section["models"]),
        **({"breakdown": parts.record()} if breakdown else {}),
        **(
            {
                "floor_cpu_s": ideal + essentials.image_cpu_s,
                "floor_image_cpu_s": essentials.image_cpu_s,
                "floor_work": [
                    len(essentials.renders),
                    len(essentials.parses),
                    len(essentials.steps),
                ],
            }
            if ideal is not None
            else {}
        ),
    }


def percall(
    scale: int, repeats: int, breakdown: bool = False, floor: bool = False, paid: bool = False
) -> None:
    print(
        "pipeline CPU per call (AdaptPipeline.run, analysis excluded) beside the model layer's "
        "on the same calls replayed (fresh ModelPool + simulated backend + store + cache, no "
        f"pipeline); median of {repeats}, each run in its own process"
        + ("; every model priced" if paid else "")
    )
    for n in (24, 24 * scale):
        runs = []
        for _ in range(repeats):
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(n)]
                + (["--breakdown"] if breakdown else [])
                + (["--floor"] if floor else [])
                + (["--priced"] if paid else []),
                capture_output=True,
                text=True,
                check=False,
            )
            if out.returncode != 0:
                raise SystemExit(f"child failed:\n{out.stderr[-3000:]}")
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        pipe = statistics.median(1000 * r["pipeline_cpu_s"] / r["calls"] for r in runs)
        base = statistics.median(1000 * r["model_layer_cpu_s"] / r["calls"] for r in runs)
        ratio = statistics.median(r["pipeline_cpu_s"] / r["model_layer_cpu_s"] for r in runs)
        print(
            f"    {n:5d} memes {runs[0]['calls']:7d} calls: pipeline {pipe:6.3f} ms/call, "
            f"model layer {base:6.3f} ms/call, ratio {ratio:5.2f}x (target <= 1.3x)",
            flush=True,
        )
        if floor:
            print_floor(runs)
        if breakdown:
            print_breakdown(runs)


def print_floor(runs: list[dict[str, Any]], indent: str = "      ") -> None:
    """The ideal pipeline's CPU per call and ratio (medians over ``runs``)."""
    f = statistics.median(1000 * r["floor_cpu_s"] / r["calls"] for r in runs)
    img = statistics.median(1000 * r["floor_image_cpu_s"] / r["calls"] for r in runs)
    ratio = statistics.median(r["floor_cpu_s"] / r["model_layer_cpu_s"] for r in runs)
    renders, parses, steps = runs[0]["floor_work"]
    print(
        f"{indent}ideal pipeline (same calls, no dependencies; {renders} renders, {parses} "
        f"parses, {steps} step outcomes, image work {img:.3f} ms/call): {f:6.3f} ms/call, "
        f"ratio {ratio:5.2f}x"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--percall", action="store_true")
    ap.add_argument("--breakdown", action="store_true", help="with --percall: where CPU goes")
    ap.add_argument(
        "--floor", action="store_true", help="with --percall: the ideal pipeline's ratio"
    )
    ap.add_argument(
        "--priced", action="store_true", help="with --percall: every model priced (paid calls)"
    )
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child_percall(args.child, args.breakdown, args.floor, args.priced)))
        return
    if args.percall:
        percall(args.scale, args.repeats, args.breakdown, args.floor, args.priced)
        return
    with tempfile.TemporaryDirectory(prefix="memearena-bench-data-") as tmp:
        small = (DatasetConfig(format="demo"), 24)
        large_path = cloned_set(Path(tmp), args.scale)
        large = (DatasetConfig(format="fhm", path=large_path), 24 * args.scale)
        results = {}
        for name, (data, n) in (("demo", small), (f"{args.scale}x", large)):
            runs = [one_run(config(data), n) for _ in range(args.repeats)]
            wall, calls, per_meme, refine, chains = (
                statistics.median(r[k] for r in runs) for k in range(5)
            )
            results[name] = (n, wall, calls, per_meme, refine, chains)
            print(
                f"{name:>5}: {n:5d} memes  {calls:7.0f} calls  wall {wall:6.2f} s  "
                f"{1000 * wall / n:6.1f} ms/meme | mining..scoring {per_meme / n:5.1f} calls/meme"
                f" | refinement {refine:6.0f} calls in {chains:4.0f} chains "
                f"({refine / max(chains, 1):4.1f}/chain)  (median of {args.repeats})"
            )
    (n0, w0, c0, p0, r0, k0) = results["demo"]
    (n1, w1, c1, p1, r1, k1) = results[f"{args.scale}x"]
    print(
        f"ratio {args.scale}x/demo: memes {n1 / n0:.1f}x, all calls {c1 / c0:.2f}x, "
        f"per-meme stages' calls per meme {(p1 / n1) / (p0 / n0):.2f}x, refinement calls per "
        f"chain {(r1 / max(k1, 1)) / (r0 / max(k0, 1)):.2f}x, wall per meme "
        f"{(w1 / n1) / (w0 / n0):.2f}x"
    )
    print(
        "refinement seeds adapt.seed_fraction (0.1) of each (target, category, repeat)'s "
        "scored samples, at least adapt.seed_min (2): below 20 samples a group its cost follows "
        "the groups, above it the memes"
    )


if __name__ == "__main__":
    main()
