"""The run lifecycle, written once for every method.

``run_method`` opens (or creates) the run directory — the lock, the store, the dataset binding,
the config snapshot with prompt hashes — checks every needed API key before any call, builds the
pool (cache, spend cap, batch), runs the method, accounts for it (spend and its upper bound
from the store, steps reused / new per stage) and finishes it: the status with its problems and
exit code, the method's section merged into ``leaderboard.json`` atomically, the report, and
the console summary (``print_run_summary``). ``plan_method`` is the dry run: the same code path
against stand-ins. The lifecycle sees a method only through ``memearena.engine.protocol.Method``,
found by name in ``memearena.engine.registry``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from memearena.config import RunConfig
from memearena.engine.leaderboard import merge_leaderboard, read_leaderboard
from memearena.engine.plan import AsServed, PlannedCalls, planned_from_calls, stand_in_config
from memearena.engine.pool import CACHE_FILE, check_keys, open_pool, sim_world
from memearena.engine.progress import StageProgress
from memearena.engine.protocol import Finished, Method, MethodRun, RunContext
from memearena.engine.registry import get_method, load_view, method_names, method_spec
from memearena.engine.rundir import open_run_dir, run_facts
from memearena.engine.status import (
    RunStatus,
    directory_status,
    print_run_status,
    status_from_record,
    status_record,
)
from memearena.engine.steps import StageCount, counting_steps, fewer_collections
from memearena.report.inputs import rendered_inputs
from memearena.report.safe import console_safe
from memearena.store import RunStore

__all__ = [
    "RunResult",
    "env_flag",
    "plan_method",
    "print_run_summary",
    "report_inputs",
    "run_method",
    "write_run_report",
]


@dataclass
class RunResult:
    """Where a finished (or stopped) run of one method left its outputs, and its verdict."""

    method: str
    title: str
    run_dir: Path
    leaderboard: dict[str, Any]
    """The whole ``leaderboard.json`` as written (every method's keys)."""
    status: RunStatus
    """What is missing, why, the spend and the exit code (``memearena.engine.status``)."""
    new_calls: int
    """Calls this invocation paid for (not cached, not over budget)."""
    cost_usd: float
    """Everything the run directory's calls cost (settled), every invocation."""
    outcome: Any
    """The method's own outcome (the Arena: one ``ArenaOutcome`` per setting)."""
    outputs: tuple[str, ...] = ()
    stages: dict[str, StageCount] = field(default_factory=dict)
    """Per stage: steps reused from the run directory, newly computed, and failed."""
    analysis_reused: bool = False
    """The section was unchanged: the previous one was kept rather than recomputed."""
    interrupted: int | None = None
    """The signal (SIGINT, SIGTERM) that stopped the run politely, or None."""
    report_kept: str | None = None
    """``report.html`` was made from exactly this run's inputs (``report_inputs``) and was
    kept, not rendered again: the date it shows (that of the run that rendered it); None when
    this run wrote it."""

    @property
    def stopped(self) -> str | None:
        """Why the run stopped early (the spend cap), or None."""
        return self.status.stopped

    @property
    def section(self) -> dict[str, Any]:
        """The method's section of the leaderboard (empty when it wrote none)."""
        sec = self.leaderboard.get(self.method)
        return sec if isinstance(sec, dict) else {}

    @property
    def exit_code(self) -> int:
        """0 complete, 1 incomplete or nothing usable, 3 spend cap reached; 128 + the signal's
        number for a run a signal stopped (130 for SIGINT, 143 for SIGTERM)."""
        if self.interrupted is not None:
            return 128 + self.interrupted
        return self.status.exit_code

    def resume_line(self) -> str:
        """``contexts: reused N, new M · answers: ...`` (failed steps too, when any)."""
        parts = []
        for stage, c in self.stages.items():
            text = f"{stage}: reused {c.reused:,}, new {c.new:,}"
            if c.failed:
                text += f", failed {c.failed:,} (retried on re-run)"
            parts.append(text)
        return " · ".join(parts)


STOP_GRACE_S = 10.0
"""After SIGINT or SIGTERM, how long the calls in flight have to get their replies and be
recorded (no call starts after the signal; a second signal exits at once)."""

INTERRUPTED = "interrupted by"
"""How the reason of a polite stop begins (``RunStatus.stopped``)."""


class _PoliteStop:
    """SIGINT / SIGTERM during a run: the first stops the pool politely (``ModelPool.interrupt``:
    no new call, the calls in flight finish within ``STOP_GRACE_S`` and are recorded, then the
    run finishes as a stopped one and is resumed by the same command); a second exits at once,
    as a kill does (what is committed stays: run.db is write-ahead)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.pool: Any = None

    def reason(self) -> str:
        name = signal.Signals(self.signum).name if self.signum is not None else "a signal"
        return (
            f"{INTERRUPTED} {name}: no call was started after it, the calls in flight were "
            "finished and recorded; re-run the same command to continue"
        )

    def __call__(self, signum: int, frame: object) -> None:
        if self.signum is not None:
            os._exit(128 + signum)
        self.signum = signum
        if self.loop is None:  # not calling models: the run's outputs are being written
            sys.stderr.write(
                "stopping once the outputs are written (signal again to exit at once)\n"
            )
            return
        sys.stderr.write(
            f"stopping: no new calls; the calls in flight have {STOP_GRACE_S:g} s to finish "
            "and be recorded (signal again to exit at once)\n"
        )
        self.arm()

    def arm(self) -> None:
        """Stop the pool, if a signal came and the run's event loop is up."""
        if self.signum is not None and self.loop is not None and self.pool is not None:
            with contextlib.suppress(RuntimeError):  # the loop has just closed
                self.loop.call_soon_threadsafe(self.pool.interrupt, self.reason(), STOP_GRACE_S)


@contextlib.contextmanager
def _polite_stop() -> Iterator[_PoliteStop]:
    """Handle SIGINT and SIGTERM as a polite stop while the run goes on (only in the main
    thread, where Python delivers signals); the previous handlers are put back after."""
    stop = _PoliteStop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, stop)
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _stopped_by_signal(status: RunStatus) -> bool:
    return bool(status.stopped and status.stopped.startswith(INTERRUPTED))


