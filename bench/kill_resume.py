"""Kill + resume against the simulated server, counted at the server.

A method's example config is served by ``sim-serve``'s world (its ``provider: sim`` models
behind the OpenAI-compatible server on loopback, with faults), and run over HTTP by the CLI
(``memearena run METHOD``) in a child process. The child gets a signal (``--signal KILL``: a
SIGKILL; ``TERM``: a polite stop) at a random moment ``--min-s`` to ``--max-s`` seconds after
its first request reaches the server, ``--kills`` times, each time resumed with
the same command, then resumed until it completes. Every request body the server billed more
than once is then counted and put in one of these kinds:

- ``recorded``: its reply was on record as ``ok`` in run.db at the kill before the repeat
  (must be 0: a reply on record is never paid again);
- ``in_flight``: a kill left a call of the request ``sent`` in run.db (it was in flight at
  the kill: its reply, billed before or after the kill, was never recorded);
- ``garbled``: its earlier reply was a malformed one (a fault the server injected), asked
  again by design;
- ``same_run``: neither (a refusal or a dropped answer asked again, or a second send of one
  request by one run).

Beside them: per kill, the calls the kill left ``sent`` in run.db (in flight at the kill, from
the run's side), and how long a polite stop took. The request behind a billed reply is found
by its ``Idempotency-Key`` (``memearena.models.backends.idempotency_key`` of the request key).
With ``--idempotency`` the server honours that key (replays the reply it billed, unbilled).

    python bench/kill_resume.py --method adapt --fail-rate 0.2 --kills 5 --signal KILL
        [--limit N] [--seed S] [--idempotency] [--min-s 1] [--max-s 8]

Prints one JSON line; load is printed with it (figures of a noisy, shared machine).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from memearena.config import SimModelConfig, load_config
from memearena.engine.registry import get_method, method_names
from memearena.models.backends import idempotency_key
from memearena.sim.serve import config_world
from memearena.sim.server import BackgroundServer

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CONFIGS = {
    "arena": "demo-arena.yaml",
    "adapt": "adapt.yaml",
    "judge_audit": "judge-audit.yaml",
}


def http_config(method: str, base_url: str, tmp: Path, limit: int | None) -> Path:
    """The method's example config with every simulated model behind ``base_url``."""
    raw = yaml.safe_load((EXAMPLES / CONFIGS[method]).read_text())
    for name, m in list(raw["models"].items()):
        if m.get("provider") == "sim":
            raw["models"][name] = {
                "provider": "openai",
                "base_url": base_url,
                "model": name,
                "family": m.get("family", name),
                "price": {"input": 2.0, "output": 8.0},
                "timeout": 3.0,
                "max_retries": 8,
            }
    if limit is not None:
        for d in raw["data"]:
            d["limit"] = limit
    path = tmp / "http.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def db_state(db: Path) -> tuple[set[str], dict[int, str], set[str]]:
    """Request keys with an ``ok`` reply on record, calls left ``sent`` (id -> request key),
    every request key."""
    if not db.exists():
        return set(), {}, set()
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        ok = {
            r[0]
            for r in con.execute(
                "SELECT request_hash FROM calls WHERE status='ok' AND dropped=0"
                " AND response IS NOT NULL AND response != ''"
            )
        }
        sent = dict(con.execute("SELECT id, request_hash FROM calls WHERE status='sent'"))
        keys = {r[0] for r in con.execute("SELECT DISTINCT request_hash FROM calls")}
    finally:
        con.close()
    return ok, sent, keys


