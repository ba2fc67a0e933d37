"""The engine's step primitives, shared by every method's pipeline.

A *step* is one agent call whose final outcome (a parsed output, a refusal, an output that stayed
unparseable after re-asks) is stored as one artifact under a deterministic key; a permanent model
failure is only an error record, so a re-run retries it. A step's key carries the fingerprint of
the request it sends (``ModelPool.request_key``: endpoint and model id, rendered prompt with
image hashes, parameters), so a re-run after a config change recomputes what changed and reuses
the rest. ``bounded_map`` keeps a bounded window of jobs in flight, so memory follows the
window, not the number of items.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import random
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from memearena.errors import BudgetExceeded
from memearena.prompts import AskResult
from memearena.store import RunStore

__all__ = [
    "DEFAULT_WINDOW",
    "StageCount",
    "bounded_map",
    "capped_map",
    "counting_steps",
    "fewer_collections",
    "outcome_value",
    "run_step",
    "seeded_rng",
    "step_outcome",
    "tally_step",
    "unparsed_outcome",
]

T = TypeVar("T")
U = TypeVar("U")

DEFAULT_WINDOW = 256
"""Jobs in flight when a caller does not say (a few times a typical total concurrency)."""


def seeded_rng(*parts: object) -> random.Random:
    """A generator seeded by a string of the parts (config seed, purpose, item): stable across
    processes and platforms, so a resumed run makes the choices an uninterrupted one makes."""
    return random.Random("|".join(str(p) for p in parts))


@dataclass
class StageCount:
    """Steps of one stage in this run: reused from the store, newly computed, or failed."""

    reused: int = 0
    """Found in the store under the same key (same request): not called again."""
    new: int = 0
    """Computed by this run (a parsed output, a refusal or an unparseable output)."""
    failed: int = 0
    """A model failure (only an error record): retried by the next run."""
    again: int = 0
    """Reached again in this run (one request reached by several items or chains): answered
    from the outcome this run already counted as reused or new, so neither count repeats it."""


YOUNG_COLLECTION_THRESHOLD = 10_000
"""Allocations between two collections of the youngest generation while a pipeline runs
(Python's default: 700)."""

_GC_LOCK = threading.Lock()
_GC_HELD: list[tuple[int, int, int]] = []  # the thresholds to restore, while any block is inside


@contextlib.contextmanager
def fewer_collections(young: int = YOUNG_COLLECTION_THRESHOLD) -> Iterator[None]:
    """Collect the youngest generation every ``young`` allocations instead of every 700 inside
    the block (the whole process: thresholds are global). A pipeline keeps a window of steps in
    flight, whose coroutines, messages and replies outlive 700 allocations: each default
    collection traverses them and promotes them, so the older generations are traversed again;
    with room for a window's worth, most of them are gone before the next collection. Nothing
    is left uncollected (cycles wait a little longer). Nested or concurrent blocks restore the
    thresholds once the last one ends."""
    with _GC_LOCK:
        if not _GC_HELD:
            old = gc.get_threshold()
            _GC_HELD.append(old)
            gc.set_threshold(max(young, old[0]), old[1], old[2])
        else:
            _GC_HELD.append(_GC_HELD[0])
    try:
        yield
    finally:
        with _GC_LOCK:
            first = _GC_HELD.pop()
            if not _GC_HELD:
                gc.set_threshold(*first)


_TALLY: ContextVar[dict[str, StageCount] | None] = ContextVar("memearena_step_tally", default=None)


@contextlib.contextmanager
def counting_steps() -> Iterator[dict[str, StageCount]]:
    """Count every ``run_step`` made inside (event loops started inside included) by artifact
    kind: the lifecycle's "reused N, new M" per stage, for a method that keeps no counts."""
    tally: dict[str, StageCount] = {}
    token = _TALLY.set(tally)
    try:
        yield tally
    finally:
        _TALLY.reset(token)


def tally_step(kind: str, field: str) -> None:
    """Count one step of ``kind`` as ``reused``, ``new`` or ``failed`` in the enclosing
    ``counting_steps`` (a caller that answers a step from its own memory of the run's stored
    outcomes counts it as ``run_step`` would have)."""
    tally = _TALLY.get()
    if tally is not None:
        c = tally.get(kind)
        if c is None:
            c = tally[kind] = StageCount()
        c.__dict__[field] += 1


def outcome_value(
    store: RunStore,
    kind: str,
    key: str,
    res: AskResult[T],
    encode: Callable[[T, AskResult[T]], dict[str, Any]],
) -> dict[str, Any] | None:
    """The artifact value for a finished ask (recording refusals and parse failures as errors
    too, so the report shows them), or None for a failure worth retrying on a re-run."""
    if res.value is not None:
        store.clear_errors(kind, key)  # a resumed step that now succeeds
        return encode(res.value, res)
    if res.refusal:
        raw = res.raw[-1] if res.raw else ""
        store.record_error(kind, key, "refusal", raw[:500])
        return {"refusal": True, "raw": raw}
    if res.error and res.error.startswith("unparseable"):
        store.record_error(kind, key, res.error, (res.raw[-1] if res.raw else "")[:500])
        return {"error": res.error, "raw": res.raw}
    store.record_error(kind, key, res.error or "unknown failure")
    return None


def step_outcome(
    res: AskResult[T],
    encode: Callable[[T, AskResult[T]], dict[str, Any]],
    *,
    required: bool = False,
) -> tuple[dict[str, Any] | None, tuple[str, str] | None]:
    """``(artifact value, error record)`` of a finished ask: a parsed value (no error record: an
    earlier one is cleared), a refusal or a parse failure (both final: an artifact and an error
    record, so the report shows them), or a failure worth retrying (no artifact, an error).

    ``required``: the step's output is one the run cannot go on without (an Arena context, a
    guideline, an Adapt reference): a parse failure is then an error record only, never a
    final artifact, so a re-run asks again (with its own re-asks) instead of reusing it."""
    if res.value is not None:
        return encode(res.value, res), None
    return unparsed_outcome(res, required=required)


def unparsed_outcome(
    res: AskResult[Any], *, required: bool = False
) -> tuple[dict[str, Any] | None, tuple[str, str] | None]:
    """``step_outcome`` of an ask that came back with no parsed value (a refusal, a parse
    failure, a failure worth retrying)."""
    if res.refusal:
        raw = res.raw[-1] if res.raw else ""
        return {"refusal": True, "raw": raw}, ("refusal", raw[:500])
    if res.error and res.error.startswith("unparseable"):
        detail = (res.raw[-1] if res.raw else "")[:500]
        if required:
            return None, (res.error, detail)
        return {"error": res.error, "raw": res.raw}, (res.error, detail)
    return None, (res.error or "unknown failure", "")


async def run_step(
    store: RunStore,
    kind: str,
    key: str,
    call: Callable[[], Awaitable[AskResult[T]]],
    encode: Callable[[T, AskResult[T]], dict[str, Any]],
    *,
    lookup: bool = True,
    required: bool = False,
    observe: Callable[[str], None] | None = None,
) -> dict[str, Any] | None:
    """The stored artifact ``(kind, key)``, or call, store and return it (first write wins).
    ``lookup=False`` skips the read when the caller has just looked the key up in a batch;
    ``required``: an output that stays unparseable is retried on a re-run (`step_outcome`);
    ``observe`` is told how the step counted (``reused``, ``new`` or ``failed``), as the tally
    counts it (a progress bar fed per step kind).

    The outcome is queued for the store's next group commit (``RunStore.commit_step``), which
    writes it after the calls it came from and before any request sent later, so a step whose
    result another request used is never lost to a kill; this returns without waiting for it.
    Returns None when the call failed for a reason worth retrying on a re-run."""
    if lookup:
        got = store.get_artifact(kind, key)
        if got is not None:
            tally_step(kind, "reused")
            if observe is not None:
                observe("reused")
            return got
    res = await call()
    value, error = step_outcome(res, encode, required=required)
    counted = "new" if value is not None else "failed"
    tally_step(kind, counted)
    if observe is not None:
        observe(counted)
    # The key was found absent before the call (here, or by the caller's batched look-up).
    return await store.commit_step(
        kind, key, value, error=error, clear_error=error is None, absent=True
    )


async def bounded_map(
    fn: Callable[[T], Awaitable[U]], items: Iterable[T], window: int = DEFAULT_WINDOW
) -> AsyncIterator[tuple[T, U]]:
    """``fn`` over ``items`` with at most ``window`` calls in flight, yielding ``(item, result)``
    as each finishes (completion order). Items are drawn lazily, so a generator of millions of
    jobs never materialises. An exception in ``fn`` cancels the rest and propagates.

    Each job tells of its own end (a done callback), so a job that ends costs the same
    whatever the window (``asyncio.wait`` would visit every job in flight, twice, each time)."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    it = iter(items)
    running: dict[asyncio.Future[U], T] = {}
    ended: collections.deque[asyncio.Future[U]] = collections.deque()
    wake: list[asyncio.Future[None]] = []  # the generator's wait for the next end, if waiting
    loop = asyncio.get_running_loop()

    def on_end(t: asyncio.Future[U]) -> None:
        ended.append(t)
        if wake and not wake[0].done():
            wake[0].set_result(None)

    def fill() -> None:
        while len(running) < window:
            try:
                item = next(it)
            except StopIteration:
                return
            t = asyncio.ensure_future(fn(item))
            running[t] = item
            t.add_done_callback(on_end)

    fill()
    try:
        while running:
            if not ended:
                w = loop.create_future()
                wake.append(w)
                try:
                    await w
                finally:
                    wake.clear()
            for _ in range(len(ended)):  # those ended by now; then the window is refilled
                t = ended.popleft()
                yield running.pop(t), t.result()
            fill()
    finally:
        for t in running:
            t.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)


class _Stopped:
    """What a job of ``capped_map`` returns once the spend cap stopped the run."""


_STOPPED = _Stopped()


async def capped_map(
    fn: Callable[[T], Awaitable[U]],
    items: Iterable[T],
    window: int = DEFAULT_WINDOW,
    *,
    stopped: Callable[[], BudgetExceeded | None] | None = None,
) -> AsyncIterator[tuple[T, U]]:
    """``bounded_map``, except for the spend cap: once a job raises BudgetExceeded, no further
    job starts and the jobs in flight run to their end (a call cancelled mid-way would stay on
    record as sent, its reply lost, and be paid again by the next run); their results are
    yielded, then BudgetExceeded is raised. Any other exception cancels the rest, as in
    ``bounded_map``.

    ``stopped``: the caller's own record of a stop (its jobs may catch the cap themselves and
    end early with what they finished): once it returns one, no further job starts either."""
    raised: list[BudgetExceeded] = []

    def stop() -> BudgetExceeded | None:
        if raised:
            return raised[0]
        return stopped() if stopped is not None else None

    async def guarded(item: T) -> U | _Stopped:
        if stop() is not None:
            return _STOPPED
        try:
            return await fn(item)
        except BudgetExceeded as e:
            raised.append(e)
            return _STOPPED

    def gated() -> Iterator[T]:
        for item in items:
            if stop() is not None:
                return
            yield item

    async for item, res in bounded_map(guarded, gated(), window):
        if not isinstance(res, _Stopped):
            yield item, res
    why = stop()
    if why is not None:
        raise why