def _method(name: str, cfg: RunConfig, options: Mapping[str, Any]) -> Method:
    return get_method(name)(cfg, options)


def run_method(
    name: str,
    cfg: RunConfig,
    run_dir: str | Path,
    *,
    max_cost: float | None = None,
    cache_path: Path | None = None,
    console: Console | None = None,
    show_progress: bool = True,
    bootstrap: int | None = None,
    **options: Any,
) -> RunResult:
    """Run (or resume) method ``name`` in ``run_dir``: outputs written, verdict returned."""
    run_dir = Path(run_dir)
    method = _method(name, cfg, options)
    method.prepare(console)
    with open_run_dir(cfg, run_dir) as store:
        started = time.time()
        calls_before = store.last_call_id()
        recorded = _take_finish_record(store, method.name)
        # The records as this run finds them (read only when a finish record may be kept).
        counts = _records(store) if recorded is not None else None
        inputs = method.load(store, run_dir)
        check_keys(cfg, method.models())  # before any call
        world = sim_world(cfg, inputs.memes)
        cacheable = method.setup_world(world)
        pool = open_pool(
            cfg,
            world,
            store,
            cache_path=(cache_path or run_dir / CACHE_FILE) if cacheable else None,
            max_cost=max_cost,
        )
        ctx = RunContext(
            cfg=cfg,
            run_dir=run_dir,
            store=store,
            pool=pool,
            progress=StageProgress(enabled=False),
            inputs=inputs,
            world=world,
            started=started,
            max_cost=max_cost,
        )
        # From here on a signal is a polite stop: the run's calls finish and are recorded,
        # and its leaderboard and report are written (a second signal exits at once).
        with _polite_stop() as stop:
            with counting_steps() as tally:
                run = _execute(method, ctx, console, show_progress, stop)
            stages = run.stages or {kind: tally[kind] for kind in tally}
            key = _finish_key(method, cfg, options, bootstrap, max_cost, inputs)
            kept = None
            # As many records of each kind after the run as before: it wrote none (an artifact
            # is written by a step with its call, or with its item's members: those counts
            # tell, without reading every artifact again).
            quiet = not run.stopped and stop.signum is None
            if (
                counts is not None
                and quiet
                and _records(store, artifacts=False) == _without(counts)
            ):
                kept = _kept_finish(recorded, key, method, run_dir, counts)
            finished = kept if kept is not None else method.finish(ctx, run, bootstrap=bootstrap)
            status = _directory_status(store, method.name, finished.status)
            facts = run_facts(cfg)
            parts = {**finished.parts, "run": facts, "status": status}
            own = parts.get(method.keys[0])
            if isinstance(own, dict):
                # Its own facts too: a directory holding several methods (the demo's) keeps each
                # method's config and date, where the top-level "run" is the latest method's.
                parts[method.keys[0]] = {**own, "run": facts}
            board = merge_leaderboard(run_dir, (*method.keys, "run", "status"), parts)
            report_kept = _write_or_keep_report(run_dir, board)
            if finished.written is not None:
                finished.written()
            if kept is not None and counts is not None:  # no record written since they were read
                cost = float(recorded["cost_usd"]) if recorded else store.total_cost()
                counts = [*counts[:-1], store.meta_digest(_OWN_META)]
            else:
                cost, counts = store.total_cost(), _records(store)
            if finished.status.complete and not finished.status.stopped and stop.signum is None:
                _record_finish(store, method, key, run_dir, board, finished.status, cost, counts)
            return RunResult(
                method=method.name,
                title=method.title,
                run_dir=run_dir,
                leaderboard=board,
                status=finished.status,
                new_calls=store.count_new_calls(calls_before),
                cost_usd=cost,
                outcome=run.outcome,
                outputs=method.outputs,
                stages=stages,
                analysis_reused=finished.analysis_reused,
                interrupted=stop.signum if _stopped_by_signal(finished.status) else None,
                report_kept=report_kept,
            )


