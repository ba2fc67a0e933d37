"""The model call stack: cache, concurrency and rate limits, budget, timeout, retries,
accounting, refusal detection and the call record, in that order, for every model call.

Spend on record is never lower than spend: a call that can cost money or leaves this process
is recorded as ``sent`` (with the most it can cost) and committed before it is sent, then settled
in place when it ends; a kill leaves it ``sent``, so the run's spend upper bound covers it.
The spend cap (``max_cost``) is on the run's total across invocations (read from the store),
and a call reserves its estimate only once it holds one of its model's two kinds of slot (a
stage slot, in which it is reserved and put on record as ``sent``, then a send slot, held while
it is in flight; ``max_concurrency`` of each), so reservations never exceed twice what can be
in flight, and the next requests' ``sent`` commit overlaps the replies in flight instead of
idling a send slot. Reaching the cap stops the pool: calls not yet reserved raise
BudgetExceeded without a record, calls already reserved go out, finish and are recorded, and
``aclose`` waits for them before closing any client.

Writes are group-committed, write-ahead: the cache entries, requests as sent and call records
of the calls that end (or are about to be sent) in the same event-loop turn, or in the next few
while other calls still wait on a reply (``GROUP_TURNS``), are written in one transaction per
file (one commit for a few dozen calls rather than two per call), with the step outcomes the
store has queued since (``RunStore.commit_step``) written after them in the same transaction.
A call returns once its rows are queued, not committed; what it returned is committed before
any request that could depend on it leaves: a call's ``sent`` commit carries every row and
cache entry queued before it, the commit stays scheduled (a few turns at most), the store
commits the queue before any write or read of its own, and ``aclose`` commits the rest. So a
crash (kill -9 included) can lose only results no request sent since depends on (a re-run asks
for them again, from the cache file where it holds them), never the ``sent`` row of a request
that left, and never a step's outcome without the calls it came from. Failed and over-budget
calls are committed at once, before their error is raised. While a commit would carry free
results only (cache hits, replies of free in-process models, step outcomes: nothing a kill
could make a re-run pay for again), nobody waits on it and no call of a tracked model is under
way, it waits for more to join it, up to ``FREE_GROUP_ROWS`` rows or ``FREE_GROUP_S`` seconds;
a paid reply's settlement, a ``sent`` row, a waiter or the store's own write makes it due at
once, as above.

With ``commit_in_thread`` (off by default), a scheduled group commit runs in the pool's writer
thread instead of on the loop (SQLite and Zstandard release the GIL for most of it), one at a
time and in the order taken, through connections of its own; the event loop only hands it
over. Until it ended, what it carries is served from memory (replies,
cache entries, the store's queued step outcomes), and the store's own writes and reads, the
failure paths and ``aclose`` first wait for it, then commit what is left on the loop."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import logging
import math
import os
import queue
import random
import re
import threading
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memearena.errors import (
    BadResponse,
    BudgetExceeded,
    ConfigError,
    EndpointError,
    ModelError,
    TransientModelError,
)
from memearena.models.accounting import estimate_tokens
from memearena.models.backends import (
    REQUEST_ID,
    ChatBackend,
    OpenAIBackend,
    SimBackend,
    SimResponder,
    idempotency_key,
)
from memearena.models.cache import (
    ResponseCache,
    endpoint_id,
    key_from_parts,
    key_prefix,
    params_json,
    payload_from_parts,
    payload_key,
)
from memearena.models.embeddings import (
    EMBED_KEY_TAG,
    EMBED_PARAMS,
    EmbedAsChat,
    EmbeddingBackend,
    SimEmbedder,
    decode_vectors,
    embed_messages,
)
from memearena.models.limits import RateLimiter, backoff_delay
from memearena.models.refusal import detect_refusal
from memearena.models.types import Completion, GenParams, ImagePart, Message, Usage
from memearena.store.keyfilter import KeyFilter
from memearena.store.runstore import USAGE_FIELDS, CallStatus, RunStore

if TYPE_CHECKING:
    from memearena.config import ModelConfig
    from memearena.models.lean import LeanBackend

__all__ = ["DEFAULT_OUTPUT_ESTIMATE", "USAGE_FIELDS", "ModelPool"]

log = logging.getLogger("memearena.models")

_GARBLE = re.compile(r"\x00|<\|(?:endoftext|im_end|im_start|eot_id|end_of_text)\|?")
"""Marks of a reply broken in transit or decoding: a NUL, a leaked special token."""


def _garbled(text: str | None) -> str | None:
    """What marks `text` as garbled (a NUL, a leaked special token), or None.

    A garbled reply is retried as the same request (``bad_response``), never parsed or re-asked:
    a truncated answer would otherwise be scored, and a re-ask's outcome would then depend on
    which request the fault hit, so two runs of one config could differ."""
    if not text:
        return None
    m = _GARBLE.search(text)
    if m is None:
        return None
    return "NUL byte" if m.group() == "\x00" else f"leaked special token {m.group()!r}"


DEFAULT_OUTPUT_ESTIMATE = 512
"""Output tokens assumed by the budget check when a call sets no max_tokens."""

MIN_SECRET_CHARS = 8
"""Key values shorter than this are not scrubbed (a short placeholder like ``EMPTY`` or ``x``
is no secret, and replacing it everywhere would garble stored text)."""

GROUP_TURNS = 4
"""Event-loop turns a group commit waits for more calls to join it while replies may still
arrive (see ``ModelPool._flush_after``)."""

FREE_GROUP_ROWS = 256
"""Call rows a commit of free results only may gather before it is due (``FREE_GROUP_S``)."""

FREE_GROUP_S = 0.25
"""Seconds a commit of free results only may wait for more to join it: what a kill can lose
that nothing paid for (replies of free in-process models, cache hits, step outcomes), each
computed again for nothing by a re-run. Anything paid for, or waited on, commits at once."""

REQUEST_MEMO_SIZE = 1024
"""Requests whose payload and key ``request_key`` keeps for the ``complete`` that follows it
(the oldest are dropped first; a miss only costs hashing the payload again)."""

_STATUS_COUNTER = {"cached": "cached", "error": "errors", "refusal": "refusals", "budget": "budget"}


class _Committer:
    """The writer's thread: the group commits handed to it, one after another in that order
    (a daemon: a process that exits without closing its pool loses only what a kill would)."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name="memearena-commit", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()

    def close(self, wait: bool) -> None:
        """End the thread once the commits handed to it ended (waiting for that if ``wait``)."""
        self._jobs.put(None)
        if wait and self._thread is not threading.current_thread():
            self._thread.join()


