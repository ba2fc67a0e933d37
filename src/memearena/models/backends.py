"""Raw model endpoints: the OpenAI-compatible HTTP backend and the in-process simulated one."""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import itertools
import json
import os
import re
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memearena.config.urls import split_query
from memearena.errors import BadResponse, EndpointError, ModelError, TransientModelError
from memearena.jsonsafe import loads_bounded
from memearena.models.accounting import estimate_text_tokens, estimate_tokens
from memearena.models.types import GenParams, ImagePart, Message, RawReply, TextPart, Usage

if TYPE_CHECKING:
    from memearena.config import OpenAIModelConfig, SimModelConfig

__all__ = [
    "IDEMPOTENCY_HEADER",
    "MAX_REPLY_DEPTH",
    "MAX_USAGE_TOKENS",
    "REQUEST_ID",
    "ROLE_HEADER",
    "ChatBackend",
    "OpenAIBackend",
    "RawReply",
    "SimBackend",
    "SimResponder",
    "api_key",
    "connection_failure_kind",
    "idempotency_key",
    "least_busy",
    "openai_messages",
    "parse_completion",
    "parse_retry_after",
    "request_body",
    "scrub_key",
    "status_error",
]

ROLE_HEADER = "X-Memearena-Role"

IDEMPOTENCY_HEADER = "Idempotency-Key"
"""Sent with each chat request: the same for every attempt at one request until a reply to it
is received and not used (then the next attempt gets a new one), and the same again from a
resumed run for a request a kill left in flight. A server that honours the header (it depends
on the server: OpenAI's API does not document it) answers a repeat with the reply it already
billed; any other server ignores it."""

REQUEST_ID: ContextVar[str | None] = ContextVar("memearena_request_id", default=None)
"""The ``Idempotency-Key`` of the request the current task is sending (set by the model
pool around a backend's ``chat``)."""


def idempotency_key(request_key: str, generation: int) -> str:
    """The header value for attempt lineage ``generation`` of request ``request_key``: a hash,
    so the header names the request without carrying anything of it."""
    digest = hashlib.sha256(f"{request_key}:{generation}".encode()).hexdigest()
    return f"memearena-{digest[:40]}"


"""Header carrying the agent role (servers ignore it; the simulated server answers by it)."""


@runtime_checkable
class ChatBackend(Protocol):
    """One raw chat endpoint. Raises TransientModelError for retryable failures."""

    async def chat(self, messages: Sequence[Message], params: GenParams, role: str) -> RawReply:
        """Send one request and return the reply."""
        ...


@runtime_checkable
class SimResponder(Protocol):
    """The simulated world's answer to one request (implemented by ``memearena.sim.world``)."""

    def respond(self, model: str, role: str, messages: Sequence[Message], params: GenParams) -> str:
        """The simulated model's reply text; may raise TransientModelError."""
        ...


class SimBackend:
    """An in-process simulated model: the responder's answer after ``latency_ms``."""

    def __init__(self, name: str, cfg: SimModelConfig, responder: SimResponder) -> None:
        self.name = name
        self._delay = cfg.latency_ms / 1000.0
        self._responder = responder
        self._max_bytes = cfg.max_response_bytes

    async def chat(self, messages: Sequence[Message], params: GenParams, role: str) -> RawReply:
        """Ask the responder; token usage is estimated (ceil(chars / 4), +85 per image)."""
        if self._delay > 0:
            await asyncio.sleep(self._delay)
        text = self._responder.respond(self.name, role, messages, params)
        if not isinstance(text, str):
            raise BadResponse(f"simulated reply is a {type(text).__name__}, not text")
        if len(text) > self._max_bytes // 4 and len(text.encode("utf-8")) > self._max_bytes:
            raise ModelError(
                f"model {self.name!r}: reply larger than max_response_bytes ({self._max_bytes:,})",
                kind="too_large",
            )
        usage = Usage(estimate_tokens(messages), estimate_text_tokens(text))
        return RawReply(text, usage, "stop")


def openai_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages in the chat-completions wire format (a lone text part is sent as a string)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        content = m.content
        if len(content) == 1 and isinstance(content[0], TextPart):
            out.append({"role": m.role, "content": content[0].text})
            continue
        parts: list[dict[str, Any]] = []
        for p in content:
            if isinstance(p, TextPart):
                parts.append({"type": "text", "text": p.text})
            elif isinstance(p, ImagePart):
                parts.append({"type": "image_url", "image_url": {"url": p.data_url}})
        out.append({"role": m.role, "content": parts})
    return out


def _request_headers(role: str) -> dict[str, str]:
    rid = REQUEST_ID.get()
    if rid is None:
        return {ROLE_HEADER: role}
    return {ROLE_HEADER: role, IDEMPOTENCY_HEADER: rid}


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or HTTP date)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


