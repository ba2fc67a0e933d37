"""Adapt over HTTP: ``examples/adapt.yaml``'s models served by ``sim-serve`` (``--latency-ms``
200 by default) in its own process, and Adapt run against it by the CLI in a child process, for
each source tree given (``--src NAME=PATH``, e.g. the current checkout and a baseline one), the
runs interleaved (the order alternates each round) so machine load falls on both alike.

Reported per run, from the run's own ``run.db`` (every call paid: start = ``created_at -
latency_s``, end = ``created_at``):

* wall time of the whole command, and its window floor: calls x latency / ``adapt.window`` (no
  schedule of those calls through that window can finish sooner), with wall / floor;
* calls in flight on average: the calls' summed duration over the wall time of the model
  stages (first start to last end), against ``adapt.window`` (which bounds jobs, and a job may
  ask several calls at once: the average can pass it);
* the child's CPU per call;
* the leaderboard's figures (per target: failure rate and its interval, the original-image
  figure, the refinement figures) and the calls per role: a change of schedule must leave them
  equal to the baseline's.

Medians over ``--repeats`` rounds; the load average before and after each run is printed.
``--memes 0`` runs the bundled demo set as it is (``examples/adapt.yaml`` exactly); ``--dry-run``
also prints each tree's dry run of the same config (planned calls) against the calls made.

    nice python bench/http_adapt.py [--memes 48] [--latency-ms 200] [--concurrency 32]
        [--repeats 3] [--src new=src --src main=/work/main/src]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(port: int, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"sim-serve exited ({proc.returncode})")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("sim-serve did not start listening")


def served_config(
    example: str, run: str, data: Path, base_url: str, concurrency: int
) -> dict[str, Any]:
    """``examples/<example>`` with every model an endpoint of the server at ``base_url``, on
    ``data``, no response cache, as run ``run``."""
    cfg = yaml.safe_load((ROOT / "examples" / example).read_text())
    cfg["models"] = {
        name: {
            "provider": "openai",
            "model": name,
            "base_url": base_url,
            "family": m.get("family"),
            "max_concurrency": concurrency,
            "timeout": 60,
        }
        for name, m in cfg["models"].items()
    }
    cfg["data"] = [{"format": "demo", "path": str(data)}]
    cfg["cache"] = False
    cfg["run"] = run
    return cfg


def http_config(data: Path, base_url: str, concurrency: int) -> dict[str, Any]:
    """``examples/adapt.yaml`` with every model an endpoint of the server, on ``data``."""
    return served_config("adapt.yaml", "http-adapt", data, base_url, concurrency)


def in_flight(db: Path) -> dict[str, Any]:
    """Calls paid, per role, and the average number in flight over the model stages."""
    con = sqlite3.connect(db)
    try:
        rows = con.execute(
            "SELECT role, created_at - latency_s, created_at, attempts FROM calls "
            "WHERE status NOT IN ('cached', 'budget')"
        ).fetchall()
    finally:
        con.close()
    roles: dict[str, int] = {}
    for role, _, _, attempts in rows:  # attempts: the requests sent (re-tries included)
        roles[role] = roles.get(role, 0) + int(attempts)
    start = min(r[1] for r in rows)
    end = max(r[2] for r in rows)
    busy = sum(r[2] - r[1] for r in rows)
    return {
        "calls": sum(roles.values()),
        "rows": len(rows),
        "roles": dict(sorted(roles.items())),
        "span": end - start,
        "in_flight": busy / (end - start),
    }


def figures(run_dir: Path) -> dict[str, Any]:
    """The leaderboard's Adapt figures that a schedule must not change."""
    board = json.loads((run_dir / "leaderboard.json").read_text())["adapt"]
    out: dict[str, Any] = {}
    for m in board["models"]:
        out[m["model"]] = {k: v for k, v in m.items() if not isinstance(v, (dict, list))}
    out["chains_total"] = board.get("chains_total")
    out["weaknesses"] = board.get("weaknesses")
    return out


def dry_run(src: str, cfg_path: Path, out: Path) -> int:
    """The calls a tree's dry run of the config plans (its table's total)."""
    proc = subprocess.run(
        [sys.executable, "-m", "memearena", "adapt", "run", str(cfg_path), "--dry-run", "--out",
         str(out)],
        env=dict(os.environ, PYTHONPATH=src, COLUMNS="200"),
        capture_output=True,
        text=True,
    )  # fmt: skip
    for line in proc.stdout.splitlines():
        cells = [c.strip() for c in line.replace("│", "|").split("|")]
        if len(cells) > 3 and cells[1] == "total":
            return int(cells[3].replace(",", ""))
    raise SystemExit(f"{src}: no dry-run total\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")


