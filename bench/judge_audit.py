"""Bench: the demo's Judge audit over several seeds, and the cost of generating perturbations.

Run: python bench/judge_audit.py [--seeds 3] [--bootstrap 300] [--repeats 5]

Part 1 runs the demo audit (``memearena demo``'s simulated panel: one judge per injected failure
mode, a clean reference) for S = 0 … seeds−1 and prints, per seed, whether every injected bias
is flagged on its judge, whether the clean judge is flagged on nothing, whether the trust
composite (shown beside the leaderboard's order by overall) gives every flagged classic bias
(position, consistency, verbosity, self-enhancement) a larger shortfall than the reference's,
the other flags raised, and the wall time; then the detection rate per injected bias over the
seeds.

Part 2 times the image work on the demo memes: median CPU milliseconds per image over repeats
for the original (the safe image path with the metadata added) and the ``visual_transformation``
and ``texture_insertion`` variants, against a baseline measured in the same run — storing the
unperturbed image (decode, encode, hash, write) — and prints the ratio.

Part 3 (``--percall``): the audit's pipeline CPU per call beside the model layer's on the same
calls replayed (``bench/percall.py``: the run's recorded requests through a fresh ``ModelPool``
with the simulated backend, store and cache, and no pipeline), at demo size and at ``--scale``
times the demo (memes cycled with distinct ids and texts), each run in its own process, with
the image work's share of the pipeline's CPU (originals and perturbations). Target: at most
1.3x at both sizes. ``--breakdown`` adds where the pipeline's CPU goes, in µs per call (as
``bench/adapt.py --breakdown``; the image work by its worker threads' own CPU).
``--floor`` adds the ideal pipeline's ratio, as ``bench/adapt.py --floor`` (the image work by
its worker threads' own CPU); ``--priced`` prices every simulated model, as there.

Part 4 (``--rss``): peak RSS of the whole audit (analysis and report included) at 24, 144 and
480 memes, each size in its own process, with the peak after each stage and after the analysis,
and SQLite's memory high-water mark (its page caches, bounded by the store's soft heap limit);
``--tracemalloc`` adds the Python heap's peak per stage (slower). Target: growth at most 0.1 MB
per meme (24 -> 480); the growth between the two largest sizes is printed too.

    python bench/judge_audit.py [--seeds 3] [--percall [--breakdown] [--floor] [--priced]] [--rss]
        [--sizes 24,144,480]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from PIL import Image
from rich.console import Console

from memearena.data import load_datasets
from memearena.demo import demo_config
from memearena.engine.lifecycle import run_method
from memearena.methods.judge_audit.analysis import CLASSIC_FLAGS
from memearena.methods.judge_audit.items import meme_image
from memearena.methods.judge_audit.perturb import (
    SHOWS_KEY,
    ImageStore,
    PerturbContext,
    Triplet,
    perturb,
)
from memearena.methods.judge_audit.view import demo_check

TWIN = "sim-judge-falcon-twin"
"""``--twin``: a clean copy of the reference judge (its own family) added to the panel."""


def seeds(n: int, bootstrap: int, twin: bool = False) -> bool:
    print(f"Part 1: the demo audit over {n} seeds (bootstrap {bootstrap}, intervals over memes)")
    hits: Counter[str] = Counter()
    total: Counter[str] = Counter()
    ok_all = True
    twin_flagged = 0
    for seed in range(n):
        cfg = demo_config(seed=seed, bootstrap=bootstrap)
        if twin:
            assert cfg.judge_audit is not None and cfg.judge_audit.reference_judge is not None
            ref_model = cfg.models[cfg.judge_audit.reference_judge]
            cfg.models[TWIN] = ref_model.model_copy(update={"family": "falcon-twin"})
            cfg.judge_audit.judges.append(TWIN)
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            res = run_method(
                "judge_audit", cfg, Path(tmp), show_progress=False, console=Console(quiet=True)
            )
            secs = time.perf_counter() - t0
        section = res.section
        lines, ok = demo_check(section)
        board = section["leaderboard"]
        ref = section["reference_judge"]
        ref_rank = next(r["rank"] for r in board if r["judge"] == ref)
        ref_trust = next(r["trust"] for r in board if r["judge"] == ref)
        # Ordered by overall (as MM-JudgeBias); the trust composite beside it must count every
        # flagged classic bias: the judge's shortfall on that component exceeds the clean
        # reference's.
        component = {
            "position": "position",
            "position_consistency": "position",
            "verbosity": "verbosity",
            "self_enhancement": "self_enhancement",
        }
        above = [
            f"{r['judge']} ({f}: shortfall {r['trust']['components'][component[f]]:.3f})"
            for r in board
            for f in set(r["flags"]) & set(CLASSIC_FLAGS)
            if (r["trust"]["components"][component[f]] or 0.0)
            <= (ref_trust["components"][component[f]] or 0.0)
        ]
        ok &= not above
        ok_all &= ok
        injected = section["simulated"]["injected"]
        flags = {r["judge"]: set(r["flags"]) for r in section["leaderboard"]}
        extra = []
        for judge, expected in injected.items():
            for bias in expected:
                total[bias] += 1
                hits[bias] += bias in flags[judge]
            others = sorted(flags[judge] - set(expected))
            if others:
                extra.append(f"{judge}: {', '.join(others)}")
        print(
            f"seed {seed}: {'all injected biases flagged, clean judge clean' if ok else 'FAILED'}"
            f" ({secs:.1f} s, {res.new_calls} calls)"
        )
        for line in lines:
            if not line.startswith("ok"):
                print("   ", line)
        print(
            f"    ranking (by {section['order_by']}): clean reference {ref} is #{ref_rank} of "
            f"{len(board)}, trust {ref_trust['value']:.3f}; "
            + (
                f"a classic flag without a larger shortfall in trust: {'; '.join(above)}"
                if above
                else "every flagged classic bias has a larger shortfall than the reference's"
            )
        )
        print(
            "    trust:",
            ", ".join(
                f"{r['rank_label']} {r['judge']} {r['trust']['value']:.3f} "
                f"[{r['rank_ci'][0]}-{r['rank_ci'][1]}]"
                for r in board
            ),
        )
        print("    other flags:", "; ".join(extra) or "none")
        if twin:
            got = flags.get(TWIN, set())
            twin_flagged += bool(got)
            print(
                f"    clean twin of the reference: flagged on {', '.join(sorted(got)) or 'nothing'}"
            )
    if twin:
        print(f"clean twin of the reference flagged in {twin_flagged} of {n} seeds (target ≤ 2)")
    print("detection rate per injected bias:")
    for bias in sorted(total):
        print(f"    {bias:<26} {hits[bias]}/{total[bias]}")
    return ok_all


def generators(repeats: int) -> None:
    print(f"Part 2: image generators on the demo memes (CPU, median of {repeats} repeats)")
    cfg = demo_config()
    memes = load_datasets(cfg.data, cfg.image).memes
    with tempfile.TemporaryDirectory() as tmp:
        store = ImageStore(Path(tmp) / "images")
        images = [im for m in memes if (im := meme_image(m, store, cfg.image)) is not None]
        triplets = [Triplet("Is this meme harmful? Refer to the image.", im, "r") for im in images]

        def baseline() -> None:
            # Decode the stored original (no cache), encode it as the store does, hash, write.
            for t in triplets:
                assert t.image is not None
                with Image.open(t.image.path) as im:
                    store.put(im.convert("RGB"), {SHOWS_KEY: "x"})

        def originals() -> None:
            for m in memes:
                meme_image(m, store, cfg.image)

        def gen(bias_type: str) -> None:
            for i, t in enumerate(triplets):
                ctx = PerturbContext(store, random.Random(i), shows="x")
                perturb(bias_type, t, ctx)

        def per_image(fn: object) -> float:
            times = []
            for _ in range(repeats):
                t0 = time.process_time()
                fn()  # type: ignore[operator]
                times.append((time.process_time() - t0) / len(triplets))
            return statistics.median(times)

        base = per_image(baseline)
        print(f"    store the unperturbed image (baseline)  {1000 * base:7.2f} ms/image")
        t = per_image(originals)
        print(
            f"    {'original (safe path + metadata)':<38}  {1000 * t:7.2f} ms/image  "
            f"({t / base:.2f}x baseline)"
        )
        for bias_type in ("visual_transformation", "texture_insertion"):
            t = per_image(lambda b=bias_type: gen(b))
            print(f"    {bias_type:<38}  {1000 * t:7.2f} ms/image  ({t / base:.2f}x baseline)")


def _audit_config(root: Path, n: int, bootstrap: int, paid: bool = False) -> Any:
    from percall import priced
    from scale import write_memes

    from memearena.config import DatasetConfig

    data = write_memes(root / "data", n)
    cfg = demo_config(bootstrap=bootstrap)
    cfg = cfg.model_copy(update={"data": [DatasetConfig(format="demo", path=data)]})
    return priced(cfg) if paid else cfg


def child_percall(
    n: int, bootstrap: int, breakdown: bool = False, floor: bool = False, paid: bool = False
) -> dict[str, Any]:
    """One audit over ``n`` memes with its calls recorded, then those calls replayed (and,
    with ``floor``, replayed again with the run's essential work around them)."""
    from adapt import Breakdown
    from percall import Essentials, Recorder, replay, timed_method

    from memearena.engine.pool import open_pool, sim_world
    from memearena.methods.judge_audit import judge, stages
    from memearena.methods.judge_audit.stages import JudgeAuditPipeline
    from memearena.store import RunStore

    acc: dict[str, float] = {}
    timed_method(JudgeAuditPipeline, "run", acc)
    for name in ("perturb", "meme_image"):  # the image work inside the pipeline's CPU
        setattr(stages, name, _timed(getattr(stages, name), acc, "images"))
    parts = Breakdown()
    if breakdown:
        parts.install_common()
        for name in ("score_messages", "pairwise_messages", "build_messages"):
            parts.wrap(stages, name, "rendering prompts")
        # The image work runs in worker threads: each call's own thread's CPU.
        for name in ("image_variant", "meme_image", "_fingerprint"):
            parts.wrap(stages, name, "image work (worker threads)", time.thread_time)
        ask = stages.ask

        def asking(*a: Any, **kw: Any) -> Any:
            a = (*a[:4], parts.timed_parser(a[4]), *a[5:])
            return ask(*a, **kw)

        stages.ask = asking  # type: ignore[assignment]
    essentials = Essentials()
    if floor:
        essentials.install()
        # What renders a prompt (the judges' prompts on a miss of their small memo).
        for owner, name in (
            (stages, "build_messages"),
            (judge, "render"),
            (judge, "build_messages"),
        ):
            essentials.renderer(owner, name)
        essentials.asker(stages)
        for name in ("image_variant", "meme_image", "_fingerprint"):
            essentials.image_work(stages, name, time.thread_time)
    with tempfile.TemporaryDirectory(prefix="memearena-bench-ja-") as tmp:
        root = Path(tmp)
        cfg = _audit_config(root, n, bootstrap, paid)
        rec = Recorder().install()
        res = run_method(
            "judge_audit", cfg, root / "run", show_progress=False, console=Console(quiet=True)
        )
        rec.uninstall()
        essentials.uninstall()
        memes = load_datasets(cfg.data, cfg.image).memes
        store = RunStore(root / "replay.db")
        assert cfg.judge_audit is not None
        parts.phase = "replay"
        base = replay(
            lambda: open_pool(
                cfg, sim_world(cfg, memes), store, cache_path=root / "replay.sqlite", max_cost=None
            ),
            rec.calls,
            cfg.judge_audit.window,
        )
        store.close()
        ideal = None
        if floor:
            fstore = RunStore(root / "floor.db")
            ideal = replay(
                lambda: open_pool(
                    cfg,
                    sim_world(cfg, memes),
                    fstore,
                    cache_path=root / "floor.sqlite",
                    max_cost=None,
                ),
                rec.calls,
                cfg.judge_audit.window,
                floor=essentials,
                store=fstore,
            )
            fstore.close()
    board = [(r["judge"], r["trust"]["value"]) for r in res.section["leaderboard"]]
    return {
        "memes": n,
        "calls": len(rec.calls),
        "pipeline_cpu_s": acc["run"],
        "images_cpu_s": acc.get("images", 0.0),
        "model_layer_cpu_s": base,
        "board": board,
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


def _sqlite_memory_mb() -> tuple[float, float] | None:
    """SQLite's memory in use and its high-water mark in this process (its page caches, under
    the store's soft heap limit), or None where the library's symbols cannot be reached."""
    import ctypes

    try:
        import _sqlite3

        lib = ctypes.CDLL(_sqlite3.__file__)
        used, high = lib.sqlite3_memory_used, lib.sqlite3_memory_highwater
    except (ImportError, OSError, AttributeError):
        return None
    used.restype = high.restype = ctypes.c_int64
    high.argtypes = [ctypes.c_int]
    return used() / 2**20, high(0) / 2**20


def _timed(fn: Any, acc: dict[str, float], key: str) -> Any:
    def wrapper(*a: Any, **kw: Any) -> Any:
        c = time.process_time()
        try:
            return fn(*a, **kw)
        finally:
            acc[key] = acc.get(key, 0.0) + time.process_time() - c

    return wrapper


def child_rss(n: int, bootstrap: int, trace: bool) -> dict[str, Any]:
    """Peak RSS of one whole audit over ``n`` memes, after each pipeline stage and after the
    analysis; SQLite's share at its high-water mark."""
    import tracemalloc

    from percall import peak_rss_mb

    import memearena.methods.judge_audit.analysis as analysis
    from memearena.methods.judge_audit.stages import JudgeAuditPipeline

    stages: dict[str, list[float]] = {}

    def mark(name: str) -> None:
        heap = tracemalloc.get_traced_memory()[1] / 2**20 if trace else 0.0
        stages[name] = [peak_rss_mb(), heap]

    for name in ("prepare", "score_pairs", "classic"):
        fn = getattr(JudgeAuditPipeline, name)

        async def wrapper(self: Any, *a: Any, _f: Any = fn, _n: str = name, **kw: Any) -> Any:
            try:
                return await _f(self, *a, **kw)
            finally:
                k = _n
                while k in stages:  # score_pairs runs twice (memes, then rows)
                    k += "'"
                mark(k)

        setattr(JudgeAuditPipeline, name, wrapper)
    section = analysis.judge_audit_section

    def analysed(*a: Any, **kw: Any) -> Any:
        try:
            return section(*a, **kw)
        finally:
            mark("analysis")

    analysis.judge_audit_section = analysed  # type: ignore[assignment]
    if trace:
        tracemalloc.start()
    with tempfile.TemporaryDirectory(prefix="memearena-bench-ja-") as tmp:
        root = Path(tmp)
        cfg = _audit_config(root, n, bootstrap)
        mark("start")
        t0 = time.perf_counter()
        res = run_method(
            "judge_audit", cfg, root / "run", show_progress=False, console=Console(quiet=True)
        )
        wall = time.perf_counter() - t0
        mark("end")
    sq = _sqlite_memory_mb()
    return {
        "memes": n,
        "calls": res.new_calls,
        "wall_s": wall,
        "stages": stages,
        "sqlite_high_mb": sq[1] if sq else None,
    }


def _child(args: list[str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def percall(
    scale: int,
    repeats: int,
    bootstrap: int,
    breakdown: bool = False,
    floor: bool = False,
    paid: bool = False,
) -> None:
    from adapt import print_breakdown, print_floor

    print(
        "Part 3: pipeline CPU per call (JudgeAuditPipeline.run, analysis excluded) beside the "
        "model layer's on the same calls replayed (fresh ModelPool + simulated backend + store "
        f"+ cache, no pipeline); median of {repeats}, each run in its own process"
        + ("; every model priced" if paid else "")
    )
    for n in (24, 24 * scale):
        runs = [
            _child(
                ["--child", "percall", "--n", str(n), "--bootstrap", str(bootstrap)]
                + (["--breakdown"] if breakdown else [])
                + (["--floor"] if floor else [])
                + (["--priced"] if paid else [])
            )
            for _ in range(repeats)
        ]
        calls = runs[0]["calls"]
        pipe = statistics.median(1000 * r["pipeline_cpu_s"] / r["calls"] for r in runs)
        base = statistics.median(1000 * r["model_layer_cpu_s"] / r["calls"] for r in runs)
        ratio = statistics.median(r["pipeline_cpu_s"] / r["model_layer_cpu_s"] for r in runs)
        images = statistics.median(1000 * r["images_cpu_s"] / r["calls"] for r in runs)
        print(
            f"    {n:5d} memes {calls:7d} calls: pipeline {pipe:6.3f} ms/call (images "
            f"{images:5.3f}), model layer {base:6.3f} ms/call, ratio {ratio:5.2f}x "
            "(target <= 1.3x)",
            flush=True,
        )
        if floor:
            print_floor(runs)
        if breakdown:
            print_breakdown(runs)


def rss(sizes: list[int], bootstrap: int, trace: bool) -> None:
    print(
        "Part 4: peak RSS of the whole audit (analysis and report included), each size in its "
        "own process; the peak after each stage" + (" and the Python heap's peak" if trace else "")
    )
    rows = []
    for n in sizes:
        args = ["--child", "rss", "--n", str(n), "--bootstrap", str(bootstrap)]
        r = _child(args + (["--tracemalloc"] if trace else []))
        rows.append(r)
        st = "  ".join(
            f"{k} {v[0]:.0f}" + (f" (heap {v[1]:.0f})" if trace else "")
            for k, v in r["stages"].items()
        )
        sq = r.get("sqlite_high_mb")
        print(
            f"    {n:5d} memes {r['calls']:7d} calls {r['wall_s']:6.1f} s  peak RSS MB: {st}"
            + (f"  [SQLite high-water {sq:.0f}]" if sq is not None else ""),
            flush=True,
        )
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        growth = (b["stages"]["end"][0] - a["stages"]["end"][0]) / (b["memes"] - a["memes"])
        print(
            f"    growth {growth:.3f} MB per meme ({a['memes']} -> {b['memes']} memes; "
            "target <= 0.1)"
        )
    if len(rows) > 2:
        # Once SQLite's page caches have reached the store's soft heap limit (a fixed bound,
        # filled within the first few hundred memes), what is left is what grows per meme.
        a, b = rows[-2], rows[-1]
        growth = (b["stages"]["end"][0] - a["stages"]["end"][0]) / (b["memes"] - a["memes"])
        print(f"    growth {growth:.3f} MB per meme ({a['memes']} -> {b['memes']} memes)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--bootstrap", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--percall", action="store_true", help="part 3 only")
    ap.add_argument("--rss", action="store_true", help="part 4 only")
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--sizes", default="24,144,480")
    ap.add_argument("--tracemalloc", action="store_true")
    ap.add_argument("--breakdown", action="store_true", help="with --percall: where CPU goes")
    ap.add_argument(
        "--floor", action="store_true", help="with --percall: the ideal pipeline's ratio"
    )
    ap.add_argument(
        "--priced", action="store_true", help="with --percall: every model priced (paid calls)"
    )
    ap.add_argument("--child", choices=["percall", "rss"], help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--twin", action="store_true", help="add a clean twin of the reference")
    ap.add_argument("--no-generators", action="store_true", help="part 1 only")
    args = ap.parse_args()
    if args.child == "percall":
        print(
            json.dumps(
                child_percall(args.n, args.bootstrap, args.breakdown, args.floor, args.priced)
            )
        )
        return
    if args.child == "rss":
        print(json.dumps(child_rss(args.n, args.bootstrap, args.tracemalloc)))
        return
    if args.percall or args.rss:
        if args.percall:
            percall(
                args.scale, args.repeats, args.bootstrap, args.breakdown, args.floor, args.priced
            )
        if args.rss:
            rss([int(s) for s in args.sizes.split(",")], args.bootstrap, args.tracemalloc)
        return
    ok = seeds(args.seeds, args.bootstrap, args.twin)
    if not args.no_generators:
        generators(args.repeats)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
