"""The model call stack: cache, budget, concurrency and rate limits, timeout, retries,
accounting, refusal detection and the call record, in that order, for every model call.

Writes are group-committed: the cache entries and call records of the calls that end in the
same event-loop turn are written in one transaction each (one commit per turn rather than two
per call), and each call waits for that commit before it returns. So, as with one commit per
call, a call's record (and its cache entry) is durable by the time its result is returned: a
crash (kill -9 included) can only lose the records of calls that had not returned yet, never
one whose result the caller could have stored. Failed and over-budget calls are committed at
once, before their error is raised."""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memearena.errors import BudgetExceeded, ModelError, TransientModelError
from memearena.models.accounting import estimate_tokens
from memearena.models.backends import ChatBackend, OpenAIBackend, SimBackend, SimResponder
from memearena.models.cache import (
    ResponseCache,
    endpoint_id,
    key_from_parts,
    key_prefix,
    params_json,
)
from memearena.models.limits import RateLimiter, backoff_delay
from memearena.models.refusal import detect_refusal
from memearena.models.types import Completion, GenParams, Message
from memearena.store.runstore import USAGE_FIELDS, CallStatus, RunStore

if TYPE_CHECKING:
    from memearena.config import ModelConfig

__all__ = ["DEFAULT_OUTPUT_ESTIMATE", "USAGE_FIELDS", "ModelPool"]

log = logging.getLogger("memearena.models")

DEFAULT_OUTPUT_ESTIMATE = 512
"""Output tokens assumed by the budget check when a call sets no max_tokens."""

"""Keys of each model's usage summary (same as ``RunStore.usage_summary``)."""

_STATUS_COUNTER = {"cached": "cached", "error": "errors", "refusal": "refusals", "budget": "budget"}


class _Model:
    """Per-model state, precomputed once: limits, parameters, price, cache-key prefix."""

    __slots__ = (
        "backend",
        "cfg",
        "endpoint",
        "key_prefix",
        "limiter",
        "name",
        "params",
        "params_part",
        "price_in",
        "price_out",
        "sem",
        "usage",
    )

    def __init__(self, name: str, cfg: ModelConfig) -> None:
        self.name = name
        self.cfg = cfg
        self.params = cfg.gen_params()
        self.endpoint = endpoint_id(cfg, name)
        self.key_prefix = key_prefix(self.endpoint)
        self.params_part = params_json(self.params)
        self.sem = asyncio.Semaphore(cfg.max_concurrency)
        self.limiter = RateLimiter(cfg.rpm) if cfg.rpm else None
        self.price_in = cfg.price.input / 1_000_000
        self.price_out = cfg.price.output / 1_000_000
        self.backend: ChatBackend | None = None
        self.usage: dict[str, float] = dict.fromkeys(USAGE_FIELDS, 0)


