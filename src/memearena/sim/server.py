"""An OpenAI-compatible HTTP server in front of a simulated responder, with fault injection.

``POST /v1/chat/completions`` (non-streaming), ``POST /v1/embeddings``, ``GET /v1/models`` and
``GET /v1/stats``. The official ``openai`` client talks to it; the agent role comes from the
``X-Memearena-Role`` header. Every answer is simulated, never a real model's.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import pickle
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from memearena.errors import ConfigError, ModelError, TransientModelError
from memearena.models.accounting import estimate_text_tokens, estimate_tokens
from memearena.models.backends import ROLE_HEADER, SimResponder
from memearena.models.types import GenParams, ImagePart, Message
from memearena.sim.batch import BATCH_FILE_LIMIT, add_batch_routes, upload_body_limit
from memearena.sim.faults import FAULTS, FaultPlan, garble
from memearena.sim.wire import BadRequest, parse_messages, request_params

__all__ = [
    "IDEMPOTENCY_HEADER",
    "STATS_KEY",
    "BackgroundServer",
    "BilledReply",
    "EchoResponder",
    "ServerStats",
    "body_digest",
    "make_app",
    "parse_messages",
    "serve",
]


@dataclass
class ServerStats:
    """Request counters of one server (read by tests and benches through ``/v1/stats``)."""

    requests: int = 0
    """Chat-completion requests received (every attempt, faulty or not)."""
    completed: int = 0
    """Requests answered with a proper completion."""
    faults: dict[str, int] = field(default_factory=lambda: dict.fromkeys(FAULTS, 0))
    """Injected faults by kind."""
    bad_requests: int = 0
    """Requests rejected with 400."""
    responder_errors: int = 0
    """Requests the responder itself failed."""
    in_flight: int = 0
    """Requests being handled now."""
    max_in_flight: int = 0
    """Most requests handled at once."""
    roles: dict[str, int] = field(default_factory=dict)
    """Requests by agent role."""
    answered: dict[str, int] = field(default_factory=dict)
    """Request body hash (model, messages, parameters) -> replies sent with usage (a proper
    completion or a malformed one: both are billed); a hash above 1 was paid more than once."""
    log: list[BilledReply] = field(default_factory=list)
    """Every billed reply, in the order billed (``GET /v1/stats/billed``; only with
    ``log_billed=True``: it grows with every request)."""
    replayed: int = 0
    """Requests answered with the stored reply of an earlier request under the same
    ``Idempotency-Key`` (not billed; only with ``idempotency=True``)."""

    def paid_twice(self) -> int:
        """Replies billed for a request body already answered once (0 when nothing is paid
        twice)."""
        return sum(n - 1 for n in self.answered.values() if n > 1)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return {
            "requests": self.requests,
            "completed": self.completed,
            "faults": dict(self.faults),
            "bad_requests": self.bad_requests,
            "responder_errors": self.responder_errors,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "roles": dict(self.roles),
            "answered_bodies": len(self.answered),
            "paid_twice": self.paid_twice(),
            "replayed": self.replayed,
        }


@dataclass(frozen=True)
class BilledReply:
    """One billed reply: when its request arrived and when it was billed (server clock,
    ``time.time()``), the body's hash, the client's ``Idempotency-Key`` (or None), the fault
    injected into it (``malformed``) or None, and the agent role it was sent for."""

    received: float
    billed: float
    digest: str
    idempotency_key: str | None
    fault: str | None
    role: str


def body_digest(body: Mapping[str, Any]) -> str:
    """The hash of a request body as billed: its JSON with sorted keys (one request, one hash,
    however a client orders its fields)."""
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


IDEMPOTENCY_HEADER = "Idempotency-Key"
"""The request header a client may send so that a retried request is answered once: a server
that honours it (``make_app(idempotency=True)``; real providers differ, most ignore it)
replays the reply stored under the key, unbilled, for a request with the same body."""

STATS_KEY = web.AppKey("memearena_stats", ServerStats)
"""Where ``make_app`` keeps the server's counters on the application."""


class EchoResponder:
    """A trivial responder for tests and benches: echoes the role, model and last user text."""

    def respond(self, model: str, role: str, messages: Sequence[Message], params: GenParams) -> str:
        """``[role] model: <last user text>`` (plus the number of images, if any)."""
        last = next((m for m in reversed(messages) if m.role == "user"), None)
        text = last.plain_text() if last is not None else ""
        images = sum(isinstance(p, ImagePart) for m in messages for p in m.content)
        suffix = f" (+{images} image{'s' * (images != 1)})" if images else ""
        return f"[{role}] {model}: {text}{suffix}"


