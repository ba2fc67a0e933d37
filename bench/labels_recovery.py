"""Bench: do the human-label figures' 95% intervals cover the values the simulated annotators
plant, and how long do the queues and the figures take?

Run: python bench/labels_recovery.py [--seeds 20] [--memes 12] [--annotators 3] [--boot 400]

One Arena run on the demo memes (simulated models; ``--memes`` of them, three targets, fusion
rounds = judges) is labelled ``--seeds`` times by the simulated annotators
(``memearena.sim.annotators``, each seed a fresh draw of their noise); each time every judge's κ
against the annotators' majority (criteria pooled) and the annotators' α per battle field are
compared with their planted large-sample values. Printed: the share of intervals covering
their planted value (nominal 0.95: the baseline), the mean error and its spread, and the median
time of ``queue_items`` and of ``agreement`` (with the machine's load: the figures move with it).
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console

from memearena.config import DatasetConfig
from memearena.demo import demo_config
from memearena.engine.lifecycle import run_method
from memearena.labels import queue_items
from memearena.labels.agreement import agreement
from memearena.labels.simulated import simulate_labels
from memearena.sim.annotators import demo_annotators


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--memes", type=int, default=12)
    ap.add_argument("--annotators", type=int, default=3)
    ap.add_argument("--boot", type=int, default=400)
    args = ap.parse_args()
    cfg = demo_config(bootstrap=0)
    assert cfg.arena is not None
    arena = cfg.arena.model_copy(
        update={"fusion_rounds": len(cfg.arena.judges), "targets": cfg.arena.targets[:3]}
    )
    cfg = cfg.model_copy(
        update={"data": [DatasetConfig(format="demo", limit=args.memes)], "arena": arena}
    )
    tmp = Path(tempfile.mkdtemp(prefix="labels-bench-"))
    try:
        run = tmp / "arena"
        run_method("arena", cfg, run, console=Console(file=io.StringIO()), show_progress=False)
        covered: dict[str, list[bool]] = {"kappa": [], "alpha": []}
        errors: dict[str, list[float]] = {"kappa": [], "alpha": []}
        t_items, t_figures = [], []
        for seed in range(args.seeds):
            for f in run.glob("labels.sqlite*"):
                f.unlink()
            t0 = time.perf_counter()
            queue_items(run, "battles")
            t_items.append(time.perf_counter() - t0)
            planted = simulate_labels(
                run, demo_annotators(args.annotators), seed=seed, queues=["battles"]
            )
            t0 = time.perf_counter()
            figures = agreement(run, n_boot=args.boot, seed=seed)
            t_figures.append(time.perf_counter() - t0)
            for judge, want in planted.kappa.items():
                (row,) = figures.figure("kappa", judge=judge, field="all")
                covered["kappa"].append(row["ci_low"] <= want <= row["ci_high"])
                errors["kappa"].append(row["value"] - want)
            for name, want in planted.alpha.items():
                rows = figures.figure("alpha", queue="battles", field=name.split(".", 1)[1])
                if rows and rows[0]["ci_low"] is not None:
                    covered["alpha"].append(rows[0]["ci_low"] <= want <= rows[0]["ci_high"])
                    errors["alpha"].append(rows[0]["value"] - want)
        load = os.getloadavg()[0]
        print(
            f"{args.memes} memes, {args.annotators} annotators, {args.seeds} seeds, "
            f"{args.boot} bootstrap rounds; load {load:.2f}"
        )
        for name in ("kappa", "alpha"):
            c = covered[name]
            print(
                f"{name}: {sum(c)}/{len(c)} intervals cover the planted value "
                f"({sum(c) / len(c):.3f}; nominal 0.95); error mean "
                f"{statistics.fmean(errors[name]):+.4f}, sd {statistics.pstdev(errors[name]):.4f}"
            )
        print(
            f"queue_items(battles) median {statistics.median(t_items) * 1000:.0f} ms; "
            f"agreement median {statistics.median(t_figures) * 1000:.0f} ms"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
