"""Bench: `memearena rank` at arena scale vs FastChat's own code, whole process, parsing included.

Run:  python bench/ranking.py --fastchat DIR              # all sizes, 1000 rounds, medians of 3
      python bench/ranking.py --fastchat DIR --sizes 50x1000000 --repeats 3 --baseline-repeats 1
      python bench/ranking.py --fastchat DIR --sizes 50x1000000 --baseline-src ../main/src
      python bench/ranking.py --readers            # battle-file readers on the largest file
      python bench/ranking.py --blas               # batched solves with BLAS pinned or not
DIR is a FastChat checkout (`git clone https://github.com/lm-sys/FastChat`) or a bare clone of it
(or a folder holding that clone as `repo`); FastChat is never a dependency: its
`fastchat/serve/monitor/rating_systems.py` is loaded from DIR (it needs pandas, scipy and tqdm:
`pip install -e ".[notebook]" tqdm`).

memearena runs from `--src` (default: this checkout's `src`), and `--baseline-src` names another
source tree (e.g. main's) timed in the same runs, interleaved, for a before/after. Each tree runs
from a copy of its package compiled to bytecode, as an installed package is: with
PYTHONDONTWRITEBYTECODE set, a run from the bare tree compiles every memearena module it imports
each time (about 0.1 s of CPU); `--no-bytecode` times the tree as it is.

Arenas are skewed as real ones are: each battle's two models are drawn with log-normal
popularity (σ = --sigma), so many pairs never meet and rare models have a handful of battles;
outcomes follow Bradley–Terry with about 20% ties. Each arena is written as a JSONL battle file
(Chatbot Arena format) and both sides run as separate processes on it:

* memearena: `python -m memearena rank FILE --bootstrap N --json`, for each tree.
* FastChat: how its leaderboard code ranks a battle file: `pandas.read_json(lines=True)`, then
  `rating_systems.compute_elo`, `compute_bt` and `compute_bootstrap_bt` (one multinomial draw of
  all rounds, a `multiprocessing.Pool(os.cpu_count())` of L-BFGS-B fits), percentiles of the
  rounds. Its BLAS is pinned to one thread (`--baseline-blas-as-found` leaves it): its pool
  already fills every core, and BLAS threads inside each small fit only oversubscribe them
  (20x slower per fit on a loaded machine).

Reported per size and tree: wall time (median of --repeats), CPU time (user + sys, the process
and its reading processes or pool workers), peak RSS (largest single process), the ratio
FastChat ÷ memearena, the largest difference between the two point estimates (memearena's is
the exact MLE; FastChat's L-BFGS stops at gtol), every run's wall and CPU, and each side's parts
as wall/CPU seconds, timed in one more run of each (memearena's online Elo and bootstrap draws
overlap the rest in the command; they are timed alone after it too). The machine may be shared:
the load average is printed at the start and end of each size; CPU ratios are the steadier.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
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


def parts_line(parts: dict[str, list[float]]) -> str:
    """Each part as wall/CPU seconds."""
    return ", ".join(f"{k} {wall:.2f}/{cpu:.2f}" for k, (wall, cpu) in parts.items())


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
        t0 = clock()
        rs = load_rating_systems(fastchat, Path(d))
        import pandas as pd

        t1 = clock()
        battles = pd.read_json(path, lines=True)
        t2 = clock()
        elo = rs.compute_elo(battles)
        t3 = clock()
        bt = rs.compute_bt(battles)
        t4 = clock()
        boot = rs.compute_bootstrap_bt(battles, num_round=rounds)
        t5 = clock()
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
        "imports": span(t0, t1),
        "read_json": span(t1, t2),
        "compute_elo": span(t2, t3),
        "compute_bt": span(t3, t4),
        "compute_bootstrap_bt": span(t4, t5),
    }
    return {"models": rows, "parts": parts}


def clock() -> tuple[float, float]:
    """(wall s, CPU s of this process and its reaped children: forked readers, pool workers)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    return time.perf_counter(), cpu


def span(start: tuple[float, float], end: tuple[float, float]) -> list[float]:
    return [end[0] - start[0], end[1] - start[1]]


