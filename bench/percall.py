"""Shared by ``bench/adapt.py`` and ``bench/judge_audit.py``: a pipeline's CPU per call beside
the model layer's on the same calls replayed.

``Recorder`` wraps ``ModelPool.complete`` and ``ModelPool.embed`` for the length of a run and
keeps every call's arguments in order (re-asks included; cache hits too, as the run made them):
a reference each, so the recording costs the run a tuple per call, nothing more. ``replay``
copies those calls' messages into new objects (outside its timed region) and sends them
through a fresh ``ModelPool`` (the simulated backend, a fresh run store and response cache, the
same window) with no pipeline: the model layer's own CPU on the run's own requests. The ratio
of the two is what the pipeline adds on top of its calls.

``Essentials`` (the ``--floor`` of both benches) keeps, during the same run, the work a pipeline
cannot do without for its calls: every prompt it rendered (the rendering functions' arguments),
every reply it parsed (the parser and the text), every step outcome it queued
(``RunStore.commit_step``'s arguments), and the CPU of its image work. ``replay(...,
floor=...)`` then sends the same calls with that work redone around them, spread evenly over the
calls (renders before a call, parses and step outcomes after it), and no dependency between
calls, so the group commits are as large as the window allows. That is an ideal pipeline: no
memo, no scheduling, no bookkeeping; the method's own choices of what to ask cost nothing. Its
CPU (plus the image work measured in the run) over the plain replay's is the lowest ratio any
design on this model layer and store can reach for the method's calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import resource
import time
from collections.abc import Callable, Sequence
from typing import Any

from memearena.engine.steps import bounded_map
from memearena.errors import ParseError
from memearena.models import ModelPool
from memearena.models.types import Message
from memearena.store import RunStore

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


class Essentials:
    """A run's essential per-call work, recorded for the floor replay (see the module)."""

    def __init__(self) -> None:
        self.renders: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = []
        self.parses: list[tuple[Callable[[str], Any], str]] = []
        self.steps: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
        self.image_cpu_s = 0.0
        self._saved: list[tuple[Any, str, Any]] = []

    def _patch(self, owner: Any, name: str, new: Any) -> None:
        self._saved.append((owner, name, inspect.getattr_static(owner, name)))
        setattr(owner, name, new)

    def renderer(self, owner: Any, name: str) -> None:
        """Record every call of the rendering function ``owner.name`` (a module's own name
        for it: the one the pipeline calls)."""
        fn = getattr(owner, name)

        def rendering(*a: Any, **kw: Any) -> Any:
            self.renders.append((fn, a, kw))
            return fn(*a, **kw)

        self._patch(owner, name, rendering)

    def parser(self, parser: Callable[[str], Any]) -> Callable[[str], Any]:
        """``parser``, recording each text it is given."""

        def parsing(text: str) -> Any:
            self.parses.append((parser, text))
            return parser(text)

        return parsing

    def asker(self, owner: Any, name: str = "ask") -> None:
        """Record the parser of every reply ``owner.name`` (``prompts.ask``) parses."""
        ask = getattr(owner, name)

        def asking(*a: Any, **kw: Any) -> Any:
            return ask(*a[:4], self.parser(a[4]), *a[5:], **kw)

        self._patch(owner, name, asking)

    def image_work(self, owner: Any, name: str, clock: Callable[[], float]) -> None:
        """Add the CPU of ``owner.name`` (by ``clock``: ``time.thread_time`` in workers)."""
        fn = getattr(owner, name)

        def timed(*a: Any, **kw: Any) -> Any:
            c = clock()
            try:
                return fn(*a, **kw)
            finally:
                self.image_cpu_s += clock() - c  # a float add: atomic enough under the GIL

        self._patch(owner, name, timed)

    def install(self) -> Essentials:
        """Record every step outcome queued (all methods queue them through the store)."""
        commit = RunStore.commit_step

        async def committing(store: RunStore, *a: Any, **kw: Any) -> Any:
            self.steps.append((a, kw))
            return await commit(store, *a, **kw)

        self._patch(RunStore, "commit_step", committing)
        return self

    def uninstall(self) -> None:
        for owner, name, orig in reversed(self._saved):
            setattr(owner, name, orig)
        self._saved.clear()


def priced(cfg: Any) -> Any:
    """``cfg`` with every model priced (a cent per million tokens): each call then takes a paid
    call's path through the model layer (its ``sent`` row committed before the request leaves,
    its reply settled at once), as in a run of paid endpoints. Unpriced simulated models are
    free, and the pool lets free results wait to share a commit."""
    from memearena.config import Price

    price = Price(input=0.01, output=0.01)
    models = {k: m.model_copy(update={"price": price}) for k, m in cfg.models.items()}
    return cfg.model_copy(update={"models": models})


def _share(items: Sequence[Any], i: int, n: int) -> Sequence[Any]:
    """The ``i``-th of ``n`` even shares of ``items``, in order."""
    return items[i * len(items) // n : (i + 1) * len(items) // n]


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
    floor: Essentials | None = None,
    store: RunStore | None = None,
) -> float:
    """CPU seconds of ``calls`` sent through a fresh pool (``make_pool``), ``window`` at a
    time; a call that fails (a simulated fault past its retries) counts as made. ``main``:
    given, its ``"cpu"`` is set to the CPU seconds of the event loop's thread alone.

    ``floor`` (with the pool's ``store``): the calls with the run's essential work redone
    around them, each call's even share of it (the module's ideal pipeline)."""

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

        n = len(calls)

        async def ideal(job: tuple[int, Call]) -> None:
            assert floor is not None and store is not None
            i, call = job
            for fn, a, kw in _share(floor.renders, i, n):
                fn(*a, **kw)
            await one(call)
            for parser, text in _share(floor.parses, i, n):
                with contextlib.suppress(ParseError):
                    parser(text)
            for a, kw in _share(floor.steps, i, n):
                await store.commit_step(*a, **kw)

        t, m = time.process_time(), time.thread_time()
        if floor is None:
            async for _ in bounded_map(one, calls, window):
                pass
        else:
            async for _ in bounded_map(ideal, enumerate(calls), window):
                pass
        cpu = time.process_time() - t
        if main is not None:
            main["cpu"] = time.thread_time() - m
        await pool.aclose()
        return cpu

    # The model layer runs under the collection thresholds a method's run sets (the lifecycle's
    # ``fewer_collections``, where the measured tree has it), as the pipeline did.
    from memearena.engine import steps

    held = getattr(steps, "fewer_collections", contextlib.nullcontext)
    with held():
        return asyncio.run(go())
