"""Bench: the demo's Judge audit over several seeds, and the cost of generating perturbations.

Run: python bench/judge_audit.py [--seeds 3] [--bootstrap 300] [--repeats 5]

Part 1 runs the demo audit (``memearena demo``'s simulated panel: one judge per injected failure
mode, a clean reference) for S = 0 … seeds−1 and prints, per seed, whether every injected bias
is flagged on its judge, whether the clean judge is flagged on nothing, whether the trust
ranking keeps every judge with a flagged classic bias (position, consistency, verbosity,
self-enhancement) below the clean reference judge, the other flags raised, and the wall time;
then the detection rate per injected bias over the seeds.

Part 2 times the image generators on the demo memes: median seconds per image over repeats for
``visual_transformation`` and ``texture_insertion``, against a baseline measured in the same
run — storing the unperturbed image (decode, encode, hash, write) — and prints the ratio.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

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


def seeds(n: int, bootstrap: int) -> bool:
    print(f"Part 1: the demo audit over {n} seeds (bootstrap {bootstrap}, intervals over memes)")
    hits: Counter[str] = Counter()
    total: Counter[str] = Counter()
    ok_all = True
    for seed in range(n):
        cfg = demo_config(seed=seed, bootstrap=bootstrap)
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
        above = [
            f"{r['judge']} (#{r['rank']}: {', '.join(set(r['flags']) & set(CLASSIC_FLAGS))})"
            for r in board
            if r["rank"] < ref_rank and set(r["flags"]) & set(CLASSIC_FLAGS)
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
            f"    ranking: clean reference {ref} is #{ref_rank} of {len(board)}; "
            + (
                f"ranked above it with a classic flag: {'; '.join(above)}"
                if above
                else "no judge with a flagged classic bias above it"
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
    print("detection rate per injected bias:")
    for bias in sorted(total):
        print(f"    {bias:<26} {hits[bias]}/{total[bias]}")
    return ok_all


def generators(repeats: int) -> None:
    print(f"Part 2: image generators on the demo memes (median of {repeats} repeats)")
    cfg = demo_config()
    memes = load_datasets(cfg.data, cfg.image).memes
    with tempfile.TemporaryDirectory() as tmp:
        store = ImageStore(Path(tmp) / "images")
        images = [im for m in memes if (im := meme_image(m, store, cfg.image)) is not None]
        triplets = [Triplet("Is this meme harmful? Refer to the image.", im, "r") for im in images]

        def baseline() -> None:
            for t in triplets:
                assert t.image is not None
                store.put(t.image.load(), {SHOWS_KEY: "x"})

        def gen(bias_type: str) -> None:
            for i, t in enumerate(triplets):
                ctx = PerturbContext(store, random.Random(i), shows="x")
                perturb(bias_type, t, ctx)

        def per_image(fn: object) -> float:
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn()  # type: ignore[operator]
                times.append((time.perf_counter() - t0) / len(triplets))
            return statistics.median(times)

        base = per_image(baseline)
        print(f"    store the unperturbed image (baseline)  {1000 * base:7.2f} ms/image")
        for bias_type in ("visual_transformation", "texture_insertion"):
            t = per_image(lambda b=bias_type: gen(b))
            print(f"    {bias_type:<38}  {1000 * t:7.2f} ms/image  ({t / base:.2f}x baseline)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--bootstrap", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    ok = seeds(args.seeds, args.bootstrap)
    generators(args.repeats)
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
