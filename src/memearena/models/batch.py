"""Provider batch APIs: a model's calls sent through the OpenAI-compatible Batch API.

A model with ``batch: true`` gets a `BatchBackend` in place of the live one. Calls arriving
close together (a pipeline stage keeps many in flight) are written to one JSONL file
(``POST /v1/files``, purpose ``batch``), submitted as one batch (``POST /v1/batches``, 24 h
window) and polled (``GET /v1/batches/{id}``) every ``batch_poll_s``; when it completes, its
output file is read and each reply goes back to its caller as a live reply would: the pool
records, prices (at ``batch_discount``) and caches it exactly as a live call.

Threat: a kill while batches are pending must not pay a request twice. Every request is on
record in the run database (table ``batch_requests``: request id → input file → batch) from
its upload on; a re-run that asks for the same request finds it there and waits for that batch
(or creates the batch from the uploaded file, if the kill fell between the two) instead of
submitting it again. The same holds inside one run: a transient error on a poll, an output
read or a batch creation is retried against that batch (a created batch is found by its input
file), and only the batch's terminal state or a failed reply line takes a request off the
record.

A batch input file is bounded like the providers' (``batch_max_bytes``, 200 MB, and
``batch_max_requests``, 50,000, at OpenAI): the requests that gathered are split into as many
files as they need, and an upload the endpoint refuses as too large (413) is split in two and
uploaded again (the limit learned for the next ones), never failing the run; only a single
request larger than the limit fails, naming it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from memearena.errors import BadResponse, ModelError, TransientModelError
from memearena.jsonsafe import loads_bounded
from memearena.models.backends import OpenAIBackend, RawReply, parse_completion
from memearena.models.types import GenParams, Message

if TYPE_CHECKING:
    from memearena.config import OpenAIModelConfig
    from memearena.store import RunStore

__all__ = [
    "BATCH_ENDPOINT",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_REQUESTS",
    "BatchBackend",
    "BatchLedger",
    "custom_id",
]

log = logging.getLogger("memearena.models")

BATCH_ENDPOINT: Literal["/v1/chat/completions"] = "/v1/chat/completions"
"""The endpoint every batched request goes to."""

DEFAULT_MAX_BYTES = 200_000_000
"""The largest batch input file the providers accept (OpenAI: 200 MB)."""
DEFAULT_MAX_REQUESTS = 50_000
"""The most requests in one batch input file (OpenAI: 50,000)."""

_GATHER_S = 0.2  # calls arriving within this of each other share a batch
_REPLY_DEPTH = 64
_RETRY_BASE_S = 1.0  # a transient failure of a batch step: retried after 1, 2, 4, ... s
_RETRY_CAP_S = 60.0
_ATTEMPTS = 8  # then the callers fail (transient); their requests stay with their batch
_TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
"""Batch states after which the provider runs nothing more of it ("cancelling" is not one)."""
_T = TypeVar("_T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS batch_requests (
    custom_id TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    file_id TEXT NOT NULL,
    batch_id TEXT,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS batch_requests_file ON batch_requests (file_id);
CREATE INDEX IF NOT EXISTS batch_requests_batch ON batch_requests (batch_id);
"""