def call_statuses(db: Path) -> dict[str, set[str]]:
    """Per request key, the statuses (and ``dropped``) of its calls on record."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        out: dict[str, set[str]] = {}
        for key, status, dropped, kind in con.execute(
            "SELECT request_hash, status, dropped, error_kind FROM calls"
        ):
            label = "dropped" if dropped else (f"{status}:{kind}" if kind else status)
            out.setdefault(key, set()).add(label)
    finally:
        con.close()
    return out


def child(method: str, cfg: Path, out: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "memearena", "run", method, str(cfg), "--out", str(out)]
    return subprocess.Popen(
        [*cmd, "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--method", choices=sorted(CONFIGS), required=True)
    ap.add_argument("--fail-rate", type=float, default=0.0)
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--signal", choices=["KILL", "TERM", "INT"], default="KILL")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--idempotency", action="store_true")
    ap.add_argument("--min-s", type=float, default=1.0)
    ap.add_argument("--max-s", type=float, default=8.0)
    args = ap.parse_args()
    sig = getattr(signal, f"SIG{args.signal}")
    rng = random.Random(args.seed)
    for name in method_names():
        get_method(name)  # every method's part of the simulated world
    load = os.getloadavg()
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="memearena-kill-") as d:
        tmp = Path(d)
        sim_cfg = load_config(EXAMPLES / CONFIGS[args.method])
        world, names = config_world(sim_cfg)
        assert all(isinstance(sim_cfg.models[n], SimModelConfig) for n in sim_cfg.models)
        with BackgroundServer(
            world,
            process=True,
            models=names,
            fail_rate=args.fail_rate,
            seed=args.seed,
            hang_s=4.0,
            retry_after_s=0.05,
            idempotency=args.idempotency,
            log_billed=True,
        ) as srv:
            cfg = http_config(args.method, srv.base_url, tmp, args.limit)
            run_name = yaml.safe_load(cfg.read_text())["run"]
            db = tmp / "out" / run_name / "run.db"
            kills: list[dict[str, Any]] = []
            codes: list[int] = []
            unsettled: dict[int, str] = {}
            for _ in range(args.kills):
                seen = srv.stats()["requests"]
                proc = child(args.method, cfg, tmp / "out")
                # The signal comes at a random moment after the child's first request (a
                # signal during its start-up would find nothing in flight).
                while srv.stats()["requests"] == seen and proc.poll() is None:
                    time.sleep(0.05)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(rng.uniform(args.min_s, args.max_s))
                if proc.poll() is not None:  # it ended before the signal: a complete run
                    codes.append(proc.returncode)
                    break
                t_kill = time.time()
                proc.send_signal(sig)
                proc.wait()
                t_exit = time.time()
                ok, sent, _ = db_state(db)
                new_sent = {i: k for i, k in sent.items() if i not in unsettled}
                unsettled = sent
                kills.append(
                    {
                        "at": t_kill,
                        "exit": proc.returncode,
                        "stop_s": round(t_exit - t_kill, 2),
                        "left_sent": len(new_sent),
                        "in_flight": set(new_sent.values()),
                        "ok": ok,
                    }
                )
            else:
                for _ in range(5):  # resumed until complete (a run may end incomplete)
                    proc = child(args.method, cfg, tmp / "out")
                    err = proc.communicate()[1]
                    codes.append(proc.returncode)
                    if proc.returncode == 0:
                        break
                    sys.stderr.write(err.decode(errors="replace")[-2000:])
            with urllib.request.urlopen(f"{srv.base_url}/stats/billed", timeout=30) as r:
                billed = json.loads(r.read())
            stats = srv.stats()
        _, _, keys = db_state(db)
        statuses = call_statuses(db)
    # The request behind a billed reply, by its Idempotency-Key (its first twelve lineages).
    request_of = {idempotency_key(k, g): k for k in keys for g in range(12)}
    by_body: dict[str, list[list[Any]]] = {}
    for row in billed:
        by_body.setdefault(row[2], []).append(row)
    kinds = {"recorded": 0, "in_flight": 0, "garbled": 0, "same_run": 0}
    same_run: dict[str, int] = {}
    for rows in by_body.values():
        rows.sort(key=lambda r: r[1])
        for prev, nxt in itertools.pairwise(rows):
            if prev[4] == "malformed":
                kinds["garbled"] += 1
                continue
            request = request_of.get(prev[3] or "")
            # Recorded: on record as ok at a kill after the earlier reply was billed and before
            # the repeat arrived. In flight: a call of the request a kill left ``sent`` (the
            # server may read and bill it after its client was killed).
            before = [k for k in kills if prev[1] <= k["at"] <= nxt[0]]
            if before and request in before[-1]["ok"]:
                kinds["recorded"] += 1
            elif any(request in k["in_flight"] for k in kills):
                kinds["in_flight"] += 1
            else:
                kinds["same_run"] += 1
                record = ",".join(sorted(statuses.get(request or "", ()))) or "no record"
                same_run[f"{prev[5]} ({record})"] = same_run.get(f"{prev[5]} ({record})", 0) + 1
    print(
        json.dumps(
            {
                "method": args.method,
                "fail_rate": args.fail_rate,
                "signal": args.signal,
                "idempotency": args.idempotency,
                "limit": args.limit,
                "kills": len(kills),
                "exit_codes": [k["exit"] for k in kills] + codes,
                "completed": bool(codes) and codes[-1] == 0,
                "billed": len(billed),
                "bodies": len(by_body),
                "paid_twice": sum(len(r) - 1 for r in by_body.values()),
                "paid_twice_by_kind": kinds,
                "same_run_by_role_and_record": same_run,
                "left_sent_at_kills": [k["left_sent"] for k in kills],
                "stop_s": [k["stop_s"] for k in kills],
                "replayed_unbilled": stats.get("replayed", 0),
                "unmatched_keys": sum(1 for r in billed if r[3] not in request_of),
                "wall_s": round(time.perf_counter() - t_start, 1),
                "load": [round(x, 2) for x in load],
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
