"""Stage progress bars (rich) that the pipelines advance as steps finish or are resumed."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


class StageProgress:
    """One bar per pipeline stage; a no-op when ``enabled`` is False (tests, notebooks)."""

    def __init__(self, console: Console | None = None, *, enabled: bool = True) -> None:
        self._enabled = enabled
        self._progress = Progress(
            TextColumn("[bold]{task.description:<12}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=not enabled,
        )
        self._tasks: dict[str, TaskID] = {}

    def __enter__(self) -> StageProgress:
        self._progress.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.__exit__(exc_type, exc, tb)

    def stage(self, name: str, total: int) -> None:
        """Declare (or grow) a stage with ``total`` steps."""
        if not self._enabled:  # nothing is shown: no bookkeeping per step either
            return
        if name in self._tasks:
            self._progress.update(self._tasks[name], total=total)
        else:
            self._tasks[name] = self._progress.add_task(name, total=total)

    def advance(self, name: str, n: int = 1) -> None:
        """Mark ``n`` steps of a stage done."""
        if self._enabled and name in self._tasks:
            self._progress.advance(self._tasks[name], n)
