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
submitting it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from memearena.errors import BadResponse, ModelError, TransientModelError
from memearena.jsonsafe import loads_bounded
from memearena.models.backends import OpenAIBackend, RawReply, parse_completion
from memearena.models.types import GenParams, Message

if TYPE_CHECKING:
    from memearena.config import OpenAIModelConfig
    from memearena.store import RunStore

__all__ = ["BATCH_ENDPOINT", "BatchBackend", "BatchLedger", "custom_id"]

log = logging.getLogger("memearena.models")

BATCH_ENDPOINT: Literal["/v1/chat/completions"] = "/v1/chat/completions"
"""The endpoint every batched request goes to."""

_GATHER_S = 0.2  # calls arriving within this of each other share a batch
_REPLY_DEPTH = 64

_SCHEMA = """
CREATE TABLE IF NOT EXISTS batch_requests (
    custom_id TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    file_id TEXT NOT NULL,
    batch_id TEXT,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS batch_requests_file ON batch_requests (file_id);
"""


def custom_id(role: str, body: dict[str, Any]) -> str:
    """The request's id inside a batch: its role and the hash of its exact body (the same
    request asked again, in this run or a re-run, has the same id)."""
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:40]
    return f"{role}|{digest}"


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

    def lookup(self, cid: str) -> tuple[str, str | None] | None:
        """(file id, batch id or None) for a request already submitted, else None."""
        row = self._db.execute(
            "SELECT file_id, batch_id FROM batch_requests WHERE custom_id = ?", (cid,)
        ).fetchone()
        return None if row is None else (row[0], row[1])

    def add(self, model: str, file_id: str, ids: Sequence[str]) -> None:
        """Requests uploaded in `file_id` (before its batch is created)."""
        now = time.time()
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO batch_requests VALUES (?, ?, ?, NULL, ?)",
                [(cid, model, file_id, now) for cid in ids],
            )

    def set_batch(self, file_id: str, batch_id: str) -> None:
        """The batch created from `file_id`."""
        with self._db:
            self._db.execute(
                "UPDATE batch_requests SET batch_id = ? WHERE file_id = ?", (batch_id, file_id)
            )

    def forget(self, ids: Sequence[str]) -> None:
        """Requests whose batch failed them: they may be submitted again (they were not paid)."""
        with self._db:
            self._db.executemany(
                "DELETE FROM batch_requests WHERE custom_id = ?", [(cid,) for cid in ids]
            )

    def pending(self, model: str) -> int:
        """Requests of `model` on record (submitted, whatever their batch's state)."""
        row = self._db.execute(
            "SELECT COUNT(*) FROM batch_requests WHERE model = ?", (model,)
        ).fetchone()
        return int(row[0])

    def close(self) -> None:
        self._db.close()


