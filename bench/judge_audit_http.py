"""The Judge audit over HTTP: ``examples/judge-audit.yaml``'s models served by ``sim-serve``
(``--latency-ms`` 200 by default) in its own process, and the audit run against it by the CLI in
a child process, for each source tree given (``--src NAME=PATH``, e.g. this checkout and a
baseline one; ``NAME=PATH@W`` runs that tree with ``W`` image worker threads, 0: the image work
on the event loop), the runs interleaved (the order alternates each round) so machine load falls
on all alike.

Reported per run, from the run's own ``run.db`` (every call paid: start = ``created_at -
latency_s``, end = ``created_at``):

* wall time of the whole command and its stage floor: the sum over the stages (calls by role)
  of the larger of calls x latency / the stage's window (``judge_audit.window``; a quarter of it
  for the responses and descriptions, whose jobs are memes) and the busiest model's calls x
  latency / its concurrency (the stages run one after the other, and no schedule of a stage's
  calls through those bounds finishes sooner), with wall / floor;
* the child's CPU per call and its CPU against the floor, and the CPU of its main thread (the
  event loop's: the CPU that the calls wait behind; work in other threads does not) per call;
* the calls in flight on average over the model stages;
* the leaderboard's Judge audit figures and a digest of the set of request keys
  (``calls.request_hash``): a change of where the image work runs must leave both equal to the
  baseline's (checked: a mismatch is printed as such).

Medians over ``--repeats`` rounds with the range; the load average before and after each run is
printed.

    nice python bench/judge_audit_http.py [--memes 96] [--latency-ms 200] [--concurrency 32]
        [--repeats 3] [--src new=src --src main=/work/main/src]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))

from http_adapt import _free_port, _wait, served_config  # noqa: E402

# The child: the CLI, with the image worker count set when the tree has the knob (``pN``: N
# worker processes instead of threads, started by a fork server, for the comparison only).
_CHILD = (
    "import atexit, sys, time\n"
    "atexit.register(lambda: print('LOOP_CPU', time.thread_time(), file=sys.stderr))\n"
    "w = sys.argv.pop(1)\n"
    "if w != '-':\n"
    "    import memearena.methods.judge_audit.stages as s\n"
    "    s.image_workers = lambda: int(w.lstrip('p'))\n"
    "    if w.startswith('p'):\n"
    "        import concurrent.futures as cf, multiprocessing as mp, types\n"
    "        ctx = mp.get_context('forkserver')\n"
    "        ctx.set_forkserver_preload(['memearena.methods.judge_audit.stages'])\n"
    "        pool = lambda n, **_: cf.ProcessPoolExecutor(n, mp_context=ctx)\n"
    "        s.concurrent = types.SimpleNamespace(futures=types.SimpleNamespace(\n"
    "            ThreadPoolExecutor=pool, Future=cf.Future))\n"
    "from memearena.cli import main\n"
    "sys.argv[0] = 'memearena'\n"
    "main()\n"
)


def http_config(data: Path, base_url: str, concurrency: int) -> dict[str, Any]:
    """``examples/judge-audit.yaml`` with every model an endpoint of the server, on ``data``."""
    return served_config("judge-audit.yaml", "http-judge-audit", data, base_url, concurrency)


def calls(db: Path, latency: float, window: int, concurrency: int) -> dict[str, Any]:
    """Calls paid, the stage floor, the average in flight over the model stages, and the
    request keys' digest."""
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "SELECT created_at - latency_s, created_at, attempts, request_hash, role, model "
            "FROM calls WHERE status NOT IN ('cached', 'budget')"
        ).fetchall()
    finally:
        con.close()
    start = min(r[0] for r in rows)
    end = max(r[1] for r in rows)
    keys = sorted({str(r[3]) for r in rows})
    per: dict[str, dict[str, int]] = {}
    for r in rows:
        m = per.setdefault(r[4], {})
        m[r[5]] = m.get(r[5], 0) + int(r[2])
    floor = 0.0
    for role, models in per.items():
        w = max(1, window // 4) if role.endswith(("respond", "describe")) else window
        floor += latency * max(sum(models.values()) / w, max(models.values()) / concurrency)
    return {
        "floor": floor,
        "calls": sum(int(r[2]) for r in rows),
        "in_flight": sum(r[1] - r[0] for r in rows) / (end - start),
        "keys": len(keys),
        "keys_digest": hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16],
    }


_TIMED = ("seconds", "latency", "elapsed", "wall", "date")
"""Leaderboard fields that are timings or dates (they differ between any two runs): left out."""


def _untimed(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _untimed(x) for k, x in v.items() if not any(t in k for t in _TIMED)}
    if isinstance(v, list):
        return [_untimed(x) for x in v]
    return v


