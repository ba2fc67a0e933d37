"""Stage progress bars (rich) that the pipelines advance as steps finish or are resumed.

A bar counts the steps this run makes: its total is the steps planned, a step found in the run
directory is advanced as reused (and shown as such), and a planned step the run turns out not
to need (a refused answer leaves no pair to judge) is dropped from the total, never counted as
done. So a finished bar reads what the closing "reused N, new M" line says, and a bar of a run
stopped by the spend cap stays short by the steps it did not make.

A method whose closing line counts step kinds (the lifecycle's tally: Adapt's) switches the
bars to step kinds (``by_step_kind``): a bar per kind, grown by each step as the run reaches it
(``reach``: its total is the steps reached so far, as a refinement chain grows) and advanced as
the tally counts it (``made``); item-level bars (``stage``/``advance``/``drop``) are then not
shown, since they would count items, not the steps the closing line counts."""

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
            TextColumn("{task.fields[reused_text]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=not enabled,
        )
        self._tasks: dict[str, TaskID] = {}
        self._reused: dict[str, int] = {}
        self._by_kind = False

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

    def by_step_kind(self) -> None:
        """Show a bar per step kind from now on (``reach``/``made``), as the closing line
        counts them; item-level bars (``stage``/``advance``/``drop``) are no longer shown."""
        self._by_kind = True
        for name in list(self._tasks):
            self._progress.remove_task(self._tasks.pop(name))
            del self._reused[name]

    def reach(self, kind: str) -> None:
        """One more step of ``kind`` this run makes or reuses (its bar's total grows)."""
        if not self._enabled:
            return
        if kind not in self._tasks:
            self._reused[kind] = 0
            self._tasks[kind] = self._progress.add_task(kind, total=1, reused_text="")
        else:
            self._grow(kind, 1)

    def made(self, kind: str, counted: str) -> None:
        """A reached step of ``kind`` counted as ``reused``, ``new`` or ``failed``."""
        self._advance(kind, 1, reused=counted == "reused")

    def unreach(self, kind: str) -> None:
        """A reached step of ``kind`` that ended uncounted (cancelled, stopped by the spend
        cap): off the total, never shown as done."""
        if self._enabled and kind in self._tasks:
            self._grow(kind, -1)

    def _grow(self, name: str, n: int) -> None:
        task = self._tasks[name]
        total = self._progress.tasks[self._progress.task_ids.index(task)].total or 0
        self._progress.update(task, total=max(0, int(total) + n))

    def stage(self, name: str, total: int) -> None:
        """Declare (or grow) a stage with ``total`` steps."""
        if not self._enabled or self._by_kind:  # nothing is shown: no bookkeeping either
            return
        if name in self._tasks:
            self._progress.update(self._tasks[name], total=total)
        else:
            self._reused[name] = 0
            self._tasks[name] = self._progress.add_task(name, total=total, reused_text="")

    def advance(self, name: str, n: int = 1, *, reused: bool = False) -> None:
        """Mark ``n`` steps of a stage done (``reused``: found in the run directory, not made
        again)."""
        if not self._by_kind:
            self._advance(name, n, reused=reused)

    def _advance(self, name: str, n: int, *, reused: bool) -> None:
        if not (self._enabled and name in self._tasks and n):
            return
        task = self._tasks[name]
        if reused:
            self._reused[name] += n
            self._progress.update(task, reused_text=f"reused {self._reused[name]:,}")
        self._progress.advance(task, n)

    def drop(self, name: str, n: int) -> None:
        """Take ``n`` planned steps off a stage's total: the run does not need them (never
        shown as done)."""
        if self._enabled and not self._by_kind and name in self._tasks and n > 0:
            self._grow(name, -n)

    def counts(self) -> dict[str, tuple[int, int, int]]:
        """Per stage, what its bar shows: ``(done, reused, total)``."""
        out: dict[str, tuple[int, int, int]] = {}
        for t in self._progress.tasks:
            name = next((k for k, v in self._tasks.items() if v == t.id), None)
            if name is not None:
                out[name] = (int(t.completed), self._reused[name], int(t.total or 0))
        return out