RUN_TOKEN_META = "run.token"
"""Meta entry: a fresh random token written by every run of any method as it starts; a finish
record (``FINISH_META``) counts only while the token it was written under is current."""

FINISH_META = "finish."
"""Meta entries ``finish.<method>``: what the method's last complete run finished with (its
status, what it was computed from), written as that run ended under the token it started; a
run that finds the token unchanged (no run of any method since, not even one that was killed),
the same key (config, options, inputs, code) and writes nothing to the store, finds that
nothing its finish reads has changed and keeps what it finished with instead of reading the
store again (``_kept_finish``). Anything else: the method's finish, in full."""


_OWN_META = (RUN_TOKEN_META, FINISH_META)
"""The lifecycle's own meta entries, left out of what a finish record compares."""


def _records(store: RunStore, *, artifacts: bool = True) -> list[Any]:
    """The store's records as a finish record compares them: how many of each kind (and the
    newest call's id), and the digest of the run-level values but the lifecycle's own."""
    return [*store.record_counts(artifacts=artifacts), store.meta_digest(_OWN_META)]


def _without(records: list[Any]) -> list[Any]:
    """``_records`` as ``artifacts=False`` gives them (their count dropped)."""
    return [*records[:4], *records[5:]]


def _take_finish_record(store: RunStore, method: str) -> dict[str, Any] | None:
    """This method's finish record if no run has started since it was written, then a new run
    token (from here on no record written before counts: a run killed before its end leaves
    none that does)."""
    token = store.get_meta(RUN_TOKEN_META)
    raw = store.get_meta(FINISH_META + method)
    store.set_meta(RUN_TOKEN_META, uuid.uuid4().hex)
    if not raw or not token:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("token") != token:
        return None
    return record


def _finish_key(
    method: Method,
    cfg: RunConfig,
    options: Mapping[str, Any],
    bootstrap: int | None,
    max_cost: float | None,
    inputs: Any,
) -> str:
    """Digest of what a method's finish reads besides the store and the run directory's files:
    the config, the method's options, the bootstrap and the cap, the inputs (every field of
    every meme and row), the prompt templates and the code (memearena's version and sources)."""
    from memearena.prompts import template_hashes
    from memearena.version import __version__

    h = hashlib.sha256()
    for part in (
        method.name,
        __version__,
        cfg.model_dump_json(),
        json.dumps(dict(options), sort_keys=True, default=repr),
        json.dumps([bootstrap, max_cost]),
        json.dumps(template_hashes(), sort_keys=True),
        _code_stamp(_packages()),
    ):
        h.update(part.encode("utf-8") + b"\0")
    for item in [*inputs.memes, *inputs.rows]:
        dump = getattr(item, "model_dump_json", None)
        h.update((dump() if callable(dump) else repr(item)).encode("utf-8") + b"\n")
    return h.hexdigest()


