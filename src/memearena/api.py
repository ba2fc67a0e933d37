"""The notebook API: sync functions that also work inside a running event loop (Jupyter), their
async twins, and result objects with pandas accessors.

The API names no method: it reads the method registry (``memearena.engine.registry``). For
every registered method ``x`` there are ``run_x`` / ``arun_x`` / ``plan_x`` / ``aplan_x``
(``run("x", ...)`` and ``plan("x", ...)`` with the method's name as an argument), and
:func:`open_run` returns the method's result class (``Method.result``; one shape for every
method, ``memearena.engine.results.MethodResult``): built only from what a run directory
holds, so the same object describes a run just finished, a run opened later, or a run made by
the CLI.

Every ``run_*`` / ``plan_*`` is thin over the run lifecycle (``memearena.engine.lifecycle``:
``run_method`` / ``plan_method``), so a notebook run locks, accounts, writes its status and its
report exactly as the CLI's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from memearena.engine.registry import get_method, method_names
from memearena.engine.results import MethodResult, MissingExtraError, pandas, read_json
from memearena.errors import MemearenaError

if TYPE_CHECKING:  # pandas is an optional extra: imported only when a DataFrame is asked for
    import pandas as pd

    from memearena.config import RunConfig
    from memearena.engine.plan import PlannedCalls

__all__ = [
    "MethodResult",
    "MissingExtraError",
    "RunFolder",
    "RunResults",
    "label_agreement",
    "open_run",
    "plan",
    "result_class",
    "run",
    "twins",
]

P = ParamSpec("P")
R = TypeVar("R")


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


def result_class(method: str) -> type[MethodResult]:
    """The result class of a registered method (``Method.result``; the generic one if none)."""
    cls: type[MethodResult] = getattr(get_method(method), "result", MethodResult)
    return cls


def _result(method: str, run_dir: Path, **kw: Any) -> MethodResult:
    return result_class(method)(run_dir, method=method, **kw)


def _methods_of(run_dir: Path) -> list[str]:
    """The methods a run directory holds results of, in registry (report) order: its
    leaderboard's method keys, or (when no section was written, e.g. a run the spend cap
    stopped early) the sections of the config its last run recorded."""
    board = read_json(run_dir / "leaderboard.json")
    found = [k for k in method_names() if isinstance(board.get(k), dict)]
    if found:
        return found
    db = run_dir / "run.db"
    if db.is_file():
        from memearena.store import RunStore

        with RunStore(db) as store:
            snap = store.latest_snapshot()
        config = (snap or {}).get("config") or {}
        return [k for k in method_names() if config.get(k)]
    return []


def _is_run_dir(path: Path) -> bool:
    return (path / "leaderboard.json").is_file() or (path / "run.db").is_file()


def label_agreement(run_dir: str | Path, *, bootstrap: int = 1000, seed: int = 0) -> Any:
    """The human-label agreement figures of a run directory (``memearena.labels.Agreement``:
    ``.rows`` / ``.to_pandas()`` with ``figure``, ``judge``, ``field``, ``group``, ``value``,
    ``ci_low``, ``ci_high``, ``n``); reads ``DIR/labels.sqlite``, writes nothing."""
    from memearena.labels import agreement

    return agreement(Path(run_dir), n_boot=bootstrap, seed=seed)


def open_run(run_dir: str | Path) -> MethodResult | RunResults | RunFolder:
    """The results of an existing run directory (nothing is run or called): the method's
    result (``ArenaResult``, ``AdaptResult``, ``JudgeAuditResult``, ...) for a directory of one
    method, a :class:`RunResults` for one holding several (the demo's), a :class:`RunFolder`
    for a folder of run directories (``runs/``)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise MemearenaError(f"{run_dir}: no such run directory")
    if not _is_run_dir(run_dir):
        runs = sorted(p for p in run_dir.iterdir() if p.is_dir() and _is_run_dir(p))
        if runs:
            return RunFolder(run_dir, runs)
    methods = _methods_of(run_dir)
    if not methods:
        raise MemearenaError(f"{run_dir}: holds no results of any method (no leaderboard.json)")
    if len(methods) > 1:
        return RunResults(run_dir, methods)
    return _result(methods[0], run_dir)


class RunResults:
    """A run directory holding several methods' results (the demo's: Arena, Adapt and Judge
    audit): one result object per method, by name (``results["arena"]`` or
    ``results.arena``), and one DataFrame of them all."""

    def __init__(self, run_dir: str | Path, methods: Sequence[str]) -> None:
        self.run_dir = Path(run_dir)
        self.methods = list(methods)
        """The methods this directory holds results of, in report order."""
        self.results: dict[str, MethodResult] = {m: _result(m, self.run_dir) for m in methods}

    def __getitem__(self, method: str) -> MethodResult:
        if method not in self.results:
            raise MemearenaError(f"{self.run_dir}: holds no {method} results")
        return self.results[method]

    def __getattr__(self, name: str) -> Any:
        # A registered method's results by its name (``results.arena``).
        if name.startswith("_") or name not in method_names():
            raise AttributeError(name)
        return self[name]

    @property
    def status(self) -> dict[str, Any] | None:
        """The latest run's completion status from leaderboard.json."""
        status = read_json(self.run_dir / "leaderboard.json").get("status")
        return status if isinstance(status, dict) else None

    def to_pandas(self) -> pd.DataFrame:
        """Every method's leaderboard stacked (one shape: ``method``, ``entity`` (the model or
        judge), ``rank``, ``figure``, ``value``, ``ci_low``, ``ci_high``)."""
        return _stack(self.results)

    def intervals(self) -> pd.DataFrame:
        """Every method's figures with intervals stacked (``method``, ``entity``, ``figure``,
        ``value``, ``ci_low``, ``ci_high``)."""
        return _stack(self.results, "intervals")

    def profile(self, *, bootstrap: int = 1000, seed: int = 0) -> dict[str, Any]:
        """One profile per model across these methods, and how far the methods agree
        (``memearena profile DIR --json``: ``models``, each with one part per method and role;
        ``agreement``, Spearman's ρ between two methods' scores with its bootstrap interval)."""
        from memearena.engine.profile import build_profile

        return build_profile(self.run_dir, bootstrap=bootstrap, seed=seed)

    def __repr__(self) -> str:
        return f"RunResults({str(self.run_dir)!r}, methods={self.methods})"


_STACKED = ["method", "entity", "rank", "figure", "value", "ci_low", "ci_high"]


def _stack(results: Mapping[str, MethodResult], table: str = "leaderboard") -> pd.DataFrame:
    pd = pandas()
    frames = []
    for name, result in results.items():
        df = getattr(result, table)().rename(columns={result.entity: "entity"})
        df.insert(0, "method", name)
        frames.append(df[[c for c in _STACKED if c in df.columns]])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=_STACKED)


