"""How close Adapt's dry run comes to the run it plans, against endpoints whose replies it
cannot know: ``examples/adapt.yaml`` with every model an OpenAI-compatible endpoint served by
``memearena sim-serve`` on loopback. Prints the planned point estimate, the planned range and
the calls the run then made (new calls, counted by the client), and the point's error.

    PYTHONPATH=src python bench/adapt_plan.py [--limit N] [--seed S]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise SystemExit(f"sim-serve exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit("sim-serve did not start")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", type=Path, default=REPO / "examples" / "adapt.yaml")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument(
        "--catalogue",
        action="store_true",
        help="serve the demo catalogue only (not the config's own simulated profiles)",
    )
    args = ap.parse_args()

    from memearena.config import load_config
    from memearena.engine.lifecycle import plan_method, run_method

    raw = yaml.safe_load(args.config.read_text(encoding="utf-8"))
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    cmd = [sys.executable, "-m", "memearena", "sim-serve", "--port", str(port)]
    if not args.catalogue:
        cmd += ["--config", str(args.config)]
    if args.seed is not None:  # the server's world is seeded as the plan's stand-ins are
        cmd += ["--seed", str(args.seed)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait(port, proc)
        for name, m in raw["models"].items():
            raw["models"][name] = {
                "provider": "openai",
                "base_url": f"http://127.0.0.1:{port}/v1",
                "model": name,
                "family": m.get("family", name),
                "max_concurrency": 16,
            }
        if args.limit is not None:
            for entry in raw["data"]:
                entry["limit"] = args.limit
        if args.seed is not None:
            raw["seed"] = args.seed
        with tempfile.TemporaryDirectory() as tmp:
            cfg_path = Path(tmp) / "adapt-endpoints.yaml"
            cfg_path.write_text(yaml.safe_dump(raw), encoding="utf-8")
            cfg = load_config(cfg_path)
            t0 = time.perf_counter()
            plan = plan_method("adapt", cfg)
            t_plan = time.perf_counter() - t0
            t0 = time.perf_counter()
            result = run_method("adapt", cfg, Path(tmp) / "run", show_progress=False)
            t_run = time.perf_counter() - t0
        made = result.new_calls
        low, high = getattr(plan, "calls_low", None), getattr(plan, "calls_high", None)
        load = os.getloadavg()[0]
        served = "demo catalogue" if args.catalogue else "the config's profiles"
        print(
            f"config {args.config.name}, limit {args.limit}, seed {cfg.seed}, sim-serve "
            f"serving {served}; load {load:.1f}"
        )
        print(
            f"planned {plan.calls:,} (range {low}-{high}), made {made:,}, "
            f"error {100 * (plan.calls - made) / made:+.2f}%  "
            f"(plan {t_plan:.1f}s, run {t_run:.1f}s)"
        )
        if low is not None and high is not None:
            print(f"made within the range: {low <= made <= high}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