def _outputs_state(method: Method, run_dir: Path, board: Mapping[str, Any]) -> dict[str, Any]:
    """What a finish left beside the store: the method's sections of leaderboard.json (their
    run dates left out) and the files of the run directory (name, size, modification time;
    the method's output folders walked)."""
    own = {k: board.get(k) for k in method.keys}
    files = _files_beside(run_dir)
    for name in method.outputs:
        if name.endswith("/"):
            files += _files_under(run_dir / name.rstrip("/"))
    return {
        "sections": hashlib.sha256(
            json.dumps(_undated(own), sort_keys=True, default=str).encode("utf-8")
        ).hexdigest(),
        "files": hashlib.sha256("\n".join(files).encode("utf-8", "replace")).hexdigest(),
    }


def _record_finish(
    store: RunStore,
    method: Method,
    key: str,
    run_dir: Path,
    board: Mapping[str, Any],
    status: RunStatus,
    cost: float,
    counts: list[Any],
) -> None:
    """Write this method's finish record under the current run token (a complete run only:
    its status holds nothing of this invocation's own but its failed calls, left out)."""
    record = {
        "token": store.get_meta(RUN_TOKEN_META),
        "key": key,
        "counts": counts,
        "outputs": _outputs_state(method, run_dir, board),
        "status": status_record(status),
        "cost_usd": cost,
    }
    store.set_meta(FINISH_META + method.name, json.dumps(record, separators=(",", ":")))


def _kept_finish(
    record: dict[str, Any] | None, key: str, method: Method, run_dir: Path, counts: list[Any]
) -> Finished | None:
    """What the method's last complete run finished with, when nothing it was computed from
    has changed: the record is current (``_take_finish_record``), its key is this run's, the
    store holds as many records of each kind as then, and the method's sections and the files
    beside the store are as that run left them. Else None (the method's finish runs)."""
    if record is None or record.get("key") != key:
        return None
    store_counts = record.get("counts")
    cost = record.get("cost_usd")
    status = status_from_record(record.get("status"))
    if status is None or not isinstance(cost, int | float) or not isinstance(store_counts, list):
        return None
    board = read_leaderboard(run_dir)
    if record.get("outputs") != _outputs_state(method, run_dir, board):
        return None
    # A run's own writes change the token; these see an edit of run.db outside any run that
    # adds or removes records (one that only rewrites a record in place is not seen).
    if store_counts != counts:
        return None
    kept = {k: board[k] for k in method.keys if k in board}
    return Finished(kept, status, analysis_reused=True)


STATUS_META = "status."
"""Meta entries ``status.<method>``: each method's latest status in this run directory."""


def _directory_status(store: RunStore, method: str, status: RunStatus) -> dict[str, Any]:
    """Record this method's status; the directory's: no method's failure hidden by another's
    later success (the demo's directory holds three methods, one report banner)."""
    store.set_meta(STATUS_META + method, json.dumps(status.as_json()))
    others: dict[str, dict[str, Any]] = {}
    for name in method_names():
        raw = store.get_meta(STATUS_META + name) if name != method else None
        if raw:
            others[name] = json.loads(raw)
    return directory_status(status, others)


def _execute(
    method: Method,
    ctx: RunContext,
    console: Console | None,
    show_progress: bool,
    stop: _PoliteStop | None = None,
) -> MethodRun:
    """One event loop for the method's stages; the pool is drained and closed however it ends.
    With ``stop``, a signal stops the pool politely (one that came before the loop, at once)."""

    async def go() -> MethodRun:
        if stop is not None:
            stop.loop, stop.pool = asyncio.get_running_loop(), ctx.pool
            stop.arm()
        try:
            with (
                StageProgress(console, enabled=show_progress and not ctx.planning) as progress,
                fewer_collections(),  # a window of steps in flight outlives 700 allocations
            ):
                ctx.progress = progress
                return await method.run(ctx)
        finally:
            await ctx.pool.aclose()
            if stop is not None:
                stop.loop = None

    return asyncio.run(go())


