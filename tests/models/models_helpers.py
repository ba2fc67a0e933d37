"""Shared helpers of the model-layer tests: scriptable fake backends and responders."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from memearena.config import OpenAIModelConfig, SimModelConfig
from memearena.models import GenParams, Message, RawReply, Usage


def sim_cfg(**kw: Any) -> SimModelConfig:
    """A simulated model config."""
    return SimModelConfig(provider="sim", **kw)


def openai_cfg(base_url: str | list[str], **kw: Any) -> OpenAIModelConfig:
    """An OpenAI-compatible model config pointed at ``base_url``."""
    kw.setdefault("model", "sim-a")
    return OpenAIModelConfig(provider="openai", base_url=base_url, **kw)


def user(text: str) -> list[Message]:
    """A one-message request."""
    return [Message.text("user", text)]


class FakeBackend:
    """A backend that answers by a script: ``script(call_number, messages, role)`` returns a
    RawReply / str, or raises; it counts calls and tracks how many overlap."""

    def __init__(
        self,
        script: Callable[[int, Sequence[Message], str], RawReply | str] | None = None,
        delay: float = 0.0,
    ) -> None:
        self.script = script or (lambda n, msgs, role: f"answer {n} to {msgs[-1].plain_text()}")
        self.delay = delay
        self.calls = 0
        self.roles: list[str] = []
        self.params: list[GenParams] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.times: list[float] = []

    async def chat(self, messages: Sequence[Message], params: GenParams, role: str) -> RawReply:
        n = self.calls
        self.calls += 1
        self.roles.append(role)
        self.params.append(params)
        self.times.append(asyncio.get_running_loop().time())
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            out = self.script(n, messages, role)
        finally:
            self.in_flight -= 1
        if isinstance(out, str):
            return RawReply(out, Usage(100, 50), "stop")
        return out


class ScriptedResponder:
    """A SimResponder answering ``[role] model: last user text`` unless ``fn`` is given."""

    def __init__(self, fn: Callable[[str, str, Sequence[Message]], str] | None = None) -> None:
        self.fn = fn
        self.seen: list[tuple[str, str, list[Message], GenParams]] = []

    def respond(self, model: str, role: str, messages: Sequence[Message], params: GenParams) -> str:
        self.seen.append((model, role, list(messages), params))
        if self.fn is not None:
            return self.fn(model, role, messages)
        return f"[{role}] {model}: {messages[-1].plain_text()}"


def run(coro: Any) -> Any:
    """Run a coroutine on a fresh event loop (one loop per test, as per command)."""
    return asyncio.run(coro)
