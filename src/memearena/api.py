"""The notebook API: sync functions that also work inside a running event loop (Jupyter), their
async twins, and result objects with pandas accessors.

A result object is built only from what a run directory holds — ``leaderboard.json``,
``battles.jsonl`` and ``run.db`` read through :class:`~memearena.store.RunStore`'s public
methods — so the same object describes a run just finished, a run opened later with
:func:`open_run`, or a run made by the CLI.

Every ``run_*`` / ``plan_*`` is thin over the run lifecycle (``memearena.engine.lifecycle``:
``run_method`` / ``plan_method``), so a notebook run locks, accounts, writes its status and its
report exactly as the CLI's. Adding a method's twins::

    def _run_x(cfg, run_dir, **kw) -> XResult:
        done = _run("x", cfg, run_dir, ...)          # the lifecycle, by method name
        return XResult(done.run_dir, ...)
    run_x, arun_x = twins(_run_x, "run_x")

then list both names in ``memearena/__init__.py``'s ``_LAZY`` table and the result class in
``_RESULTS`` (what ``open_run`` returns for a directory holding that method).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
from collections.abc import Awaitable, Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from memearena.errors import MemearenaError

if TYPE_CHECKING:  # pandas is an optional extra: imported only when a DataFrame is asked for
    import pandas as pd

    from memearena.config import RunConfig
    from memearena.engine.plan import PlannedCalls

__all__ = [
    "AdaptResult",
    "ArenaResult",
    "JudgeAuditResult",
    "MissingExtraError",
    "RunResults",
    "aplan_adapt",
    "aplan_arena",
    "aplan_judge_audit",
    "arun_adapt",
    "arun_arena",
    "arun_judge_audit",
    "open_run",
    "plan_adapt",
    "plan_arena",
    "plan_judge_audit",
    "run_adapt",
    "run_arena",
    "run_judge_audit",
    "twins",
]

P = ParamSpec("P")
R = TypeVar("R")


class MissingExtraError(MemearenaError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise MissingExtraError(
            "DataFrames need pandas: pip install 'memearena[notebook]'"
        ) from None
    return pandas


# ---------------------------------------------------------------------------------------------
# Sync in a running loop, and async twins


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def call_blocking(fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """Call ``fn`` here, or — when this thread already runs an event loop (Jupyter) — in a
    worker thread, whose own ``asyncio.run`` cannot collide with the caller's loop."""
    if not _in_running_loop():
        return fn(*args, **kwargs)
    ctx = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="memearena") as pool:
        return pool.submit(ctx.run, functools.partial(fn, *args, **kwargs)).result()