def _error(
    status: int,
    message: str,
    kind: str,
    headers: dict[str, str] | None = None,
    code: str | None = None,
) -> Any:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return web.Response(
        status=status, text=json.dumps(body), content_type="application/json", headers=headers
    )


def make_app(
    responder: SimResponder,
    *,
    latency_ms: float = 0,
    fail_rate: float = 0,
    seed: int = 0,
    faults: Sequence[str] = FAULTS,
    hang_s: float = 30.0,
    retry_after_s: float = 0.1,
    models: Sequence[str] = (),
    batch_delay_s: float = 0.5,
    batch_faults: Mapping[str, int] | None = None,
    batch_file_limit: int = BATCH_FILE_LIMIT,
    idempotency: bool = False,
    log_billed: bool = False,
) -> web.Application:
    """The server application. ``fail_rate`` of requests get a fault drawn from ``faults``
    (deterministic in ``seed`` and the request's sequence number): ``429`` (with a Retry-After
    of ``retry_after_s``), ``500``, ``timeout`` (hangs ``hang_s``) or ``malformed``.
    With ``models`` given, a request for any other model gets a 404 ``model_not_found`` error,
    as OpenAI answers (so a misspelt model fails ``models check``); without, every name is
    served and ``/v1/models`` lists the names requested so far. A batch input file is accepted
    up to ``batch_file_limit`` bytes (200 MB, as the providers accept; 413 past it).
    With ``idempotency``, a chat request carrying an ``Idempotency-Key`` already answered with
    the same body gets that reply again, unbilled (another body under the key: 422); one
    whose first request is still being answered waits for it. With ``log_billed``, every
    billed reply is kept for ``GET /v1/stats/billed``."""
    plan = FaultPlan.of(fail_rate, seed, faults)
    idemp = idempotency
    delay = latency_ms / 1000.0
    stats = ServerStats()
    known_models = list(models)
    strict = bool(known_models)
    # aiohttp's default body limit (1 MiB) would refuse batch uploads the providers accept.
    app = web.Application(client_max_size=max(1024**2, upload_body_limit(batch_file_limit)))
    app[STATS_KEY] = stats
    retry_header = {"Retry-After": f"{retry_after_s:g}"}
    # Idempotency-Key -> (body hash, reply) of a billed reply; keys whose request is being
    # answered now (a second one with the key waits for the first).
    stored: dict[str, tuple[str, str]] = {}
    answering: dict[str, asyncio.Event] = {}

    async def chat(request: web.Request) -> web.StreamResponse:
        idem = request.headers.get(IDEMPOTENCY_HEADER)
        if not idemp or not idem:
            return await _chat(request, idem)
        while (busy := answering.get(idem)) is not None:
            await busy.wait()
        answering[idem] = done = asyncio.Event()
        try:
            return await _chat(request, idem)
        finally:
            del answering[idem]
            done.set()

    async def _chat(request: web.Request, idem: str | None) -> web.StreamResponse:
        received = time.time()
        seq = stats.requests
        stats.requests += 1
        stats.in_flight += 1
        if stats.in_flight > stats.max_in_flight:
            stats.max_in_flight = stats.in_flight
        try:
            try:
                body = await request.json()
                if not isinstance(body, dict):
                    raise BadRequest("the request body must be a JSON object")
                if body.get("stream"):
                    raise BadRequest("stream=true is not supported by the simulated server")
                model = body.get("model")
                if not isinstance(model, str) or not model:
                    raise BadRequest("'model' must be a non-empty string")
                messages = parse_messages(body.get("messages"))
                params = request_params(body)
            except (BadRequest, ValueError) as e:
                stats.bad_requests += 1
                msg = str(e) if isinstance(e, BadRequest) else "the request body is not JSON"
                return _error(400, msg, "invalid_request_error")
            digest = body_digest(body)
            if idemp and idem and idem in stored:
                first, text = stored[idem]
                if first != digest:
                    stats.bad_requests += 1
                    msg = "Keys for idempotent requests can only be used with the same body."
                    return _error(422, msg, "invalid_request_error", code="idempotency_error")
                stats.replayed += 1
                return web.Response(text=text, content_type="application/json")
            if model not in known_models:
                if strict:
                    stats.bad_requests += 1
                    return _error(
                        404,
                        f"The model `{model}` does not exist or you do not have access to it.",
                        "invalid_request_error",
                        code="model_not_found",
                    )
                known_models.append(model)
            role = request.headers.get(ROLE_HEADER, "chat")
            stats.roles[role] = stats.roles.get(role, 0) + 1

            fault = plan.draw(seq)
            if fault == "429":
                stats.faults["429"] += 1
                msg = "Rate limit reached (simulated)."
                return _error(429, msg, "rate_limit_error", retry_header)
            if delay > 0:
                await asyncio.sleep(delay)
            if fault == "500":
                stats.faults["500"] += 1
                return _error(500, "The server had an error (simulated).", "server_error")
            if fault == "timeout":
                stats.faults["timeout"] += 1
                await asyncio.sleep(hang_s)
            try:
                text = responder.respond(model, role, messages, params)
            except TransientModelError as e:
                stats.responder_errors += 1
                headers = None
                if e.retry_after is not None:
                    headers = {"Retry-After": f"{e.retry_after:g}"}
                return _error(503, str(e), "server_error", headers)
            except ModelError as e:
                stats.responder_errors += 1
                return _error(400, str(e), "invalid_request_error")
            if fault == "malformed":
                stats.faults["malformed"] += 1
                text = garble(text, seq, plan.seed)
            elif fault is None:
                stats.completed += 1
            stats.answered[digest] = stats.answered.get(digest, 0) + 1
            if log_billed:
                stats.log.append(BilledReply(received, time.time(), digest, idem, fault, role))
            prompt_tokens = estimate_tokens(messages)
            completion_tokens = estimate_text_tokens(text)
            reply = {
                "id": f"chatcmpl-sim-{seq}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
                "system_fingerprint": "memearena-sim",
            }
            out = json.dumps(reply)
            if idemp and idem:
                stored[idem] = (digest, out)
            return web.Response(text=out, content_type="application/json")
        finally:
            stats.in_flight -= 1

    async def list_models(request: web.Request) -> web.StreamResponse:
        data = [
            {"id": m, "object": "model", "created": 0, "owned_by": "memearena-sim"}
            for m in known_models
        ]
        return web.json_response({"object": "list", "data": data})

    async def get_stats(request: web.Request) -> web.StreamResponse:
        return web.json_response(stats.as_dict())

    async def get_billed(request: web.Request) -> web.StreamResponse:
        # Every billed reply (benches count what was paid twice, and when, from it).
        return web.json_response([list(vars(b).values()) for b in stats.log])

    async def embeddings(request: web.Request) -> web.StreamResponse:
        # ``/v1/embeddings``: the simulated model's deterministic vectors, OpenAI's reply shape
        # (floats, or base64 float32 as the SDK asks by default); faults are not injected here.
        from memearena.models.embeddings import sim_embedding

        seq = stats.requests
        stats.requests += 1
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise BadRequest("the request body must be a JSON object")
            model = body.get("model")
            if not isinstance(model, str) or not model:
                raise BadRequest("'model' must be a non-empty string")
            raw = body.get("input")
            inputs = [raw] if isinstance(raw, str) else raw
            if not isinstance(inputs, list) or not inputs:
                raise BadRequest("'input' must be a string or a non-empty list of strings")
            if not all(isinstance(t, str) for t in inputs):
                raise BadRequest("'input' must hold strings (token ids are not supported)")
            fmt = body.get("encoding_format", "float")
            if fmt not in ("float", "base64"):
                raise BadRequest("'encoding_format' must be 'float' or 'base64'")
        except (BadRequest, ValueError) as e:
            stats.bad_requests += 1
            msg = str(e) if isinstance(e, BadRequest) else "the request body is not JSON"
            return _error(400, msg, "invalid_request_error")
        if model not in known_models:
            if strict:
                stats.bad_requests += 1
                return _error(
                    404,
                    f"The model `{model}` does not exist or you do not have access to it.",
                    "invalid_request_error",
                    code="model_not_found",
                )
            known_models.append(model)
        role = request.headers.get(ROLE_HEADER, "embeddings")
        stats.roles[role] = stats.roles.get(role, 0) + 1
        if delay > 0:
            await asyncio.sleep(delay)
        data: list[dict[str, Any]] = []
        for i, text in enumerate(inputs):
            vec = sim_embedding(text)
            emb: Any = vec
            if fmt == "base64":
                emb = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode()
            data.append({"object": "embedding", "index": i, "embedding": emb})
        tokens = sum(estimate_text_tokens(t) for t in inputs)
        stats.completed += 1
        reply = {
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            "id": f"emb-sim-{seq}",
        }
        return web.Response(text=json.dumps(reply), content_type="application/json")

    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/embeddings", embeddings)
    app.router.add_get("/v1/models", list_models)
    app.router.add_get("/v1/stats", get_stats)
    app.router.add_get("/v1/stats/billed", get_billed)
    add_batch_routes(  # the Batch API (/v1/files, /v1/batches)
        app,
        responder,
        delay_s=batch_delay_s,
        known_models=known_models,
        faults=batch_faults,
        file_limit=batch_file_limit,
    )
    return app


