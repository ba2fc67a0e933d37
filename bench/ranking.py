"""Bench: `memearena rank` at arena scale vs FastChat's own code, whole process, parsing included.

Run:  python bench/ranking.py --fastchat DIR              # all sizes, 1000 rounds, medians of 3
      python bench/ranking.py --fastchat DIR --sizes 50x1000000 --repeats 3 --baseline-repeats 1
      python bench/ranking.py --readers            # battle-file readers on the largest file
      python bench/ranking.py --blas               # batched solves with BLAS pinned or not
DIR is a FastChat checkout (`git clone https://github.com/lm-sys/FastChat`) or a bare clone of it;
FastChat is never a dependency: its `fastchat/serve/monitor/rating_systems.py` is loaded from DIR
(it needs pandas, scipy and tqdm: `pip install -e ".[notebook]" tqdm`).

Arenas are skewed as real ones are: each battle's two models are drawn with log-normal
popularity (σ = --sigma), so many pairs never meet and rare models have a handful of battles;
outcomes follow Bradley–Terry with about 20% ties. Each arena is written as a JSONL battle file
(Chatbot Arena format) and both sides run as separate processes on it:

* memearena: `python -m memearena rank FILE --bootstrap N --json`.
* FastChat: how its leaderboard code ranks a battle file: `pandas.read_json(lines=True)`, then
  `rating_systems.compute_elo`, `compute_bt` and `compute_bootstrap_bt` (one multinomial draw of
  all rounds, a `multiprocessing.Pool(os.cpu_count())` of L-BFGS-B fits), percentiles of the
  rounds. Its BLAS is pinned to one thread (`--baseline-blas-as-found` leaves it): its pool
  already fills every core, and BLAS threads inside each small fit only oversubscribe them
  (20x slower per fit on a loaded machine).

Reported per size: wall time (median of --repeats), CPU time (user + sys, the process and its
pool workers), peak RSS (largest single process), the ratio FastChat ÷ memearena, the largest
difference between the two point estimates (memearena's is the exact MLE; FastChat's L-BFGS
stops at gtol), and each side's parts, timed in one more run of each. The machine may be
shared: the load average is printed at the start and end of each size.
"""

from __future__ import annotations

import argparse
import json
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


def run(cmd: list[str], out: Path, env: dict[str, str] | None = None) -> dict[str, float]:
    """Run a command to completion: wall s, CPU s (it and its reaped children), peak RSS MB."""
    with out.open("w") as stdout, tempfile.TemporaryFile() as stderr:  # a file: never blocks
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        stderr.seek(0)
        errors = stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {errors.strip()[-500:]}")
    return {
        "wall": wall,
        "cpu": usage.ru_utime + usage.ru_stime,
        "rss": usage.ru_maxrss / 1024,
    }


def median_run(
    cmd: list[str], out: Path, repeats: int, env: dict[str, str] | None = None
) -> dict[str, float]:
    runs = [run(cmd, out, env) for _ in range(repeats)]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def load() -> str:
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def parts_line(parts: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in parts.items())


# --- FastChat's code, loaded from a checkout ------------------------------------------------------

RATING_SYSTEMS = "fastchat/serve/monitor/rating_systems.py"