class RunFolder:
    """A folder of run directories (``runs/``): each run's results by its directory name."""

    def __init__(self, root: str | Path, runs: Sequence[Path]) -> None:
        self.root = Path(root)
        self.runs: dict[str, MethodResult | RunResults] = {}
        """Each run directory's results, by name (a directory holding no results is left
        out and named in ``skipped``)."""
        self.skipped: dict[str, str] = {}
        """Run directories that could not be opened, with why."""
        for path in runs:
            try:
                opened = open_run(path)
            except MemearenaError as e:
                self.skipped[path.name] = str(e)
                continue
            if not isinstance(opened, RunFolder):
                self.runs[path.name] = opened

    def __getitem__(self, name: str) -> MethodResult | RunResults:
        if name not in self.runs:
            raise MemearenaError(f"{self.root}: no run {name!r} (have: {', '.join(self.runs)})")
        return self.runs[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.runs)

    def __len__(self) -> int:
        return len(self.runs)

    def to_pandas(self) -> pd.DataFrame:
        """Every run's leaderboards stacked, with a first column ``run``."""
        pd = pandas()
        frames = []
        for name, res in self.runs.items():
            df = res.to_pandas() if isinstance(res, RunResults) else _stack({res.name: res})
            df.insert(0, "run", name)
            frames.append(df)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def __repr__(self) -> str:
        return f"RunFolder({str(self.root)!r}, runs={list(self.runs)})"


