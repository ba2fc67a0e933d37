"""Shared by ``bench/adapt.py`` and ``bench/judge_audit.py``: a pipeline's CPU per call beside
the model layer's on the same calls replayed.

``Recorder`` wraps ``ModelPool.complete`` and ``ModelPool.embed`` for the length of a run and
keeps every call's arguments in order (re-asks included; cache hits too, as the run made them):
a reference each, so the recording costs the run a tuple per call, nothing more. ``replay``
copies those calls' messages into new objects (outside its timed region) and sends them
through a fresh ``ModelPool`` (the simulated backend, a fresh run store and response cache, the
same window) with no pipeline: the model layer's own CPU on the run's own requests. The ratio
of the two is what the pipeline adds on top of its calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import time
from collections.abc import Callable, Sequence
from typing import Any

from memearena.engine.steps import bounded_map
from memearena.models import ModelPool
from memearena.models.types import Message

Call = tuple[str, str, tuple[Any, ...], dict[str, Any]]


def peak_rss_mb() -> float:
    """This process's peak resident set so far (MB; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _fresh(arg: Any) -> Any:
    """A message list copied into new message objects: the replay pays for encoding its
    messages itself, as a pipeline's first use of them does (nothing memoised on the run's)."""
    if isinstance(arg, list) and arg and all(isinstance(m, Message) for m in arg):
        return [Message(m.role, m.content) for m in arg]
    return arg


class Recorder:
    """Every ``ModelPool.complete``/``embed`` call made while installed, in call order."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._saved: dict[str, Any] = {}

    def install(self) -> Recorder:
        for name in ("complete", "embed"):
            orig = getattr(ModelPool, name)
            self._saved[name] = orig

            def wrapper(
                pool: ModelPool, model: str, *a: Any, _o: Any = orig, _n: str = name, **kw: Any
            ) -> Any:
                self.calls.append((_n, model, a, kw))
                return _o(pool, model, *a, **kw)

            setattr(ModelPool, name, wrapper)
        return self

    def uninstall(self) -> None:
        for name, orig in self._saved.items():
            setattr(ModelPool, name, orig)
        self._saved.clear()


def timed_method(cls: type, name: str, acc: dict[str, float]) -> None:
    """Wrap the coroutine method ``cls.name`` to add its CPU seconds to ``acc[name]``, and
    those of the calling (event loop's) thread alone to ``acc[name + "_main"]`` (work handed to
    other threads, such as the store's group commits, is not in it)."""
    fn = getattr(cls, name)

    async def wrapper(self: Any, *a: Any, **kw: Any) -> Any:
        c, m = time.process_time(), time.thread_time()
        try:
            return await fn(self, *a, **kw)
        finally:
            acc[name] = acc.get(name, 0.0) + time.process_time() - c
            acc[f"{name}_main"] = acc.get(f"{name}_main", 0.0) + time.thread_time() - m

    setattr(cls, name, wrapper)


def replay(
    make_pool: Callable[[], ModelPool],
    calls: Sequence[Call],
    window: int,
    main: dict[str, float] | None = None,
) -> float:
    """CPU seconds of ``calls`` sent through a fresh pool (``make_pool``), ``window`` at a
    time; a call that fails (a simulated fault past its retries) counts as made. ``main``:
    given, its ``"cpu"`` is set to the CPU seconds of the event loop's thread alone."""

    calls = [
        (kind, model, tuple(map(_fresh, a)), {k: _fresh(v) for k, v in kw.items()})
        for kind, model, a, kw in calls
    ]

    async def go() -> float:
        pool = make_pool()

        async def one(call: Call) -> None:
            kind, model, a, kw = call
            # The run saw the same failure; its CPU is what is measured.
            with contextlib.suppress(Exception):
                await getattr(pool, kind)(model, *a, **kw)

        t, m = time.process_time(), time.thread_time()
        async for _ in bounded_map(one, calls, window):
            pass
        cpu = time.process_time() - t
        if main is not None:
            main["cpu"] = time.thread_time() - m
        await pool.aclose()
        return cpu

    return asyncio.run(go())