class ModelPool:
    """Every configured model behind one ``complete`` call. Identical requests are served from
    the cache; every call, cached or failed, is recorded in the store."""

    def __init__(
        self,
        models: Mapping[str, ModelConfig],
        *,
        store: RunStore | None = None,
        cache: ResponseCache | None = None,
        max_cost: float | None = None,
        responder: SimResponder | None = None,
        backends: Mapping[str, ChatBackend] | None = None,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        seed: int = 0,
    ) -> None:
        self._models = {name: _Model(name, cfg) for name, cfg in models.items()}
        for name, backend in (backends or {}).items():
            if name not in self._models:
                raise ModelError(f"backend given for unknown model {name!r}")
            self._models[name].backend = backend
        self._store = store
        self._cache = cache
        self._max_cost = max_cost
        self._responder = responder
        self._backoff_base = backoff_base
        self._backoff_cap = backoff_cap
        self._rng = random.Random(seed)  # jitter only: never shapes a result
        self._spent = 0.0
        self._reserved = 0.0
        # Group commit: what ended since the last commit, and the calls waiting for it.
        self._pending_calls: list[tuple[Any, ...]] = []  # CallRecord rows
        self._pending_cache: dict[str, Completion] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self._flush_loop: asyncio.AbstractEventLoop | None = None  # where a commit is scheduled

    @property
    def spent_usd(self) -> float:
        """USD spent by this pool's calls so far (cached calls cost nothing)."""
        return self._spent

    def usage(self) -> dict[str, dict[str, float]]:
        """Per model: calls, cached, errors, refusals, budget, tokens, cost, summed latency."""
        return {name: dict(m.usage) for name, m in self._models.items() if m.usage["calls"]}

    def _backend(self, m: _Model) -> ChatBackend:
        if m.backend is None:
            if m.cfg.provider == "openai":
                m.backend = OpenAIBackend(m.name, m.cfg)
            else:
                if self._responder is None:
                    raise ModelError(
                        f"model {m.name!r} is simulated but no simulated world was given"
                    )
                m.backend = SimBackend(m.name, m.cfg, self._responder)
        return m.backend

    def _record(
        self,
        m: _Model,
        key: str,
        role: str,
        status: CallStatus,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost: float = 0.0,
        latency: float = 0.0,
        attempts: int = 0,
        error: str | None = None,
        response: str | None = None,
    ) -> None:
        """Count the call and queue its record for the next commit (``_committed`` waits for
        it, ``_commit_now`` forces it)."""
        u = m.usage
        u["calls"] += 1
        counter = _STATUS_COUNTER.get(status)
        if counter is not None:
            u[counter] += 1
        u["input_tokens"] += input_tokens
        u["output_tokens"] += output_tokens
        u["cost_usd"] += cost
        u["latency_s"] += latency
        if self._store is not None:
            # A CallRecord's fields, in order, as a plain row (no dataclass per call).
            self._pending_calls.append(
                (
                    key,
                    m.name,
                    role,
                    status,
                    input_tokens,
                    output_tokens,
                    cost,
                    latency,
                    attempts,
                    error,
                    response,
                    time.time(),
                )
            )

    async def _committed(self) -> None:
        """Wait until every cache entry and call record pending now is committed: the first
        waiter of an event-loop turn schedules one commit for all of them at the next turn."""
        if not self._pending_calls and not self._pending_cache:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._waiters.append(fut)
        if self._flush_loop is not loop:
            self._flush_loop = loop
            loop.call_soon(self._flush)
        await fut

    def _flush(self) -> Exception | None:
        """Commit every pending cache entry (one transaction) and call record (another), then
        wake their waiters, with the write error if one failed; returns that error."""
        self._flush_loop = None
        calls, self._pending_calls = self._pending_calls, []
        entries, self._pending_cache = self._pending_cache, {}
        waiters, self._waiters = self._waiters, []
        error: Exception | None = None
        if entries and self._cache is not None:
            try:
                self._cache.put_many(entries.items())
            except Exception as e:  # StoreError; anything else must still wake the waiters
                error = e
        if calls and self._store is not None:
            try:
                self._store.record_call_rows(calls)
            except Exception as e:
                error = error or e
        for w in waiters:
            if w.done():  # its call was cancelled meanwhile (its record is committed all the same)
                continue
            try:
                if error is None:
                    w.set_result(None)
                else:
                    w.set_exception(error)
            except RuntimeError:  # its event loop is closed: nobody is waiting any more
                pass
        return error

    def _commit_now(self) -> None:
        """Commit everything pending before returning (failure paths); raises a write error."""
        error = self._flush()
        if error is not None:
            raise error

    def request_key(
        self, model: str, messages: Sequence[Message], params: GenParams | None = None
    ) -> str:
        """The content hash of the request ``complete`` would send (endpoint identity, model
        id, messages with image hashes, merged parameters): the fingerprint a step's artifact
        key carries, so a changed model, prompt, input or parameter is recomputed, never reused."""
        m = self._models.get(model)
        if m is None:
            raise ModelError(f"unknown model {model!r}; define it under 'models'")
        if params is None:
            return key_from_parts(m.key_prefix, m.endpoint, messages, m.params, m.params_part)
        return key_from_parts(m.key_prefix, m.endpoint, messages, m.params.merged(params))

    async def complete(
        self,
        model: str,
        messages: Sequence[Message],
        *,
        role: str,
        params: GenParams | None = None,
    ) -> Completion:
        """One model call through the whole stack. Returns once the call's record (and cache
        entry) is committed. Raises ModelError once retries are spent (the failure is recorded
        first) and BudgetExceeded before a call that would overspend."""
        m = self._models.get(model)
        if m is None:
            raise ModelError(f"unknown model {model!r}; define it under 'models'")
        if params is None:
            p = m.params
            key = key_from_parts(m.key_prefix, m.endpoint, messages, p, m.params_part)
        else:
            p = m.params.merged(params)
            key = key_from_parts(m.key_prefix, m.endpoint, messages, p)
        t0 = time.perf_counter()

        if self._cache is not None:
            # An answer still waiting for its commit is as good as one in the cache file.
            hit = self._pending_cache.get(key) or self._cache.get(key)
            if hit is not None:
                latency = time.perf_counter() - t0
                self._record(m, key, role, "cached", latency=latency, response=hit.text)
                await self._committed()
                return Completion(
                    hit.text,
                    model,
                    hit.usage,
                    latency,
                    hit.finish_reason,
                    refusal=False,
                    cached=True,
                    cost_usd=0.0,
                )

        estimate = 0.0
        if self._max_cost is not None:
            out_tokens = p.max_tokens or DEFAULT_OUTPUT_ESTIMATE
            estimate = estimate_tokens(messages) * m.price_in + out_tokens * m.price_out
            # In-flight calls hold their estimate, so concurrency cannot overshoot the budget.
            if self._spent + self._reserved + estimate > self._max_cost:
                reason = (
                    f"budget: spent ${self._spent:.4f} + in flight ${self._reserved:.4f} + "
                    f"this call ~${estimate:.4f} would exceed --max-cost ${self._max_cost:.4f}"
                )
                self._record(m, key, role, "budget", error=reason)
                self._commit_now()
                raise BudgetExceeded(f"{model}: {reason}")
            self._reserved += estimate
        try:
            return await self._call(m, key, messages, p, role, t0)
        finally:
            self._reserved -= estimate

    async def _call(
        self,
        m: _Model,
        key: str,
        messages: Sequence[Message],
        p: GenParams,
        role: str,
        t0: float,
    ) -> Completion:
        backend = self._backend(m)
        cfg = m.cfg
        attempt = 0
        while True:
            attempt += 1
            try:
                async with m.sem:
                    if m.limiter is not None:
                        await m.limiter.acquire()
                    async with asyncio.timeout(cfg.timeout):
                        raw = await backend.chat(messages, p, role)
                break
            except TimeoutError:
                err: TransientModelError = TransientModelError(f"no reply within {cfg.timeout:g}s")
            except TransientModelError as e:
                err = e
            except ModelError as e:
                raise self._fail(m, key, role, t0, attempt, str(e)) from None
            except Exception as e:  # a bug in a backend or responder: on record, then raised
                self._fail(m, key, role, t0, attempt, f"{type(e).__name__}: {e}")
                raise
            if attempt > cfg.max_retries:
                reason = f"{err} (gave up after {attempt} attempts)"
                raise self._fail(m, key, role, t0, attempt, reason) from None
            delay = backoff_delay(
                attempt,
                self._rng,
                base=self._backoff_base,
                cap=self._backoff_cap,
                retry_after=err.retry_after,
            )
            log.debug("%s: attempt %d failed (%s); retrying in %.2fs", m.name, attempt, err, delay)
            await asyncio.sleep(delay)

        latency = time.perf_counter() - t0
        usage = raw.usage
        cost = usage.input_tokens * m.price_in + usage.output_tokens * m.price_out
        self._spent += cost
        text = raw.text or raw.refusal_field or ""
        refusal = detect_refusal(raw.text, raw.finish_reason, raw.refusal_field)
        completion = Completion(
            text, m.name, usage, latency, raw.finish_reason, refusal, False, cost
        )
        # Never cache a refusal, an empty output or a filtered stop: a cached refusal would
        # replay on every retry.
        if (
            self._cache is not None
            and not refusal
            and raw.finish_reason != "content_filter"
            and text.strip()
        ):
            self._pending_cache[key] = completion
        self._record(
            m,
            key,
            role,
            "refusal" if refusal else "ok",
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost=cost,
            latency=latency,
            attempts=attempt,
            response=text,
        )
        await self._committed()
        return completion

    def _fail(
        self, m: _Model, key: str, role: str, t0: float, attempts: int, reason: str
    ) -> ModelError:
        """Record a failed call; returns the error to raise (naming the model)."""
        log.warning("%s: call failed: %s", m.name, reason)
        self._record(
            m,
            key,
            role,
            "error",
            latency=time.perf_counter() - t0,
            attempts=attempts,
            error=reason,
        )
        self._commit_now()
        return ModelError(f"{m.name}: {reason}")

    async def aclose(self) -> None:
        """Commit anything still pending and close every backend this pool opened (the store and
        cache belong to the caller)."""
        try:
            self._commit_now()
        finally:
            for m in self._models.values():
                close = getattr(m.backend, "aclose", None)
                if close is not None:
                    await close()

    async def __aenter__(self) -> ModelPool:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