_KEYLIKE = re.compile(r"\b(sk|key|api)-[A-Za-z0-9_\-*]{6,}", re.IGNORECASE)
# Only these are worth a retry: a timeout, a rate limit or a server error. Every other 4xx
# (401/403 bad key, 404 unknown model, 400 bad request) fails the same way on every attempt.
_RETRYABLE_STATUS = frozenset({408, 429})
# An endpoint that cannot serve the model at all: no further request to it is worth sending.
_ENDPOINT_STATUS = {401: "auth", 403: "auth", 404: "not_found"}

MAX_USAGE_TOKENS = 100_000_000
"""Largest token count accepted in a reply's usage (larger is a malformed reply)."""

MAX_REPLY_DEPTH = 32
"""Deepest JSON nesting accepted in a completion body (real ones nest < 8 levels)."""


def _usage_count(u: dict[str, Any], name: str) -> int | None:
    """A validated token count from a usage object: None when absent; BadResponse when it is
    not a finite, non-negative whole number (negative usage would make spend negative)."""
    v = u.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise BadResponse(f"usage.{name} is not a number")
    if v != v or v < 0 or v > MAX_USAGE_TOKENS or (isinstance(v, float) and not v.is_integer()):
        raise BadResponse(f"usage.{name} is not a token count ({v!r})")
    return int(v)


def least_busy(busy: Sequence[int], turn: Iterator[int]) -> int:
    """The replica with the fewest calls in flight, ties broken round-robin from ``turn``."""
    n = len(busy)
    if n == 1:
        return 0
    start = next(turn) % n
    best = start
    for k in range(1, n):
        i = (start + k) % n
        if busy[i] < busy[best]:
            best = i
    return best