def one_run(src: str, cfg_path: Path, out: Path, window: int, latency: float) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=src)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load0 = os.getloadavg()[0]
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "memearena", "adapt", "run", str(cfg_path), "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(
            f"{src}: exit {proc.returncode}\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )
    run_dir = next(p.parent for p in out.rglob("run.db"))
    got = in_flight(run_dir / "run.db")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    floor = got["calls"] * latency / window
    return {
        "wall": wall,
        "floor": floor,
        "ratio": wall / floor,
        "cpu_ms_per_call": 1000 * cpu / got["calls"],
        "load": (load0, os.getloadavg()[0]),
        **got,
        "figures": figures(run_dir),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memes", type=int, default=48, help="0: the bundled demo set as it is")
    ap.add_argument("--dry-run", action="store_true", help="also plan each tree's dry run")
    ap.add_argument("--latency-ms", type=float, default=200.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--src",
        action="append",
        default=None,
        help="NAME=PATH of a source tree to run (repeatable; default this checkout's src)",
    )
    a = ap.parse_args()
    from scale import write_memes

    srcs = dict(s.split("=", 1) for s in (a.src or [f"this={ROOT / 'src'}"]))
    srcs = {k: str(Path(v).resolve()) for k, v in srcs.items()}
    latency = a.latency_ms / 1000
    with tempfile.TemporaryDirectory(prefix="memearena-http-adapt-") as d:
        tmp = Path(d)
        if a.memes:
            data = write_memes(tmp / "data", a.memes)
        else:
            from memearena.data.demo import demo_dir

            data = demo_dir() / "memes.jsonl"
        port = _free_port()
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memearena",
                "sim-serve",
                "--port",
                str(port),
                "--latency-ms",
                str(a.latency_ms),
                "--config",
                str(ROOT / "examples" / "adapt.yaml"),
            ],
            env=dict(os.environ, PYTHONPATH=str(ROOT / "src")),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait(port, server)
            cfg = http_config(data, f"http://127.0.0.1:{port}/v1", a.concurrency)
            window = int(cfg.get("adapt", {}).get("window", 64))
            cfg_path = tmp / "adapt.yaml"
            cfg_path.write_text(yaml.safe_dump(cfg))
            runs: dict[str, list[dict[str, Any]]] = {k: [] for k in srcs}
            planned = (
                {k: dry_run(v, cfg_path, tmp / f"dry-{k}") for k, v in srcs.items()}
                if a.dry_run
                else {}
            )
            names = list(srcs)
            for r in range(a.repeats):
                for name in names if r % 2 == 0 else names[::-1]:
                    out = tmp / f"out-{name}-{r}"
                    got = one_run(srcs[name], cfg_path, out, window, latency)
                    runs[name].append(got)
                    print(
                        json.dumps(
                            {"src": name, **{k: v for k, v in got.items() if k != "figures"}}
                        ),
                        flush=True,
                    )
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(
        f"\nAdapt over HTTP: {a.memes} memes, latency {a.latency_ms:g} ms, per-model concurrency "
        f"{a.concurrency}, window {window}; medians of {a.repeats} interleaved runs"
    )
    base = names[-1]
    for name in names:
        rs = runs[name]
        med = {k: statistics.median(float(x[k]) for x in rs) for k in ("wall", "floor", "ratio")}
        slots = statistics.median(x["in_flight"] for x in rs)
        cpu = statistics.median(x["cpu_ms_per_call"] for x in rs)
        calls = sorted({x["calls"] for x in rs})
        ratios = ", ".join(f"{x['ratio']:.2f}" for x in rs)
        flights = ", ".join(f"{x['in_flight']:.1f}" for x in rs)
        print(
            f"  {name:<6} wall {med['wall']:6.1f} s  floor {med['floor']:5.1f} s  wall/floor "
            f"{med['ratio']:.2f} (runs {ratios})  in flight {slots:4.1f} of {window} "
            f"(runs {flights})  calls {calls}  CPU {cpu:.2f} ms/call"
        )
    for name, n in planned.items():
        made = statistics.median(x["rows"] for x in runs[name])
        print(
            f"  {name:<6} dry run planned {n:,} calls; the runs made {made:,.0f} "
            f"({100 * (made - n) / n:+.2f}%)"
        )
    loads = [v for rs in runs.values() for x in rs for v in x["load"]]
    print(f"  load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cpus")
    ref = runs[base][0]
    for name in names:
        for x in runs[name]:
            same = x["figures"] == ref["figures"] and x["roles"] == ref["roles"]
            if not same:
                print(f"  DIFFERENT from {base}'s first run: {name}")
                print("   ", json.dumps(x["roles"]), "\n   ", json.dumps(ref["roles"]))
                break
        else:
            print(f"  {name}: leaderboard figures and calls per role equal to {base}'s")


if __name__ == "__main__":
    main()
