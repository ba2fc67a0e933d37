"""Cost and time of the Adapt method on the simulated world: the demo-size run (the bundled 24
memes) against a run ``--scale`` times larger (each demo meme cloned with its own image), both
with the demo's Adapt config, no cache, fresh run directories.

Prints model calls and wall time for each size: calls per meme of the per-meme stages (mining,
misbeliefs, references, scoring), which should stay flat (cost linear in memes), and calls per
refinement chain (refinement draws a fixed number of seeds per target x category x repeat, so
its cost follows chains). Ratios large/small; figures are medians of ``--repeats``.

    python bench/adapt.py [--scale 10] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
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