def figures(run_dir: Path) -> str:
    """A digest of the leaderboard (every figure it shows but the timings)."""
    board = json.loads((run_dir / "leaderboard.json").read_text())
    return hashlib.sha256(json.dumps(_untimed(board), sort_keys=True).encode()).hexdigest()[:16]


def one_run(
    src: str, workers: str, cfg_path: Path, out: Path, window: int, latency: float, conc: int
) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=src)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, workers, "judge-audit", "run", str(cfg_path), "--out",
         str(out)],
        env=env,
        capture_output=True,
        text=True,
    )  # fmt: skip
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(
            f"{src}: exit {proc.returncode}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )
    run_dir = next(p.parent for p in out.rglob("run.db"))
    got = calls(run_dir / "run.db", latency, window, conc)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    loop_cpu = float(proc.stderr.rsplit("LOOP_CPU", 1)[1].split()[0])
    floor = got["floor"]
    return {
        "wall": wall,
        "ratio": wall / floor,
        "cpu_floor": cpu / floor,
        "cpu_ms_per_call": 1000 * cpu / got["calls"],
        "loop_cpu_ms_per_call": 1000 * loop_cpu / got["calls"],
        "loop_cpu_floor": loop_cpu / floor,
        "load": (round(load0, 2), round(os.getloadavg()[0], 2)),
        **got,
        "figures": figures(run_dir),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memes", type=int, default=96, help="0: the bundled demo set as it is")
    ap.add_argument("--latency-ms", type=float, default=200.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--window", type=int, default=0, help="judge_audit.window (0: the config's)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--src",
        action="append",
        default=None,
        help="NAME=PATH[@WORKERS] of a source tree to run (repeatable; default this checkout)",
    )
    a = ap.parse_args()
    from scale import write_memes

    srcs: dict[str, tuple[str, str]] = {}
    for s in a.src or [f"this={ROOT / 'src'}"]:
        name, spec = s.split("=", 1)
        path, _, workers = spec.partition("@")
        srcs[name] = (str(Path(path).resolve()), workers or "-")
    latency = a.latency_ms / 1000
    with tempfile.TemporaryDirectory(prefix="memearena-http-audit-") as d:
        tmp = Path(d)
        if a.memes:
            data = write_memes(tmp / "data", a.memes)
        else:
            from memearena.data.demo import demo_dir

            data = demo_dir() / "memes.jsonl"
        port = _free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "memearena", "sim-serve", "--port", str(port), "--latency-ms",
             str(a.latency_ms), "--config", str(ROOT / "examples" / "judge-audit.yaml")],
            env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            _wait(port, server)
            cfg = http_config(data, f"http://127.0.0.1:{port}/v1", a.concurrency)
            if a.window:
                cfg["judge_audit"]["window"] = a.window
            window = int(cfg["judge_audit"].get("window", 256))
            cfg_path = tmp / "judge-audit.yaml"
            cfg_path.write_text(yaml.safe_dump(cfg))
            runs: dict[str, list[dict[str, Any]]] = {k: [] for k in srcs}
            names = list(srcs)
            for r in range(a.repeats):
                for name in names if r % 2 == 0 else names[::-1]:
                    path, workers = srcs[name]
                    out = tmp / f"out-{name}-{r}"
                    got = one_run(path, workers, cfg_path, out, window, latency, a.concurrency)
                    runs[name].append(got)
                    print(json.dumps({"src": name, **got}), flush=True)
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(
        f"\nJudge audit over HTTP: {a.memes} memes, latency {a.latency_ms:g} ms, per-model "
        f"concurrency {a.concurrency}, window {window}; medians of {a.repeats} interleaved runs"
    )
    base = names[-1]
    base_sets = {(x["keys_digest"], x["figures"]) for x in runs[base]}
    for name in names:
        rs = runs[name]

        def med(k: str, rs: list[dict[str, Any]] = rs) -> str:
            v = [float(x[k]) for x in rs]
            return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"

        same = {(x["keys_digest"], x["figures"]) for x in rs} == base_sets
        print(
            f"  {name:<8} wall {med('wall')} s  floor {med('floor')} s  wall/floor {med('ratio')}"
            f"  CPU/floor {med('cpu_floor')}  CPU {med('cpu_ms_per_call')} ms/call  loop thread "
            f"{med('loop_cpu_ms_per_call')} ms/call, /floor {med('loop_cpu_floor')}  in flight "
            f"{med('in_flight')} of {window}  calls {sorted({x['calls'] for x in rs})}  "
            f"keys+figures {'= ' + base if same else 'DIFFER from ' + base}"
        )
    print(f"  load (1-min) before/after each run: {[x['load'] for n in names for x in runs[n]]}")


if __name__ == "__main__":
    main()
