"""Deterministic instruction counts of a pipeline's run beside the model layer's on the same
calls replayed: the ratio ``bench/adapt.py --percall`` and ``bench/judge_audit.py --percall``
measure in CPU seconds, counted by valgrind's callgrind instead, so that one change shows as a
stable difference rather than inside the ±30% a shared machine adds to CPU time.

The measurement is the percall bench's own child (``child_percall``: one run over ``--memes``
memes with its calls recorded by ``percall.Recorder``, then ``percall.replay`` of those calls
through a fresh pool), re-executed under ``valgrind --tool=callgrind --instr-atstart=no`` with
PYTHONHASHSEED=0. Instrumentation is on only for the two windows that --percall times:

* pipeline: ``AdaptPipeline.run`` / ``JudgeAuditPipeline.run``, from its start to its return;
* replay: from the moment ``percall.replay`` starts its window of calls (``bounded_map``) to the
  moment it closes the replay pool, i.e. its timed region.

Everything the process does in a window counts (the pool's commit tasks, the event loop, the
garbage collector), as it does in process CPU time. Each edge of a window is one ``vgdb``
monitor command (the channel ``callgrind_control`` drives): ``zero`` and ``instrumentation
on`` at the start, ``dump <window>`` and ``instrumentation off`` at the end; vgdb returns only
once valgrind has carried the command out, so an edge is exact up to the few hundred thousand
instructions of the subprocess call around it, the same in every run. Why not the
alternatives: ``--toggle-collect`` counts while a C function is on the stack, and no C frame
spans a coroutine that the event loop resumes beside the tasks it spawns; client requests need
compiled code. With instrumentation off outside the windows (imports, setup, analysis), a run
takes a few minutes at 24 memes.

``--baseline DIR`` runs the same measurement on another checkout (its ``src`` on PYTHONPATH,
this checkout's bench code for both) and prints both with the change in %. Target: pipeline
instructions at most 1.5x the replay's.

    python bench/instructions.py adapt|judge_audit [--memes 24] [--seed 0] [--baseline DIR]
        [--out DIR]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

METHODS = ("adapt", "judge_audit")
WINDOWS = ("pipeline", "replay")
TARGET = 1.5
# The Judge audit's bootstrap rounds shape only its analysis, outside both windows.
JA_BOOTSTRAP = 50
HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Counts:
    """One measurement: instructions of each window and the calls both made."""

    checkout: Path
    calls: int
    pipeline: int
    replay: int
    wall_s: float

    @property
    def ratio(self) -> float:
        return self.pipeline / self.replay


# -- callgrind's output ---------------------------------------------------------------------


def read_dump(path: Path) -> tuple[str, int]:
    """(the dump's trigger, its instructions): the ``desc: Trigger:`` line (``dump <hint>``
    for a dump asked for by a monitor command) and the Ir column of its totals."""
    trigger, events, totals = "", ["Ir"], None
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("desc: Trigger:"):
                trigger = line.split(":", 2)[2].strip()
            elif line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith("totals:") or (totals is None and line.startswith("summary:")):
                totals = line.split()[1:]
    if totals is None or "Ir" not in events:
        raise ValueError(f"{path}: not a callgrind output file with Ir totals")
    return trigger, int(totals[events.index("Ir")])


def window_counts(out: Path) -> dict[str, int]:
    """Instructions per window from the dumps in ``out`` (``callgrind.out.N``), each window
    exactly once; the final dump at exit (instrumentation off) is not a window."""
    found: dict[str, list[int]] = {}
    for path in sorted(out.glob("callgrind.out.*")):
        trigger, ir = read_dump(path)
        if trigger.startswith("dump "):
            found.setdefault(trigger.removeprefix("dump ").strip(), []).append(ir)
    bad = {w: len(found.get(w, [])) for w in WINDOWS if len(found.get(w, [])) != 1}
    if bad or set(found) - set(WINDOWS):
        raise RuntimeError(
            f"callgrind dumps in {out}: expected one each of {', '.join(WINDOWS)}, "
            f"found { ({w: len(v) for w, v in found.items()}) }"
        )
    return {w: found[w][0] for w in WINDOWS}


# -- the child, under valgrind --------------------------------------------------------------


class Windows:
    """Opens and closes the counted windows through vgdb, each at most once, one at a time."""

    def __init__(self, send: Callable[[Sequence[str]], None]) -> None:
        self._send = send
        self.current: str | None = None
        self.done: list[str] = []

    def start(self, name: str) -> None:
        if self.current is not None or name in self.done:
            raise RuntimeError(f"window {name!r} opened twice or inside {self.current!r}")
        self._send(["zero", "instrumentation on"])
        self.current = name

    def stop(self, name: str) -> None:
        if self.current != name:
            raise RuntimeError(f"window {name!r} closed while {self.current!r} is open")
        self._send([f"dump {name}", "instrumentation off"])
        self.current = None
        self.done.append(name)


def vgdb_sender(vgdb: str, prefix: str) -> Callable[[Sequence[str]], None]:
    """Sends monitor commands to this process's valgrind, in order, and returns once done."""
    base = [vgdb, f"--vgdb-prefix={prefix}", f"--pid={os.getpid()}"]

    def send(commands: Sequence[str]) -> None:
        args = list(base)
        for i, command in enumerate(commands):
            args += (["-c"] if i else []) + command.split()
        try:
            # vgdb reaches a process blocked in a system call (here: waiting for vgdb) through
            # ptrace; where ptrace is refused it would wait for ever.
            out = subprocess.run(args, capture_output=True, text=True, check=False, timeout=120)
        except subprocess.TimeoutExpired:
            raise RuntimeError(
                f"vgdb {commands}: no answer in 120 s (is ptrace allowed?)"
            ) from None
        if out.returncode != 0:
            raise RuntimeError(f"vgdb {commands} failed: {out.stderr.strip()[-500:]}")

    return send


