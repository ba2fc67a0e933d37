"""The lean client against a hostile endpoint on raw loopback sockets: a response is read only
for a request that was sent on that connection (bytes nobody asked for close the connection),
and a redirect is never followed (an error naming the status and the Location)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from models_helpers import openai_cfg, user

from memearena.errors import EndpointError, ModelError
from memearena.models import GenParams
from memearena.models.lean import LeanBackend

Reply = Callable[[int, asyncio.StreamWriter], Awaitable[None]]


def completion(text: str) -> bytes:
    body = json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        }
    ).encode()
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: keep-alive\r\n\r\n"
    )
    return head.encode() + body


def redirect(status: int, location: str) -> bytes:
    reason = {301: "Moved Permanently", 302: "Found", 307: "Temporary Redirect"}[status]
    return (
        f"HTTP/1.1 {status} {reason}\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n"
    ).encode()


class RawServer:
    """A loopback HTTP/1.1 server on raw sockets in its own thread: reads each request (head and
    Content-Length body), counts it by method and path, and lets ``reply`` write whatever it
    wants on the connection."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.requests: list[tuple[str, str]] = []
        self.connections = 0
        self._handlers: set[asyncio.Task[Any]] = set()
        self._server: asyncio.Server | None = None
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                if length:
                    await reader.readexactly(length)
                self.requests.append((method, path))
                await self.reply(len(self.requests), writer)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
            self._handlers.discard(task)

    def __enter__(self) -> RawServer:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        ready = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(self._loop)
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._handle, sock=sock)
            )
            ready.set()
            self._loop.run_forever()
            self._loop.close()

        self._thread = threading.Thread(target=main, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)


async def _two_calls(backend: LeanBackend, pause: float) -> list[str]:
    out = []
    for k in range(2):
        raw = await backend.chat(user(f"q{k}"), GenParams(max_tokens=8), "t")
        out.append(raw.text)
        await asyncio.sleep(pause)
    await backend.aclose()
    return out


def test_an_unsolicited_response_is_never_the_next_requests_reply() -> None:
    async def reply(n: int, writer: asyncio.StreamWriter) -> None:
        writer.write(completion(f"reply to request {n}"))
        await writer.drain()
        await asyncio.sleep(0.15)  # then a response nobody asked for, on the kept-alive line
        writer.write(completion("UNSOLICITED"))
        await writer.drain()

    with RawServer(reply) as srv:
        backend = LeanBackend("m", openai_cfg(srv.base_url, model="m"))
        got = asyncio.run(_two_calls(backend, pause=0.4))
        seen = len(srv.requests)
    assert got == ["reply to request 1", "reply to request 2"]
    assert seen == 2


def test_bytes_left_after_a_reply_close_the_connection() -> None:
    async def reply(n: int, writer: asyncio.StreamWriter) -> None:
        writer.write(completion(f"reply to request {n}") + completion("PIPELINED"))
        await writer.drain()

    with RawServer(reply) as srv:
        backend = LeanBackend("m", openai_cfg(srv.base_url, model="m"))
        got = asyncio.run(_two_calls(backend, pause=0.05))
        connections = srv.connections
    assert got == ["reply to request 1", "reply to request 2"]
    assert connections == 2  # the first connection was not reused


@pytest.fixture
def elsewhere() -> Iterator[RawServer]:
    async def reply(n: int, writer: asyncio.StreamWriter) -> None:
        writer.write(completion("the other origin answered"))
        await writer.drain()

    with RawServer(reply) as srv:
        yield srv


@pytest.mark.parametrize("status", [302, 307, 301])
def test_a_redirect_is_not_followed_and_names_the_status_and_location(
    status: int, elsewhere: RawServer
) -> None:
    target = f"{elsewhere.base_url}/chat/completions"

    async def reply(n: int, writer: asyncio.StreamWriter) -> None:
        writer.write(redirect(status, target))
        await writer.drain()

    async def go(backend: LeanBackend) -> Any:
        try:
            return await backend.chat(user("q"), GenParams(max_tokens=8), "t")
        finally:
            await backend.aclose()

    with RawServer(reply) as srv:
        backend = LeanBackend("m", openai_cfg(srv.base_url, model="m"))
        with pytest.raises(ModelError) as info:
            asyncio.run(go(backend))
    message = str(info.value)
    assert f"HTTP {status}" in message and target in message and "not followed" in message
    assert isinstance(info.value, EndpointError)  # every call would be redirected: stop
    assert elsewhere.requests == []  # neither re-POSTed nor turned into a GET