def plan_method(name: str, cfg: RunConfig, **options: Any) -> PlannedCalls:
    """Dry run of method ``name``: its own code path with every model stood in for by a
    simulated one of the same name (``memearena.engine.plan``); nothing is called."""
    # A missing section, a bad input file (the Arena's human guidelines): one ConfigError line,
    # before anything; the method's warnings (flagged judges) are printed as a run prints them.
    _method(name, cfg, options).prepare(None)
    sim_cfg = stand_in_config(cfg)
    method = _method(name, sim_cfg, options)
    with tempfile.TemporaryDirectory(prefix="memearena-plan-") as tmp:
        scratch = Path(tmp)
        store = RunStore(scratch / "run.db")
        try:
            inputs = method.load(None, scratch)
            world = sim_world(sim_cfg, inputs.memes)
            method.setup_world(world)
            # The stand-ins of endpoint models meet the world as the simulated server would.
            endpoints = frozenset(n for n, m in cfg.models.items() if m.provider != "sim")
            if endpoints:
                world.serve_dataset(inputs.memes, sim_cfg.image)
            served = AsServed(world, endpoints)
            pool = open_pool(sim_cfg, served, store, cache_path=None, max_cost=None)
            ctx = RunContext(
                cfg=sim_cfg,
                run_dir=scratch,
                store=store,
                pool=pool,
                progress=StageProgress(enabled=False),
                inputs=inputs,
                world=world,
                planning=True,
                started=time.time(),
                stand_ins=endpoints,
            )
            run = _execute(method, ctx, None, False)
            plan = planned_from_calls(cfg, store.iter_calls(), method.typical_output)
            bounds = getattr(method, "planned_range", None)  # optional: a path set by answers
            return plan.with_range(*bounds(run, plan.calls)) if callable(bounds) else plan
        finally:
            store.close()


def write_run_report(run_dir: Path, board: dict[str, Any]) -> Path:
    """``run_dir/report.html`` from ``board``, with every registered method's section (only
    the methods' views are imported for it: a run of one method loads no other's stages). Its
    head records its inputs (``report_inputs``), so that a run finding the same keeps it."""
    from memearena.engine.profile import register_report_part
    from memearena.report.html import write_report  # the renderer: only to render

    register_report_part()

    for name in method_names():
        load_view(name)  # a method's view registers its report section
    run = board.get("run")
    date = str(run.get("date", "")) if isinstance(run, dict) else ""
    return write_report(run_dir, board, inputs=(report_inputs(run_dir, board), date))


def _write_or_keep_report(run_dir: Path, board: dict[str, Any]) -> str | None:
    """Render ``report.html`` unless the page there was made from exactly these inputs (then
    it is kept: nothing it shows has changed but the date of the run, and it shows that of
    the run that rendered it). Returns that date when kept, None when written now."""
    had = rendered_inputs(run_dir / "report.html")
    if had is not None and had[0] == report_inputs(run_dir, board):
        return had[1]
    write_run_report(run_dir, board)
    return None


_NOT_REPORT_INPUTS = frozenset({"report.html", "leaderboard.json", "run.lock"})
"""Files of a run directory a report is not made from: itself, the document (digested as
data, its dates left out) and the lock; ``run.db*`` and hidden (temporary) files neither."""


def report_inputs(run_dir: Path, board: Mapping[str, Any]) -> str:
    """Digest of everything ``report.html`` is made from but the date of the run it shows: the
    document with its run dates left out, the files beside it (name, size and modification
    time: the report's run-directory parts, a method's battle files, read them), and the code
    that renders it (memearena's version and the name, size and modification time of every
    source file of memearena and of each registered method's package). Equal digests, equal
    pages but for that date; a changed file, however slight, renders the page again."""
    from memearena.version import __version__

    h = hashlib.sha256()
    h.update(json.dumps(_undated(board), sort_keys=True, default=str).encode("utf-8"))
    h.update(b"\0" + __version__.encode("utf-8"))
    for line in _files_beside(run_dir):
        h.update(b"\0" + line.encode("utf-8", "replace"))
    h.update(b"\0" + _code_stamp(_packages()).encode("utf-8"))
    return h.hexdigest()


