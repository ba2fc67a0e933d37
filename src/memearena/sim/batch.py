"""The OpenAI Batch API on the simulated server: ``/v1/files`` and ``/v1/batches``.

Enough of the API for the official ``openai`` client and ``models/batch.py``: upload a JSONL
file of requests (purpose ``batch``), create a batch from it, poll it, list batches, read the
output file. A batch completes ``batch_delay_s`` after its creation (each line answered by
the simulated world as a live call would be, its role read from the custom id's prefix). Every
answered request is counted by custom id, so a test can check that none was paid twice.

An uploaded file is accepted up to ``file_limit`` bytes (200 MB, as the providers accept) and
refused past it with a 413, as they answer.

``batch_faults`` injects 500s: for each step named (`BATCH_FAULT_STEPS`), the first N calls
about one object answer 500 (an upload: per content; a batch creation: per input file, and the
batch *is* created before the 500, as a provider that timed out after committing would; a poll:
per batch; an output read: per file). Deterministic whatever the timing, so a test can assert
exact counts.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.web_request import FileField

from memearena.errors import ModelError
from memearena.models.accounting import estimate_text_tokens, estimate_tokens
from memearena.models.backends import SimResponder
from memearena.sim.wire import parse_messages, request_params

__all__ = [
    "BATCH_FAULT_STEPS",
    "BATCH_FILE_LIMIT",
    "BATCH_STATS_KEY",
    "BatchStats",
    "add_batch_routes",
]

BATCH_FILE_LIMIT = 200_000_000
"""The largest batch input file accepted by default, in bytes (OpenAI's limit: 200 MB)."""

BATCH_FAULT_STEPS = ("file_create", "batch_create", "poll", "output_read", "list")
"""The batch endpoints' steps a fault can be injected into."""


@dataclass
class BatchStats:
    """What the batch endpoints did: files, batches, and each request answered (= billed)."""

    files: int = 0
    batches: int = 0
    completed_batches: int = 0
    billed: dict[str, int] = field(default_factory=dict)
    """custom id → how many times it was answered (billed) in a completed batch."""
    faults: dict[str, int] = field(default_factory=dict)
    """step → 500s injected."""
    too_large: int = 0
    """Uploads refused with 413 (past the file limit)."""
    largest_upload: int = 0
    """Bytes of the largest file accepted."""

    def as_dict(self) -> dict[str, Any]:
        """Counters as JSON."""
        return {
            "files": self.files,
            "batches": self.batches,
            "completed_batches": self.completed_batches,
            "billed_requests": sum(self.billed.values()),
            "distinct_requests": len(self.billed),
            "billed_twice": sorted(k for k, v in self.billed.items() if v > 1),
            "faults": dict(self.faults),
            "too_large": self.too_large,
            "largest_upload": self.largest_upload,
        }


BATCH_STATS_KEY = web.AppKey("batch_stats", BatchStats)


def upload_body_limit(file_limit: int) -> int:
    """The request body an upload of ``file_limit`` bytes needs (the multipart envelope on
    top): what the server's ``client_max_size`` must be at least."""
    return file_limit + 64 * 1024


def _error(status: int, message: str) -> web.Response:
    body = {"error": {"message": message, "type": "invalid_request_error"}}
    return web.json_response(body, status=status)


def add_batch_routes(
    app: web.Application,
    responder: SimResponder,
    *,
    delay_s: float = 0.5,
    known_models: list[str] | None = None,
    faults: Mapping[str, int] | None = None,
    file_limit: int = BATCH_FILE_LIMIT,
) -> None:
    """Add the file and batch endpoints to the simulated server's `app`; `faults`: step →
    how many first calls about each object answer 500 (see the module's docstring);
    `file_limit`: the largest upload accepted, in bytes (the app's ``client_max_size`` must
    admit it, see ``upload_body_limit``)."""
    plan = dict(faults or {})
    unknown = sorted(set(plan) - set(BATCH_FAULT_STEPS))
    if unknown:
        raise ValueError(f"unknown batch fault step(s) {unknown}; known: {list(BATCH_FAULT_STEPS)}")
    calls: dict[tuple[str, str], int] = {}

    def fault(step: str, key: str) -> bool:
        """Whether this call of `step` about `key` is one to answer 500."""
        n = calls.get((step, key), 0)
        calls[(step, key)] = n + 1
        if n < plan.get(step, 0):
            stats.faults[step] = stats.faults.get(step, 0) + 1
            return True
        return False

    def server_error() -> web.Response:
        body = {
            "error": {"message": "The server had an error (simulated).", "type": "server_error"}
        }
        return web.json_response(body, status=500)

    stats = BatchStats()
    app[BATCH_STATS_KEY] = stats
    files: dict[str, tuple[str, bytes]] = {}  # id → (filename, content)
    batches: dict[str, dict[str, Any]] = {}
    ids = itertools.count(1)
    tasks: set[asyncio.Task[None]] = set()

    def answer(line: dict[str, Any]) -> dict[str, Any]:
        cid = str(line.get("custom_id", ""))
        body = line.get("body")
        try:
            if not isinstance(body, dict) or not isinstance(body.get("model"), str):
                raise ValueError("the request body must be an object naming a model")
            if known_models and body["model"] not in known_models:
                raise ValueError(f"The model `{body['model']}` does not exist")
            messages = parse_messages(body.get("messages"))
            role = cid.split("|", 1)[0] or "chat"
            text = responder.respond(body["model"], role, messages, request_params(body))
        except (ValueError, ModelError) as e:
            response = {"status_code": 400, "body": {"error": {"message": str(e)}}}
            return {"id": f"batch_req_{next(ids)}", "custom_id": cid, "response": response}
        stats.billed[cid] = stats.billed.get(cid, 0) + 1
        usage = {"prompt_tokens": estimate_tokens(messages)}
        usage["completion_tokens"] = estimate_text_tokens(text)
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        reply = {
            "id": f"chatcmpl-simbatch-{next(ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": usage,
        }
        return {
            "id": f"batch_req_{next(ids)}",
            "custom_id": cid,
            "response": {"status_code": 200, "body": reply},
            "error": None,
        }

    async def run_batch(batch: dict[str, Any]) -> None:
        await asyncio.sleep(delay_s)
        _, content = files[batch["input_file_id"]]
        lines = [json.loads(raw) for raw in content.splitlines() if raw.strip()]
        out = [answer(line) for line in lines]
        output_id = f"file-sim-{next(ids)}"
        files[output_id] = ("output.jsonl", b"".join(json.dumps(o).encode() + b"\n" for o in out))
        stats.files += 1
        failed = sum(o["response"]["status_code"] != 200 for o in out)
        batch.update(
            status="completed",
            output_file_id=output_id,
            completed_at=int(time.time()),
            request_counts={"total": len(out), "completed": len(out) - failed, "failed": failed},
        )
        stats.completed_batches += 1

    def too_large(size: str) -> web.Response:
        stats.too_large += 1
        return _error(413, f"File too large: {size}; the limit is {file_limit:,} bytes")

    async def create_file(request: web.Request) -> web.StreamResponse:
        if (request.content_length or 0) > upload_body_limit(file_limit):
            return too_large(f"{request.content_length:,} bytes")
        try:
            form = await request.post()
        except web.HTTPRequestEntityTooLarge:
            return too_large("over the request body limit")
        upload = form.get("file")
        if not isinstance(upload, FileField) or form.get("purpose") != "batch":
            return _error(400, "expected a multipart 'file' with purpose 'batch'")
        content = upload.file.read()
        if len(content) > file_limit:
            return too_large(f"{len(content):,} bytes")
        stats.largest_upload = max(stats.largest_upload, len(content))
        if fault("file_create", hashlib.sha256(content).hexdigest()):
            return server_error()
        file_id = f"file-sim-{next(ids)}"
        files[file_id] = (str(upload.filename or "batch.jsonl"), content)
        stats.files += 1
        return web.json_response(
            {
                "id": file_id,
                "object": "file",
                "bytes": len(content),
                "created_at": int(time.time()),
                "filename": files[file_id][0],
                "purpose": "batch",
                "status": "processed",
            }
        )

    async def file_content(request: web.Request) -> web.StreamResponse:
        found = files.get(request.match_info["file_id"])
        if found is None:
            return _error(404, "no such file")
        if fault("output_read", request.match_info["file_id"]):
            return server_error()
        return web.Response(body=found[1], content_type="application/octet-stream")

    async def create_batch(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        file_id = body.get("input_file_id") if isinstance(body, dict) else None
        if file_id not in files:
            return _error(400, f"no such input file: {file_id!r}")
        batch_id = f"batch_sim_{next(ids)}"
        now = int(time.time())
        batch = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body.get("endpoint", "/v1/chat/completions"),
            "errors": None,
            "input_file_id": file_id,
            "completion_window": body.get("completion_window", "24h"),
            "status": "in_progress",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": now,
            "expires_at": now + 86400,
            "completed_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": None,
        }
        batches[batch_id] = batch
        stats.batches += 1
        task = asyncio.create_task(run_batch(batch))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        if fault("batch_create", str(file_id)):  # created, then the answer is lost
            return server_error()
        return web.json_response(batch)

    async def get_batch(request: web.Request) -> web.StreamResponse:
        batch = batches.get(request.match_info["batch_id"])
        if batch is None:
            return _error(404, "no such batch")
        if fault("poll", batch["id"]):
            return server_error()
        return web.json_response(batch)

    async def list_batches(request: web.Request) -> web.StreamResponse:
        if fault("list", ""):
            return server_error()
        data = list(reversed(batches.values()))
        return web.json_response(
            {
                "object": "list",
                "data": data,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
                "has_more": False,
            }
        )

    async def get_stats(request: web.Request) -> web.StreamResponse:
        return web.json_response(stats.as_dict())

    app.router.add_post("/v1/files", create_file)
    app.router.add_get("/v1/files/{file_id}/content", file_content)
    app.router.add_post("/v1/batches", create_batch)
    app.router.add_get("/v1/batches", list_batches)
    app.router.add_get("/v1/batches/{batch_id}", get_batch)
    app.router.add_get("/v1/batch_stats", get_stats)