def twins(fn: Callable[P, R], name: str) -> tuple[Callable[P, R], Callable[P, Awaitable[R]]]:
    """A blocking function as (sync that works inside a running loop, async twin).

    The async twin runs ``fn`` in a worker thread (``asyncio.to_thread``), so awaiting it never
    blocks the caller's loop; both return what ``fn`` returns and raise what it raises.
    """

    @functools.wraps(fn)
    def sync(*args: P.args, **kwargs: P.kwargs) -> R:
        return call_blocking(fn, *args, **kwargs)

    @functools.wraps(fn)
    async def async_(*args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(fn, *args, **kwargs)

    sync.__name__ = sync.__qualname__ = name
    async_.__name__ = async_.__qualname__ = f"a{name}"
    return sync, async_


# ---------------------------------------------------------------------------------------------
# Results


def _read_json(path: Path) -> dict[str, Any]:
    from memearena.jsonsafe import loads_bounded

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as e:
        raise MemearenaError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        value = loads_bounded(text, max_bytes=max(len(text) * 4, 1))
    except ValueError as e:
        raise MemearenaError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(value, dict):
        raise MemearenaError(f"{path}: expected a JSON object")
    return value


def _read_jsonl(path: Path) -> list[Any]:
    """Every row of a JSONL output file; a bad line is one MemearenaError naming file:line."""
    from memearena.jsonsafe import loads_bounded

    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except OSError as e:
        raise MemearenaError(f"{path}: cannot read ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise MemearenaError(f"{path}: not valid UTF-8") from None
    rows = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(loads_bounded(line))
        except ValueError as e:
            raise MemearenaError(f"{path}:{n}: not valid JSON ({e})") from None
    return rows


_ROW_FIELDS = ("model", "rank", "bt", "ci_low", "ci_high", "elo", "win_rate", "battles")


class ArenaResult:
    """An Arena run directory's outputs, with DataFrame accessors (``pip install
    'memearena[notebook]'`` for pandas).

    ``repr`` is one line; the data is read from the run directory when an accessor is called.
    """

    def __init__(
        self,
        run_dir: str | Path,
        *,
        new_calls: int | None = None,
        cost_usd: float | None = None,
        stopped: str | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        """The run directory (holds leaderboard.json, battles.jsonl, run.db, report.html)."""
        self.new_calls = new_calls
        """Model calls this invocation paid for (None for a run opened with ``open_run``)."""
        self.cost_usd = cost_usd
        """The run's total recorded cost in USD (None for a run opened with ``open_run``)."""
        self.stopped = stopped
        """Why the run stopped early (e.g. the spend cap), or None."""
        self._board: dict[str, Any] | None = None

    # -- plain data --------------------------------------------------------------------------
    @property
    def leaderboard(self) -> dict[str, Any]:
        """``leaderboard.json`` as a dict (empty when the run wrote none)."""
        if self._board is None:
            self._board = _read_json(self.run_dir / "leaderboard.json")
        return self._board

    @property
    def arena(self) -> dict[str, Any]:
        """The leaderboard's ``arena`` section (empty when absent)."""
        section = self.leaderboard.get("arena")
        return section if isinstance(section, dict) else {}

    @property
    def status(self) -> dict[str, Any] | None:
        """The run's completion status from leaderboard.json, when the run recorded one."""
        status = self.leaderboard.get("status")
        return status if isinstance(status, dict) else None

    def iter_battles(self) -> Iterator[dict[str, Any]]:
        """Every resolved battle from ``battles.jsonl``, one dict each (streamed)."""
        from memearena.jsonsafe import loads_bounded

        path = self.run_dir / "battles.jsonl"
        if not path.is_file():
            return
        with path.open(encoding="utf-8-sig") as f:
            for n, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    row = loads_bounded(line)
                except ValueError as e:
                    raise MemearenaError(f"{path}:{n}: not valid JSON ({e})") from None
                if isinstance(row, dict):
                    yield row

    # -- DataFrames --------------------------------------------------------------------------
    def to_pandas(self) -> pd.DataFrame:
        """The overall leaderboard (same as :meth:`leaderboard_df`)."""
        return self.leaderboard_df()

    def leaderboard_df(self, by: str | None = None) -> pd.DataFrame:
        """The overall leaderboard, or with ``by`` (``criterion``, ``judge``, ``context``,
        ``source``) one row per (group, model) with a first column naming the group."""
        pd = _pandas()
        if by is None:
            rows = self.arena.get("overall") or []
            return pd.DataFrame(rows, columns=_columns(rows))
        groups = self.arena.get(f"by_{by}")
        if not isinstance(groups, dict):
            known = sorted(k[3:] for k in self.arena if k.startswith("by_"))
            have = ", ".join(known) or "none"
            raise MemearenaError(f"no leaderboard by {by!r} in this run (have: {have})")
        flat = [{by: g, **row} for g, rows in groups.items() for row in rows]
        return pd.DataFrame(flat, columns=[by, *(c for c in _columns(flat) if c != by)])

    def battles(self) -> pd.DataFrame:
        """Every resolved battle (``battles.jsonl``), one row each."""
        return _pandas().DataFrame(list(self.iter_battles()))

    def judges(self) -> pd.DataFrame:
        """Judge metrics: one row per judge (NDCG, Kendall τ vs the panel with intervals, ...);
        nested fields are flattened with ``.`` (e.g. ``vs_truth.ndcg.value``)."""
        pd = _pandas()
        rows = self.arena.get("judges") or []
        return pd.json_normalize(rows) if rows else pd.DataFrame()

    def agreement(self) -> pd.DataFrame:
        """Panel agreement: Krippendorff's α and each judge pair's Cohen κ, with intervals."""
        pd = _pandas()
        panel = self.arena.get("panel") or {}
        rows: list[dict[str, Any]] = []
        alpha = panel.get("krippendorff_alpha")
        if isinstance(alpha, dict):
            rows.append({"metric": "krippendorff_alpha", "pair": None, **alpha})
        for pair, k in (panel.get("cohen_kappa") or {}).items():
            if isinstance(k, dict):
                rows.append({"metric": "cohen_kappa", "pair": pair, **k})
        return pd.DataFrame(rows, columns=_columns(rows) or ["metric", "pair", "value"])

    def answer_outcomes(self) -> pd.DataFrame:
        """Per target: answers, refusals and format failures (from leaderboard.json)."""
        pd = _pandas()
        rows = [{"model": m, **v} for m, v in (self.arena.get("answers") or {}).items()]
        return pd.DataFrame(rows, columns=_columns(rows) or ["model"])

    def answers(self) -> pd.DataFrame:
        """Every stored answer (``run.db``): item, context level, model, text and whether it had
        the requested sections. Text is the model's untrusted output: escape before rendering."""
        from memearena.methods.arena.stages import stored_answers

        rows = []
        for item, level, model, value in self._with_store(lambda s: list(stored_answers(s))):
            rows.append(
                {
                    "item": item,
                    "context": level,
                    "model": model,
                    "text": value.get("text"),
                    "format_ok": value.get("format_ok"),
                }
            )
        cols = ["item", "context", "model", "text", "format_ok"]
        return _pandas().DataFrame(rows, columns=cols)

    def calls(self) -> pd.DataFrame:
        """Every model call on record (``run.db``): model, role, status, tokens, cost, latency."""
        from dataclasses import asdict

        records = self._with_store(lambda s: s.calls())
        rows = [{k: v for k, v in asdict(r).items() if k != "response"} for r in records]
        return _pandas().DataFrame(rows)

    def request(self, key: str) -> dict[str, Any] | None:
        """The request a call sent, by its ``request_hash`` (``calls()``): endpoint, messages
        as sent (images by content hash), parameters; None for a call recorded before requests
        were kept. Message text is untrusted: escape before rendering."""
        return self._with_store(lambda s: s.request(key))

    def requests(self) -> pd.DataFrame:
        """Every request on record (``run.db``), one row per request key: ``key``,
        ``endpoint``, ``messages``, ``params`` (as ``memearena export --table requests``)."""
        import io
        import json

        buf = io.StringIO()
        self._with_store(lambda s: s.write_export("requests", buf, "jsonl"))
        rows = [json.loads(line) for line in buf.getvalue().splitlines() if line]
        cols = ["key", "key_version", "endpoint", "messages", "params"]
        return _pandas().DataFrame(rows, columns=cols)

    def errors(self) -> pd.DataFrame:
        """Every recorded error (``run.db``): kind, key, reason."""
        from dataclasses import asdict

        rows = [asdict(e) for e in self._with_store(lambda s: s.errors())]
        return _pandas().DataFrame(rows, columns=["kind", "key", "reason", "detail", "created_at"])

    # -- helpers -----------------------------------------------------------------------------
    def _with_store(self, fn: Callable[[Any], R]) -> R:
        from memearena.store import RunStore

        db = self.run_dir / "run.db"
        if not db.is_file():
            raise MemearenaError(f"{db}: no run database in this directory")
        with RunStore(db) as store:
            return fn(store)

    def _artifacts(self, kind: str) -> list[tuple[str, dict[str, Any]]]:
        return self._with_store(lambda s: s.artifacts(kind))

    def __repr__(self) -> str:
        overall = self.arena.get("overall") or []
        top = ", ".join(str(r.get("model")) for r in overall[:3])
        more = ", …" if len(overall) > 3 else ""
        extra = f", stopped={self.stopped!r}" if self.stopped else ""
        return (
            f"ArenaResult({str(self.run_dir)!r}, battles={self.arena.get('battles', 0)}, "
            f"models=[{top}{more}]{extra})"
        )


def _columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Column order: the rank-contract fields first, then any others in first-seen order."""
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    first = [c for c in _ROW_FIELDS if c in seen]
    return first + [c for c in seen if c not in first]


METHOD_KEYS = ("arena", "adapt", "judge_audit")
"""The methods whose results a run directory can hold (their leaderboard.json keys)."""


def _methods_of(run_dir: Path) -> list[str]:
    """The methods a run directory holds results of: its leaderboard's method keys, or (when
    no section was written, e.g. a run the spend cap stopped early) the sections of the config
    its last run recorded."""
    board = _read_json(run_dir / "leaderboard.json")
    found = [k for k in METHOD_KEYS if isinstance(board.get(k), dict)]
    if found:
        return found
    db = run_dir / "run.db"
    if db.is_file():
        from memearena.store import RunStore

        with RunStore(db) as store:
            snap = store.latest_snapshot()
        config = (snap or {}).get("config") or {}
        return [k for k in METHOD_KEYS if config.get(k)]
    return []


def open_run(run_dir: str | Path) -> ArenaResult | AdaptResult | JudgeAuditResult | RunResults:
    """The results of an existing run directory (nothing is run or called): an
    :class:`ArenaResult`, :class:`AdaptResult` or :class:`JudgeAuditResult` for a directory of
    one method, a :class:`RunResults` for one holding several (the demo's)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise MemearenaError(f"{run_dir}: no such run directory")
    methods = _methods_of(run_dir)
    if not methods:
        raise MemearenaError(f"{run_dir}: holds no results of any method (no leaderboard.json)")
    if len(methods) > 1:
        return RunResults(run_dir, methods)
    return _RESULTS[methods[0]](run_dir)


# ---------------------------------------------------------------------------------------------
# Methods: thin over the run lifecycle (memearena.engine.lifecycle)


def _config(cfg: RunConfig | str | Path) -> RunConfig:
    from memearena.config import load_config

    return load_config(cfg) if isinstance(cfg, str | Path) else cfg


def _run(
    method: str,
    cfg: RunConfig | str | Path,
    run_dir: str | Path,
    max_cost: float | None,
    show_progress: bool,
    bootstrap: int | None,
    **options: Any,
) -> Any:
    from memearena.engine.lifecycle import run_method

    return run_method(
        method,
        _config(cfg),
        run_dir,
        max_cost=max_cost,
        show_progress=show_progress,
        bootstrap=bootstrap,
        **options,
    )


def _plan(method: str, cfg: RunConfig | str | Path, **options: Any) -> PlannedCalls:
    """The dry run; a config without the method's section is one ConfigError line."""
    from memearena.engine.lifecycle import plan_method

    return plan_method(method, _config(cfg), **options)


def _run_arena(
    cfg: RunConfig | str | Path,
    run_dir: str | Path,
    *,
    max_cost: float | None = None,
    settings: Sequence[str] | None = None,
    show_progress: bool = True,
    bootstrap: int | None = None,
) -> ArenaResult:
    """Run (or resume) the Arena in ``run_dir``; returns its results (see :class:`ArenaResult`).

    ``cfg`` is a :class:`~memearena.config.RunConfig` or the path of a YAML config.
    """
    done = _run("arena", cfg, run_dir, max_cost, show_progress, bootstrap, settings=settings)
    return ArenaResult(
        done.run_dir, new_calls=done.new_calls, cost_usd=done.cost_usd, stopped=done.stopped
    )


def _plan_arena(cfg: RunConfig | str | Path, settings: Sequence[str] | None = None) -> PlannedCalls:
    """Dry run: the calls, tokens and cost a run would make; nothing is called."""
    return _plan("arena", cfg, settings=settings)


run_arena, arun_arena = twins(_run_arena, "run_arena")
plan_arena, aplan_arena = twins(_plan_arena, "plan_arena")


class AdaptResult:
    """The results of an Adapt run, read from its run directory (``leaderboard.json``'s
    ``adapt`` section, ``adapt_scores.jsonl``, ``adapt_chains.jsonl``)."""

    def __init__(
        self,
        run_dir: str | Path,
        *,
        new_calls: int | None = None,
        cost_usd: float | None = None,
        stopped: str | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.new_calls = new_calls
        self.cost_usd = cost_usd
        self.stopped = stopped

    @property
    def section(self) -> dict[str, Any]:
        """The ``adapt`` section of ``leaderboard.json``."""
        board = _read_json(self.run_dir / "leaderboard.json")
        sec = board.get("adapt")
        if not isinstance(sec, dict):
            raise MemearenaError(f"{self.run_dir}: leaderboard.json has no adapt section")
        return sec

    def _jsonl(self, name: str) -> list[dict[str, Any]]:
        return _read_jsonl(self.run_dir / name)

    @property
    def status(self) -> dict[str, Any] | None:
        """The run's completion status from leaderboard.json, when the run recorded one."""
        status = _read_json(self.run_dir / "leaderboard.json").get("status")
        return status if isinstance(status, dict) else None

    def to_pandas(self) -> pd.DataFrame:
        """One row per target (same as :meth:`models`)."""
        return self.models()

    def models(self) -> pd.DataFrame:
        """One row per target: scores, failure rates, loop and control, with intervals."""
        return _pandas().DataFrame(self.section["models"])

    def by_category(self) -> pd.DataFrame:
        """One row per (category, target)."""
        rows = [{"category": c, **r} for c, rs in self.section["by_category"].items() for r in rs]
        return _pandas().DataFrame(rows)

    def weaknesses(self) -> pd.DataFrame:
        """Every refinement step that lowered a target's score."""
        return _pandas().DataFrame(self.section["weaknesses"])

    def scores(self) -> pd.DataFrame:
        """Every original answer's outcome and score (refused / unparsed have no score)."""
        return _pandas().DataFrame(self._jsonl("adapt_scores.jsonl"))

    def chains(self) -> pd.DataFrame:
        """One row per refinement step (the lineage), with its chain's target, mode and stop."""
        rows = [
            {k: c[k] for k in ("target", "category", "repeat", "mode", "seed", "stop")} | s
            for c in self._jsonl("adapt_chains.jsonl")
            for s in c["steps"]
        ]
        return _pandas().DataFrame(rows)

    def __repr__(self) -> str:
        return f"AdaptResult({str(self.run_dir)!r})"


def _run_adapt(
    cfg: RunConfig | str | Path,
    run_dir: str | Path,
    *,
    max_cost: float | None = None,
    show_progress: bool = True,
    bootstrap: int | None = None,
) -> AdaptResult:
    """Run (or resume) Adapt in ``run_dir``; returns its results (see :class:`AdaptResult`)."""
    done = _run("adapt", cfg, run_dir, max_cost, show_progress, bootstrap)
    return AdaptResult(
        done.run_dir, new_calls=done.new_calls, cost_usd=done.cost_usd, stopped=done.stopped
    )


def _plan_adapt(cfg: RunConfig | str | Path) -> PlannedCalls:
    """Dry run of Adapt: the calls, tokens and cost a run would make; nothing is called."""
    return _plan("adapt", cfg)


run_adapt, arun_adapt = twins(_run_adapt, "run_adapt")
plan_adapt, aplan_adapt = twins(_plan_adapt, "plan_adapt")


class JudgeAuditResult:
    """The results of a Judge audit, read from its run directory (``leaderboard.json``'s
    ``judge_audit`` section and ``judge_audit_scores.jsonl``)."""

    def __init__(
        self,
        run_dir: str | Path,
        *,
        new_calls: int | None = None,
        cost_usd: float | None = None,
        stopped: str | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        self.new_calls = new_calls
        self.cost_usd = cost_usd
        self.stopped = stopped

    @property
    def section(self) -> dict[str, Any]:
        """The ``judge_audit`` section of ``leaderboard.json``."""
        board = _read_json(self.run_dir / "leaderboard.json")
        sec = board.get("judge_audit")
        if not isinstance(sec, dict):
            raise MemearenaError(f"{self.run_dir}: leaderboard.json has no judge_audit section")
        return sec

    @property
    def status(self) -> dict[str, Any] | None:
        """The run's completion status from leaderboard.json, when the run recorded one."""
        status = _read_json(self.run_dir / "leaderboard.json").get("status")
        return status if isinstance(status, dict) else None

    def to_pandas(self) -> pd.DataFrame:
        """The evaluator leaderboard, one row per judge (same as :meth:`leaderboard`)."""
        return self.leaderboard()

    def leaderboard(self) -> pd.DataFrame:
        """The evaluator leaderboard: one row per judge, each figure as value / ci_low / ci_high
        columns (``trust_value``, the figure it is ranked by, ``overall_value``,
        ``p_prefer_first_ci_low``, ``integrality_ci_high``, ...), the rank with its range over
        the bootstrap (``rank_ci_low``, ``rank_ci_high``) plus its flags."""
        rows = []
        for r in self.section.get("leaderboard") or []:
            row: dict[str, Any] = {"judge": r.get("judge"), "rank": r.get("rank")}
            rank_ci = r.get("rank_ci")
            if isinstance(rank_ci, list) and len(rank_ci) == 2:
                row["rank_ci_low"], row["rank_ci_high"] = rank_ci
            for key in (
                "trust",
                "overall",
                "p_prefer_first",
                "position_consistency",
                "p_prefer_padded",
                "self_enhancement",
                "abstention_rate",
                "parse_failure_rate",
            ):
                est = r.get(key) or {}
                for part in ("value", "ci_low", "ci_high"):
                    row[f"{key}_{part}"] = est.get(part)
            for cat, est in (r.get("categories") or {}).items():
                for part in ("value", "ci_low", "ci_high"):
                    row[f"{cat}_{part}"] = (est or {}).get(part)
            row["flags"] = ", ".join(r.get("flags") or [])
            rows.append(row)
        return _pandas().DataFrame(rows)

    def bias_types(self) -> pd.DataFrame:
        """One row per (judge, bias type): metric, value, interval, pairs and excluded pairs."""
        rows = [
            {"judge": r.get("judge"), "bias_type": t, **fig}
            for r in self.section.get("leaderboard") or []
            for t, fig in (r.get("types") or {}).items()
        ]
        return _pandas().DataFrame(rows)

    def scores(self) -> pd.DataFrame:
        """Every scored pair (``judge-audit metrics`` format, with judge and status)."""
        return _pandas().DataFrame(_read_jsonl(self.run_dir / "judge_audit_scores.jsonl"))

    def __repr__(self) -> str:
        return f"JudgeAuditResult({str(self.run_dir)!r})"


def _run_judge_audit(
    cfg: RunConfig | str | Path,
    run_dir: str | Path,
    *,
    max_cost: float | None = None,
    show_progress: bool = True,
    bootstrap: int | None = None,
) -> JudgeAuditResult:
    """Run (or resume) the Judge audit in ``run_dir``; returns its results."""
    done = _run("judge_audit", cfg, run_dir, max_cost, show_progress, bootstrap)
    return JudgeAuditResult(
        done.run_dir, new_calls=done.new_calls, cost_usd=done.cost_usd, stopped=done.stopped
    )


def _plan_judge_audit(cfg: RunConfig | str | Path) -> PlannedCalls:
    """Dry run of the Judge audit: the calls, tokens and cost a run would make."""
    return _plan("judge_audit", cfg)


run_judge_audit, arun_judge_audit = twins(_run_judge_audit, "run_judge_audit")
plan_judge_audit, aplan_judge_audit = twins(_plan_judge_audit, "plan_judge_audit")


_RESULTS: dict[str, Any] = {
    "arena": ArenaResult,
    "adapt": AdaptResult,
    "judge_audit": JudgeAuditResult,
}


class RunResults:
    """A run directory holding several methods' results (the demo's: Arena, Adapt and Judge
    audit): one result object per method, by name, and one DataFrame of them all."""

    def __init__(self, run_dir: str | Path, methods: Sequence[str]) -> None:
        self.run_dir = Path(run_dir)
        self.methods = list(methods)
        """The methods this directory holds results of, in report order."""
        self.results: dict[str, Any] = {m: _RESULTS[m](self.run_dir) for m in self.methods}

    @property
    def arena(self) -> ArenaResult:
        """The Arena's results (MemearenaError when the directory has none)."""
        return self._get("arena")  # type: ignore[no-any-return]

    @property
    def adapt(self) -> AdaptResult:
        """Adapt's results (MemearenaError when the directory has none)."""
        return self._get("adapt")  # type: ignore[no-any-return]

    @property
    def judge_audit(self) -> JudgeAuditResult:
        """The Judge audit's results (MemearenaError when the directory has none)."""
        return self._get("judge_audit")  # type: ignore[no-any-return]

    def _get(self, method: str) -> Any:
        if method not in self.results:
            raise MemearenaError(f"{self.run_dir}: holds no {method} results")
        return self.results[method]

    @property
    def status(self) -> dict[str, Any] | None:
        """The latest run's completion status from leaderboard.json."""
        status = _read_json(self.run_dir / "leaderboard.json").get("status")
        return status if isinstance(status, dict) else None

    def to_pandas(self) -> pd.DataFrame:
        """Every method's main table (its ``to_pandas()``) stacked, with a first column
        ``method`` naming where each row comes from."""
        pd = _pandas()
        frames = []
        for name, result in self.results.items():
            df = result.to_pandas()
            df.insert(0, "method", name)
            frames.append(df)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def __repr__(self) -> str:
        return f"RunResults({str(self.run_dir)!r}, methods={self.methods})"
