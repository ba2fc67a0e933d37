"""The lean request path against the SDK path, its reference: for every request shape the same
body reaches the endpoint, and every reply or failure comes back as the same RawReply, vectors or
error (class, kind, message, Retry-After). Everything runs on loopback."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import socket
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web
from models_helpers import openai_cfg, run, user

from memearena.config import OpenAIModelConfig
from memearena.errors import ConfigError, EndpointError, ModelError
from memearena.models import GenParams, ImagePart, Message, ModelPool, OpenAIBackend, TextPart
from memearena.models.lean import LeanBackend, decode_reply, status_message
from memearena.sim.server import BackgroundServer

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PATHS = ("lean", "sdk")


class Stub:
    """An aiohttp app on a free loopback port, in a thread: records every request (path,
    headers, JSON body) and answers with ``handler``."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.seen: list[tuple[str, dict[str, str], Any]] = []
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> Stub:
        async def recorded(request: web.Request) -> web.StreamResponse:
            raw = await request.read()
            headers = {k.lower(): v for k, v in request.headers.items()}
            self.seen.append((request.path, headers, json.loads(raw)))
            return await self.handler(request)

        app = web.Application()
        app.router.add_post("/v1/chat/completions", recorded)
        app.router.add_post("/v1/embeddings", recorded)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        ready = threading.Event()
        runner = web.AppRunner(app, handler_cancellation=True)

        def main() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(runner.setup())
            self._loop.run_until_complete(web.SockSite(runner, sock).start())
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(runner.cleanup())
            self._loop.close()

        self._thread = threading.Thread(target=main, daemon=True)
        self._thread.start()
        assert ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        assert self._thread is not None
        self._thread.join(10)


def _answer(text: str, status: int = 200, headers: dict[str, str] | None = None) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        return web.Response(
            text=text, status=status, headers=headers, content_type="application/json"
        )

    return handle


def _completion(content: Any = "fine", **extra: Any) -> str:
    choice = {"index": 0, "message": {"role": "assistant", "content": content}}
    choice["finish_reason"] = extra.pop("finish_reason", "stop")
    choice["message"].update(extra.pop("message", {}))
    body = {"id": "c1", "object": "chat.completion", "choices": [choice], **extra}
    return json.dumps(body)


def _backends(cfg: OpenAIModelConfig) -> dict[str, Any]:
    return {"lean": LeanBackend("m", cfg), "sdk": OpenAIBackend("m", cfg)}


def _outcome(coro: Awaitable[Any]) -> Awaitable[Any]:
    """The call's result, or its error reduced to what callers see of it."""

    async def go() -> Any:
        try:
            return await coro
        except ModelError as e:
            retry = getattr(e, "retry_after", None)
            retry = None if retry is None else round(retry, 1)
            message = str(e)
            if e.kind == "bad_response" and "not valid JSON (" in message:
                # The parsers word a syntax error differently; what was wrong is the same.
                message = message.split(" (", 1)[0]
            return (type(e).__name__, e.kind, message, retry)

    return go()


def _both(stub: Stub, call: Callable[[Any], Awaitable[Any]], **cfg: Any) -> dict[str, Any]:
    """``call(backend)`` through the lean path then the SDK path against ``stub``."""
    cfg.setdefault("timeout", 10)
    backends = _backends(openai_cfg(stub.base_url, model="crafted", **cfg))

    async def go() -> dict[str, Any]:
        out = {}
        try:
            for name in PATHS:
                out[name] = await _outcome(call(backends[name]))
        finally:
            for b in backends.values():
                await b.aclose()
        return out

    return run(go())


def _image(payload: bytes = b"\x89PNG fake image bytes") -> ImagePart:
    url = "data:image/png;base64," + base64.b64encode(payload).decode()
    return ImagePart(url, hashlib.sha256(payload).hexdigest())


SCHEMA = json.dumps(
    {
        "type": "json_schema",
        "json_schema": {
            "name": "verdict",
            "strict": True,
            "schema": {
                "type": "object",
                "properties": {"winner": {"type": "string", "enum": ["A", "B", "tie"]}},
                "required": ["winner"],
                "additionalProperties": False,
            },
        },
    }
)

