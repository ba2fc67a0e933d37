"""The lean request path: an OpenAI-compatible endpoint spoken to directly over aiohttp, the
body encoded and the reply decoded with msgspec, no SDK objects on the way.

It is the default backend of ``provider: openai`` (``client: lean``); the SDK backend
(``OpenAIBackend``, ``client: sdk``) is the reference it is tested against: for every request
shape the same body reaches the endpoint and the same reply or error comes back. What it keeps
from the SDK path, field by field:

- the reply is read chunk by chunk and the call fails (``too_large``, never retried) past
  ``max_response_bytes``, so an endless reply never sits in memory whole;
- a 200 body is parsed with the bounds of ``jsonsafe.loads_bounded``: no NaN/Infinity, no
  number that overflows, nesting no deeper than ``MAX_REPLY_DEPTH``, valid UTF-8 (msgspec also
  refuses a lone surrogate escape, which the store could not encode); then validated field by
  field by the same ``parse_completion`` / ``validate_embedding_reply`` the SDK path uses;
- error statuses map through the same ``status_error`` (408/429/5xx transient with Retry-After;
  401/403/404 end the endpoint; other 4xx permanent) with the SDK's message text;
- a refused connection or an unknown host is an ``EndpointError``; a timeout, a reset or a
  dropped connection is transient;
- a reply is read only for a request sent on its connection: a kept-alive connection holding
  bytes nobody asked for (an unsolicited or extra response) is closed, never reused, so no
  request is handed another one's reply;
- redirects are not followed (a 307/308 would re-POST the prompt to another origin, a 302 turn
  into a GET whose reply looks like a completion): a 3xx is an ``EndpointError`` naming the
  status and the Location;
- the key comes from the environment only and is scrubbed from every message.

Retries, limits, spend, the cache and the call record stay in ``ModelPool``: this is only the
raw endpoint."""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from memearena.config.urls import endpoint_url
from memearena.errors import BadResponse, EndpointError, ModelError, TransientModelError
from memearena.models.accounting import estimate_text_tokens
from memearena.models.backends import (
    IDEMPOTENCY_HEADER,
    MAX_REPLY_DEPTH,
    REQUEST_ID,
    ROLE_HEADER,
    RawReply,
    api_key,
    connection_failure_kind,
    least_busy,
    parse_completion,
    request_body,
    scrub_key,
    status_error,
)
from memearena.models.types import GenParams, Message

if TYPE_CHECKING:
    import aiohttp

    from memearena.config import OpenAIModelConfig
    from memearena.models.embeddings import EmbedReply

__all__ = [
    "DEFAULT_BASE_URL",
    "EMBED_BYTES_PER_TEXT",
    "LeanBackend",
    "decode_reply",
    "status_message",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""Where a model with no ``base_url`` is sent (after ``OPENAI_BASE_URL``), as the SDK does."""

EMBED_BYTES_PER_TEXT = 24 * 65_536
"""Room an embeddings reply gets per input text beyond ``max_response_bytes``: the largest vector
the validator accepts (``MAX_EMBED_DIMS`` values) at 24 bytes a number, so no reply that could
pass validation is cut off, and none larger is read."""

_ERROR_BODY_BYTES = 64 * 1024
"""Most of an error body read for its message (the rest is discarded unread)."""

_ENV_HEADERS = (("OPENAI_ORG_ID", "OpenAI-Organization"), ("OPENAI_PROJECT_ID", "OpenAI-Project"))

_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder()
# A response_format is the same few schema strings all run long: checked and encoded once each.
_FORMATS: dict[str, msgspec.Raw] = {}
_MAX_FORMATS = 256


def _response_format(text: str) -> msgspec.Raw:
    raw = _FORMATS.get(text)
    if raw is None:
        json.loads(text)  # the SDK path sends json.loads(text): refuse what it would refuse
        raw = msgspec.Raw(text.encode("utf-8"))
        if len(_FORMATS) < _MAX_FORMATS:
            _FORMATS[text] = raw
    return raw


def _body(model: str, messages: Sequence[Message], params: GenParams) -> bytes:
    """The request body ``request_body`` builds for the SDK path, as JSON bytes."""
    return _ENCODER.encode(request_body(model, messages, params, _response_format))


_CONNECTORS: dict[int, type] = {}


def _checked_connector(aiohttp: Any) -> type:
    """A ``TCPConnector`` that never hands out a pooled connection holding bytes nobody asked
    for: an HTTP/1.1 reply carries no request id, so a response that arrived on an idle
    kept-alive connection would be read as the reply to the next request sent on it. Such a
    connection (``should_close``: unread data buffered, or marked to close) is closed and the
    next one taken, or a new one opened."""
    got = _CONNECTORS.get(id(aiohttp))
    if got is not None:
        return got
    base = aiohttp.TCPConnector

    def unread(proto: Any) -> bool:
        return proto is not None and bool(getattr(proto, "should_close", False))

    if inspect.iscoroutinefunction(base._get):  # aiohttp >= 3.10: returns a Connection

        class Checked(base):  # type: ignore[misc,valid-type]
            async def _get(self, *args: Any, **kw: Any) -> Any:
                while True:
                    conn = await super()._get(*args, **kw)
                    if conn is None or not unread(conn.protocol):
                        return conn
                    conn.close()

    else:  # aiohttp 3.9: returns the protocol

        class Checked(base):  # type: ignore[misc,valid-type,no-redef]
            def _get(self, *args: Any, **kw: Any) -> Any:
                while True:
                    proto = super()._get(*args, **kw)
                    if proto is None or not unread(proto):
                        return proto
                    proto.close()

    _CONNECTORS[id(aiohttp)] = Checked
    return Checked


def _printable(text: str, limit: int = 300) -> str:
    """Untrusted header text made safe for a one-line message (controls escaped, bounded)."""
    text = text[:limit]
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _too_deep(data: Any, limit: int) -> bool:
    """Whether decoded JSON nests deeper than ``limit`` (iterative: no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))
    return False