def ours_parts(path: Path, rounds: int) -> dict[str, list[float]]:
    """memearena's parts in one process, as `rank --json` runs them ([wall, CPU] each), then
    two of them again alone (in the command they overlap the rest)."""
    t0 = clock()
    import memearena.cli.main  # noqa: F401  (what the command imports)
    from memearena.cli import rank as cli_rank
    from memearena.stats import bt
    from memearena.stats.battles import read_battle_table
    from memearena.stats.elo import online_elo_codes
    from memearena.stats.rank_table import rank_table

    t1 = clock()
    workers = cli_rank._cores() if hasattr(cli_rank, "_cores") else 1
    table = read_battle_table(path, workers=workers)
    t2 = clock()
    rank_table(table, bootstrap=rounds, seed=0)
    t3 = clock()
    online_elo_codes(table.model_a, table.model_b, table.score_a, len(table.models))
    t4 = clock()
    bt.resample(table.counts(), rounds, 0)
    t5 = clock()
    return {
        "imports": span(t0, t1),
        f"read (up to {workers} processes)": span(t1, t2),
        "counts + BT + bootstrap + online Elo": span(t2, t3),
        "[alone: online Elo": span(t3, t4),
        "bootstrap draws]": span(t4, t5),
    }


# --- parts ----------------------------------------------------------------------------------------


def baseline_env(args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ, TQDM_DISABLE="1")
    if not args.baseline_blas_as_found:
        env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def tree_env(tree: Path) -> dict[str, str]:
    """The environment that runs memearena from `tree` (a folder holding the package)."""
    return dict(os.environ, PYTHONPATH=str(tree))


def prepare_tree(src: Path, into: Path, bytecode: bool) -> Path:
    """The tree to time: `src` as it is, or (`bytecode`) a copy of its package compiled to
    bytecode, as an installed package is (pip compiles on install), so that a run does not
    compile memearena's modules when PYTHONDONTWRITEBYTECODE is set."""
    if not (src / "memearena" / "__init__.py").is_file():
        raise SystemExit(f"{src}: no memearena package in this folder")
    if not bytecode:
        return src
    shutil.copytree(src / "memearena", into / "memearena", ignore=shutil.ignore_patterns("*.pyc"))
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(into / "memearena")],
        check=True,
        env=dict(os.environ, PYTHONDONTWRITEBYTECODE=""),
    )
    return into


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


