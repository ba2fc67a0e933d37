"""Bench: `memearena rank` at arena scale vs the FastChat recipe, whole process, parsing included.

Run:  python bench/ranking.py                      # all sizes, 1000 rounds, medians of 3
      python bench/ranking.py --sizes 15x100000 --repeats 1
      python bench/ranking.py --readers            # battle-file readers on the largest file
      python bench/ranking.py --blas               # batched solves with BLAS pinned or not
(the baseline needs pandas: `pip install -e ".[notebook]"`)

Arenas are skewed as real ones are: each battle's two models are drawn with log-normal
popularity (σ = --sigma), so many pairs never meet and rare models have a handful of battles;
outcomes follow Bradley–Terry with about 20% ties. Each arena is written as a JSONL battle file
(Chatbot Arena format) and both sides run as separate processes on it:

* memearena: `python -m memearena rank FILE --bootstrap N --json`.
* FastChat: a faithful REIMPLEMENTATION (FastChat is not a dependency) of how
  fastchat/serve/monitor ranks a battle file: `pandas.read_json(lines=True)`, online Elo over
  `itertuples` (elo_analysis.compute_elo), `preprocess_for_bt` (pd.factorize, np.unique over
  (model_a, model_b, outcome) rows), `compute_bt`, and `compute_bootstrap_bt`: one
  `np.random.multinomial` draw of all rounds, then a `multiprocessing.Pool(os.cpu_count())`
  mapping one scipy L-BFGS-B fit per round (maxiter 100, gtol 1e-6), percentiles of the rounds.

Reported per size: wall time (median of --repeats), CPU time (user + sys, the process and its
pool workers), peak RSS (largest single process), and the ratio FastChat ÷ memearena; then the
largest difference between the two point estimates (memearena's is the exact MLE; FastChat's
L-BFGS stops at gtol). The machine may be shared: CPU time is the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

WINNERS = ("model_a", "model_b", "tie", "tie (bothbad)")
DEFAULT_SIZES = "15x100000,50x100000,150x100000,15x1000000,50x1000000,150x1000000"


# --- arenas ---------------------------------------------------------------------------------------


def write_arena(path: Path, n_models: int, n_battles: int, sigma: float, seed: int) -> float:
    """Write a skewed arena as JSONL; returns the share of model pairs that ever met."""
    rng = np.random.default_rng(seed)
    popularity = rng.lognormal(0.0, sigma, n_models)
    p = popularity / popularity.sum()
    a = rng.choice(n_models, n_battles, p=p)
    b = rng.choice(n_models, n_battles, p=p)
    clash = a == b
    while clash.any():
        b[clash] = rng.choice(n_models, int(clash.sum()), p=p)
        clash = a == b
    skill = rng.normal(0.0, 1.0, n_models)
    p_a = 1.0 / (1.0 + np.exp(skill[b] - skill[a]))
    u = rng.random(n_battles)
    outcome = np.where(u < 0.8 * p_a, 0, np.where(u < 0.8, 1, np.where(u < 0.9, 2, 3)))
    names = [f"model-{k:03d}" for k in range(n_models)]
    tstamp = 1.7e9 + np.cumsum(rng.exponential(1.0, n_battles))
    with path.open("w") as f:
        for x, y, o, t in zip(
            a.tolist(), b.tolist(), outcome.tolist(), tstamp.tolist(), strict=True
        ):
            f.write(
                f'{{"model_a": "{names[x]}", "model_b": "{names[y]}", '
                f'"winner": "{WINNERS[o]}", "tstamp": {t:.3f}}}\n'
            )
    met = np.zeros((n_models, n_models), dtype=bool)
    met[a, b] = met[b, a] = True
    return float(met.sum() / (n_models * (n_models - 1)))


# --- processes ------------------------------------------------------------------------------------


def run(cmd: list[str], out: Path) -> dict[str, float]:
    """Run a command to completion: wall s, CPU s (it and its reaped children), peak RSS MB."""
    with out.open("w") as stdout:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {stderr.strip()[-500:]}")
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss": usage.ru_maxrss / 1024,
    }


def median_run(cmd: list[str], out: Path, repeats: int) -> dict[str, float]:
    runs = [run(cmd, out) for _ in range(repeats)]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


# --- the FastChat recipe, reimplemented -----------------------------------------------------------


def compute_elo(
    battles: Any, k: float = 4, scale: float = 400, base: float = 10, init: float = 1000
) -> dict[str, float]:
    """fastchat/serve/monitor/elo_analysis.py: compute_elo."""
    from collections import defaultdict

    rating: dict[str, float] = defaultdict(lambda: init)
    for _, model_a, model_b, winner in battles[["model_a", "model_b", "winner"]].itertuples():
        ra, rb = rating[model_a], rating[model_b]
        ea = 1 / (1 + base ** ((rb - ra) / scale))
        eb = 1 / (1 + base ** ((ra - rb) / scale))
        if winner == "model_a":
            sa = 1.0
        elif winner == "model_b":
            sa = 0.0
        elif winner in ("tie", "tie (bothbad)"):
            sa = 0.5
        else:
            raise ValueError(f"unexpected vote {winner}")
        rating[model_a] += k * (sa - ea)
        rating[model_b] += k * (1 - sa - eb)
    return dict(rating)


def preprocess_for_bt(df: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any]:
    """fastchat/serve/monitor/rating_systems.py: preprocess_for_bt."""
    import pandas as pd

    n_rows = len(df)
    model_indices, models = pd.factorize(pd.concat([df["model_a"], df["model_b"]]))
    matchups = np.column_stack([model_indices[:n_rows], model_indices[n_rows:]])
    schedule = np.full(shape=(n_rows,), fill_value=1, dtype=np.int32)
    schedule[df["winner"] == "model_a"] = 2
    schedule[df["winner"] == "model_b"] = 0
    matchups_outcomes = np.column_stack([matchups, schedule])
    unique_matchups, weights = np.unique(matchups_outcomes, return_counts=True, axis=0)
    matchups = unique_matchups[:, [0, 1]]
    outcomes = unique_matchups[:, 2].astype(np.float64) / 2.0
    return matchups, outcomes, weights.astype(np.float64), models


def bt_loss_and_grad(
    ratings: np.ndarray,
    matchups: np.ndarray,
    outcomes: np.ndarray,
    weights: np.ndarray,
    alpha: float = 1.0,
) -> tuple[float, np.ndarray]:
    """rating_systems.py: bt_loss_and_grad."""
    from scipy.special import expit

    matchup_ratings = ratings[matchups]
    logits = alpha * (matchup_ratings[:, 0] - matchup_ratings[:, 1])
    probs = expit(logits)
    loss = -((np.log(probs) * outcomes + np.log(1.0 - probs) * (1.0 - outcomes)) * weights).sum()
    matchups_grads = -alpha * (outcomes - probs) * weights
    model_grad = np.zeros_like(ratings)
    np.add.at(
        model_grad,
        matchups[:, [0, 1]],
        matchups_grads[:, None] * np.array([1.0, -1.0], dtype=np.float64),
    )
    return loss, model_grad


def fit_bt(
    matchups: np.ndarray,
    outcomes: np.ndarray,
    weights: np.ndarray,
    n_models: int,
    alpha: float,
    tol: float = 1e-6,
) -> np.ndarray:
    """rating_systems.py: fit_bt (L-BFGS-B from zeros)."""
    from scipy.optimize import minimize

    result = minimize(
        fun=bt_loss_and_grad,
        x0=np.zeros(n_models, dtype=np.float64),
        args=(matchups, outcomes, weights, alpha),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 100, "gtol": tol},
    )
    return np.asarray(result["x"])


def _fit_round(args: tuple[np.ndarray, np.ndarray, int, float, np.ndarray]) -> np.ndarray:
    matchups, outcomes, n_models, alpha, weights = args
    return fit_bt(matchups, outcomes, weights, n_models, alpha)


def fastchat_rank(path: Path, rounds: int, seed: int) -> dict[str, Any]:
    """rating_systems.py compute_bt + compute_bootstrap_bt, elo_analysis.py compute_elo."""
    import multiprocessing as mp

    import pandas as pd

    battles = pd.read_json(path, lines=True)
    elo = compute_elo(battles)
    matchups, outcomes, weights, models = preprocess_for_bt(battles)
    alpha = math.log(10.0)
    point = fit_bt(matchups, outcomes, weights, len(models), alpha)
    np.random.seed(seed)
    idxs = np.random.multinomial(n=len(battles), pvals=weights / weights.sum(), size=rounds)
    boot_weights = idxs.astype(np.float64) / len(battles)
    jobs = [(matchups, outcomes, len(models), alpha, w) for w in boot_weights]
    with mp.Pool(os.cpu_count()) as pool:
        boot = np.array(list(pool.imap_unordered(_fit_round, jobs)))
    scaled = 400.0 * boot + 1000.0
    low, high = np.percentile(scaled, [2.5, 97.5], axis=0)
    rows = [
        {
            "model": m,
            "bt": 400.0 * point[k] + 1000.0,
            "ci_low": low[k],
            "ci_high": high[k],
            "elo": elo[m],
        }
        for k, m in enumerate(models)
    ]
    return {"models": sorted(rows, key=lambda r: -r["bt"])}


# --- parts ----------------------------------------------------------------------------------------


def compare_sizes(args: argparse.Namespace, tmp: Path) -> None:
    print(
        f"rank --bootstrap {args.rounds} --json vs the FastChat recipe (reimplemented), "
        f"whole process, medians of {args.repeats}; cores: {os.cpu_count()}, "
        f"load average {os.getloadavg()[0]:.1f} at start"
    )
    header = (
        f"{'models × battles':>18} {'met':>4} | {'memearena wall':>14} {'cpu':>6} {'RSS':>7} | "
        f"{'FastChat wall':>13} {'cpu':>6} {'RSS':>7} | {'÷ wall':>6} {'÷ cpu':>6} | {'Δ point':>8}"
    )
    print(header)
    for size in args.sizes.split(","):
        m, n = (int(v) for v in size.split("x"))
        path = tmp / f"arena-{m}x{n}.jsonl"
        met = write_arena(path, m, n, args.sigma, args.seed)
        ours_out, theirs_out = tmp / "ours.json", tmp / "theirs.json"
        ours = median_run(
            [
                sys.executable,
                "-m",
                "memearena",
                "rank",
                str(path),
                "--bootstrap",
                str(args.rounds),
                "--json",
            ],
            ours_out,
            args.repeats,
        )
        rows = json.loads(ours_out.read_text())["models"]
        if args.no_baseline:
            flags = sum(not r["mle"] for r in rows)
            print(
                f"{m:>6} × {n:>9,} {met:>4.0%} | {ours['wall']:>12.2f} s {ours['cpu']:>5.1f}s "
                f"{ours['rss']:>5.0f}MB | rows flagged mle=false: {flags}",
                flush=True,
            )
            path.unlink()
            continue
        theirs = median_run(
            [sys.executable, __file__, "--fastchat-run", str(path), "--rounds", str(args.rounds)],
            theirs_out,
            args.baseline_repeats or args.repeats,
        )
        a = {r["model"]: r["bt"] for r in rows}
        prior = "" if all(r["mle"] for r in rows) else " (no MLE: memearena used the weak prior)"
        b = {r["model"]: r["bt"] for r in json.loads(theirs_out.read_text())["models"]}
        delta = max(abs(a[k] - b[k]) for k in a)
        print(
            f"{m:>6} × {n:>9,} {met:>4.0%} | {ours['wall']:>12.2f} s {ours['cpu']:>5.1f}s "
            f"{ours['rss']:>5.0f}MB | {theirs['wall']:>11.2f} s {theirs['cpu']:>5.1f}s "
            f"{theirs['rss']:>5.0f}MB | {theirs['wall'] / ours['wall']:>6.1f} "
            f"{theirs['cpu'] / ours['cpu']:>6.1f} | {delta:>6.3f} Elo{prior}",
            flush=True,
        )
        path.unlink()


READERS = {
    "pydantic per line (load_battles)": """