# ---------------------------------------------------------------------------------------------
# Methods: thin over the run lifecycle (memearena.engine.lifecycle)


def _config(cfg: RunConfig | str | Path) -> RunConfig:
    from memearena.config import load_config

    return load_config(cfg) if isinstance(cfg, str | Path) else cfg


def run(
    method: str,
    cfg: RunConfig | str | Path,
    run_dir: str | Path,
    *,
    max_cost: float | None = None,
    show_progress: bool = True,
    bootstrap: int | None = None,
    **options: Any,
) -> MethodResult:
    """Run (or resume) ``method`` in ``run_dir``; returns its results (its result class).
    ``cfg`` is a :class:`~memearena.config.RunConfig` or the path of a YAML config; ``options``
    are the method's own (the Arena's ``settings``)."""
    from memearena.engine.lifecycle import run_method

    done = run_method(
        method,
        _config(cfg),
        run_dir,
        max_cost=max_cost,
        show_progress=show_progress,
        bootstrap=bootstrap,
        **options,
    )
    return _result(
        method, done.run_dir, new_calls=done.new_calls, cost_usd=done.cost_usd, stopped=done.stopped
    )


def plan(method: str, cfg: RunConfig | str | Path, **options: Any) -> PlannedCalls:
    """Dry run of ``method``: the calls, tokens and cost a run would make; nothing is called
    (a config without the method's section is one ConfigError line)."""
    from memearena.engine.lifecycle import plan_method

    return plan_method(method, _config(cfg), **options)


def _twins_of(name: str) -> tuple[str, str] | None:
    """``("run" | "plan", method)`` for ``run_x`` / ``arun_x`` / ``plan_x`` / ``aplan_x``."""
    for prefix, kind in (("run_", "run"), ("arun_", "run"), ("plan_", "plan"), ("aplan_", "plan")):
        if name.startswith(prefix) and name[len(prefix) :] in method_names():
            return kind, name[len(prefix) :]
    return None


def _method_function(kind: str, method: str) -> Callable[..., Any]:
    if kind == "run":

        def fn(cfg: RunConfig | str | Path, run_dir: str | Path, **kw: Any) -> MethodResult:
            return run(method, cfg, run_dir, **kw)

        fn.__doc__ = f"Run (or resume) {method} in ``run_dir`` (see :func:`run`)."
    else:

        def fn(cfg: RunConfig | str | Path, **kw: Any) -> PlannedCalls:  # type: ignore[misc]
            return plan(method, cfg, **kw)

        fn.__doc__ = f"Dry run of {method} (see :func:`plan`); nothing is called."
    return fn


def __getattr__(name: str) -> Any:
    # Every registered method's twins, and its result class by name (``ArenaResult``).
    found = _twins_of(name)
    if found is not None:
        kind, method = found
        sync, async_ = twins(_method_function(kind, method), f"{kind}_{method}")
        globals()[f"{kind}_{method}"], globals()[f"a{kind}_{method}"] = sync, async_
        return globals()[name]
    if name.endswith("Result"):
        for method in method_names():
            cls = result_class(method)
            if cls.__name__ == name:
                return cls
    raise AttributeError(f"module 'memearena.api' has no attribute {name!r}")


def __dir__() -> list[str]:
    twins_ = [f"{p}_{m}" for m in method_names() for p in ("run", "arun", "plan", "aplan")]
    results = [result_class(m).__name__ for m in method_names()]
    return sorted({*globals(), *twins_, *results})