class _Commit:
    """One group commit handed to the writer's thread: the rows it writes, the waiters it
    wakes, and how it ended (``ended`` is set in that thread, ``done`` on the event loop)."""

    __slots__ = (
        "calls",
        "done",
        "dropped",
        "ended",
        "entries",
        "error",
        "loop",
        "requests",
        "settle",
        "steps",
        "waiters",
        "withdrawn",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        calls: list[tuple[Any, ...]],
        settle: list[tuple[Any, ...]],
        withdrawn: list[tuple[str]],
        entries: dict[str, Completion],
        requests: list[tuple[str, str, str]],
        dropped: list[tuple[str]],
        steps: Any,
        waiters: list[asyncio.Future[None]],
    ) -> None:
        self.loop = loop
        self.calls = calls
        self.settle = settle
        self.withdrawn = withdrawn
        self.entries = entries
        self.requests = requests
        self.dropped = dropped
        self.steps = steps
        self.waiters = waiters
        self.error: Exception | None = None
        self.ended = threading.Event()
        self.done = False


class _Model:
    """Per-model state, precomputed once: limits, parameters, price, cache-key prefix."""

    __slots__ = (
        "backend",
        "cfg",
        "dead",
        "endpoint",
        "key_prefix",
        "limiter",
        "name",
        "params",
        "params_part",
        "price_in",
        "price_out",
        "sem",
        "stage",
        "tracked",
        "usage",
    )

    def __init__(self, name: str, cfg: ModelConfig) -> None:
        self.name = name
        self.cfg = cfg
        self.params = GenParams.of(cfg)
        self.endpoint = endpoint_id(cfg, name)
        self.key_prefix = key_prefix(self.endpoint)
        self.params_part = params_json(self.params)
        self.sem = asyncio.Semaphore(cfg.max_concurrency)  # requests in flight
        # Calls reserved and being put on record as sent, not yet holding a ``sem`` slot: the
        # next requests' ``sent`` commit overlaps the replies in flight instead of idling a slot.
        self.stage = asyncio.Semaphore(cfg.max_concurrency)
        self.limiter = RateLimiter(cfg.rpm) if cfg.rpm else None
        self.price_in = cfg.price.input / 1_000_000
        self.price_out = cfg.price.output / 1_000_000
        if getattr(cfg, "batch", False):  # batched calls are billed at the batch discount
            self.price_in *= cfg.batch_discount  # type: ignore[union-attr]
            self.price_out *= cfg.batch_discount  # type: ignore[union-attr]
        self.backend: ChatBackend | None = None
        self.usage: dict[str, float] = dict.fromkeys(USAGE_FIELDS, 0)
        # Why no further call to this model is sent (refused connection, bad key, ...).
        self.dead: EndpointError | None = None
        # Whether calls are recorded ``sent`` before they are sent: every call that can cost
        # money or leaves this process (a free in-process simulated model needs no such record).
        self.tracked = cfg.provider != "sim" or self.price_in > 0 or self.price_out > 0


def _live_backend(m: _Model) -> OpenAIBackend | LeanBackend:
    """The raw endpoint of an OpenAI-compatible model: the lean path unless ``client: sdk``."""
    cfg = m.cfg
    assert cfg.provider == "openai"
    if cfg.client == "sdk":
        return OpenAIBackend(m.name, cfg)
    from memearena.models.lean import LeanBackend  # lazy: aiohttp is only needed here

    return LeanBackend(m.name, cfg)