def child(method: str, memes: int, seed: int, windows: Windows) -> dict[str, Any]:
    """The percall child of ``method`` with its two windows marked."""
    import percall

    from memearena.models import ModelPool

    # bench/adapt.py or bench/judge_audit.py, with the demo world's seed set in the config
    # builder its child_percall calls.
    bench: Any = importlib.import_module(method)
    pipeline: type[Any]
    if method == "adapt":
        from memearena.methods.adapt.stages import AdaptPipeline as pipeline

        bench.adapt_demo_config = partial(bench.adapt_demo_config, seed=seed)
        run_child = partial(bench.child_percall, memes)
    else:
        from memearena.methods.judge_audit.stages import JudgeAuditPipeline as pipeline

        bench.demo_config = partial(bench.demo_config, seed=seed)
        run_child = partial(bench.child_percall, memes, JA_BOOTSTRAP)

    # Installed before child_percall wraps run for its CPU time: the window lies inside it.
    run = pipeline.run

    async def counted_run(self: Any, *a: Any, **kw: Any) -> Any:
        windows.start("pipeline")
        try:
            return await run(self, *a, **kw)
        finally:
            windows.stop("pipeline")

    pipeline.run = counted_run

    # replay times its bounded_map over the calls and closes the pool after: the same window.
    window_map = percall.bounded_map

    def counted_map(*a: Any, **kw: Any) -> Any:
        windows.start("replay")
        return window_map(*a, **kw)

    percall.bounded_map = counted_map  # type: ignore[assignment]
    aclose = ModelPool.aclose

    async def counted_aclose(self: ModelPool) -> None:
        if windows.current == "replay":
            windows.stop("replay")
        await aclose(self)

    ModelPool.aclose = counted_aclose  # type: ignore[method-assign]

    result = run_child()
    if windows.done != list(WINDOWS):
        raise RuntimeError(f"windows counted: {windows.done}, expected {list(WINDOWS)}")
    import memearena

    return {"calls": result["calls"], "memearena": str(Path(memearena.__file__).resolve())}


# -- the parent -----------------------------------------------------------------------------


def tools() -> tuple[str, str]:
    """valgrind and vgdb (valgrind's own package ships both), or one line naming the missing."""
    found = {name: shutil.which(name) for name in ("valgrind", "vgdb")}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise SystemExit(
            f"bench/instructions.py: {' and '.join(missing)} not found on PATH; instruction "
            "counts need valgrind's callgrind (Debian/Ubuntu: apt-get install valgrind)"
        )
    return found["valgrind"] or "", found["vgdb"] or ""


