"""Cost and time of the Adapt method on the simulated world: the demo-size run (the bundled 24
memes) against a run ``--scale`` times larger (each demo meme cloned with its own image), both
with the demo's Adapt config, no cache, fresh run directories.

Prints model calls per meme and wall time per meme for each size, and the ratios large/small:
calls per meme should stay flat (cost linear in memes). Figures are medians of ``--repeats``.

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
from memearena.pipelines.adapt import run_adapt
from memearena.pipelines.adapt.demo import adapt_demo_config


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


def one_run(cfg: RunConfig, memes: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory(prefix="memearena-bench-adapt-") as tmp:
        t0 = time.perf_counter()
        res = run_adapt(cfg, Path(tmp) / "run", show_progress=False)
        wall = time.perf_counter() - t0
    assert res.section["models"], "the run produced no result"
    return wall, res.new_calls


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
            wall = statistics.median(r[0] for r in runs)
            calls = statistics.median(r[1] for r in runs)
            results[name] = (n, wall, calls)
            print(
                f"{name:>5}: {n:5d} memes  {calls:8.0f} calls  {calls / n:6.1f} calls/meme  "
                f"wall {wall:7.2f} s  {1000 * wall / n:6.1f} ms/meme  (median of {args.repeats})"
            )
    (n0, w0, c0), (n1, w1, c1) = results["demo"], results[f"{args.scale}x"]
    print(
        f"ratio {args.scale}x/demo: memes {n1 / n0:.1f}x, calls {c1 / c0:.2f}x, "
        f"calls per meme {(c1 / n1) / (c0 / n0):.2f}x, wall per meme {(w1 / n1) / (w0 / n0):.2f}x"
    )


if __name__ == "__main__":
    main()