def decode_reply(body: bytes, max_depth: int = MAX_REPLY_DEPTH) -> Any:
    """A reply body parsed as untrusted JSON: BadResponse for bad syntax, invalid UTF-8,
    NaN/Infinity, a number out of range or nesting deeper than ``max_depth`` (the bounds of
    ``loads_bounded``; the size bound is enforced while reading)."""
    try:
        data = _DECODER.decode(body)
    except (msgspec.DecodeError, RecursionError) as e:
        raise BadResponse(f"reply is not valid JSON ({str(e)[:120]})") from None
    # Cheap exact pre-check: a document with no more brackets than the limit cannot exceed it.
    if (
        isinstance(data, dict | list)
        and body.count(b"{") + body.count(b"[") > max_depth
        and _too_deep(data, max_depth)
    ):
        raise BadResponse(f"reply is not valid JSON (JSON nested deeper than {max_depth} levels)")
    return data


def status_message(status: int, text: str) -> str:
    """The message the SDK path reports for an error status with body ``text``: the error
    object's ``message`` when the body carries one, else ``Error code: N``."""
    err_text = text.strip()
    body: Any = err_text
    err_msg = f"Error code: {status}"
    try:
        body = json.loads(err_text)
    except ValueError:
        pass
    else:
        error = body.get("error", body) if isinstance(body, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        if isinstance(message, str) and message:
            err_msg += f" - {message}"
    # The SDK keeps body["error"] as the error's body and reads the message from there.
    data = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
    return err_msg


class LeanBackend:
    """An OpenAI-compatible endpoint on aiohttp: one connection pool per replica, least-busy
    balancing, no retries of its own (the model stack retries)."""

    def __init__(self, name: str, cfg: OpenAIModelConfig) -> None:
        self.name = name
        self._cfg = cfg
        where = ", ".join(cfg.urls()) or "api.openai.com"
        self._where = f"model {name!r} ({cfg.model} at {where})"
        key = api_key(cfg, self._where)
        # Kept only to scrub it out of error messages; never logged, stored or repr'd.
        self._secret = key
        self._max_bytes = cfg.max_response_bytes
        bases = cfg.urls() or [os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL]
        self._bases = list(bases)
        headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        # The SDK sends these when the environment sets them; so does this path.
        for env, header in _ENV_HEADERS:
            if value := os.environ.get(env):
                headers[header] = value
        self._headers = headers
        self._role_headers: dict[str, dict[str, str]] = {}
        self._sessions: list[aiohttp.ClientSession] | None = None
        self._urls: dict[str, list[Any]] = {}
        self._busy = [0] * len(self._bases)
        self._rr = itertools.count()
        self._aiohttp: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"LeanBackend({self.name!r}, model={self._cfg.model!r})"

    def _session(self, i: int) -> aiohttp.ClientSession:
        """Replica ``i``'s session, opened on first use. A session belongs to the event loop it
        was opened on: a backend used again from another loop (one per command) opens new ones
        (the old loop is gone with its connections)."""
        loop = asyncio.get_running_loop()
        if self._sessions is not None and self._loop is not loop:
            self._sessions = None
        if self._sessions is None:
            self._loop = loop
            import aiohttp
            from yarl import URL

            timeout = aiohttp.ClientTimeout(
                total=None, sock_connect=self._cfg.timeout, sock_read=self._cfg.timeout
            )
            connector = _checked_connector(aiohttp)
            self._sessions = [
                aiohttp.ClientSession(
                    connector=connector(limit=0, keepalive_timeout=30),
                    timeout=timeout,
                    skip_auto_headers=("User-Agent",),
                    raise_for_status=False,
                )
                for _ in self._bases
            ]
            for path in ("/chat/completions", "/embeddings"):
                # encoded=True: the URL is sent as written (its query kept, after the path)
                self._urls[path] = [URL(endpoint_url(b, path), encoded=True) for b in self._bases]
            self._aiohttp = aiohttp
        return self._sessions[i]

    def _pick(self) -> int:
        return least_busy(self._busy, self._rr)

    def _headers_for(self, role: str) -> dict[str, str]:
        h = self._role_headers.get(role)
        if h is None:
            h = {**self._headers, ROLE_HEADER: role}
            if len(self._role_headers) < 64:  # roles are a handful of fixed names
                self._role_headers[role] = h
        return h

    async def _post(self, path: str, body: bytes, role: str, cap: int) -> bytes:
        """POST ``body`` and return the 2xx reply read up to ``cap`` bytes; every failure mapped
        to the model error the SDK path raises for it."""
        i = self._pick()
        session = self._session(i)
        aiohttp = self._aiohttp
        self._busy[i] += 1
        try:
            headers = self._headers_for(role)
            if (rid := REQUEST_ID.get()) is not None:
                headers = {**headers, IDEMPOTENCY_HEADER: rid}
            async with session.post(
                self._urls[path][i],
                data=body,
                headers=headers,
                allow_redirects=False,
            ) as resp:
                if 300 <= resp.status < 400:
                    raise self._redirected(resp)
                if resp.status >= 400:
                    text = await self._read_error(resp)
                    msg = self._scrub(f"{self._where}: HTTP {resp.status}: {text}")
                    raise status_error(msg, resp.status, resp.headers)
                return await self._read_capped(resp, cap)
        except ModelError:
            raise
        except (TimeoutError, aiohttp.ServerTimeoutError) as e:
            raise self._connection_error(e, timeout=True) from None
        except (aiohttp.ClientError, OSError) as e:
            raise self._connection_error(e, timeout=False) from None
        finally:
            self._busy[i] -= 1

    def _redirected(self, resp: aiohttp.ClientResponse) -> EndpointError:
        """A 3xx: never followed (the prompt would go to wherever it points, a 302 turn into a
        GET); every call would be redirected alike, so nothing more is sent to the model."""
        resp.close()  # its body is not read: the connection is not reused
        location = _printable(resp.headers.get("Location", "(none)"))
        return EndpointError(
            self._scrub(
                f"{self._where}: HTTP {resp.status} redirect to {location}; redirects are not "
                "followed (set base_url to the address that answers)"
            ),
            kind="redirect",
        )

    def _connection_error(self, e: BaseException, *, timeout: bool) -> ModelError:
        dead = connection_failure_kind(e)
        if dead is not None:
            what = "connection refused" if dead == "connection_refused" else "unknown host"
            return EndpointError(f"{self._where}: {what}", kind=dead)
        if timeout:
            return TransientModelError("request timed out", kind="timeout")
        detail = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        return TransientModelError(
            self._scrub(f"{self._where}: connection error: {detail}"), kind="connection"
        )

    async def _read_capped(self, resp: aiohttp.ClientResponse, cap: int) -> bytes:
        """The body, read chunk by chunk; stops (and fails the call) past ``cap`` so a huge or
        endless reply never sits in memory whole."""
        declared = resp.content_length
        if declared is not None and declared > cap:
            raise self._too_large(cap)
        chunks: list[bytes] = []
        size = 0
        stream = resp.content
        while True:
            chunk = await stream.readany()
            if not chunk:
                break
            size += len(chunk)
            if size > cap:
                raise self._too_large(cap)
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def _too_large(self, cap: int) -> ModelError:
        return ModelError(
            f"{self._where}: reply larger than max_response_bytes ({cap:,}); reading stopped",
            kind="too_large",
        )

    async def _read_error(self, resp: aiohttp.ClientResponse) -> str:
        """An error body's message (its first ``_ERROR_BODY_BYTES`` only: an error body is
        untrusted and need not be small)."""
        chunks: list[bytes] = []
        left = _ERROR_BODY_BYTES
        while left > 0:  # read(n) returns what has arrived, up to n: loop to the end or the cap
            chunk = await resp.content.read(left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return status_message(resp.status, b"".join(chunks).decode("utf-8", "replace"))

    def _scrub(self, text: str) -> str:
        return scrub_key(text, self._secret)

    async def chat(self, messages: Sequence[Message], params: GenParams, role: str) -> RawReply:
        """One chat completion; failures mapped as ``OpenAIBackend.chat`` maps them."""
        body = _body(self._cfg.model, messages, params)
        raw = await self._post("/chat/completions", body, role, self._max_bytes)
        return parse_completion(decode_reply(raw), messages)

    async def embed(self, texts: Sequence[str], role: str) -> EmbedReply:
        """One ``/v1/embeddings`` request (floats), validated into an EmbedReply; failures
        mapped as ``chat`` maps them."""
        from memearena.models.embeddings import validate_embedding_reply

        payload = {"model": self._cfg.model, "input": list(texts), "encoding_format": "float"}
        cap = self._max_bytes + EMBED_BYTES_PER_TEXT * len(texts)
        raw = await self._post("/embeddings", _ENCODER.encode(payload), role, cap)
        try:
            data = decode_reply(raw)
        except BadResponse as e:
            raise BadResponse(f"embeddings {e}") from None
        estimate = sum(estimate_text_tokens(t) for t in texts)
        return validate_embedding_reply(data, len(texts), estimate)

    async def aclose(self) -> None:
        """Close every replica's connection pool."""
        sessions, self._sessions = self._sessions, None
        for s in sessions or []:
            await s.close()
        if sessions:
            await asyncio.sleep(0)  # let the transports see their close before the loop ends