REQUESTS: dict[str, tuple[list[Message], GenParams]] = {
    "text chat": (user("explain the meme"), GenParams()),
    "system, user and assistant turns": (
        [
            Message.text("system", "You are a careful moderator."),
            Message.text("user", "first question"),
            Message.text("assistant", "first answer"),
            Message.text("user", 'second question, unicode: é ✓ \u2028 "quoted"'),
        ],
        GenParams(),
    ),
    "image parts": (
        [Message("user", (TextPart("what does this meme mean?"), _image(), _image(b"second")))],
        GenParams(),
    ),
    "image only": ([Message("user", (_image(),))], GenParams()),
    "sampling parameters": (
        user("q"),
        GenParams(temperature=0.7, top_p=0.9, max_tokens=256, seed=11),
    ),
    "reasoning model": (user("q"), GenParams(max_tokens=64, reasoning_effort="low")),
    "structured outputs": (user("judge"), GenParams(temperature=0.0, response_format=SCHEMA)),
}


@pytest.mark.parametrize("shape", sorted(REQUESTS))
def test_both_paths_send_the_same_body_and_headers(shape: str) -> None:
    messages, params = REQUESTS[shape]
    with Stub(_answer(_completion())) as stub:
        got = _both(stub, lambda b: b.chat(messages, params, "arena.judge"))
    assert got["lean"] == got["sdk"]
    (lean_path, lean_headers, lean_body), (sdk_path, sdk_headers, sdk_body) = stub.seen
    assert lean_path == sdk_path == "/v1/chat/completions"
    assert lean_body == sdk_body
    for header in ("authorization", "content-type", "x-memearena-role"):
        assert lean_headers[header] == sdk_headers[header], header
    assert lean_headers["x-memearena-role"] == "arena.judge"


def test_the_key_and_organisation_headers_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMEARENA_TEST_LEAN_KEY", "sk-test-lean-0123456789")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-test")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-test")
    with Stub(_answer(_completion())) as stub:
        _both(
            stub,
            lambda b: b.chat(user("q"), GenParams(), "t"),
            api_key_env="MEMEARENA_TEST_LEAN_KEY",
        )
    (_, lean, _), (_, sdk, _) = stub.seen
    assert lean["authorization"] == sdk["authorization"] == "Bearer sk-test-lean-0123456789"
    assert lean["openai-organization"] == sdk["openai-organization"] == "org-test"
    assert lean["openai-project"] == sdk["openai-project"] == "proj-test"


def test_a_missing_key_fails_both_paths_before_anything_is_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MEMEARENA_TEST_UNSET_KEY", raising=False)
    cfg = openai_cfg("http://127.0.0.1:9/v1", api_key_env="MEMEARENA_TEST_UNSET_KEY")
    for cls in (LeanBackend, OpenAIBackend):
        with pytest.raises(EndpointError, match="MEMEARENA_TEST_UNSET_KEY") as e:
            cls("m", cfg)
        assert e.value.kind == "missing_key"