from memearena.stats import load_battles
n = len(load_battles(PATH).battles)
""",
    "memearena columnar (msgspec + exact fallback)": """
from memearena.stats import read_battle_table
n = len(read_battle_table(PATH))
""",
    "orjson per line, to codes (no validation)": """
import orjson, numpy as np
index, a, b = {}, [], []
with open(PATH, "rb") as f:
    for line in f:
        if line.strip():
            o = orjson.loads(line)
            a.append(index.setdefault(o["model_a"], len(index)))
            b.append(index.setdefault(o["model_b"], len(index)))
n = len(np.array(a))
""",
    "polars read_ndjson, to codes (no validation)": """
import polars as pl
df = pl.read_ndjson(PATH, schema={"model_a": pl.String, "model_b": pl.String, "winner": pl.String})
codes = df["model_a"].cast(pl.Categorical).to_physical().to_numpy()
n = df.height
""",
    "pyarrow.json, to codes (no validation)": """
import pyarrow as pa, pyarrow.json as pj
schema = pa.schema([("model_a", pa.string()), ("model_b", pa.string()), ("winner", pa.string())])
opts = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
t = pj.read_json(PATH, parse_options=opts)
codes = t.column("model_a").combine_chunks().dictionary_encode()
n = t.num_rows
""",
}


def compare_readers(args: argparse.Namespace, tmp: Path) -> None:
    m, n = (int(v) for v in args.sizes.split(",")[-1].split("x"))
    path = tmp / "readers.jsonl"
    write_arena(path, m, n, args.sigma, args.seed)
    print(f"reading {n:,} battles ({path.stat().st_size / 1e6:.0f} MB), medians of {args.repeats}")
    base = None
    for name, code in READERS.items():
        script = tmp / "reader.py"
        script.write_text(f"PATH = {str(path)!r}\n{code}\nprint(n)\n")
        try:
            r = median_run([sys.executable, str(script)], tmp / "reader.out", args.repeats)
        except SystemExit as exc:
            print(f"  {name:<48} unavailable ({str(exc).splitlines()[-1][-80:]})")
            continue
        base = base or r["wall"]
        print(
            f"  {name:<48} {r['wall']:>6.2f} s wall {r['cpu']:>6.2f} s cpu {r['rss']:>6.0f} MB "
            f"({base / r['wall']:.1f}× the first)"
        )


def compare_blas(args: argparse.Namespace) -> None:
    from memearena.stats import bt
    from memearena.stats.battles import parse_battle_table

    m, n = (int(v) for v in args.sizes.split(",")[-1].split("x"))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "a.jsonl"
        write_arena(path, m, n, args.sigma, args.seed)
        counts = parse_battle_table(path.read_bytes()).counts()
    draws = bt.resample(counts, args.rounds, args.seed)
    print(
        f"{m} models × {n:,} battles, {args.rounds} rounds, medians of {args.repeats}: "
        "batched Newton (a dense solve per round and step), then the whole bradley_terry"
    )
    for label, threads in (("BLAS as found", None), ("BLAS pinned to 1 thread", 1)):
        bt._BLAS_THREADS = threads
        for part, fn in (
            ("batched Newton", lambda: bt.fit_cells(counts, draws, prior=1.0)),
            ("bradley_terry", lambda: bt.bradley_terry(counts, bootstrap=args.rounds)),
        ):
            walls, cpus = [], []
            for _ in range(args.repeats):
                t0, c0 = time.perf_counter(), time.process_time()
                fn()
                walls.append(time.perf_counter() - t0)
                cpus.append(time.process_time() - c0)
            print(
                f"  {label:<24} {part:<15} {statistics.median(walls):>6.2f} s wall "
                f"{statistics.median(cpus):>6.2f} s cpu"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES, help="models x battles, comma-separated")
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--baseline-repeats",
        type=int,
        default=None,
        help="FastChat runs per size (default: --repeats)",
    )
    parser.add_argument("--sigma", type=float, default=2.0, help="log-normal popularity spread")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--readers", action="store_true", help="compare battle-file readers")
    parser.add_argument("--no-baseline", action="store_true", help="time memearena only")
    parser.add_argument("--blas", action="store_true", help="BLAS threads pinned vs not")
    parser.add_argument("--fastchat-run", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fastchat_run is not None:
        print(json.dumps(fastchat_rank(args.fastchat_run, args.rounds, args.seed)))
        return
    with tempfile.TemporaryDirectory() as d:
        if args.readers:
            compare_readers(args, Path(d))
        elif args.blas:
            compare_blas(args)
        else:
            compare_sizes(args, Path(d))


if __name__ == "__main__":
    main()