_RUN_OPTS: dict[str, Any] = {
    "access_log": None,
    "handler_cancellation": True,  # a client that gave up must not keep a hung handler alive
    "shutdown_timeout": 0.5,
}


def serve(
    responder: SimResponder,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    banner: str | None = None,
    **opts: Any,
) -> None:
    """Serve until interrupted (``memearena sim-serve``); ``opts`` as for ``make_app``.
    Bad options and an address already in use are one-line ConfigErrors."""
    try:
        app = make_app(responder, **opts)
    except ValueError as e:
        raise ConfigError(f"sim-serve: {e}") from None
    url = f"http://{host}:{port}/v1"
    try:
        # Bound here, not inside run_app, so a port in use is one line, not a traceback.
        sock = socket.create_server((host, port), reuse_port=False)
    except OSError as e:
        reason = e.strerror or str(e)
        raise ConfigError(f"sim-serve: cannot listen on {host}:{port} ({reason})") from None
    web.run_app(
        app,
        sock=sock,
        print=lambda *_: print(
            f"{banner or f'simulated OpenAI-compatible server on {url}'} (Ctrl-C to stop)",
            flush=True,
        ),
        **_RUN_OPTS,
    )


def _bind_loopback() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def _child_main() -> None:
    """Entry of a process-mode server: (responder, opts) pickled on stdin, port on stdout."""
    responder, opts = pickle.load(sys.stdin.buffer)
    sock = _bind_loopback()
    sys.stdout.write(f"{sock.getsockname()[1]}\n")
    sys.stdout.flush()
    web.run_app(make_app(responder, **opts), sock=sock, print=None, **_RUN_OPTS)