REPLIES: dict[str, str] = {
    "plain": _completion("fine", usage={"prompt_tokens": 12, "completion_tokens": 3}),
    "no usage (estimated)": _completion("no usage here"),
    "content parts": _completion([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
    "float usage": _completion("x", usage={"prompt_tokens": 3.0, "completion_tokens": 2}),
    "refusal field": _completion(None, message={"refusal": "I can't help with that."}),
    "length stop": _completion("cut", finish_reason="length"),
    "content filter": _completion("", finish_reason="content_filter"),
    "null finish": _completion("x", finish_reason=None),
    "verdict JSON in content": _completion('{"verdicts": {"a": {"winner": "A"}}}' + "[" * 40),
    "unknown fields": _completion("x", system_fingerprint="fp", service_tier={"a": [1, 2]}),
    "unicode": _completion("é ✓ 😀 \u2028"),
    "a key given twice (the last wins on both)": (
        '{"choices": [{"message": {"content": "first", "content": "last"}}]}'
    ),
    "a byte-order mark": "\ufeff" + _completion("x"),
    # malformed: every one a bad_response on both paths
    "message is a string": json.dumps({"choices": [{"message": "hello"}]}),
    "no choices": json.dumps({"id": "x"}),
    "empty choices": json.dumps({"choices": []}),
    "choice is a string": json.dumps({"choices": ["x"]}),
    "content is a number": _completion(42),
    "content part is malformed": _completion([{"text": 3}]),
    "refusal is an object": _completion("x", message={"refusal": {"a": 1}}),
    "finish_reason is a number": _completion("x", finish_reason=7),
    "usage is a string": _completion("x", usage="lots"),
    "usage is negative": _completion("x", usage={"prompt_tokens": 5, "completion_tokens": -50}),
    "usage is fractional": _completion("x", usage={"prompt_tokens": 1.5}),
    "usage is a bool": _completion("x", usage={"prompt_tokens": True}),
    "usage is huge": _completion("x", usage={"completion_tokens": 10**30}),
    "usage is NaN": '{"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": NaN}}',
    "usage is Infinity": '{"choices": [{"message": {"content": "x"}}], "usage": {"a": Infinity}}',
    "a number of 5000 digits": '{"choices": [{"message": {"content": "x"}}], "n": '
    + "9" * 5000
    + "}",
    "a float that overflows": '{"choices": [{"message": {"content": "x"}}], "n": 1e400}',
    "nested 33 deep": '{"choices": [{"message": {"content": "x"}}], "n": '
    + "[" * 31
    + "]" * 31
    + "}",
    "deeply nested body": '{"a":' * 50_000 + "1" + "}" * 50_000,
    "not JSON": "<html>oops</html>",
    "an array": "[1, 2, 3]",
    "empty": "",
    "truncated": _completion("fine")[:-5],
}


@pytest.mark.parametrize("case", sorted(REPLIES))
def test_both_paths_read_a_reply_alike(case: str) -> None:
    with Stub(_answer(REPLIES[case])) as stub:
        got = _both(stub, lambda b: b.chat(user("a question"), GenParams(), "t"))
    assert got["lean"] == got["sdk"]
    if not isinstance(got["lean"], tuple):
        return
    cls, kind, message, _ = got["lean"]
    assert (cls, kind) == ("BadResponse", "bad_response"), message
    assert "\n" not in message and len(message) < 400


def test_nesting_at_the_limit_is_accepted_and_one_deeper_is_not() -> None:
    at_limit = '{"a":' + "[" * 31 + "]" * 31 + "}"
    nested: Any = []
    for _ in range(30):
        nested = [nested]
    assert decode_reply(at_limit.encode()) == {"a": nested}
    with pytest.raises(ModelError, match="deeper than 32"):
        decode_reply(('{"a":' + "[" * 32 + "]" * 32 + "}").encode())


def test_a_lone_surrogate_is_refused_where_the_store_could_not_hold_it() -> None:
    # json.loads accepts "\ud800"; SQLite cannot encode it. The lean path refuses it up front.
    with pytest.raises(ModelError) as e:
        decode_reply(_completion("\ud800").encode())
    assert e.value.kind == "bad_response"


ERROR_BODY = json.dumps({"error": {"message": "nope", "type": "invalid_request_error"}})
STATUSES: dict[str, tuple[int, str, dict[str, str]]] = {
    "400 with an error message": (400, ERROR_BODY, {}),
    "400 with no message": (400, json.dumps({"error": {"type": "x"}}), {}),
    "400 with a bare object": (400, json.dumps({"message": "flat"}), {}),
    "400 with plain text": (400, "bad request, plainly", {}),
    "400 empty": (400, "", {}),
    "401": (401, ERROR_BODY, {}),
    "403": (403, ERROR_BODY, {}),
    "404": (404, ERROR_BODY, {}),
    "408": (408, ERROR_BODY, {}),
    "409": (409, ERROR_BODY, {}),
    "422": (422, json.dumps({"detail": [{"loc": ["body"], "msg": "bad"}]}), {}),
    "429 with retry-after": (429, ERROR_BODY, {"Retry-After": "7"}),
    "429 with retry-after-ms": (429, ERROR_BODY, {"retry-after-ms": "250"}),
    "429 with a garbled retry-after": (429, ERROR_BODY, {"Retry-After": "soon"}),
    "500": (500, ERROR_BODY, {}),
    "502 html": (502, "<html>bad gateway</html>", {}),
    "503 with retry-after": (503, ERROR_BODY, {"Retry-After": "2"}),
}


@pytest.mark.parametrize("case", sorted(STATUSES))
def test_both_paths_map_an_error_status_alike(case: str) -> None:
    status, body, headers = STATUSES[case]
    with Stub(_answer(body, status, headers)) as stub:
        got = _both(stub, lambda b: b.chat(user("q"), GenParams(), "t"))
    assert got["lean"] == got["sdk"]
    cls, _, message, _ = got["lean"]
    retryable = status in (408, 429) or status >= 500
    assert cls == (
        "TransientModelError"
        if retryable
        else "EndpointError"
        if status in (401, 403, 404)
        else "ModelError"
    )
    assert f"HTTP {status}" in message


def test_a_key_echoed_in_an_error_body_is_scrubbed_on_both_paths(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "sk-live-0123456789abcdefSECRET"
    monkeypatch.setenv("MEMEARENA_TEST_LEAN_KEY", secret)
    body = json.dumps({"error": {"message": f"bad key {secret}"}})
    with Stub(_answer(body, 400)) as stub:
        got = _both(
            stub,
            lambda b: b.chat(user("q"), GenParams(), "t"),
            api_key_env="MEMEARENA_TEST_LEAN_KEY",
        )
    assert got["lean"] == got["sdk"]
    assert secret not in got["lean"][2] and "***" in got["lean"][2]


def test_status_message_mirrors_the_sdk() -> None:
    assert status_message(400, ERROR_BODY) == "nope"
    assert status_message(500, "") == "Error code: 500"
    assert status_message(500, " oops ") == "Error code: 500"
    assert status_message(400, json.dumps({"error": {"message": ""}})) == ""


def test_an_oversized_reply_is_too_large_on_both_paths() -> None:
    big = _completion("x" * 5000)
    with Stub(_answer(big)) as stub:
        got = _both(stub, lambda b: b.chat(user("q"), GenParams(), "t"), max_response_bytes=1000)
    assert got["lean"][:2] == got["sdk"][:2] == ("ModelError", "too_large")
    assert "max_response_bytes" in got["lean"][2]


def test_an_oversized_chunked_reply_is_too_large_without_a_length() -> None:
    async def chunked(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for _ in range(40):
            await resp.write(b"x" * 100)
        await resp.write_eof()
        return resp

    with Stub(chunked) as stub:
        got = _both(stub, lambda b: b.chat(user("q"), GenParams(), "t"), max_response_bytes=1000)
    assert got["lean"][:2] == got["sdk"][:2] == ("ModelError", "too_large")


def test_a_refused_connection_ends_the_endpoint_on_both_paths() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = openai_cfg(f"http://127.0.0.1:{port}/v1", timeout=5)
    backends = _backends(cfg)

    async def go() -> dict[str, Any]:
        out = {n: await _outcome(b.chat(user("q"), GenParams(), "t")) for n, b in backends.items()}
        for b in backends.values():
            await b.aclose()
        return out

    got = run(go())
    assert got["lean"] == got["sdk"]
    assert got["lean"][:2] == ("EndpointError", "connection_refused")


def test_a_hung_endpoint_times_out_on_both_paths() -> None:
    async def hang(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(5)
        return web.Response(text=_completion())

    with Stub(hang) as stub:
        got = _both(stub, lambda b: b.chat(user("q"), GenParams(), "t"), timeout=0.3)
    assert (
        got["lean"] == got["sdk"] == ("TransientModelError", "timeout", "request timed out", None)
    )


def test_a_dropped_connection_is_transient_on_both_paths() -> None:
    async def drop(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        request.transport.close()
        await asyncio.sleep(0.1)
        return web.Response(text="")

    with Stub(drop) as stub:
        got = _both(stub, lambda b: b.chat(user("q"), GenParams(), "t"))
    # Both retry it; the SDK's transport reports it as a timeout, the lean path says what it was.
    assert got["lean"][0] == got["sdk"][0] == "TransientModelError"
    assert got["lean"][1] == "connection" and "ServerDisconnected" in got["lean"][2]


def _embeddings(n: int, dims: int = 4, **extra: Any) -> str:
    data = [{"object": "embedding", "index": i, "embedding": [0.5 + i] * dims} for i in range(n)]
    return json.dumps({"object": "list", "data": data, "model": "crafted", **extra})


EMBEDDINGS: dict[str, str] = {
    "plain": _embeddings(2, usage={"prompt_tokens": 7, "total_tokens": 7}),
    "no usage": _embeddings(2),
    "out of order": json.dumps(
        {"data": [{"index": 1, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}]}
    ),
    "wrong count": _embeddings(3),
    "ragged": json.dumps(
        {"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]}
    ),
    "a string value": json.dumps(
        {"data": [{"index": 0, "embedding": ["x"]}, {"index": 1, "embedding": [1.0]}]}
    ),
    "no data": json.dumps({"object": "list"}),
    "not JSON": "nope",
}


@pytest.mark.parametrize("case", sorted(EMBEDDINGS))
def test_both_paths_embed_alike(case: str) -> None:
    with Stub(_answer(EMBEDDINGS[case])) as stub:
        got = _both(stub, lambda b: b.embed(["first text", "second"], "adapt.embed"))
    assert got["lean"] == got["sdk"]
    (lean_path, lean_headers, lean_body), (_, sdk_headers, sdk_body) = stub.seen
    assert lean_path == "/v1/embeddings" and lean_body == sdk_body
    assert lean_headers["x-memearena-role"] == sdk_headers["x-memearena-role"] == "adapt.embed"


def test_both_paths_answer_alike_from_the_simulated_server() -> None:
    messages = [Message("user", (TextPart("what does this meme mean?"), _image()))]
    with BackgroundServer(models=("sim-a",)) as srv:
        backends = _backends(openai_cfg(srv.base_url))

        async def go() -> dict[str, Any]:
            out = {}
            for name, b in backends.items():
                out[name] = (
                    await b.chat(messages, GenParams(max_tokens=50), "target"),
                    await b.embed(["cats chase mice"], "embed"),
                    await _outcome(b.embed(["x"], "embed")),
                )
                await b.aclose()
            return out

        got = run(go())
    assert got["lean"][:2] == got["sdk"][:2]
    assert got["lean"][0].text == "[target] sim-a: what does this meme mean? (+1 image)"


def test_the_pool_uses_the_lean_path_by_default_and_the_sdk_when_asked() -> None:
    with BackgroundServer() as srv:
        pool = ModelPool(
            {"lean": openai_cfg(srv.base_url), "sdk": openai_cfg(srv.base_url, client="sdk")}
        )

        async def go() -> list[str]:
            texts = [(await pool.complete(m, user("hi"), role="t")).text for m in ("lean", "sdk")]
            kinds = [type(pool._models[m].backend).__name__ for m in ("lean", "sdk")]
            await pool.aclose()
            return texts + kinds

        assert run(go()) == ["[t] sim-a: hi", "[t] sim-a: hi", "LeanBackend", "OpenAIBackend"]


def test_an_unknown_client_is_refused_naming_the_field(tmp_path) -> None:
    from memearena.config import load_config

    path = tmp_path / "c.yaml"
    path.write_text(
        "models:\n  m: {provider: openai, model: x, client: httpx}\ndata:\n  - {format: demo}\n"
    )
    with pytest.raises(ConfigError, match="client"):
        load_config(path)


def test_an_error_body_arriving_in_pieces_is_read_whole() -> None:
    async def slow_error(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(status=400, headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        await resp.write(ERROR_BODY[:10].encode())
        await asyncio.sleep(0.05)
        await resp.write(ERROR_BODY[10:].encode())
        await resp.write_eof()
        return resp

    with Stub(slow_error) as stub:
        got = _both(stub, lambda b: b.chat(user("q"), GenParams(), "t"))
    assert got["lean"] == got["sdk"]
    assert got["lean"][2].endswith("HTTP 400: nope")


def test_a_backend_serves_one_event_loop_after_another() -> None:
    with BackgroundServer() as srv:
        backend = LeanBackend("m", openai_cfg(srv.base_url))
        first = run(backend.chat(user("one"), GenParams(), "t"))

        async def second() -> str:
            try:
                return (await backend.chat(user("two"), GenParams(), "t")).text
            finally:
                await backend.aclose()

        assert (first.text, run(second())) == ("[t] sim-a: one", "[t] sim-a: two")