def custom_id(role: str, body: dict[str, Any], endpoint: str = "") -> str:
    """The request's id inside a batch and on the ledger: its role and the hash of the
    endpoint it goes to and its exact body, model id included (the same request asked again,
    in this run or a re-run, has the same id; one model id on two endpoints has two)."""
    text = json.dumps([endpoint, body], sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()[:40]
    return f"{role}|{digest}"


def _too_large(e: BaseException) -> bool:
    """Whether the endpoint refused an upload as too large (413)."""
    import openai

    return isinstance(e, openai.APIStatusError) and e.status_code == 413


class BatchLedger:
    """Which request went into which uploaded file and batch, in the run database.

    Its own connection to the store's SQLite file (WAL): each write commits at once, so what
    was submitted is on record before the next step can be paid for.
    """

    def __init__(self, path: Path | None) -> None:
        # Without a run store (a notebook pool), the ledger lives in memory: no resume.
        self._db = sqlite3.connect(
            ":memory:" if path is None else str(path), isolation_level=None, timeout=30.0
        )
        self._db.executescript(_SCHEMA)

    @classmethod
    def of(cls, store: RunStore | None) -> BatchLedger:
        """The ledger kept in `store`'s database (in memory without a store)."""
        return cls(None if store is None else store.path)

    def lookup(self, cid: str, model: str) -> tuple[str, str | None] | None:
        """(file id, batch id or None) for a request already submitted, else None. A request
        another name of the same model submitted (the same endpoint and body) becomes
        `model`'s, so `model`'s watcher hands its reply over."""
        row = self._db.execute(
            "SELECT file_id, batch_id, model FROM batch_requests WHERE custom_id = ?", (cid,)
        ).fetchone()
        if row is None:
            return None
        if row[2] != model:
            with self._db:
                self._db.execute(
                    "UPDATE batch_requests SET model = ? WHERE custom_id = ?", (model, cid)
                )
        return row[0], row[1]

    def add(self, model: str, file_id: str, ids: Sequence[str]) -> None:
        """Requests uploaded in `file_id` (before its batch is created)."""
        now = time.time()
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO batch_requests VALUES (?, ?, ?, NULL, ?)",
                [(cid, model, file_id, now) for cid in ids],
            )

    def set_batch(self, model: str, file_id: str, batch_id: str) -> None:
        """The batch created from `model`'s `file_id` (file and batch ids are the endpoint's:
        two endpoints may give the same ones, so every look-up by id is the model's)."""
        with self._db:
            self._db.execute(
                "UPDATE batch_requests SET batch_id = ? WHERE file_id = ? AND model = ?",
                (batch_id, file_id, model),
            )

    def forget(self, ids: Sequence[str]) -> None:
        """Requests whose batch ended without running them, or whose reply line is a failure:
        they may be submitted again (they were not paid). Never called on a transient error."""
        with self._db:
            self._db.executemany(
                "DELETE FROM batch_requests WHERE custom_id = ?", [(cid,) for cid in ids]
            )

    def ids_of(self, model: str, file_id: str) -> list[str]:
        """The requests `model` uploaded in `file_id`."""
        rows = self._db.execute(
            "SELECT custom_id FROM batch_requests WHERE file_id = ? AND model = ?",
            (file_id, model),
        ).fetchall()
        return [r[0] for r in rows]

    def ids_of_batch(self, model: str, batch_id: str) -> list[str]:
        """The requests of `model` on record in batch `batch_id`."""
        rows = self._db.execute(
            "SELECT custom_id FROM batch_requests WHERE batch_id = ? AND model = ?",
            (batch_id, model),
        ).fetchall()
        return [r[0] for r in rows]

    def pending(self, model: str) -> int:
        """Requests of `model` on record (submitted, whatever their batch's state)."""
        row = self._db.execute(
            "SELECT COUNT(*) FROM batch_requests WHERE model = ?", (model,)
        ).fetchone()
        return int(row[0])

    def close(self) -> None:
        self._db.close()


def _transient(e: BaseException) -> bool:
    """Whether an error talking to the batch endpoints may go away on its own (a timeout, a
    dropped connection, 408/409/429, a 5xx): the object it was about may well exist."""
    import openai

    if isinstance(e, (TimeoutError, ConnectionError, openai.APIConnectionError)):
        return True
    if isinstance(e, openai.APIStatusError):
        code = e.status_code
        return code in (408, 409, 429) or code >= 500
    return isinstance(e, TransientModelError)


class _Unreachable(Exception):
    """A step kept failing transiently: its callers are failed (and may retry); the ledger
    keeps their requests with the batch they belong to."""


