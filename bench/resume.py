"""Bench: a no-op resume against the fresh run it resumes, as CLI processes (imports included).

For each source tree (this checkout, and a baseline checkout's ``src`` given with
``--baseline-src``, e.g. the main branch), interleaved: a fresh ``memearena arena`` run over
``--memes`` demo memes (cycled from the bundled set with distinct ids and texts, so every request
is new; simulated models), then ``--noops`` re-runs of the same command on the same directory,
which find every step on record. Reported: CPU (user + sys) of the fresh run and of each no-op
re-run, medians, and their ratio (target: the no-op at most 2% of the fresh run). CPU, not wall
time: the machine may be shared; the load average is printed with each run. The processes keep
their compiled bytecode (in a private cache folder, as an installed package has its ``.pyc``),
so a no-op is not charged for compiling every module again; ``--no-bytecode`` compiles on every
start instead (as with ``PYTHONDONTWRITEBYTECODE``).

    nice python bench/resume.py [--memes 192] [--rounds 2] [--noops 3] [--baseline-src DIR]
                                [--no-bytecode]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

DEMO_ARENA = Path(__file__).resolve().parents[1] / "examples" / "demo-arena.yaml"


def _config(data: Path, into: Path) -> Path:
    text = DEMO_ARENA.read_text()
    text = text.replace("- format: demo", f"- format: demo\n  path: {data}", 1)
    path = into / "arena.yaml"
    path.write_text(text)
    return path


def _run(src: str, config: Path, out: Path, pycache: Path | None) -> tuple[float, float]:
    """(CPU s, wall s) of one `memearena arena CONFIG --out OUT` process (its bytecode kept
    under ``pycache``, or never written when None)."""
    t = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=src)
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    cmd = [sys.executable, "-m", "memearena", "arena", str(config), "--out", str(out)]
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [*cmd, "--no-progress"], stdout=subprocess.DEVNULL, stderr=err, env=env
        )
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) not in (0, 1):
            err.seek(0)
            raise SystemExit(f"{' '.join(cmd)} failed: {err.read().decode()[-500:]}")
    return usage.ru_utime + usage.ru_stime, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--memes", type=int, default=192)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--noops", type=int, default=3)
    ap.add_argument("--baseline-src", help="a baseline checkout's src folder (e.g. main's)")
    ap.add_argument("--no-bytecode", action="store_true", help="compile every module each start")
    a = ap.parse_args()
    from scale import write_memes

    trees = {"this": str(Path(__file__).resolve().parents[1] / "src")}
    if a.baseline_src:
        trees = {"baseline": a.baseline_src, **trees}
    fresh: dict[str, list[float]] = {t: [] for t in trees}
    noop: dict[str, list[float]] = {t: [] for t in trees}
    with tempfile.TemporaryDirectory(prefix="memearena-resume-") as d:
        tmp = Path(d)
        config = _config(write_memes(tmp / "data", a.memes).parent, tmp)
        pycache = None if a.no_bytecode else tmp / "pycache"
        for r in range(a.rounds):
            for name, src in trees.items() if r % 2 == 0 else reversed(trees.items()):
                out = tmp / f"run-{name}"
                shutil.rmtree(out, ignore_errors=True)
                cpu, wall = _run(src, config, out, pycache)
                fresh[name].append(cpu)
                load = os.getloadavg()[0]  # the machine may be shared
                print(f"round {r} {name}: fresh {cpu:.2f} s CPU, {wall:.1f} s, load {load:.1f}")
                for _ in range(a.noops):
                    cpu, wall = _run(src, config, out, pycache)
                    noop[name].append(cpu)
                    print(f"round {r} {name}: no-op CPU {cpu:.3f} s, wall {wall:.2f} s", flush=True)
    kept = "compiled on every start" if a.no_bytecode else "bytecode kept"
    print(f"no-op resume vs fresh run, {a.memes} memes, {kept}, CPU medians (target <= 2%):")
    for name in trees:
        f, n = statistics.median(fresh[name]), statistics.median(noop[name])
        print(
            f"  {name:<8}: fresh {f:6.2f} s, no-op {n:.3f} s "
            f"(range {min(noop[name]):.3f}-{max(noop[name]):.3f}) = {100 * n / f:.2f}%"
        )


if __name__ == "__main__":
    main()
