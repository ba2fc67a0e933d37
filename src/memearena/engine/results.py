"""A run directory's results as the notebook sees them: one shape for every method.

A result object is built only from what a run directory holds — ``leaderboard.json``, the
method's output files and ``run.db`` read through :class:`~memearena.store.RunStore`'s public
methods — so the same object describes a run just finished, a run opened later with
``memearena.open_run``, or a run made by the CLI. Every method's result has the same
accessors: ``leaderboard()`` (one row per ranked model or judge: ``rank``, ``figure``, and its
``value``, ``ci_low``, ``ci_high``), ``intervals()`` (every figure with an interval, one row
each, the same three columns), ``calls()``, ``requests()``, ``request(key)``, ``replies()``,
``errors()`` (this method's, in a directory holding several) and ``to_pandas()`` (the
leaderboard). A method's own result class (``Method.result``) adds its own tables."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from memearena.errors import MemearenaError

if TYPE_CHECKING:  # pandas is an optional extra: imported only when a DataFrame is asked for
    import pandas as pd

    from memearena.store import RunStore

__all__ = [
    "INTERVAL",
    "MethodResult",
    "MissingExtraError",
    "pandas",
    "read_json",
    "read_jsonl",
]

R = TypeVar("R")

INTERVAL = ("value", "ci_low", "ci_high")
"""The one interval convention of every table: the estimate and its interval's bounds."""