class BatchBackend:
    """A ChatBackend that sends calls through the Batch API of an OpenAI-compatible endpoint.

    Invariant: a request that was uploaded belongs to its file (and, once created, its batch)
    until that batch's terminal state is read. Nothing but a terminal state or a reply line
    that failed takes a request off the ledger, so a 500 or a timeout on a poll, an output
    read or a batch creation is retried against the same file or batch, never re-submitted.
    """

    batch = True
    """The pool sets no per-call timeout on this backend: a batch may take hours."""

    def __init__(
        self,
        name: str,
        cfg: OpenAIModelConfig,
        ledger: BatchLedger,
        *,
        gather_s: float = _GATHER_S,
        retry_base_s: float = _RETRY_BASE_S,
        retry_cap_s: float = _RETRY_CAP_S,
        attempts: int = _ATTEMPTS,
        max_bytes: int | None = None,
        max_requests: int | None = None,
    ) -> None:
        self.name = name
        self._cfg = cfg
        self._live = OpenAIBackend(name, cfg)  # request bodies, client, key scrubbing
        self._client = self._live._clients[0]
        self._endpoint = str(self._client.base_url)
        # The input file's bounds: the config's (the providers' defaults), lowered to below
        # any upload the endpoint refused as too large.
        if max_bytes is None:
            max_bytes = int(getattr(cfg, "batch_max_bytes", DEFAULT_MAX_BYTES))
        if max_requests is None:
            max_requests = int(getattr(cfg, "batch_max_requests", DEFAULT_MAX_REQUESTS))
        self._max_bytes = max_bytes
        self._max_requests = max_requests
        self._ledger = ledger
        self._gather_s = gather_s
        self._poll_s = cfg.batch_poll_s
        # Transient failures are retried at the polling pace or faster (1 s at most to start).
        self._retry_base_s = min(retry_base_s, self._poll_s) if self._poll_s > 0 else retry_base_s
        self._retry_cap_s = retry_cap_s
        self._attempts = attempts
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._queue: list[tuple[str, dict[str, Any]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}  # file id → its watcher
        self._where = self._live._where

    def __repr__(self) -> str:
        return f"BatchBackend({self.name!r}, model={self._cfg.model!r})"

    async def chat(self, messages: Sequence[Message], params: GenParams, role: str) -> RawReply:
        """Submit the request (or find it already submitted) and wait for its batch's reply."""
        body = self._live._request(messages, params)
        cid = custom_id(role, body, self._endpoint)
        future = self._waiting.get(cid)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._waiting[cid] = future
            known = self._ledger.lookup(cid, self.name)
            if known is not None:
                file_id, batch_id = known
                self._watch(batch_id=batch_id, file_id=file_id)
            else:
                self._queue.append((cid, body))
                # The flusher drains the queue until it finds it empty, and the check and its
                # end are one step of the loop: a call queued at any point is submitted.
                if self._flusher is None or self._flusher.done():
                    self._flusher = asyncio.create_task(self._flush())
        # Shielded: one caller giving up must not cancel the reply others share.
        line = await asyncio.shield(future)
        return self._reply(cid, line, messages)

    def _reply(self, cid: str, line: dict[str, Any], messages: Sequence[Message]) -> RawReply:
        """One output line as a live reply, or the error a live call would raise."""
        error = line.get("error")
        response = line.get("response")
        if error or not isinstance(response, dict):
            self._ledger.forget([cid])
            raise TransientModelError(f"{self._where}: batch request failed: {error}", kind="batch")
        status = response.get("status_code")
        body = response.get("body")
        if status != 200:
            self._ledger.forget([cid])
            msg = self._live._scrub(f"{self._where}: HTTP {status} in batch: {str(body)[:200]}")
            if isinstance(status, int) and (status in (408, 409, 429) or status >= 500):
                raise TransientModelError(msg, kind=f"http_{status}")
            raise ModelError(msg, kind=f"http_{status}")
        return parse_completion(body, messages)

    def _settle(self, cid: str, line: dict[str, Any] | None, error: Exception | None) -> None:
        future = self._waiting.pop(cid, None)
        if future is None or future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(line or {})

    async def _flush(self) -> None:
        """Submit what gathered, again and again until the queue is found empty: upload one
        file per round, record it, watch it (its watcher creates the batch)."""
        while True:
            await asyncio.sleep(self._gather_s)
            queue, self._queue = self._queue, []
            if not queue:
                return  # no await since the check: nothing can have queued meanwhile
            await self._submit(queue)

    async def _submit(self, queue: list[tuple[str, dict[str, Any]]]) -> None:
        """Upload what gathered in as many files as the file limit needs."""
        lines = [
            (
                cid,
                json.dumps(
                    {"custom_id": cid, "method": "POST", "url": BATCH_ENDPOINT, "body": body}
                ).encode()
                + b"\n",
            )
            for cid, body in queue
        ]
        for part in self._parts(lines):
            await self._upload(part)

    def _parts(self, lines: list[tuple[str, bytes]]) -> list[list[tuple[str, bytes]]]:
        """``lines`` in order, cut into files of at most ``max_bytes`` and ``max_requests``; a
        request larger than the limit on its own is failed (no file can hold it)."""
        parts: list[list[tuple[str, bytes]]] = []
        part: list[tuple[str, bytes]] = []
        size = 0
        for cid, line in lines:
            if len(line) > self._max_bytes:
                self._fail([cid], self._oversized(len(line)))
                continue
            if part and (size + len(line) > self._max_bytes or len(part) >= self._max_requests):
                parts.append(part)
                part, size = [], 0
            part.append((cid, line))
            size += len(line)
        if part:
            parts.append(part)
        return parts

    def _oversized(self, size: int) -> ModelError:
        return ModelError(
            f"{self._where}: a request of {size:,} bytes exceeds the batch file limit of "
            f"{self._max_bytes:,} bytes (batch_max_bytes); send this model live (batch: false)",
            kind="batch_too_large",
        )

    async def _upload(self, part: list[tuple[str, bytes]]) -> None:
        """Upload one file, record it and watch it (its watcher creates the batch); an upload
        refused as too large (413) is split in two and each half uploaded."""
        ids = [cid for cid, _ in part]
        data = b"".join(line for _, line in part)
        try:
            uploaded = await self._retrying(
                "upload",
                lambda: self._client.files.create(
                    file=("memearena-batch.jsonl", data, "application/jsonl"), purpose="batch"
                ),
            )
        except asyncio.CancelledError:
            raise
        except Exception as e:  # nothing was submitted (an orphan file is never batched)
            if _too_large(e):
                # No file this large is accepted: the next ones are cut below it.
                self._max_bytes = min(self._max_bytes, len(data) - 1)
                log.info("%s: upload of %d bytes refused as too large; split", self.name, len(data))
                if len(part) == 1:
                    self._fail(ids, self._oversized(len(data)))
                    return
                half = len(part) // 2
                await self._upload(part[:half])
                await self._upload(part[half:])
                return
            self._fail(ids, self._as_model_error("upload failed", e))
            return
        self._ledger.add(self.name, uploaded.id, ids)  # on record before the batch exists
        self._watch(batch_id=None, file_id=uploaded.id, fresh=True)

    async def _retrying(self, what: str, step: Callable[[], Awaitable[_T]]) -> _T:
        """`step`, retried with exponential backoff while it fails transiently; a permanent
        error is raised at once, `_Unreachable` once the attempts are spent."""
        for attempt in range(1, self._attempts + 1):
            try:
                return await step()
            except asyncio.CancelledError:
                raise
            except Exception as e:
                if not _transient(e):
                    raise
                if attempt == self._attempts:
                    raise _Unreachable(self._error(f"{what} failed {attempt} times", e)) from e
                delay = min(self._retry_cap_s, self._retry_base_s * 2 ** (attempt - 1))
                log.debug("%s: %s failed (%s); retrying in %.2fs", self.name, what, e, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _watch(self, *, batch_id: str | None, file_id: str, fresh: bool = False) -> None:
        if file_id in self._tasks:
            return
        self._tasks[file_id] = asyncio.create_task(self._follow(batch_id, file_id, fresh))

    async def _follow(self, batch_id: str | None, file_id: str, fresh: bool = False) -> None:
        """Create the batch of an uploaded file if none exists yet, then poll it to its end.
        `fresh`: the file was uploaded just now, so no batch of it can exist before the first
        creation attempt (after a failed attempt, or on resume, the provider is asked first)."""
        try:
            if batch_id is None:
                look = [not fresh]

                async def create() -> str:
                    found = await self._batch_of(file_id, look=look[0])
                    return found

                def again() -> Awaitable[str]:
                    coro = create()
                    look[0] = True  # a failed creation may have created the batch
                    return coro

                batch_id = await self._retrying("batch creation", again)
                self._ledger.set_batch(self.name, file_id, batch_id)
            bid = batch_id
            while True:
                batch = await self._retrying("poll", lambda: self._client.batches.retrieve(bid))
                if batch.status in _TERMINAL:
                    await self._collect(
                        bid, batch.status, batch.output_file_id, batch.error_file_id
                    )
                    return
                await asyncio.sleep(self._poll_s)
        except asyncio.CancelledError:
            raise
        except _Unreachable as e:
            # Still the batch's: the callers' retries (or a re-run) follow the same batch.
            self._fail(self._members(file_id), TransientModelError(str(e), kind="batch"))
        except Exception as e:
            # A permanent answer about the file or batch itself (a 4xx: no such batch, the
            # file refused): nothing of it runs at the provider, so its requests may go again.
            mine = self._members(file_id)
            self._ledger.forget(mine)
            self._fail(mine, self._as_model_error("batch failed", e))
        finally:
            self._tasks.pop(file_id, None)

    def _members(self, file_id: str) -> list[str]:
        """The waiting callers whose request is in `file_id`."""
        return [cid for cid in self._ledger.ids_of(self.name, file_id) if cid in self._waiting]

    async def _batch_of(self, file_id: str, *, look: bool = True) -> str:
        """The batch made from `file_id`: an existing one (a kill or a lost answer fell after
        its creation), else a new one."""
        if look:
            async for batch in self._client.batches.list(limit=100):
                if batch.input_file_id == file_id:
                    return str(batch.id)
        created = await self._client.batches.create(
            input_file_id=file_id, endpoint=BATCH_ENDPOINT, completion_window="24h"
        )
        return str(created.id)

    async def _collect(
        self, batch_id: str, status: str, output: str | None, errors: str | None
    ) -> None:
        """Hand every reply in the ended batch's output (and error) file to its waiting caller;
        the batch's other requests were not run: they leave the ledger and may go again."""
        seen: dict[str, dict[str, Any]] = {}
        for file_id in (output, errors):
            if not file_id:
                continue
            read = functools.partial(self._client.files.content, file_id)
            content = await self._retrying("output read", read)
            for raw in content.content.splitlines():
                if not raw.strip():
                    continue
                try:
                    line = loads_bounded(raw, max_depth=_REPLY_DEPTH)
                except ValueError:
                    continue  # a garbled line: its caller is failed below, never guessed
                cid = line.get("custom_id") if isinstance(line, dict) else None
                if isinstance(cid, str):
                    seen[cid] = line
                    self._settle(cid, line, None)
        members = self._ledger.ids_of_batch(self.name, batch_id)
        for cid in members:  # asked again while the error file was read: its line is here
            if cid in seen and cid in self._waiting:
                self._settle(cid, seen[cid], None)
        unanswered = [cid for cid in members if cid not in seen]
        self._ledger.forget(unanswered)
        error: Exception
        if status == "completed":
            error = BadResponse(f"{self._where}: batch {batch_id} returned no reply")
        else:
            error = TransientModelError(f"{self._where}: batch {batch_id} {status}", kind="batch")
        self._fail([cid for cid in unanswered if cid in self._waiting], error)

    def _fail(self, ids: Sequence[str], error: Exception) -> None:
        for cid in ids:
            self._settle(cid, None, error)

    def _as_model_error(self, what: str, e: Exception) -> ModelError:
        if isinstance(e, ModelError):
            return e
        if isinstance(e, _Unreachable):
            return TransientModelError(str(e), kind="batch")
        return ModelError(self._error(what, e), kind="batch")

    def _error(self, what: str, e: Exception) -> str:
        return self._live._scrub(f"{self._where}: {what}: {type(e).__name__}: {e}")

    async def aclose(self) -> None:
        """Stop polling (batches go on at the provider; a re-run picks them up) and close."""
        tasks = [t for t in (self._flusher, *self._tasks.values()) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._ledger.close()
        await self._live.aclose()