class BackgroundServer:
    """The server on a free loopback port, for tests and benches: in a background thread with
    its own event loop, or (``process=True``) in its own process so that client and server do
    not share one interpreter lock. The responder must be picklable in process mode."""

    def __init__(
        self,
        responder: SimResponder | None = None,
        *,
        process: bool = False,
        **opts: Any,
    ) -> None:
        self.responder: SimResponder = responder if responder is not None else EchoResponder()
        self.opts = opts
        self.process = process
        self.port = 0
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self.app: web.Application | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> BackgroundServer:
        """Start serving; returns once the port accepts connections."""
        if self.process:
            self._start_process()
        else:
            self._start_thread()
        return self

    def _start_thread(self) -> None:
        self.app = make_app(self.responder, **self.opts)
        sock = _bind_loopback()
        self.port = sock.getsockname()[1]
        ready = threading.Event()
        loop = asyncio.new_event_loop()
        self._loop = loop

        async def up() -> None:
            assert self.app is not None
            runner = web.AppRunner(self.app, **_RUN_OPTS)
            await runner.setup()
            await web.SockSite(runner, sock).start()
            self._runner = runner

        def main() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(up())
            ready.set()
            loop.run_forever()
            if self._runner is not None:
                loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=main, name="memearena-sim-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("simulated server did not start")

    def _start_process(self) -> None:
        # A fresh interpreter (not fork, not spawn's re-import of __main__): safe from any
        # script, and the responder travels pickled, so its class must be importable.
        payload = pickle.dumps((self.responder, self.opts))
        code = "from memearena.sim.server import _child_main; _child_main()"
        # The child imports what this process can: a plug-in method's simulated part (a
        # package on this process's path, not installed) travels inside the responder.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self._proc = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(payload)
        self._proc.stdin.close()
        line = self._proc.stdout.readline()
        if not line.strip().isdigit():
            self.stop()
            raise RuntimeError("simulated server process did not start")
        self.port = int(line)
        deadline = time.monotonic() + 30
        while True:  # the port is bound before the app runs: wait until it answers
            try:
                self.stats()
                return
            except OSError:
                if time.monotonic() > deadline or self._proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("simulated server process did not start") from None
                time.sleep(0.05)

    def stats(self) -> dict[str, Any]:
        """The server's counters (``GET /v1/stats``)."""
        if self.app is not None:
            return self.app[STATS_KEY].as_dict()
        with urllib.request.urlopen(f"{self.base_url}/stats", timeout=10) as r:
            data: dict[str, Any] = json.loads(r.read())
        return data

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None
            self._thread = None
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
            if self._proc.stdout is not None:
                self._proc.stdout.close()
            self._proc = None

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