class MissingExtraError(MemearenaError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


def pandas() -> Any:
    """The pandas module (MissingExtraError naming the extra when it is not installed)."""
    try:
        import pandas as pd_module
    except ImportError:
        raise MissingExtraError(
            "DataFrames need pandas: pip install 'memearena[notebook]'"
        ) from None
    return pd_module


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object file ({} when absent); a bad file is one MemearenaError naming it."""
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


def read_jsonl(path: Path) -> list[Any]:
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


def interval(value: Any, ci: Any = None) -> dict[str, Any] | None:
    """``{"value", "ci_low", "ci_high"}`` from any of the section shapes: a mapping with
    those keys, or a number with a ``[low, high]`` list; None when ``value`` is no number."""
    if isinstance(value, Mapping):
        if not isinstance(value.get("value"), int | float):
            return None
        return {k: value.get(k) for k in INTERVAL}
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    lo, hi = ci if isinstance(ci, list | tuple) and len(ci) == 2 else (None, None)
    return {"value": value, "ci_low": lo, "ci_high": hi}


class MethodResult:
    """The results of one method in a run directory (any registered method: a method without
    a result class of its own gets this one)."""

    method: ClassVar[str] = ""
    """The method (its leaderboard key and role prefix); set by each result class."""
    entity: ClassVar[str] = "model"
    """What a leaderboard row is about (``model``, ``judge``)."""
    bare_error_kinds: ClassVar[bool] = False
    """The method records errors under kinds without its prefix (``answer``: the Arena's)."""

    def __init__(
        self,
        run_dir: str | Path,
        *,
        method: str | None = None,
        new_calls: int | None = None,
        cost_usd: float | None = None,
        stopped: str | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        """The run directory (holds leaderboard.json, run.db, report.html, the method's files)."""
        self.name = method or self.method
        """The method these results are of."""
        self.new_calls = new_calls
        """Model calls this invocation paid for (None for a run opened with ``open_run``)."""
        self.cost_usd = cost_usd
        """The run's total recorded cost in USD (None for a run opened with ``open_run``)."""
        self.stopped = stopped
        """Why the run stopped early (e.g. the spend cap), or None."""
        self._board: dict[str, Any] | None = None

    # -- plain data --------------------------------------------------------------------------
    @property
    def board(self) -> dict[str, Any]:
        """``leaderboard.json`` as a dict (empty when the run wrote none)."""
        if self._board is None:
            self._board = read_json(self.run_dir / "leaderboard.json")
        return self._board

    @property
    def section(self) -> dict[str, Any]:
        """The method's section of ``leaderboard.json`` (empty when absent)."""
        sec = self.board.get(self.name)
        return sec if isinstance(sec, dict) else {}

    @property
    def status(self) -> dict[str, Any] | None:
        """The run's completion status from leaderboard.json, when the run recorded one."""
        status = self.board.get("status")
        return status if isinstance(status, dict) else None

    # -- what each method defines ------------------------------------------------------------
    def ranked(self) -> list[dict[str, Any]]:
        """The leaderboard's rows: ``{entity, "rank", "figure", "value", "ci_low", "ci_high",
        ...}``. The generic reading: the section's ``leaderboard`` (or ``overall``) rows, ranked
        by their ``value``."""
        rows = self.section.get("leaderboard") or self.section.get("overall") or []
        out = []
        for row in rows if isinstance(rows, list) else []:
            if not isinstance(row, Mapping):
                continue
            est = interval(row.get("value"), row.get("ci")) or interval(row) or {}
            out.append(
                {
                    self.entity: row.get(self.entity),
                    "rank": row.get("rank"),
                    "figure": row.get("figure", "value"),
                    **{k: est.get(k) for k in INTERVAL},
                }
            )
        return out

    def figures(self) -> Iterator[dict[str, Any]]:
        """Every figure with an interval: ``{entity, "figure", "value", "ci_low", "ci_high"}``
        (the generic reading: each leaderboard row's figure)."""
        for row in self.ranked():
            yield {self.entity: row[self.entity], "figure": row["figure"]} | {
                k: row.get(k) for k in INTERVAL
            }

    # -- DataFrames --------------------------------------------------------------------------
    def leaderboard(self) -> pd.DataFrame:
        """One row per ranked model (judge): rank, the figure it is ranked by, and that
        figure's ``value``, ``ci_low``, ``ci_high``, then the method's other columns."""
        rows = self.ranked()
        first = [self.entity, "rank", "figure", *INTERVAL]
        cols = first + [c for c in _columns(rows) if c not in first]
        return pandas().DataFrame(rows, columns=cols)

    def to_pandas(self) -> pd.DataFrame:
        """The leaderboard (:meth:`leaderboard`)."""
        return self.leaderboard()

    def intervals(self) -> pd.DataFrame:
        """Every figure with its interval, one row each: the model (judge), ``figure``,
        ``value``, ``ci_low``, ``ci_high``."""
        return pandas().DataFrame(list(self.figures()), columns=[self.entity, "figure", *INTERVAL])

    def calls(self) -> pd.DataFrame:
        """This method's model calls on record (``run.db``): request hash, model, role,
        status, tokens, cost, latency (the reply text is in :meth:`replies`)."""
        rows = [
            {k: v for k, v in asdict(r).items() if k != "response"}
            for r in self._with_store(self._own_calls)
        ]
        return pandas().DataFrame(rows)

    def replies(self) -> pd.DataFrame:
        """Every reply this method's calls got: request hash, model, role, status and the
        reply's text. Text is the model's untrusted output: escape before rendering."""
        cols = ["request_hash", "model", "role", "status", "response"]
        rows = [{k: getattr(r, k) for k in cols} for r in self._with_store(self._own_calls)]
        return pandas().DataFrame(rows, columns=cols)

    def request(self, key: str) -> dict[str, Any] | None:
        """The request a call sent, by its ``request_hash``: endpoint, messages as sent
        (images by content hash), parameters; None for a call recorded before requests were
        kept. Message text is untrusted: escape before rendering."""
        return self._with_store(lambda s: s.request(key))

    def requests(self) -> pd.DataFrame:
        """Every request this method's calls sent, one row per request key: ``key``,
        ``endpoint``, ``messages``, ``params`` (as ``memearena export --table requests``)."""

        def read(store: RunStore) -> list[dict[str, Any]]:
            keys = dict.fromkeys(r.request_hash for r in self._own_calls(store))
            found = (store.request(k) for k in keys)
            return [r for r in found if r is not None]

        cols = ["key", "key_version", "endpoint", "messages", "params"]
        return pandas().DataFrame(self._with_store(read), columns=cols)

    def errors(self) -> pd.DataFrame:
        """This method's recorded errors (``run.db``): kind, key, reason, detail."""

        def own(kind: str) -> bool:
            return kind.startswith(self.name + ".") or (self.bare_error_kinds and "." not in kind)

        rows = [asdict(e) for e in self._with_store(lambda s: s.errors()) if own(e.kind)]
        return pandas().DataFrame(rows, columns=["kind", "key", "reason", "detail", "created_at"])

    # -- helpers -----------------------------------------------------------------------------
    def _own_calls(self, store: RunStore) -> list[Any]:
        prefix = self.name + "."
        return [r for r in store.iter_calls() if r.role.startswith(prefix)]

    def _with_store(self, fn: Callable[[Any], R]) -> R:
        from memearena.store import RunStore

        db = self.run_dir / "run.db"
        if not db.is_file():
            raise MemearenaError(f"{db}: no run database in this directory")
        with RunStore(db) as store:
            return fn(store)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.run_dir)!r}, method={self.name!r})"


def _columns(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every key of ``rows``, in first-seen order."""
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)