def compare_sizes(args: argparse.Namespace, tmp: Path) -> None:
    if not args.no_baseline and args.fastchat is None:
        raise SystemExit("--fastchat DIR (a FastChat checkout or clone) or --no-baseline")
    named = [("memearena", args.src)]
    if args.baseline_src is not None:
        named.append(("baseline-src", args.baseline_src))
    trees = {
        name: prepare_tree(src.resolve(), tmp / f"tree-{k}", not args.no_bytecode)
        for k, (name, src) in enumerate(named)
    }
    fastchat_repeats = 0 if args.no_baseline else args.baseline_repeats or args.repeats
    print(
        f"rank --bootstrap {args.rounds} --json vs FastChat's rating_systems "
        f"(compute_elo + compute_bt + compute_bootstrap_bt, BLAS "
        f"{'as found' if args.baseline_blas_as_found else 'pinned to 1 thread'}), whole "
        f"process; memearena median of {args.repeats}, FastChat of {fastchat_repeats}; "
        f"cores: {os.cpu_count()}"
    )
    for name, src in named:
        how = "as it is" if args.no_bytecode else "a bytecode-compiled copy, as installed"
        print(f"  {name}: {src.resolve()} ({how})")
    header = (
        f"{'models × battles':>18} {'met':>4} {'tree':>12} | {'wall':>7} {'cpu':>6} {'RSS':>7} | "
        f"{'FastChat wall':>13} {'cpu':>6} {'RSS':>7} | {'÷ wall':>6} {'÷ cpu':>6} | {'Δ point':>8}"
    )
    print(header)
    for size in args.sizes.split(","):
        m, n = (int(v) for v in size.split("x"))
        path = tmp / f"arena-{m}x{n}.jsonl"
        met = write_arena(path, m, n, args.sigma, args.seed)
        theirs_out = tmp / "theirs.json"
        at_start = load()
        ours_cmd = [
            sys.executable, "-m", "memearena", "rank", str(path),
            "--bootstrap", str(args.rounds), "--json",
        ]  # fmt: skip
        theirs_cmd = [
            sys.executable, __file__, "--fastchat-run", str(path),
            "--rounds", str(args.rounds), "--fastchat", str(args.fastchat),
        ]  # fmt: skip
        # Interleaved: each tree's run and each FastChat run in turn, so all see the same load.
        ours_runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        outputs = {name: tmp / f"ours-{name}.json" for name in trees}
        theirs_runs = []
        for k in range(max(args.repeats, fastchat_repeats)):
            for name, tree in trees.items():
                if k < args.repeats:
                    ours_runs[name].append(run(ours_cmd, outputs[name], tree_env(tree)))
            if k < fastchat_repeats:
                theirs_runs.append(run(theirs_cmd, theirs_out, baseline_env(args)))
        theirs = median_of(theirs_runs) if theirs_runs else None
        result = json.loads(theirs_out.read_text()) if theirs_runs else None
        for name, tree in trees.items():
            ours = median_of(ours_runs[name])
            rows = json.loads(outputs[name].read_text())["models"]
            parts_out = tmp / "parts.json"
            part_cmd = [
                sys.executable,
                __file__,
                "--ours-parts",
                str(path),
                "--rounds",
                str(args.rounds),
            ]
            run(part_cmd, parts_out, tree_env(tree))
            our_parts = json.loads(parts_out.read_text())
            ours_line = (
                f"{m:>6} × {n:>9,} {met:>4.0%} {name:>12} | {ours['wall']:>5.2f} s "
                f"{ours['cpu']:>5.2f}s {ours['rss']:>5.0f}MB"
            )
            walls = ", ".join(f"{r['wall']:.2f}" for r in ours_runs[name])
            cpus = ", ".join(f"{r['cpu']:.2f}" for r in ours_runs[name])
            if theirs is None or result is None:
                flags = sum(not r["mle"] for r in rows)
                print(f"{ours_line} | rows flagged mle=false: {flags}", flush=True)
            else:
                a = {r["model"]: r["bt"] for r in rows}
                b = {r["model"]: r["bt"] for r in result["models"]}
                delta = max(abs(a[k] - b[k]) for k in a)
                prior = "" if all(r["mle"] for r in rows) else " (no MLE: weak prior used)"
                print(
                    f"{ours_line} | {theirs['wall']:>11.2f} s {theirs['cpu']:>5.1f}s "
                    f"{theirs['rss']:>5.0f}MB | {theirs['wall'] / ours['wall']:>6.1f} "
                    f"{theirs['cpu'] / ours['cpu']:>6.1f} | {delta:>6.3f} Elo{prior}",
                    flush=True,
                )
            print(f"    {name} walls (s): {walls}; CPU (s): {cpus}")
            print(f"    {name} parts (wall/CPU s): {parts_line(our_parts)}")
        if theirs_runs and result is not None:
            their_walls = ", ".join(f"{r['wall']:.1f}" for r in theirs_runs)
            their_cpus = ", ".join(f"{r['cpu']:.1f}" for r in theirs_runs)
            print(f"    FastChat walls (s): {their_walls}; CPU (s): {their_cpus}")
            print(f"    FastChat parts (wall/CPU s): {parts_line(result['parts'])}")
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
        "--src",
        type=Path,
        default=Path(__file__).resolve().parent.parent / "src",
        help="the memearena source tree to time (default: this checkout's src)",
    )
    parser.add_argument(
        "--baseline-src",
        type=Path,
        help="another memearena source tree timed in the same run, interleaved (e.g. main's)",
    )
    parser.add_argument(
        "--no-bytecode",
        action="store_true",
        help="run memearena from the source tree as it is (default: from a bytecode-compiled "
        "copy, as installed)",
    )
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
