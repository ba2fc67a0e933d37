"""Raw model endpoints: the OpenAI-compatible HTTP backend and the in-process simulated one."""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from memearena.errors import ModelError, TransientModelError
from memearena.models.accounting import estimate_text_tokens, estimate_tokens
from memearena.models.types import GenParams, ImagePart, Message, TextPart, Usage

if TYPE_CHECKING:
    from memearena.config import OpenAIModelConfig, SimModelConfig

__all__ = [
    "ROLE_HEADER",
    "ChatBackend",
    "OpenAIBackend",
    "RawReply",
    "SimBackend",
    "SimResponder",
    "openai_messages",
    "parse_retry_after",
]

ROLE_HEADER = "X-Memearena-Role"
"""Header carrying the agent role (servers ignore it; the simulated server answers by it)."""


@dataclass(frozen=True)
class RawReply:
    """What one endpoint returned for one request, before accounting and refusal detection."""

    text: str
    usage: Usage
    finish_reason: str | None
    refusal_field: str | None = None


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

    async def chat(self, messages: Sequence[Message], params: GenParams, role: str) -> RawReply:
        """Ask the responder; token usage is estimated (ceil(chars / 4), +85 per image)."""
        if self._delay > 0:
            await asyncio.sleep(self._delay)
        text = self._responder.respond(self.name, role, messages, params)
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
_RETRYABLE_STATUS = frozenset({408, 409, 425, 429})


class OpenAIBackend:
    """An OpenAI-compatible endpoint through the official ``openai`` SDK: one client per replica,
    least-busy balancing. The SDK's own retries are off: the model stack retries."""

    def __init__(self, name: str, cfg: OpenAIModelConfig) -> None:
        import openai  # lazy: importing the SDK is slow and only needed for real endpoints

        self.name = name
        self._cfg = cfg
        if cfg.api_key_env is None:
            key = "EMPTY"  # local servers (vLLM, Ollama, the simulator) ignore the key
        else:
            key = os.environ.get(cfg.api_key_env, "")
            if not key:
                raise ModelError(
                    f"model {name!r}: environment variable {cfg.api_key_env} is not set "
                    "(it must hold the API key)"
                )
        # Kept only to scrub it out of error messages; never logged, stored or repr'd.
        self._secret = key
        urls: list[str | None] = list(cfg.urls()) or [None]
        self._clients = [
            openai.AsyncOpenAI(
                api_key=key,
                base_url=u,
                max_retries=0,
                timeout=cfg.timeout,
                http_client=_fast_http_client(openai),
            )
            for u in urls
        ]
        self._busy = [0] * len(self._clients)
        self._rr = itertools.count()
        self._openai = openai
        self._response_cls = _response_class(openai)

    def __repr__(self) -> str:
        return f"OpenAIBackend({self.name!r}, model={self._cfg.model!r})"

    def _pick(self) -> int:
        n = len(self._clients)
        if n == 1:
            return 0
        start = next(self._rr) % n
        best = start
        for k in range(1, n):
            i = (start + k) % n
            if self._busy[i] < self._busy[best]:
                best = i
        return best

    def _scrub(self, text: str) -> str:
        if self._secret and self._secret != "EMPTY":
            text = text.replace(self._secret, "***")
        return _KEYLIKE.sub("***", text)

    def _request(self, messages: Sequence[Message], params: GenParams) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self._cfg.model, "messages": openai_messages(messages)}
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
        return body

    async def chat(self, messages: Sequence[Message], params: GenParams, role: str) -> RawReply:
        """One chat completion; SDK errors mapped to TransientModelError / ModelError."""
        oa = self._openai
        i = self._pick()
        self._busy[i] += 1
        try:
            # The SDK's generic request path (auth, base URL, timeout, error mapping) without its
            # per-call typed-dict transform and model construction, which cost more than the
            # whole rest of the stack; the reply is read as plain JSON below.
            resp = await self._clients[i].post(
                "/chat/completions",
                cast_to=self._response_cls,
                body=self._request(messages, params),
                options={"headers": {ROLE_HEADER: role}},
            )
            data = resp.json()
        except oa.APIStatusError as e:
            status = e.status_code
            msg = self._scrub(f"HTTP {status}: {_error_message(e)}")
            if status in _RETRYABLE_STATUS or status >= 500:
                raise TransientModelError(msg, parse_retry_after(e.response.headers)) from None
            raise ModelError(msg) from None
        except oa.APITimeoutError:
            raise TransientModelError("request timed out") from None
        except oa.APIConnectionError as e:
            raise TransientModelError(self._scrub(f"connection error: {e}")) from None
        except ValueError:  # a 200 whose body is not JSON
            raise TransientModelError("response is not valid JSON") from None
        finally:
            self._busy[i] -= 1
        return self._reply(data, messages)

    def _reply(self, data: Any, messages: Sequence[Message]) -> RawReply:
        try:
            choice = data["choices"][0]
            message = choice.get("message") or {}
        except (KeyError, IndexError, TypeError, AttributeError):
            raise TransientModelError("response has no choices") from None
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        refusal = message.get("refusal")
        u = data.get("usage") or {}
        prompt, completion = u.get("prompt_tokens") or 0, u.get("completion_tokens") or 0
        if prompt or completion:
            usage = Usage(int(prompt), int(completion))
        else:  # some servers omit usage: estimate so cost accounting stays conservative
            usage = Usage(estimate_tokens(messages), estimate_text_tokens(text))
        return RawReply(
            text,
            usage,
            choice.get("finish_reason"),
            refusal if isinstance(refusal, str) and refusal else None,
        )

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