def checkout_src(checkout: Path) -> Path:
    src = checkout.resolve() / "src"
    if not (src / "memearena" / "__init__.py").is_file():
        raise SystemExit(f"bench/instructions.py: {checkout} has no src/memearena to measure")
    return src


def measure(checkout: Path, method: str, memes: int, seed: int, out: Path, valgrind: str) -> Counts:
    """The child under callgrind with ``checkout``'s src on PYTHONPATH; its dumps in ``out``."""
    src = checkout_src(checkout)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("callgrind.out*"):
        old.unlink()
    env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=str(src))
    cmd = [
        valgrind,
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={out / 'callgrind.out'}",
        f"--vgdb-prefix={out / 'vgdb'}",
        f"--log-file={out / 'valgrind.log'}",
        sys.executable,
        str(Path(__file__).resolve()),
        method,
        "--memes",
        str(memes),
        "--seed",
        str(seed),
        "--child",
        str(out / "vgdb"),
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        log = out / "valgrind.log"
        tail = log.read_text(errors="replace")[-1500:] if log.exists() else ""
        raise SystemExit(
            f"bench/instructions.py: the run under valgrind failed ({proc.returncode}):\n"
            f"{proc.stderr[-3000:]}{tail}"
        )
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    if not Path(info["memearena"]).is_relative_to(src):
        raise SystemExit(f"measured {info['memearena']}, not the checkout's {src}")
    counts = window_counts(out)
    return Counts(checkout.resolve(), info["calls"], counts["pipeline"], counts["replay"], wall)


def line(c: Counts) -> str:
    return (
        f"pipeline {c.pipeline / 1e6:9,.0f}M instr ({c.pipeline / c.calls / 1e3:7,.1f}k/call)  "
        f"replay {c.replay / 1e6:9,.0f}M ({c.replay / c.calls / 1e3:7,.1f}k/call)  "
        f"ratio {c.ratio:.3f}x (target <= {TARGET}x)"
    )


def report(new: Counts, base: Counts | None) -> list[str]:
    rows = [
        f"  {new.checkout}: {new.calls} calls, {new.wall_s:.0f} s under valgrind",
        f"    {line(new)}",
    ]
    if base is not None:
        rows += [
            f"  baseline {base.checkout}: {base.calls} calls, {base.wall_s:.0f} s under valgrind",
            f"    {line(base)}",
        ]

        def pct(a: float, b: float) -> str:
            return f"{100 * (a / b - 1):+.2f}%"

        rows.append(
            f"  change: pipeline {pct(new.pipeline, base.pipeline)}, replay "
            f"{pct(new.replay, base.replay)}, ratio {pct(new.ratio, base.ratio)}"
            + ("" if new.calls == base.calls else f" (calls {base.calls} -> {new.calls})")
        )
    return rows


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("method", choices=METHODS)
    ap.add_argument("--memes", type=int, default=24, help="memes in the run (default 24)")
    ap.add_argument("--seed", type=int, default=0, help="the demo world's seed (default 0)")
    ap.add_argument("--baseline", type=Path, help="another checkout to measure the same way")
    ap.add_argument("--out", type=Path, help="keep the callgrind files here (for annotate)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.memes < 1:
        ap.error("--memes must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    if args.child:
        vgdb = shutil.which("vgdb")
        assert vgdb is not None
        windows = Windows(vgdb_sender(vgdb, args.child))
        print(json.dumps(child(args.method, args.memes, args.seed, windows)))
        return
    valgrind, _ = tools()
    checkouts = {"current": HERE.parent}
    if args.baseline is not None:
        checkout_src(args.baseline)
        checkouts["baseline"] = args.baseline
    print(
        f"{args.method}, {args.memes} memes, seed {args.seed}: instructions (callgrind, "
        "PYTHONHASHSEED=0) of the pipeline's run and of the same calls replayed through the "
        "model layer",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="memearena-bench-instr-") as tmp:
        root = args.out or Path(tmp)
        results = {
            name: measure(path, args.method, args.memes, args.seed, root / name, valgrind)
            for name, path in checkouts.items()
        }
        for row in report(results["current"], results.get("baseline")):
            print(row)
        if args.out is not None:
            print(f"  callgrind files under {args.out}/*/callgrind.out.N (callgrind_annotate)")


if __name__ == "__main__":
    main()