class ModelPool:
    """Every configured model behind one ``complete`` call. Identical requests are served from
    the cache, or from the answer on record (a reply is paid for once, whatever stopped the
    run that paid for it), or share the one call in flight; every call, cached or failed, is
    recorded in the store."""

    verify_keys = False
    """Whether a request key handed to ``complete`` is checked against its messages (tests)."""

    commit_in_thread = False
    """Whether scheduled group commits run in the writer's thread (else on the event loop, as
    the failure paths' do: the same rows in the same order). Off: over HTTP on two shared cores
    the thread took less of the loop's CPU but more in all, and its wake-ups stalled the loop
    (``bench/http_arena.py --src NAME=PATH@thread`` compares the two)."""

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
        if max_cost is not None and not (math.isfinite(max_cost) and max_cost >= 0):
            raise ConfigError(f"--max-cost: must be a finite number >= 0, got {max_cost!r}")
        self._models = {name: _Model(name, cfg) for name, cfg in models.items()}
        # A simulated model answers as its world does (the world's seed included): part of its
        # identity, or a run with another world seed would be served this world's answers.
        world = getattr(responder, "fingerprint", None)
        if isinstance(world, str):
            for m in self._models.values():
                if m.cfg.provider == "sim":
                    m.endpoint = json.dumps([m.endpoint, world], separators=(",", ":"))
                    m.key_prefix = key_prefix(m.endpoint)
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
        # What earlier invocations of this run spent (their upper bound: a call a kill left
        # unsettled may have been paid), so the cap is on the run's total; read now only under
        # a cap (a scan of every call), else when asked (``run_spent_usd``).
        self._spent_before: float | None = (
            store.spend()[1] if store is not None and max_cost is not None else None
        )
        self._stopped: str | None = None  # why the spend cap (or a signal) stopped the pool
        # A polite stop (``interrupt``): no call starts, none is retried, calls in flight have
        # until the grace period ends; then they are abandoned (left ``sent``, as a kill would).
        self._halted = False
        self._abandoned = False
        self._halt = asyncio.Event()
        self._timeouts: set[asyncio.Timeout] = set()  # the calls waiting on a reply now
        self._in_flight = 0
        self._tracked_in_flight = 0  # of those, calls of tracked models (see _may_defer)
        self._sending = 0  # calls waiting on a backend's reply (see _flush_after)
        self._idle = asyncio.Event()
        self._idle.set()
        self._ids = itertools.count()
        self._id_prefix = uuid.uuid4().hex[:12]
        # Known key values, scrubbed from every text this pool returns or stores.
        self._secrets = sorted(
            {
                v
                for cfg in models.values()
                if (env := getattr(cfg, "api_key_env", None))
                and len(v := os.environ.get(env, "")) >= MIN_SECRET_CHARS
            },
            key=len,
            reverse=True,
        )
        # Group commit: what ended since the last commit, and the calls waiting for it.
        self._pending_calls: list[tuple[Any, ...]] = []  # CallRecord rows
        self._pending_settle: list[tuple[Any, ...]] = []  # settlements of sent rows
        self._pending_withdrawn: list[tuple[str]] = []  # sent rows whose request never left
        self._pending_cache: dict[str, Completion] = {}
        self._pending_requests: list[tuple[str, str, str]] = []  # (key, role, payload) as sent
        # Replies paid for since the last commit, by request key (``_reused`` serves them
        # before the commit puts them on record), and keys whose replies were found unusable.
        self._pending_replies: dict[str, Completion] = {}
        self._pending_dropped: list[tuple[str]] = []
        # The group commit running in the writer's thread (one at a time), and the cache
        # entries and replies it carries: served from here until it ends, as from the queue.
        self._commit: _Commit | None = None
        self._inflight_cache: dict[str, Completion] = {}
        self._inflight_replies: dict[str, Completion] = {}
        self._committer: _Committer | None = None
        # Whether earlier invocations left replies on record, and the keys this one paid for:
        # only those are looked up in the store before a call is sent.
        self._replies_before = store.has_replies() if store is not None else False
        self._replied: KeyFilter | None = None
        # Replies received and not used, per request key (refusals, empty and dropped answers,
        # in this invocation; on record before it up to call ``_unused_upto``): a request is
        # sent again under the next Idempotency-Key, so no server replays such a reply.
        self._unused: dict[str, int] = {}
        self._unused_upto = (
            store.last_call_id() if store is not None and store.has_replies_not_used() else 0
        )
        # Single flight: the call in flight per request key, which an identical request
        # joins instead of paying for the same reply again (None: it ended without one).
        self._flights: dict[str, asyncio.Future[Completion | None]] = {}
        self._waiters: list[asyncio.Future[None]] = []
        self._flush_loop: asyncio.AbstractEventLoop | None = None  # where a commit is scheduled
        # A commit of free results put off (``_flush_after``), and since when it was due.
        self._deferred: asyncio.TimerHandle | None = None
        self._free_since: float | None = None
        self._embedders: dict[str, EmbeddingBackend] = {}  # per model, opened on first embed
        # What request_key computed, for the complete that sends the very same request: by
        # model, params and the identities of the message objects, with weak references that
        # prove those objects are still the ones keyed (an id is only unique while its object
        # lives; a dead one's id may be reused), so nothing keeps a message's image alive.
        self._request_memo: dict[tuple[Any, ...], tuple[tuple[Any, ...], str, str]] = {}
        # The payload of each key request_key returned, for a ``complete`` handed that key (its
        # messages may be other objects: the same prompt with the image's data in place of its
        # hash). A payload is what hashes to its key, so it stands for no other request.
        self._payload_memo: dict[str, str] = {}
        # A commit that failed with no call waiting on it: raised by the next call or aclose.
        self._write_error: Exception | None = None
        if store is not None:
            store.attach_writer(self)  # its group commits carry the store's queued steps

    @property
    def spent_usd(self) -> float:
        """USD spent by this pool's calls so far (cached calls cost nothing)."""
        return self._spent

    @property
    def run_spent_usd(self) -> float:
        """USD the run has spent over every invocation (earlier ones at their upper bound)."""
        if self._spent_before is None:  # no cap: the store's figure, this pool's calls in it
            return self._store.spend()[1] if self._store is not None else self._spent
        return self._spent_before + self._spent

    @property
    def stopped(self) -> str | None:
        """Why the spend cap stopped this pool, or None."""
        return self._stopped

    def interrupt(self, reason: str, grace_s: float) -> int:
        """Stop politely (a signal): from now on no call starts and none is retried (each
        raises BudgetExceeded(``reason``), as at the spend cap: a method's stages let the steps
        in flight finish and start no other); the calls waiting on a reply have ``grace_s``
        seconds to get it and be recorded, then are abandoned and stay ``sent`` (their spend
        an upper bound; the next run asks again). Returns the calls in flight. Call it on the
        pool's event loop."""
        if self._stopped is None:
            self._stopped = reason
        if not self._halted:
            self._halted = True
            self._halt.set()
            asyncio.get_running_loop().call_later(grace_s, self._abandon)
        return self._sending

    def _abandon(self) -> None:
        self._abandoned = True
        now = asyncio.get_running_loop().time()
        for t in list(self._timeouts):
            when = t.when()
            if when is None or when > now:
                with contextlib.suppress(RuntimeError):  # one that is expiring already
                    t.reschedule(now)

    @property
    def interrupted(self) -> bool:
        """Whether ``interrupt`` stopped the pool."""
        return self._halted

    def dead_models(self) -> dict[str, str]:
        """Models no call is sent to any more, with the reason (refused, bad key, ...)."""
        return {name: str(m.dead) for name, m in self._models.items() if m.dead is not None}

    def scrub(self, text: str) -> str:
        """``text`` with every known key value replaced by ``***``."""
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, "***")
        return text

    def usage(self) -> dict[str, dict[str, float]]:
        """Per model: calls, cached, errors, refusals, budget, tokens, cost, summed latency."""
        return {name: dict(m.usage) for name, m in self._models.items() if m.usage["calls"]}

    def _backend(self, m: _Model) -> ChatBackend:
        if m.backend is None:
            if m.cfg.provider == "openai":
                try:
                    if m.cfg.batch:
                        from memearena.models.batch import BatchBackend, BatchLedger

                        ledger = BatchLedger.of(self._store)
                        m.backend = BatchBackend(m.name, m.cfg, ledger)
                    else:
                        m.backend = _live_backend(m)
                except EndpointError as e:  # a missing key: nothing can be sent to this model
                    m.dead = e
                    raise
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
        error_kind: str | None = None,
        call_id: str | None = None,
    ) -> None:
        """Count the call and queue its record (or, with ``call_id``, the settlement of its sent
        row) for the next commit (``_committed`` waits for it, ``_commit_now`` forces it)."""
        u = m.usage
        u["calls"] += 1
        counter = _STATUS_COUNTER.get(status)
        if counter is not None:
            u[counter] += 1
        u["input_tokens"] += input_tokens
        u["output_tokens"] += output_tokens
        u["cost_usd"] += cost
        u["latency_s"] += latency
        if self._store is None:
            return
        if error is not None:
            error = self.scrub(error)
        if response is not None:
            response = self.scrub(response)
        if call_id is not None:
            self._pending_settle.append(
                (
                    status,
                    input_tokens,
                    output_tokens,
                    cost,
                    latency,
                    attempts,
                    error,
                    response,
                    time.time(),
                    error_kind,
                    call_id,
                )
            )
            return
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
                None,
                0.0,
                error_kind,
            )
        )

    def _record_sent(self, m: _Model, key: str, role: str, bound: float) -> str:
        """Queue the ``sent`` row of a call about to be sent; returns its id (settled later)."""
        call_id = f"{self._id_prefix}-{next(self._ids)}"
        if self._store is not None:
            self._pending_calls.append(
                (
                    key,
                    m.name,
                    role,
                    "sent",
                    0,
                    0,
                    0.0,
                    0.0,
                    0,
                    None,
                    None,
                    time.time(),
                    call_id,
                    bound,
                    None,
                )
            )
        return call_id

    def _pending(self) -> bool:
        return bool(
            self._pending_calls
            or self._pending_cache
            or self._pending_settle
            or self._pending_withdrawn
            or self._pending_requests
            or self._pending_dropped
            or (self._store is not None and self._store.pending_steps)
        )

    async def _committed(self) -> None:
        """Wait until every cache entry, call record and queued step pending now is committed
        (before a request is sent): the first waiter of an event-loop turn schedules one commit
        for all of them."""
        if not self._pending() and self._commit is None:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self.schedule_flush()
        await fut

    def schedule_flush(self) -> None:
        """Have everything pending committed within a few event-loop turns, nobody waiting for
        it (``RunStore.GroupWriter``; a returning call's own rows), or, while it is all free
        results, within ``FREE_GROUP_S`` (``_flush_after``)."""
        loop = asyncio.get_running_loop()
        if self._flush_loop is not loop:
            self._flush_loop = loop
            loop.call_soon(self._flush_after, GROUP_TURNS)
        elif self._deferred is not None and not self._may_defer():
            # Something paid for or waited on joined a commit put off: it is due now.
            self._deferred.cancel()
            self._deferred = None
            loop.call_soon(self._flush_after, GROUP_TURNS)

    def _may_defer(self) -> bool:
        """Whether the pending commit carries free results only, few enough to wait for more:
        nobody waits on it (a request's ``sent`` row, the store's own write), and no paid
        reply's settlement, withdrawn row or dropped reply is in it. A call of a tracked model
        (one that costs money or leaves this process) is settled in place, so its outcome is
        always among those; new rows are free calls (cache hits, free in-process models) and
        ``sent`` rows, whose senders wait. While a tracked call is under way its own commits
        come soon and carry these along: putting them off would only add commits."""
        return not (
            self._tracked_in_flight
            or self._waiters
            or self._pending_settle
            or self._pending_withdrawn
            or self._pending_dropped
            or len(self._pending_calls) >= FREE_GROUP_ROWS
        )

    def flush_pending(self) -> None:
        """Commit everything pending now (``RunStore.GroupWriter``: before the store's own
        writes and reads); raises a write error."""
        if self._pending() or self._commit is not None:
            self._commit_now()

    def _raise_write_error(self) -> None:
        """Raise a commit's failure that no waiting call has been told of yet."""
        error, self._write_error = self._write_error, None
        if error is not None:
            raise error

    def _flush_after(self, turns: int) -> None:
        """Commit now, or (while replies may still arrive: calls are waiting on a backend) let
        up to ``turns`` more event-loop turns join this commit. A commit costs about as much
        as a few calls' rows, so fewer, larger ones are cheaper per call; a turn adds
        microseconds of latency, and a pool whose calls all wait on the commit commits at once.
        The commit runs in the writer's thread (``_start_commit``), off the event loop."""
        loop = asyncio.get_running_loop()
        if turns > 0 and self._sending:
            loop.call_soon(self._flush_after, turns - 1)
            return
        self._deferred = None
        if self._may_defer() and self._pending():
            # Free results only: a kill before the commit loses nothing paid for, so let more
            # join it (a commit's cost is mostly per commit and per page, not per row), up to
            # FREE_GROUP_ROWS rows or FREE_GROUP_S seconds; what is paid for or waited on since
            # makes it due at once (``schedule_flush``).
            now = loop.time()
            if self._free_since is None:
                self._free_since = now
            due = self._free_since + FREE_GROUP_S
            if now < due:
                self._deferred = loop.call_at(due, self._flush_after, 0)
                return
        self._flush_loop = None
        c = self._commit
        if c is not None:
            if c.loop is asyncio.get_running_loop() and not c.ended.is_set():
                return  # the one running starts the next when it ends
            self._drain()  # it ended, or was started on another loop (that will not end it)
        if not self.commit_in_thread:
            self._flush()
        elif self._pending():
            self._start_commit()
        elif self._waiters:  # nothing left to write: what they wait for is committed
            self._wake(self._waiters, None)
            self._waiters = []

    def _take(self) -> tuple[Any, ...]:
        """Everything pending, taken for one commit (the queues left empty)."""
        if self._deferred is not None:
            self._deferred.cancel()
            self._deferred = None
        self._free_since = None
        taken = (
            self._pending_calls,
            self._pending_settle,
            self._pending_withdrawn,
            self._pending_cache,
            self._pending_requests,
            self._pending_dropped,
        )
        self._pending_calls, self._pending_settle, self._pending_withdrawn = [], [], []
        self._pending_cache, self._pending_requests, self._pending_dropped = {}, [], []
        return taken

    def _start_commit(self) -> None:
        """Hand everything pending to the writer's thread as one group commit, with the waiters
        it wakes once it ends. SQLite and Zstandard release the GIL for most of their work, so
        the event loop goes on with other calls meanwhile. Write-ahead order holds: commits
        run one at a time, in the order taken, and any write or read of the store's own first
        waits for the one running (``flush_pending``)."""
        loop = asyncio.get_running_loop()
        calls, settle, withdrawn, entries, requests, dropped = self._take()
        store = self._store
        steps = store.take_steps() if store is not None else None
        commit = _Commit(
            loop, calls, settle, withdrawn, entries, requests, dropped, steps, self._waiters
        )
        self._waiters = []
        self._inflight_cache = entries
        self._inflight_replies, self._pending_replies = self._pending_replies, {}
        self._commit = commit
        if self._committer is None:
            self._committer = _Committer()
            weakref.finalize(self, self._committer.close, False)  # a pool never closed
        self._committer.submit(functools.partial(self._run_commit, commit))

    def _run_commit(self, c: _Commit) -> None:
        """The writer's thread: one group commit through the cache's and the store's own
        commit connections (``commit_db``), then its end handed back to the event loop."""
        error: Exception | None = None
        try:
            if c.entries and self._cache is not None:
                try:
                    cache = self._cache
                    cache.put_many(c.entries.items(), cache.commit_db())
                except Exception as e:  # StoreError; anything else must still wake the waiters
                    error = e
            store = self._store
            if store is not None and (
                c.calls or c.settle or c.requests or c.withdrawn or c.dropped or c.steps
            ):
                try:
                    store.write_group(
                        store.commit_db(),
                        c.calls,
                        c.settle,
                        c.requests,
                        c.withdrawn,
                        c.dropped,
                        c.steps,
                    )
                except Exception as e:
                    error = error or e
        finally:
            c.error = error
            c.ended.set()
            with contextlib.suppress(RuntimeError):  # its loop is closed: the next sync ends it
                c.loop.call_soon_threadsafe(self._end_commit, c, True)

    def _end_commit(self, c: _Commit, on_loop: bool = False) -> None:
        """On the event loop (``on_loop``) or in ``_commit_now``, once commit ``c`` ended: what
        it carried is on record (or, failed, reported), its waiters woken; the next one starts
        if anything is pending: at once on the loop when calls wait for it (their rows gathered
        while this one ran), else a few turns later. Runs once per commit."""
        if c.done:
            return
        c.done = True
        if self._commit is c:
            self._commit = None
            self._inflight_cache = {}
            self._inflight_replies = {}
        if self._store is not None:
            self._store.steps_committed(c.steps, c.error)
        if c.error is not None and not self._wake(c.waiters, c.error):
            self._write_error = c.error
        elif c.error is None:
            self._wake(c.waiters, None)
        if on_loop and self._waiters and self._pending():
            self._start_commit()
        elif self._pending() or self._waiters:
            with contextlib.suppress(RuntimeError):  # not on a running loop: nothing to wake
                self.schedule_flush()

    @staticmethod
    def _wake(waiters: list[asyncio.Future[None]], error: Exception | None) -> bool:
        """Wake ``waiters`` with ``error`` (or none); True if a waiter was told of the error."""
        told = False
        for w in waiters:
            if w.done():  # its call was cancelled meanwhile (its record is committed all the same)
                continue
            try:
                if error is None:
                    w.set_result(None)
                else:
                    w.set_exception(error)
                    told = True
            except RuntimeError:  # its event loop is closed: nobody is waiting any more
                pass
        return told

    def wait_commit(self) -> None:
        """``RunStore.GroupWriter``: wait for the commit running in the writer's thread."""
        self._drain()

    def _drain(self) -> None:
        """Wait for the commit running in the writer's thread, if any, and end it here."""
        c = self._commit
        if c is not None:
            c.ended.wait()
            self._end_commit(c)

    def _flush(self) -> Exception | None:
        """Commit every pending cache entry (one transaction) and call record (another) here,
        after the one running in the writer's thread, then wake their waiters, with the write
        error if one failed; returns that error."""
        self._drain()
        self._flush_loop = None
        calls, settle, withdrawn, entries, requests, dropped = self._take()
        self._pending_replies = {}  # on record once this commit is
        waiters, self._waiters = self._waiters, []
        error: Exception | None = None
        if entries and self._cache is not None:
            try:
                self._cache.put_many(entries.items())
            except Exception as e:  # StoreError; anything else must still wake the waiters
                error = e
        store = self._store
        if store is not None and (
            calls or settle or requests or withdrawn or dropped or store.pending_steps
        ):
            try:  # one transaction: requests as sent, calls about to be sent and ended, steps
                packed = [(k, *store.pack_request(role, p)) for k, role, p in requests]
                if dropped:
                    store.write_call_rows(calls, settle, packed, withdrawn, dropped=dropped)
                else:
                    store.write_call_rows(calls, settle, packed, withdrawn)
            except Exception as e:
                error = error or e
        if not self._wake(waiters, error) and error is not None:
            self._write_error = error
        return error

    def _commit_now(self) -> None:
        """Commit everything pending before returning (failure paths); raises a write error."""
        error = self._flush()
        if error is not None:
            self._write_error = None  # raised here
            raise error

    def request_key(
        self, model: str, messages: Sequence[Message], params: GenParams | None = None
    ) -> str:
        """The content hash of the request ``complete`` would send (endpoint identity, model
        id, messages with image hashes, merged parameters): the fingerprint a step's artifact
        key carries, so a changed model, prompt, input or parameter is recomputed, never reused.

        The payload and key are kept (a bounded memo) for a ``complete`` of the same model and
        params with the very same message objects, which then does not build and hash them
        again; any other request is keyed from scratch."""
        m = self._models.get(model)
        if m is None:
            raise ModelError(f"unknown model {model!r}; define it under 'models'")
        payload = self._payload(m, messages, params)
        key = payload_key(payload)
        by_key = self._payload_memo
        by_key[key] = payload
        if len(by_key) > REQUEST_MEMO_SIZE:
            del by_key[next(iter(by_key))]
        memo = self._request_memo
        try:
            refs = tuple([weakref.ref(x) for x in messages])
        except TypeError:  # not weakly referenceable: nothing proves its identity later
            return key
        memo[(model, params, *map(id, messages))] = (refs, payload, key)
        if len(memo) > REQUEST_MEMO_SIZE:
            del memo[next(iter(memo))]
        return key

    def _payload(self, m: _Model, messages: Sequence[Message], params: GenParams | None) -> str:
        if params is None:
            return payload_from_parts(m.key_prefix, m.endpoint, messages, m.params, m.params_part)
        return payload_from_parts(m.key_prefix, m.endpoint, messages, m.params.merged(params))

    def _payload_and_key(
        self, m: _Model, messages: Sequence[Message], params: GenParams | None
    ) -> tuple[str, str]:
        """The request's canonical payload and key: those ``request_key`` kept when the same
        model, params and message objects (alive, by identity) come back, else computed."""
        got = self._request_memo.pop((m.name, params, *map(id, messages)), None)
        if got is not None:
            refs, payload, key = got
            if len(refs) == len(messages) and all(
                r() is x for r, x in zip(refs, messages, strict=True)
            ):
                return payload, key
        payload = self._payload(m, messages, params)
        return payload, payload_key(payload)

    def uncache(
        self, model: str, messages: Sequence[Message], params: GenParams | None = None
    ) -> None:
        """Forget the reply to this request, cached and on record: its output stayed unusable
        (an ask that ended unparseable after its re-asks), and a reply replayed on every re-run
        would mean a required step could never be asked again. Its call record stays, marked
        as never to be reused (with the next commit)."""
        m = self._models.get(model)
        if m is None:
            return
        if params is None:
            key = key_from_parts(m.key_prefix, m.endpoint, messages, m.params, m.params_part)
        else:
            key = key_from_parts(m.key_prefix, m.endpoint, messages, m.params.merged(params))
        self._unused[key] = self._unused.get(key, 0) + 1
        self._drain()  # a commit carrying this reply ends before it is marked and deleted
        if self._store is not None:
            self._pending_replies.pop(key, None)
            self._pending_dropped.append((key,))
        if self._cache is not None:
            self._pending_cache.pop(key, None)
            self._cache.delete(key)

    async def complete(
        self,
        model: str,
        messages: Sequence[Message],
        *,
        role: str,
        params: GenParams | None = None,
        key: str | None = None,
    ) -> Completion:
        """One model call through the whole stack. Returns once the call's record (and cache
        entry) is queued for the next group commit, which comes before any request sent after
        (see the module docstring). Raises ModelError once retries are spent (the failure is
        committed first), EndpointError when the model's endpoint cannot serve it at all,
        BudgetExceeded (nothing recorded, nothing sent) once the spend cap is reached, and
        StoreError when an earlier group commit failed.

        ``key``: what ``request_key`` returned for this very request (model, params, and the
        same messages, images compared by hash), so it is not built and hashed again. Only code
        that keyed the request passes it, never a value read from input; ``verify_keys`` makes
        every such key be checked against the messages."""
        if self._write_error is not None:
            self._raise_write_error()
        m = self._models.get(model)
        if m is None:
            raise ModelError(f"unknown model {model!r}; define it under 'models'")
        p = m.params if params is None else m.params.merged(params)
        kept = None if key is None else self._payload_memo.pop(key, None)
        if kept is not None and key is not None and not self.verify_keys:
            payload = kept
        else:
            given = key
            payload, key = self._payload_and_key(m, messages, params)
            if given is not None and given != key:
                raise ModelError(f"{model}: the request key handed in is not this request's")
        t0 = time.perf_counter()
        self._keep_request(key, role, payload)
        self._keep_images(messages)

        if self._cache is not None:
            # An answer still waiting for its commit is as good as one in the cache file.
            hit = (
                self._pending_cache.get(key)
                or self._inflight_cache.get(key)
                or self._cache.get(key)
            )
            if hit is not None:
                latency = time.perf_counter() - t0
                self._record(m, key, role, "cached", latency=latency, response=hit.text)
                self.schedule_flush()
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
        return await self._once(m, key, role, t0, lambda: self._call(m, key, messages, p, role, t0))

    def _reusable(self, m: _Model) -> bool:
        """Whether replies on record may stand for ``m``'s new calls: always, except for a
        simulated model with the cache off (a world that answers one request differently,
        such as Adapt's null world, turns the cache off; its replies are free)."""
        return self._store is not None and (m.cfg.provider != "sim" or self._cache is not None)

    def _reused(self, m: _Model, key: str, role: str, t0: float) -> Completion | None:
        """The answer already paid for under ``key`` (this invocation's, not committed yet, or
        one on record from any earlier invocation, however it ended: a kill, the spend cap, an
        error elsewhere), recorded as a ``cached`` call; None when there is none (a refusal
        or an empty reply is never replayed)."""
        if not self._reusable(m):
            return None
        done = self._pending_replies.get(key) or self._inflight_replies.get(key)
        if done is not None:
            return self._joined(m, key, role, t0, done)
        if not (self._replies_before or (self._replied is not None and key in self._replied)):
            return None
        assert self._store is not None
        row = self._store.reply_on_record(key)
        if row is None:
            return None
        text, n_in, n_out = row
        return self._joined(m, key, role, t0, Completion(text, m.name, Usage(n_in, n_out)))

    def _joined(self, m: _Model, key: str, role: str, t0: float, done: Completion) -> Completion:
        """``done``, a reply paid for once, served to another call of the same request: a
        ``cached`` call (free) on ``m``'s record."""
        latency = time.perf_counter() - t0
        self._record(m, key, role, "cached", latency=latency, response=done.text)
        self.schedule_flush()
        return Completion(
            done.text,
            m.name,
            done.usage,
            latency,
            done.finish_reason,
            refusal=done.refusal,
            cached=True,
            cost_usd=0.0,
        )

    async def _once(
        self,
        m: _Model,
        key: str,
        role: str,
        t0: float,
        send: Callable[[], Awaitable[Completion]],
    ) -> Completion:
        """``send()``'s reply to request ``key``, paid for at most once: a reply on record is
        reused; a request identical to one in flight (the same model under two names, two
        equal answers judged in both orders) waits for that call's reply instead of sending
        its own (single flight); only when that call ends without a reply (failed,
        cancelled) does the next one send it."""
        loop = asyncio.get_running_loop()
        while True:
            served = self._reused(m, key, role, t0)
            if served is not None:
                return served
            flight = self._flights.get(key)
            if flight is None or flight.get_loop() is not loop:
                break
            # shield: a waiter cancelled must not cancel the call it waits for
            done = await asyncio.shield(flight)
            if done is not None:
                return self._joined(m, key, role, t0, done)
        self._check_open(m)
        fut: asyncio.Future[Completion | None] = loop.create_future()
        self._flights[key] = fut
        self._in_flight += 1
        tracked = m.tracked
        if tracked:
            self._tracked_in_flight += 1
        self._idle.clear()
        done = None
        try:
            done = await send()
            return done
        finally:
            if self._flights.get(key) is fut:
                del self._flights[key]
            fut.set_result(done)
            self._in_flight -= 1
            if tracked:
                self._tracked_in_flight -= 1
            if not self._in_flight:
                self._idle.set()

    def _generation(self, key: str) -> int:
        """How many replies to request ``key`` were received and not used (on record before
        this invocation, and in it): its next attempt's Idempotency-Key lineage. A resumed run
        computes the lineage the killed one was sending under, so a server that honours the
        key answers a request left in flight once."""
        n = self._unused.get(key, 0)
        if self._unused_upto and self._store is not None:
            n += self._store.replies_not_used(key, self._unused_upto)
        return n

    def _keep_request(self, key: str, role: str, payload: str) -> None:
        """Queue the request as sent for the next commit, which compresses it (kept once per
        key; a call's row names it by its ``request_hash``). Known key values are scrubbed from
        it, as from every text stored (such a request no longer hashes to its key: a key never
        reaches run.db)."""
        if self._store is not None:
            if self._secrets:
                payload = self.scrub(payload)
            self._pending_requests.append((key, role, payload))

    def _keep_images(self, messages: Sequence[Message]) -> None:
        """Keep every image sent, once per hash, in the run directory: the request names it by
        that hash, so its page shows exactly what the model saw."""
        if self._store is not None:
            for msg in messages:
                for part in msg.content:
                    if isinstance(part, ImagePart) and part.data_url:
                        self._store.images.put_data_url(part.sha256, part.data_url)

    def _check_open(self, m: _Model) -> None:
        """Raise before anything is sent once the cap stopped the pool or the model is dead."""
        if self._stopped is not None:
            raise BudgetExceeded(self._stopped)
        if m.dead is not None:
            raise EndpointError(str(m.dead), kind=m.dead.kind)

    def _estimate(self, m: _Model, messages: Sequence[Message], p: GenParams) -> float:
        """The most a call is expected to cost: its prompt plus its max output at the price."""
        if not m.tracked and self._max_cost is None:
            return 0.0
        out_tokens = p.max_tokens or DEFAULT_OUTPUT_ESTIMATE
        return estimate_tokens(messages) * m.price_in + out_tokens * m.price_out

    def _reserve(self, m: _Model, estimate: float) -> None:
        """Hold ``estimate`` against the cap (the caller holds a stage slot, then a send slot,
        so what is reserved never exceeds twice what can be in flight); reaching the cap stops
        the pool."""
        self._check_open(m)  # the cap or a dead endpoint may have stopped it while it waited
        if self._max_cost is None:
            return
        total = self.run_spent_usd
        if total + self._reserved + estimate > self._max_cost:
            self._stopped = (
                f"spend cap reached: ${total:.4f} spent in this run (all invocations) of "
                f"--max-cost ${self._max_cost:.4f}; re-run the same command with a higher "
                "--max-cost to continue"
            )
            log.info("%s (next call to %s ~$%.4f)", self._stopped, m.name, estimate)
            raise BudgetExceeded(self._stopped)
        self._reserved += estimate

    async def _call(
        self,
        m: _Model,
        key: str,
        messages: Sequence[Message],
        p: GenParams,
        role: str,
        t0: float,
        *,
        via: ChatBackend | None = None,
        estimate: float | None = None,
    ) -> Completion:
        # ``via``: another request kind (embeddings) sent through this same path.
        backend = self._backend(m) if via is None else via
        cfg = m.cfg
        if estimate is None:
            estimate = self._estimate(m, messages, p)
        call_id: str | None = None
        not_sent = False  # stopped before this attempt was sent: its outcome is already settled
        attempt = 0
        # Only a live endpoint reads the Idempotency-Key (not the simulator, not a batch).
        live = m.cfg.provider == "openai" and not getattr(m.cfg, "batch", False)
        generation = self._generation(key) if live else 0
        while True:
            attempt += 1
            try:
                await m.stage.acquire()
                staged = True
                try:
                    try:
                        self._reserve(m, estimate)
                    except (BudgetExceeded, EndpointError) as stop:
                        not_sent = True
                        if call_id is not None:  # a retry not sent: settle what was sent
                            kind = "budget" if isinstance(stop, BudgetExceeded) else stop.kind
                            self._fail(m, key, role, t0, attempt - 1, str(stop), kind, call_id)
                        raise
                    try:
                        if m.tracked and call_id is None:
                            call_id = self._record_sent(m, key, role, estimate)
                            await self._committed()  # on record before it is sent
                        async with m.sem:
                            m.stage.release()
                            staged = False
                            if m.limiter is not None:
                                await m.limiter.acquire()
                            if m.dead is not None or self._halted:
                                # It died, or a signal stopped the pool, while this call waited:
                                # not sent.
                                not_sent = True
                                halt: ModelError | BudgetExceeded
                                if m.dead is not None:
                                    halt = EndpointError(str(m.dead), kind=m.dead.kind)
                                    kind = m.dead.kind
                                else:
                                    halt, kind = BudgetExceeded(str(self._stopped)), "budget"
                                if call_id is not None and attempt == 1:  # never left: no record
                                    self._pending_withdrawn.append((call_id,))
                                    self._commit_now()
                                elif call_id is not None:  # a retry not sent: settle what was
                                    self._fail(
                                        m, key, role, t0, attempt - 1, str(halt), kind, call_id
                                    )
                                raise halt
                            # A batched call waits for its batch (hours at most providers).
                            wait = None if getattr(backend, "batch", False) else cfg.timeout
                            self._sending += 1
                            rid = REQUEST_ID.set(idempotency_key(key, generation))
                            deadline = asyncio.timeout(wait)
                            self._timeouts.add(deadline)
                            try:
                                async with deadline:
                                    raw = await backend.chat(messages, p, role)
                            finally:
                                self._timeouts.discard(deadline)
                                REQUEST_ID.reset(rid)
                                self._sending -= 1
                            garbled = _garbled(raw.text)
                            if garbled is not None:
                                raise BadResponse(f"garbled reply ({garbled})")
                    finally:
                        if self._max_cost is not None:
                            self._reserved -= estimate
                finally:
                    if staged:
                        m.stage.release()
                break
            except TimeoutError:
                if self._abandoned:  # the grace period of a polite stop ended: left ``sent``
                    raise BudgetExceeded(str(self._stopped)) from None
                err: TransientModelError = TransientModelError(
                    f"no reply within {cfg.timeout:g}s", kind="timeout"
                )
            except TransientModelError as e:
                err = e
                if e.kind == "bad_response":  # a reply received and not used
                    generation += 1
            except EndpointError as e:
                if not_sent:  # the model died while this call waited: nothing was sent
                    raise
                m.dead = m.dead or e  # no further call to this model is sent
                raise self._fail(m, key, role, t0, attempt, str(e), e.kind, call_id) from None
            except ModelError as e:
                raise self._fail(m, key, role, t0, attempt, str(e), e.kind, call_id) from None
            except BudgetExceeded:
                raise
            except Exception as e:  # a bug in a backend or responder: on record, then raised
                self._fail(m, key, role, t0, attempt, f"{type(e).__name__}: {e}", "bug", call_id)
                raise
            if attempt > cfg.max_retries:
                reason = f"{err} (gave up after {attempt} attempts)"
                raise self._fail(m, key, role, t0, attempt, reason, err.kind, call_id) from None
            delay = backoff_delay(
                attempt,
                self._rng,
                base=self._backoff_base,
                cap=self._backoff_cap,
                retry_after=err.retry_after,
            )
            log.debug("%s: attempt %d failed (%s); retrying in %.2fs", m.name, attempt, err, delay)
            if not self._halted:  # a polite stop ends the wait: the retry is not sent
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self._halt.wait()

        latency = time.perf_counter() - t0
        usage = raw.usage
        cost = usage.input_tokens * m.price_in + usage.output_tokens * m.price_out
        if not (math.isfinite(cost) and cost >= 0):  # backends validate usage; never trust it
            bad = BadResponse(f"usage gives a cost of {cost!r}")
            raise self._fail(m, key, role, t0, attempt, str(bad), bad.kind, call_id)
        self._spent += cost
        text = raw.text or raw.refusal_field or ""
        if self._secrets:
            text = self.scrub(text)
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
        if self._store is not None and not refusal and text.strip():
            # An answer paid for: served to any later call of this request (a refusal or an
            # empty reply is asked again, as the cache would have it).
            self._pending_replies[key] = completion
            if self._replied is None:
                self._replied = KeyFilter()
            self._replied.add(key)
        elif refusal or not text.strip():
            self._unused[key] = self._unused.get(key, 0) + 1
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
            call_id=call_id,
        )
        self.schedule_flush()
        return completion

    def _embedder(self, m: _Model) -> EmbeddingBackend:
        """The model's embeddings endpoint: its own backend when that can embed (the OpenAI
        one, an injected one), else an OpenAI client opened for it, or the simulated one."""
        e = self._embedders.get(m.name)
        if e is None:
            if isinstance(m.backend, EmbeddingBackend):
                e = m.backend
            elif m.cfg.provider == "openai":
                try:
                    e = _live_backend(m)
                except EndpointError as err:  # a missing key: nothing can be sent to this model
                    m.dead = err
                    raise
            else:
                e = SimEmbedder(m.name)
            self._embedders[m.name] = e
        return e

    def embed_key(self, model: str, texts: Sequence[str]) -> str:
        """The content hash of the embeddings request ``embed`` would send (endpoint identity,
        model id, texts): a step's artifact key carries it."""
        return payload_key(self._embed_payload(model, texts))

    def _embed_payload(self, model: str, texts: Sequence[str]) -> str:
        m = self._models.get(model)
        if m is None:
            raise ModelError(f"unknown model {model!r}; define it under 'models'")
        endpoint = json.dumps([m.endpoint, EMBED_KEY_TAG], separators=(",", ":"))
        return payload_from_parts(
            key_prefix(endpoint), endpoint, embed_messages(texts), EMBED_PARAMS
        )

    async def embed(self, model: str, texts: Sequence[str], *, role: str) -> list[list[float]]:
        """One vector per text through the whole stack (cache keyed by content, limits, budget,
        retries, accounting at the model's input price, call record). Raises as ``complete``
        does; a malformed reply (wrong count, non-finite value, ragged sizes) is a recorded
        ``bad_response``, retried and never cached."""
        texts = list(texts)
        if not texts:
            return []
        if self._write_error is not None:
            self._raise_write_error()
        m = self._models.get(model)
        if m is None:
            raise ModelError(f"unknown model {model!r}; define it under 'models'")
        payload = self._embed_payload(model, texts)
        key = payload_key(payload)
        messages = embed_messages(texts)
        t0 = time.perf_counter()
        self._keep_request(key, role, payload)
        if self._cache is not None:
            hit = (
                self._pending_cache.get(key)
                or self._inflight_cache.get(key)
                or self._cache.get(key)
            )
            vectors = decode_vectors(hit.text, len(texts)) if hit is not None else None
            if hit is not None and vectors is not None:
                latency = time.perf_counter() - t0
                self._record(m, key, role, "cached", latency=latency, response=hit.text)
                self.schedule_flush()
                return vectors
        self._check_open(m)
        embedder = self._embedder(m)
        done = await self._once(
            m,
            key,
            role,
            t0,
            lambda: self._call(
                m,
                key,
                messages,
                EMBED_PARAMS,
                role,
                t0,
                via=EmbedAsChat(embedder, texts),
                estimate=estimate_tokens(messages) * m.price_in,
            ),
        )
        vectors = decode_vectors(done.text, len(texts))
        if vectors is None:  # only if scrubbing a key value garbled it: never use that reply
            raise ModelError(f"{model}: embeddings reply unusable after scrubbing", kind="bug")
        return vectors

    def _fail(
        self,
        m: _Model,
        key: str,
        role: str,
        t0: float,
        attempts: int,
        reason: str,
        kind: str,
        call_id: str | None,
    ) -> ModelError:
        """Record a failed call (settling its sent row); returns the error to raise (naming the
        model, of the same class as the failure when it is an EndpointError)."""
        reason = self.scrub(reason)
        log.warning("%s: call failed: %s", m.name, reason)
        self._record(
            m,
            key,
            role,
            "error",
            latency=time.perf_counter() - t0,
            attempts=attempts,
            error=reason,
            error_kind=kind,
            call_id=call_id,
        )
        self._commit_now()
        message = reason if reason.startswith(f"model {m.name!r}") else f"{m.name}: {reason}"
        if m.dead is not None and kind == m.dead.kind:
            return EndpointError(message, kind=kind)
        return ModelError(message, kind=kind)

    async def drain(self, timeout: float | None = None) -> bool:
        """Wait until no call is in flight (at most ``timeout`` seconds); True if none is."""
        if not self._in_flight:
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._idle.wait()
        except TimeoutError:
            return False
        return True

    async def aclose(self) -> None:
        """Let calls still in flight finish and be recorded (up to the longest timeout), commit
        anything pending and close every backend this pool opened (the store and cache belong to
        the caller). Calls cancelled here stay ``sent``: their spend is an upper bound."""
        longest = max((m.cfg.timeout for m in self._models.values()), default=0.0)
        await self.drain(longest + 1.0)
        try:
            self._commit_now()
            self._raise_write_error()
        finally:
            if self._committer is not None:
                self._committer.close(True)
                self._committer = None
            for m in self._models.values():
                close = getattr(m.backend, "aclose", None)
                if close is not None:
                    await close()
            for name, e in self._embedders.items():
                if e is not self._models[name].backend and (close := getattr(e, "aclose", None)):
                    await close()

    async def __aenter__(self) -> ModelPool:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