def load_rating_systems(fastchat: Path, into: Path) -> Any:
    """FastChat's rating_systems module from a checkout or a bare clone (never copied here)."""
    import importlib

    source = fastchat / RATING_SYSTEMS
    if source.is_file():
        text = source.read_text()
    else:
        # A bare clone, or a folder holding one as `repo` (how mirrors of it are kept).
        git_dir = fastchat / "repo" if (fastchat / "repo" / "HEAD").is_file() else fastchat
        text = subprocess.run(
            ["git", "--git-dir", str(git_dir), "show", f"HEAD:{RATING_SYSTEMS}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    (into / "rating_systems.py").write_text(text)
    sys.path.insert(0, str(into))  # importable by name in the pool's workers too
    return importlib.import_module("rating_systems")


def fastchat_rank(path: Path, rounds: int, fastchat: Path) -> dict[str, Any]:
    """FastChat's leaderboard computation on a battle file, its parts timed."""
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        rs = load_rating_systems(fastchat, Path(d))
        import pandas as pd

        t1 = time.perf_counter()
        battles = pd.read_json(path, lines=True)
        t2 = time.perf_counter()
        elo = rs.compute_elo(battles)
        t3 = time.perf_counter()
        bt = rs.compute_bt(battles)
        t4 = time.perf_counter()
        boot = rs.compute_bootstrap_bt(battles, num_round=rounds)
        t5 = time.perf_counter()
    low, high = boot.quantile(0.025), boot.quantile(0.975)
    rows = [
        {
            "model": m,
            "bt": float(bt[m]),
            "ci_low": float(low[m]),
            "ci_high": float(high[m]),
            "elo": float(elo[m]),
        }
        for m in bt.index
    ]
    parts = {
        "imports": t1 - t0,
        "read_json": t2 - t1,
        "compute_elo": t3 - t2,
        "compute_bt": t4 - t3,
        "compute_bootstrap_bt": t5 - t4,
    }
    return {"models": rows, "parts": parts}


def ours_parts(path: Path, rounds: int) -> dict[str, float]:
    """memearena's parts in one process, as `rank --json` runs them."""
    t0 = time.perf_counter()
    from memearena.cli.rank import rank_command  # noqa: F401  (what the command imports)
    from memearena.stats.battles import read_battle_table
    from memearena.stats.elo import online_elo_codes
    from memearena.stats.rank_table import rank_table

    t1 = time.perf_counter()
    table = read_battle_table(path)
    t2 = time.perf_counter()
    rank_table(table, bootstrap=rounds, seed=0)
    t3 = time.perf_counter()
    online_elo_codes(table.model_a, table.model_b, table.score_a, len(table.models))
    t4 = time.perf_counter()
    return {
        "imports": t1 - t0,
        "read": t2 - t1,
        "counts, BT, bootstrap, online Elo (overlapped)": t3 - t2,
        "online Elo alone": t4 - t3,
    }


# --- parts ----------------------------------------------------------------------------------------


def baseline_env(args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ, TQDM_DISABLE="1")
    if not args.baseline_blas_as_found:
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def compare_sizes(args: argparse.Namespace, tmp: Path) -> None:
    if not args.no_baseline and args.fastchat is None:
        raise SystemExit("--fastchat DIR (a FastChat checkout or clone) or --no-baseline")
    print(
        f"rank --bootstrap {args.rounds} --json vs FastChat's rating_systems "
        f"(compute_elo + compute_bt + compute_bootstrap_bt, BLAS "
        f"{'as found' if args.baseline_blas_as_found else 'pinned to 1 thread'}), whole "
        f"process; memearena median of {args.repeats}, FastChat of "
        f"{args.baseline_repeats or args.repeats}; cores: {os.cpu_count()}"
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
        at_start = load()
        ours_cmd = [
            sys.executable, "-m", "memearena", "rank", str(path),
            "--bootstrap", str(args.rounds), "--json",
        ]  # fmt: skip
        theirs_cmd = [
            sys.executable, __file__, "--fastchat-run", str(path),
            "--rounds", str(args.rounds), "--fastchat", str(args.fastchat),
        ]  # fmt: skip
        # Interleaved: each FastChat run between memearena runs, so both see the same load.
        ours_runs, theirs_runs = [], []
        for k in range(max(args.repeats, 0 if args.no_baseline else args.baseline_repeats or 0)):
            if k < args.repeats:
                ours_runs.append(run(ours_cmd, ours_out))
            if not args.no_baseline and k < (args.baseline_repeats or args.repeats):
                theirs_runs.append(run(theirs_cmd, theirs_out, baseline_env(args)))
        ours = {key: statistics.median(r[key] for r in ours_runs) for key in ours_runs[0]}
        rows = json.loads(ours_out.read_text())["models"]
        parts_out = tmp / "parts.json"
        run(
            [sys.executable, __file__, "--ours-parts", str(path), "--rounds", str(args.rounds)],
            parts_out,
        )
        our_parts = json.loads(parts_out.read_text())
        if args.no_baseline:
            flags = sum(not r["mle"] for r in rows)
            print(
                f"{m:>6} × {n:>9,} {met:>4.0%} | {ours['wall']:>12.2f} s {ours['cpu']:>5.1f}s "
                f"{ours['rss']:>5.0f}MB | rows flagged mle=false: {flags}",
                flush=True,
            )
            print(f"    memearena parts (s): {parts_line(our_parts)}; load {at_start} → {load()}")
            path.unlink()
            continue
        theirs = {key: statistics.median(r[key] for r in theirs_runs) for key in theirs_runs[0]}
        result = json.loads(theirs_out.read_text())
        a = {r["model"]: r["bt"] for r in rows}
        prior = "" if all(r["mle"] for r in rows) else " (no MLE: memearena used the weak prior)"
        b = {r["model"]: r["bt"] for r in result["models"]}
        delta = max(abs(a[k] - b[k]) for k in a)
        print(
            f"{m:>6} × {n:>9,} {met:>4.0%} | {ours['wall']:>12.2f} s {ours['cpu']:>5.1f}s "
            f"{ours['rss']:>5.0f}MB | {theirs['wall']:>11.2f} s {theirs['cpu']:>5.1f}s "
            f"{theirs['rss']:>5.0f}MB | {theirs['wall'] / ours['wall']:>6.1f} "
            f"{theirs['cpu'] / ours['cpu']:>6.1f} | {delta:>6.3f} Elo{prior}",
            flush=True,
        )
        walls = ", ".join(f"{r['wall']:.2f}" for r in ours_runs)
        their_walls = ", ".join(f"{r['wall']:.1f}" for r in theirs_runs)
        print(f"    memearena walls (s): {walls}; FastChat walls (s): {their_walls}")
        print(f"    memearena parts (s): {parts_line(our_parts)}")
        print(f"    FastChat parts (s): {parts_line(result['parts'])}")
        print(f"    load average (1/5/15 min): {at_start} at start, {load()} at the end")
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
    parser.add_argument("--fastchat", type=Path, help="a FastChat checkout or bare clone")
    parser.add_argument(
        "--baseline-blas-as-found",
        action="store_true",
        help="leave FastChat's BLAS threads as found (default: pinned to 1)",
    )
    parser.add_argument("--fastchat-run", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--ours-parts", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fastchat_run is not None:
        print(json.dumps(fastchat_rank(args.fastchat_run, args.rounds, args.fastchat)))
        return
    if args.ours_parts is not None:
        print(json.dumps(ours_parts(args.ours_parts, args.rounds)))
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