def parse_completion(data: Any, messages: Sequence[Message]) -> RawReply:
    """A chat-completions body validated field by field into a RawReply; BadResponse names the
    first field that is missing or of the wrong type (a malformed reply never reaches a parser,
    the cache or the accounts)."""
    if not isinstance(data, dict):
        raise BadResponse("reply is not a JSON object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise BadResponse("reply has no choices")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise BadResponse("choices[0] is not an object")
    message = choice.get("message")
    if not isinstance(message, dict):
        raise BadResponse("choices[0].message is not an object")
    content = message.get("content")
    if content is None:
        text = ""
    elif isinstance(content, str):
        text = content
    elif isinstance(content, list):  # content parts, as some servers send them
        texts = []
        for part in content:
            if not isinstance(part, dict) or not isinstance(part.get("text", ""), str):
                raise BadResponse("choices[0].message.content holds a malformed part")
            texts.append(part.get("text", ""))
        text = "".join(texts)
    else:
        raise BadResponse("choices[0].message.content is not a string")
    refusal = message.get("refusal")
    if refusal is not None and not isinstance(refusal, str):
        raise BadResponse("choices[0].message.refusal is not a string")
    finish = choice.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise BadResponse("choices[0].finish_reason is not a string")
    u = data.get("usage")
    if u is not None and not isinstance(u, dict):
        raise BadResponse("usage is not an object")
    prompt = _usage_count(u, "prompt_tokens") if u else None
    completion = _usage_count(u, "completion_tokens") if u else None
    # Some servers omit usage: estimate what is missing so accounting stays conservative.
    usage = Usage(
        estimate_tokens(messages) if prompt is None else prompt,
        estimate_text_tokens(text) if completion is None else completion,
    )
    return RawReply(text, usage, finish, refusal or None)


def connection_failure_kind(exc: BaseException) -> str | None:
    """``connection_refused`` or ``dns`` when a connection error's cause chain shows the endpoint
    cannot be reached at all (the SDK reports a refused connection as a timeout); None for
    failures worth a retry (reset, timeout, temporary resolver failure)."""
    seen = 0
    e: BaseException | None = exc
    while e is not None and seen < 16:
        if isinstance(e, ConnectionRefusedError):
            return "connection_refused"
        if isinstance(e, socket.gaierror):
            return None if e.errno == socket.EAI_AGAIN else "dns"
        e = e.__cause__ or e.__context__
        seen += 1
    return None


def api_key(cfg: OpenAIModelConfig, where: str) -> str:
    """The key to send: read from the environment variable the config names ("EMPTY" when it
    names none); EndpointError ``missing_key`` when that variable is unset or empty."""
    if cfg.api_key_env is None:
        return "EMPTY"  # local servers (vLLM, Ollama, the simulator) ignore the key
    key = os.environ.get(cfg.api_key_env, "")
    if not key:
        raise EndpointError(
            f"{where}: environment variable {cfg.api_key_env} is not set "
            "(it must hold the API key)",
            kind="missing_key",
        )
    return key


def scrub_key(text: str, secret: str) -> str:
    """``text`` with the key and anything shaped like a key replaced by ``***``: an endpoint may
    echo the key in an error body, which would otherwise reach the store and the logs."""
    if secret and secret != "EMPTY":
        text = text.replace(secret, "***")
    return _KEYLIKE.sub("***", text)


def request_body(
    model: str,
    messages: Sequence[Message],
    params: GenParams,
    response_format: Callable[[str], Any] = json.loads,
) -> dict[str, Any]:
    """The chat-completions request body (both request paths and batch files send this);
    ``response_format`` turns the params' JSON text into the value sent."""
    body: dict[str, Any] = {"model": model, "messages": openai_messages(messages)}
    if params.temperature is not None:
        body["temperature"] = params.temperature
    if params.top_p is not None:
        body["top_p"] = params.top_p
    if params.max_tokens is not None:
        # Reasoning models reject max_tokens; everything else accepts it.
        field = "max_completion_tokens" if params.reasoning_effort else "max_tokens"
        body[field] = params.max_tokens
    if params.seed is not None:
        body["seed"] = params.seed
    if params.reasoning_effort is not None:
        body["reasoning_effort"] = params.reasoning_effort
    if params.response_format is not None:
        body["response_format"] = response_format(params.response_format)
    return body


def status_error(msg: str, status: int, headers: Any) -> ModelError:
    """The model error an HTTP error status maps to: 408, 429 and 5xx are transient (retried,
    after any Retry-After); 401/403/404 mean the endpoint is unusable; any other is permanent."""
    if status in _RETRYABLE_STATUS or status >= 500:
        kind = "rate_limit" if status == 429 else f"http_{status}"
        return TransientModelError(msg, parse_retry_after(headers), kind=kind)
    if status in _ENDPOINT_STATUS:
        return EndpointError(msg + _ENDPOINT_HINT[status], kind=_ENDPOINT_STATUS[status])
    return ModelError(msg, kind=f"http_{status}")


_ENDPOINT_HINT = {
    401: " (check the key in the model's api_key_env)",
    403: " (check the key in the model's api_key_env and its access to this model)",
    404: (
        " (check the model's 'model' id and its base_url: most servers answer at"
        " <base_url>/chat/completions with a base_url ending in /v1)"
    ),
}
"""What to check when an endpoint refuses every request, appended to its error."""


class OpenAIBackend:
    """An OpenAI-compatible endpoint through the official ``openai`` SDK: one client per replica,
    least-busy balancing. The SDK's own retries are off: the model stack retries."""

    def __init__(self, name: str, cfg: OpenAIModelConfig) -> None:
        import openai  # lazy: importing the SDK is slow and only needed for real endpoints

        self.name = name
        self._cfg = cfg
        where = ", ".join(cfg.urls()) or "api.openai.com"
        self._where = f"model {name!r} ({cfg.model} at {where})"
        key = api_key(cfg, self._where)
        # Kept only to scrub it out of error messages; never logged, stored or repr'd.
        self._secret = key
        self._max_bytes = cfg.max_response_bytes
        # The SDK appends its paths to the base URL's raw path, query and all: the query goes
        # on every request as default_query instead, so it follows the path.
        urls: list[tuple[str | None, dict[str, str]]] = [split_query(u) for u in cfg.urls()]
        urls = urls or [(None, {})]
        self._clients = [
            openai.AsyncOpenAI(
                api_key=key,
                base_url=u,
                default_query=query or None,
                max_retries=0,
                timeout=cfg.timeout,
                http_client=_fast_http_client(openai),
            )
            for u, query in urls
        ]
        self._busy = [0] * len(self._clients)
        self._rr = itertools.count()
        self._openai = openai
        self._response_cls = _response_class(openai)

    def __repr__(self) -> str:
        return f"OpenAIBackend({self.name!r}, model={self._cfg.model!r})"

    def _pick(self) -> int:
        return least_busy(self._busy, self._rr)

    def _scrub(self, text: str) -> str:
        return scrub_key(text, self._secret)

    def _request(self, messages: Sequence[Message], params: GenParams) -> dict[str, Any]:
        return request_body(self._cfg.model, messages, params)

    async def _read_capped(self, resp: Any) -> bytes:
        """The body, read chunk by chunk; stops (and fails the call) past ``max_response_bytes``
        so a huge or endless reply never sits in memory whole."""
        chunks: list[bytes] = []
        size = 0
        try:
            async for chunk in resp.aiter_bytes():
                size += len(chunk)
                if size > self._max_bytes:
                    raise ModelError(
                        f"{self._where}: reply larger than max_response_bytes "
                        f"({self._max_bytes:,}); reading stopped",
                        kind="too_large",
                    )
                chunks.append(chunk)
        finally:
            await resp.aclose()
        return b"".join(chunks)

    async def chat(self, messages: Sequence[Message], params: GenParams, role: str) -> RawReply:
        """One chat completion; failures mapped to TransientModelError (retried: 408, 429, 5xx,
        timeouts, resets, malformed replies), EndpointError (refused connection, unknown host,
        401, 403, 404) or ModelError (any other 4xx, an oversized reply)."""
        oa = self._openai
        i = self._pick()
        self._busy[i] += 1
        try:
            # The SDK's generic request path (auth, base URL, timeout, error mapping) without its
            # per-call typed-dict transform and model construction, which cost more than the
            # whole rest of the stack; the body is streamed (capped) and parsed (bounded) below.
            resp = await self._clients[i].post(
                "/chat/completions",
                cast_to=self._response_cls,
                body=self._request(messages, params),
                options={"headers": _request_headers(role)},
                stream=True,
            )
            body = await self._read_capped(resp)
        except (oa.APIStatusError, oa.APITimeoutError, oa.APIConnectionError) as e:
            raise self._sdk_error(e) from None
        finally:
            self._busy[i] -= 1
        try:
            data = loads_bounded(body, max_depth=MAX_REPLY_DEPTH, max_bytes=self._max_bytes)
        except ValueError as e:  # a 200 whose body is not (bounded) JSON
            raise BadResponse(f"reply is not valid JSON ({str(e)[:120]})") from None
        return parse_completion(data, messages)

    def _sdk_error(self, e: Exception) -> ModelError:
        """The model error an SDK failure maps to: 408/429/5xx, timeouts and dropped connections
        are transient (retried); a refused connection, an unknown host and 401/403/404 mean the
        endpoint is unusable (never retried); any other status is a permanent failure."""
        oa = self._openai
        if isinstance(e, oa.APIStatusError):
            status = e.status_code
            msg = self._scrub(f"{self._where}: HTTP {status}: {_error_message(e)}")
            return status_error(msg, status, e.response.headers)
        dead = connection_failure_kind(e)
        if dead is not None:
            what = "connection refused" if dead == "connection_refused" else "unknown host"
            return EndpointError(f"{self._where}: {what}", kind=dead)
        if isinstance(e, oa.APITimeoutError):
            return TransientModelError("request timed out", kind="timeout")
        return TransientModelError(
            self._scrub(f"{self._where}: connection error: {e}"), kind="connection"
        )

    async def embed(self, texts: Sequence[str], role: str) -> Any:
        """One ``/v1/embeddings`` request through the SDK's ``embeddings.create`` (floats),
        validated into an EmbedReply; failures mapped as ``chat`` maps them."""
        from memearena.models.embeddings import validate_embedding_reply

        oa = self._openai
        i = self._pick()
        self._busy[i] += 1
        try:
            resp = await self._clients[i].embeddings.create(
                model=self._cfg.model,
                input=list(texts),
                encoding_format="float",
                extra_headers={ROLE_HEADER: role},
            )
        except (oa.APIStatusError, oa.APITimeoutError, oa.APIConnectionError) as e:
            raise self._sdk_error(e) from None
        except ValueError as e:  # a 200 whose body is not JSON
            raise BadResponse(f"embeddings reply is not valid JSON ({str(e)[:120]})") from None
        finally:
            self._busy[i] -= 1
        estimate = sum(estimate_text_tokens(t) for t in texts)
        return validate_embedding_reply(resp, len(texts), estimate)

    async def aclose(self) -> None:
        """Close every replica's HTTP client."""
        for c in self._clients:
            await c.close()


def _error_message(e: Any) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
    return str(getattr(e, "message", e))


def _fast_http_client(openai: Any) -> Any:
    """The SDK's aiohttp transport where available (several times cheaper per call than the
    default on a busy loop); None (the SDK default) otherwise."""
    factory = getattr(openai, "DefaultAioHttpClient", None)
    if factory is None:
        return None
    try:
        return factory()
    except RuntimeError:  # the SDK's aiohttp extra is not installed
        return None


def _response_class(openai: Any) -> Any:
    """The HTTP response class the installed SDK returns for ``cast_to`` (httpx2 or httpx)."""
    base = getattr(openai, "_base_client", None)
    for name in ("httpx2", "httpx"):
        mod = getattr(base, name, None)
        if mod is not None:
            return mod.Response
    import httpx

    return httpx.Response
