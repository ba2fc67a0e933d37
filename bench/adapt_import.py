"""Time and peak memory of ``adapt import`` (read + analyse AdamMeme-format logs) on
synthetic logs of growing size: 8 category files, chains of 1-10 rewrites (each step a hop to
another meme, as AdamMeme's loop does), a refusal now and then, the authors' own
``Rating: n`` / ``Rating: [[n]]`` comparisons. Cost should grow linearly with the steps.

    python bench/adapt_import.py [--steps 2000 20000 200000] [--bootstrap 1000]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import tempfile
import time
from pathlib import Path

from memearena.methods.adapt.published import analyse_published_logs, read_published_logs

CATEGORIES = (
    "race",
    "gender",
    "religion",
    "nationality",
    "disability",
    "animal",
    "political",
    "child exploitation",
)


def write_logs(root: Path, steps: int, seed: int = 0) -> None:
    """``steps`` logged steps over the 8 category files; about 3 steps per meme."""
    rng = random.Random(seed)
    per_cat = steps // len(CATEGORIES)
    memes = max(1, steps // 3)
    for cat in CATEGORIES:
        rows: list[dict[str, object]] = []
        while len(rows) < per_cat:
            length = rng.randint(1, 10)
            for rs in range(length):
                if len(rows) >= per_cat:
                    break
                meme = f"image/erased/{rng.randrange(memes):06d}.png"
                if rng.random() < 0.01:
                    rows.append({"meme_image_path": meme, "task": cat, "score": "拒答"})
                    continue
                score = rng.randint(1, 10)
                form = "Rating: [[{}]]" if rng.random() < 0.6 else "Rating: {}"
                rows.append(
                    {
                        "meme_text": "a rewritten caption",
                        "explanation": "hides the harm",
                        "misbelief": "a group is said to be lesser",
                        "meme_image_path": meme,
                        "answer": "The meme may be harmful.",
                        "ref_ans": "The meme demeans a group.",
                        "comparison": "The answer misses the target.\n\n" + form.format(score),
                        "score": float(score),
                        "task": cat,
                        "run_step": rs,
                    }
                )
        (root / f"log_{cat}.json").write_text(json.dumps(rows, ensure_ascii=False))
    (root / "info.json").write_text(json.dumps({"model_name": "bench"}))


def one(steps: int, bootstrap: int) -> tuple[float, float, float]:
    """(wall s and CPU s of read + analyse, peak resident MiB of the process so far); CPU
    time is the figure to compare on a shared machine."""
    with tempfile.TemporaryDirectory(prefix="memearena-bench-import-") as tmp:
        root = Path(tmp)
        write_logs(root, steps)
        t0, c0 = time.perf_counter(), time.process_time()
        logs = read_published_logs(root)
        doc = analyse_published_logs(logs, rounds=bootstrap)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        json.dumps(doc, allow_nan=False)
    return wall, cpu, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[2000, 20000, 200000])
    ap.add_argument("--bootstrap", type=int, default=1000)
    args = ap.parse_args()
    for n in args.steps:
        wall, cpu, peak = one(n, args.bootstrap)
        print(
            f"{n:>8} steps: {wall:7.2f} s wall, {cpu:7.2f} s CPU ({cpu / n * 1e6:.1f} us/step), "
            f"peak RSS {peak:7.1f} MiB"
        )


if __name__ == "__main__":
    main()
