"""The Arena's end-of-run analysis (``ArenaMethod.finish``: leaderboard, battle files, status
counts): process CPU of one call, against a baseline source tree, and whether both trees write
the same outputs.

Each tree runs the in-process demo Arena on ``--memes`` memes (bootstrap ``--bootstrap``) in
its own process, interleaved with the other tree ``--rounds`` times; inside a run ``finish`` is
called ``--repeats`` times (its recorded status counts cleared before each, so every call
derives them), timed with ``time.process_time``. Reported: the median per tree and the ratio,
with the load (``uptime``). Then the outputs of the last round are compared byte for byte:
``leaderboard.json`` (run dates and timings removed), every ``battles*.jsonl`` and the
report's figures (``report/`` files when written).

    python bench/arena_finish.py --src src --baseline-src /work/main/src [--memes 96]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import io, json, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[5])
from scale import write_memes
from rich.console import Console
from memearena.config import DatasetConfig
from memearena.demo import demo_config
from memearena.engine.lifecycle import run_method
from memearena.methods.arena import method as m

n, boot, repeats, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
data = write_memes(Path(sys.argv[6]), n)  # one path for both trees: the same config digest
cfg = demo_config(bootstrap=boot)
arena = cfg.arena.model_copy(update={"bootstrap_unit": sys.argv[7], "self_judging": sys.argv[8]})
cfg = cfg.model_copy(
    update={
        "run": "p",
        "data": [DatasetConfig(format="demo", path=data)],
        "cache": False,
        "arena": arena,
    }
)
times = []
original = m.Arena.finish

def timed(self, ctx, run, *, bootstrap):
    result = None
    for _ in range(repeats):
        ctx.store.set_meta(m.STATUS_COUNTS, "")
        t = time.process_time()
        result = original(self, ctx, run, bootstrap=bootstrap)
        times.append(time.process_time() - t)
    return result

m.Arena.finish = timed
run_method("arena", cfg, out / "run", console=Console(file=io.StringIO()), show_progress=False)
print(json.dumps(times))
"""

VOLATILE = {"started", "finished", "date", "run_date", "wall_s", "elapsed_s", "latency_s"}
# What differs between two runs of the same tree in report.html: dates, the digests that cover
# them, measured latencies.
HTML_VOLATILE = [
    re.compile(rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+\-Z0-9:.]*"),
    re.compile(rb"\b[0-9a-f]{64}\b"),
    re.compile(rb'(data-label="Latency \(s\)">)[^<]*'),
]


def _strip(doc: object) -> object:
    if isinstance(doc, dict):
        return {k: _strip(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [_strip(v) for v in doc]
    return doc


def _run(src: str, args: argparse.Namespace, out: Path) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(Path(src).resolve())}
    bench_dir = str(Path(__file__).resolve().parent)
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            str(args.memes),
            str(args.bootstrap),
            str(args.repeats),
            str(out),
            bench_dir,
            str(out.parent / "data"),
            args.unit,
            args.self_judging,
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if res.returncode:
        sys.exit(f"{src}: {res.stderr.strip().splitlines()[-1]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def _paths(a: object, b: object, at: str = "") -> list[str]:
    """Where two JSON documents differ (key paths)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [p for k in sorted(set(a) | set(b)) for p in _paths(a.get(k), b.get(k), f"{at}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            p for k, (x, y) in enumerate(zip(a, b, strict=True)) for p in _paths(x, y, f"{at}[{k}]")
        ]
    return [] if a == b else [at]


def _outputs(run_dir: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for p in sorted(run_dir.rglob("*")):
        rel = str(p.relative_to(run_dir))
        if not p.is_file():
            continue
        if p.name == "leaderboard.json":
            doc = _strip(json.loads(p.read_text()))
            files[rel] = json.dumps(doc, sort_keys=True).encode()
        elif p.suffix == ".html":
            text = p.read_bytes()
            for pattern in HTML_VOLATILE:
                text = pattern.sub(rb"\1" if pattern.groups else b"-", text)
            files[rel] = text
        elif (
            p.name.startswith("battles") or rel.startswith("report") or p.suffix in {".svg", ".png"}
        ):
            files[rel] = p.read_bytes()
    return files


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default="src")
    ap.add_argument("--baseline-src", default="/work/main/src")
    ap.add_argument("--memes", type=int, default=96)
    ap.add_argument("--bootstrap", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--unit", default="meme", help="arena.bootstrap_unit: meme, task, battle")
    ap.add_argument("--self-judging", default="exclude", help="arena.self_judging policy")
    ap.add_argument("--keep", action="store_true", help="keep the run directories")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="arena_finish"))
    times: dict[str, list[float]] = {"baseline": [], "src": []}
    try:
        for r in range(args.rounds):
            for name, src in (("baseline", args.baseline_src), ("src", args.src)):
                out = tmp / f"{name}{r}"
                times[name] += _run(src, args, out)
        load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
        base, new = statistics.median(times["baseline"]), statistics.median(times["src"])
        print(
            f"finish CPU at {args.memes} memes (bootstrap {args.bootstrap}, unit {args.unit}, "
            f"self-judging {args.self_judging}), medians of "
            f"{len(times['src'])}: baseline {base:.3f} s {times['baseline']}, "
            f"src {new:.3f} s {times['src']}, {base / new:.2f}x; load: {load}"
        )
        last = args.rounds - 1
        a, b = _outputs(tmp / f"baseline{last}" / "run"), _outputs(tmp / f"src{last}" / "run")
        same = sorted(k for k in a if b.get(k) == a[k])
        differ = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        print(f"identical: {same}")
        print(f"DIFFER: {differ}" if differ else "all compared outputs identical")
        for k in differ:
            if k.endswith(".json"):
                print(k, _paths(json.loads(a[k]), json.loads(b[k]))[:20])
        if args.keep:
            print(f"kept: {tmp}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