class BatchBackend:
    """A ChatBackend that sends calls through the Batch API of an OpenAI-compatible endpoint."""

    batch = True
    """The pool sets no per-call timeout on this backend: a batch may take hours."""

    def __init__(
        self,
        name: str,
        cfg: OpenAIModelConfig,
        ledger: BatchLedger,
        *,
        gather_s: float = _GATHER_S,
    ) -> None:
        self.name = name
        self._cfg = cfg
        self._live = OpenAIBackend(name, cfg)  # request bodies, client, key scrubbing
        self._client = self._live._clients[0]
        self._ledger = ledger
        self._gather_s = gather_s
        self._poll_s = cfg.batch_poll_s
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._queue: list[tuple[str, dict[str, Any]]] = []
        self._flusher: asyncio.Task[None] | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}  # batch or file id → its watcher
        self._where = self._live._where

    def __repr__(self) -> str:
        return f"BatchBackend({self.name!r}, model={self._cfg.model!r})"

    async def chat(self, messages: Sequence[Message], params: GenParams, role: str) -> RawReply:
        """Submit the request (or find it already submitted) and wait for its batch's reply."""
        body = self._live._request(messages, params)
        cid = custom_id(role, body)
        future = self._waiting.get(cid)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            self._waiting[cid] = future
            known = self._ledger.lookup(cid)
            if known is not None:
                file_id, batch_id = known
                self._watch(batch_id=batch_id, file_id=file_id)
            else:
                self._queue.append((cid, body))
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
        """Submit what gathered: upload one file, record it, create its batch, watch it."""
        await asyncio.sleep(self._gather_s)
        queue, self._queue = self._queue, []
        if not queue:
            return
        ids = [cid for cid, _ in queue]
        data = b"".join(
            json.dumps(
                {"custom_id": cid, "method": "POST", "url": BATCH_ENDPOINT, "body": body}
            ).encode()
            + b"\n"
            for cid, body in queue
        )
        try:
            uploaded = await self._client.files.create(
                file=("memearena-batch.jsonl", data, "application/jsonl"), purpose="batch"
            )
        except Exception as e:  # nothing was submitted: every caller may retry
            self._fail(ids, TransientModelError(self._error("upload failed", e), kind="batch"))
            return
        self._ledger.add(self.name, uploaded.id, ids)  # on record before the batch exists
        self._watch(batch_id=None, file_id=uploaded.id)

    def _watch(self, *, batch_id: str | None, file_id: str) -> None:
        key = batch_id or file_id
        if key in self._tasks or file_id in self._tasks:
            return
        self._tasks[key] = asyncio.create_task(self._follow(batch_id, file_id))

    async def _follow(self, batch_id: str | None, file_id: str) -> None:
        """Create the batch of an uploaded file if none exists yet, then poll it to its end."""
        try:
            if batch_id is None:
                batch_id = await self._batch_of(file_id)
                self._ledger.set_batch(file_id, batch_id)
                self._tasks[batch_id] = self._tasks.pop(file_id)
            while True:
                batch = await self._client.batches.retrieve(batch_id)
                if batch.status == "completed":
                    await self._collect(batch_id, batch.output_file_id, batch.error_file_id)
                    return
                if batch.status in ("failed", "expired", "cancelled", "cancelling"):
                    raise TransientModelError(
                        f"{self._where}: batch {batch_id} {batch.status}", kind="batch"
                    )
                await asyncio.sleep(self._poll_s)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            err = e if isinstance(e, ModelError) else None
            mine = [cid for cid in self._waiting if self._belongs(cid, file_id)]
            self._ledger.forget(mine)
            self._fail(
                mine, err or TransientModelError(self._error("batch failed", e), kind="batch")
            )
        finally:
            self._tasks.pop(batch_id or file_id, None)

    def _belongs(self, cid: str, file_id: str) -> bool:
        known = self._ledger.lookup(cid)
        return known is not None and known[0] == file_id

    async def _batch_of(self, file_id: str) -> str:
        """The batch made from `file_id`: an existing one (a kill fell after its creation but
        before it was recorded), else a new one."""
        async for batch in self._client.batches.list(limit=100):
            if batch.input_file_id == file_id:
                return str(batch.id)
        created = await self._client.batches.create(
            input_file_id=file_id, endpoint=BATCH_ENDPOINT, completion_window="24h"
        )
        return str(created.id)

    async def _collect(self, batch_id: str, output: str | None, errors: str | None) -> None:
        """Hand every reply in the batch's output (and error) file to its waiting caller."""
        seen: set[str] = set()
        for file_id in (output, errors):
            if not file_id:
                continue
            content = await self._client.files.content(file_id)
            for raw in content.content.splitlines():
                if not raw.strip():
                    continue
                try:
                    line = loads_bounded(raw, max_depth=_REPLY_DEPTH)
                except ValueError:
                    continue  # a garbled line: its caller is failed below, never guessed
                cid = line.get("custom_id") if isinstance(line, dict) else None
                if isinstance(cid, str):
                    seen.add(cid)
                    self._settle(cid, line, None)
        missing = [
            cid
            for cid in list(self._waiting)
            if cid not in seen and (self._ledger.lookup(cid) or ("", None))[1] == batch_id
        ]
        self._ledger.forget(missing)
        self._fail(missing, BadResponse(f"{self._where}: batch {batch_id} returned no reply"))

    def _fail(self, ids: Sequence[str], error: Exception) -> None:
        for cid in ids:
            self._settle(cid, None, error)

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