def _stamp(entry: os.DirEntry[str], name: str) -> str | None:
    """``name``, size and modification time of a regular file (None for anything else)."""
    try:
        if not entry.is_file(follow_symlinks=False):
            return None
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return None
    return f"{name}\0{st.st_size}\0{st.st_mtime_ns}"


def _files_beside(run_dir: Path) -> list[str]:
    """The stamps of the regular files in a run directory (not in its folders) that outputs
    are made from: all but ``_NOT_REPORT_INPUTS``, ``run.db*`` and hidden ones, by name."""
    try:
        entries = sorted(os.scandir(run_dir), key=lambda e: e.name)
    except OSError:
        return []
    skip = (".", "run.db")
    return [
        stamp
        for e in entries
        if e.name not in _NOT_REPORT_INPUTS
        and not e.name.startswith(skip)
        and (stamp := _stamp(e, e.name)) is not None
    ]


def _files_under(folder: Path) -> list[str]:
    """The stamps of every regular file under ``folder`` (walked; names relative to it)."""
    out: list[str] = []
    todo = [folder]
    while todo:
        here = todo.pop()
        try:
            entries = sorted(os.scandir(here), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                todo.append(Path(e.path))
            elif (stamp := _stamp(e, os.path.relpath(e.path, folder))) is not None:
                out.append(stamp)
    return sorted(out)


def _packages() -> tuple[str, ...]:
    """memearena and every registered method's package (a plug-in's may live elsewhere)."""
    return tuple(sorted({"memearena", *(method_spec(m).package for m in method_names())}))


def _undated(board: Mapping[str, Any]) -> dict[str, Any]:
    """The document without the run dates (the top-level facts' and each method's own)."""

    def facts(value: Any) -> Any:
        return {k: v for k, v in value.items() if k != "date"} if isinstance(value, dict) else value

    out: dict[str, Any] = {}
    for key, value in board.items():
        if key == "run":
            out[key] = facts(value)
        elif isinstance(value, dict) and isinstance(value.get("run"), dict):
            out[key] = {**value, "run": facts(value["run"])}
        else:
            out[key] = value
    return out


@functools.lru_cache(maxsize=8)
def _code_stamp(packages: tuple[str, ...]) -> str:
    """Name, size and modification time of every file of these packages (their folders
    walked, bytecode caches left out; a package nested in another counted once)."""
    roots: list[Path] = []
    for package in packages:
        found = importlib.util.find_spec(package)
        if found is not None:
            roots += [Path(p) for p in found.submodule_search_locations or []]
    h = hashlib.sha256()
    seen: set[str] = set()
    todo = sorted(roots)
    while todo:
        folder = todo.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.path in seen or e.name == "__pycache__":
                continue
            seen.add(e.path)
            if e.is_dir(follow_symlinks=False):
                todo.append(Path(e.path))
            elif (stamp := _stamp(e, e.path)) is not None:
                h.update(stamp.encode("utf-8", "replace") + b"\n")
    return h.hexdigest()


def print_run_summary(console: Console, result: RunResult, *, view: bool = True) -> None:
    """The end of every run, every method alike: the method's own summary (its view), steps
    reused / new per stage, where the outputs are, then the status (one spend line)."""
    if view:
        get_method(result.method).summary(console, result.leaderboard)
    if result.stages:
        kept = "; leaderboard unchanged, kept" if result.analysis_reused else ""
        console.print(f"steps — {result.resume_line()}{kept}", highlight=False, markup=False)
    files = ", ".join(("run.db", "leaderboard.json", *result.outputs, "report.html"))
    console.print(
        f"{result.new_calls:,} new model calls. Outputs in "
        f"{console_safe(result.run_dir)}/ ({files})",
        highlight=False,
    )
    if result.report_kept is not None:
        console.print(
            "report.html kept, not rendered again: nothing it shows has changed since the run "
            f"of {console_safe(result.report_kept or 'an unknown date')}, whose date it shows",
            highlight=False,
        )
    print_run_status(console, result.status)


def env_flag(name: str) -> bool:
    """Whether an environment flag is set to a true value."""
    return os.environ.get(name, "").lower() in ("1", "true", "yes")
