"""``memearena view DIR --bundle OUT``: size and build time of the static bundle of a run.

Builds the demo (or reads ``--run DIR``), bundles it (every page reachable from the front page,
up to ``--max-pages``), and prints pages, files, bytes, wall time (of which the crawl, the
viewer rendering each page) and pages per second, beside two baselines measured in the same
run on the same directory: the run directory's own size, and the single-page offline report
(``memearena report``: its size and render time). Records the machine's load (``uptime``): the
figures move with it.

    nice python bench/bundle.py [--run DIR] [--max-pages N] [--repeats 1]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, help="a run directory (default: build the demo)")
    ap.add_argument("--max-pages", type=int, default=50_000)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()

    from rich.console import Console

    from memearena.engine.lifecycle import write_run_report
    from memearena.engine.results import read_json
    from memearena.view.bundle import write_bundle

    with tempfile.TemporaryDirectory(prefix="bench-bundle-") as tmp:
        root = Path(tmp)
        run = args.run
        if run is None:
            from memearena.demo import run_demo

            run = root / "demo"
            t = time.perf_counter()
            run_demo(run, console=Console(file=io.StringIO()), show_progress=False)
            print(f"demo built in {time.perf_counter() - t:.1f} s")
        print("load before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout)
        board = read_json(run / "leaderboard.json")
        report_times = []
        for _ in range(max(3, args.repeats)):
            t = time.perf_counter()
            write_run_report(run, board)
            report_times.append(time.perf_counter() - t)
        report_bytes = (run / "report.html").stat().st_size
        run_bytes = _size(run)
        walls, crawls = [], []
        summary = None
        for i in range(args.repeats):
            out = root / f"bundle-{i}"
            summary = write_bundle(run, out, max_pages=args.max_pages)
            walls.append(summary.seconds)
            crawls.append(summary.crawl_seconds)
            if i + 1 < args.repeats:
                shutil.rmtree(out)
        assert summary is not None
        print("load after: ", subprocess.run(["uptime"], capture_output=True, text=True).stdout)
        wall, crawl = statistics.median(walls), statistics.median(crawls)
        mib = 2**20
        print(f"cores: {os.cpu_count()}; repeats: {args.repeats} (medians)")
        print(f"run directory (baseline):  {run_bytes / mib:8.1f} MiB")
        print(
            f"report.html (baseline):    {report_bytes / mib:8.2f} MiB in "
            f"{statistics.median(report_times):.2f} s (one page, no drill-down)"
        )
        print(
            f"bundle: {summary.pages:,} pages + {summary.files:,} files = "
            f"{summary.bytes / mib:.1f} MiB in {wall:.1f} s (crawl {crawl:.1f} s, rewrite "
            f"{wall - crawl:.1f} s); {summary.pages / wall:.0f} pages/s; "
            f"{summary.bytes / max(summary.pages, 1) / 1024:.1f} KiB/page; "
            f"left out {summary.left_out:,}; errors {len(summary.failed)}"
        )


if __name__ == "__main__":
    main()
