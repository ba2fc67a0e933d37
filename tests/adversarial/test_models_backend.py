"""Crafted endpoints on loopback: no reply can kill a run, nothing unbounded is read, spend on
record is never lower than spend, and no key reaches a stored file."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from memearena.config import OpenAIModelConfig, Price
from memearena.errors import EndpointError, ModelError
from memearena.models import Message, ModelPool, ResponseCache
from memearena.store import RunStore

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class CraftedServer:
    """An aiohttp app on a free loopback port, in a thread; counts requests."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests = 0
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> CraftedServer:
        async def counted(request: web.Request) -> web.StreamResponse:
            self.requests += 1
            return await self.handler(request)

        app = web.Application()
        app.router.add_post("/v1/chat/completions", counted)
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


def _reply(content: Any = "fine", usage: Any = None, **message: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "choices": [{"message": {"role": "assistant", "content": content, **message}}],
    }
    body["choices"][0]["finish_reason"] = "stop"
    if usage is not None:
        body["usage"] = usage
    return body


def _text_handler(text: str, status: int = 200) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        await request.read()
        return web.Response(text=text, status=status, content_type="application/json")

    return handle


def _cfg(url: str, **kw: Any) -> OpenAIModelConfig:
    kw.setdefault("max_retries", 1)
    kw.setdefault("timeout", 10)
    return OpenAIModelConfig(provider="openai", model="crafted", base_url=url, **kw)


def _ask(pool: ModelPool, text: str = "hi") -> Any:
    async def go() -> Any:
        try:
            return await pool.complete("m", [Message.text("user", text)], role="target")
        finally:
            await pool.aclose()

    return asyncio.run(go())


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RunStore]:
    s = RunStore(tmp_path / "run" / "run.db")
    yield s
    s.close()


MALFORMED: dict[str, str] = {
    "message is a string": json.dumps({"choices": [{"message": "hello"}]}),
    "message is a list": json.dumps({"choices": [{"message": ["a"]}]}),
    "no choices": json.dumps({"id": "x"}),
    "empty choices": json.dumps({"choices": []}),
    "choice is a string": json.dumps({"choices": ["x"]}),
    "content is a number": json.dumps(_reply(content=42)),
    "content part is malformed": json.dumps(_reply(content=[{"text": 3}])),
    "refusal is an object": json.dumps(_reply(refusal={"a": 1})),
    "finish_reason is a number": json.dumps(
        {"choices": [{"message": {"content": "x"}, "finish_reason": 7}]}
    ),
    "usage is a string": json.dumps(_reply(usage="lots")),
    "usage is non-numeric": json.dumps(_reply(usage={"prompt_tokens": "ten"})),
    "usage is negative": json.dumps(_reply(usage={"prompt_tokens": 5, "completion_tokens": -50})),
    "usage is fractional": json.dumps(_reply(usage={"prompt_tokens": 1.5})),
    "usage is a bool": json.dumps(_reply(usage={"prompt_tokens": True})),
    "usage is huge": json.dumps(_reply(usage={"completion_tokens": 10**30})),
    "usage is NaN": '{"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": NaN}}',
    "usage is Infinity": (
        '{"choices": [{"message": {"content": "x"}}], "usage": {"completion_tokens": Infinity}}'
    ),
    "usage has 5000 digits": (
        '{"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": '
        + "9" * 5000
        + "}}"
    ),
    "deeply nested body": '{"a":' * 50_000 + "1" + "}" * 50_000,
    "body is not JSON": "<html>oops</html>",
    "body is an array": "[1, 2, 3]",
    "body is empty": "",
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_completion_is_a_recorded_bad_response_retried_and_never_cached(
    case: str, store: RunStore, tmp_path: Path
) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    price = Price(input=1.0, output=1.0)
    with CraftedServer(_text_handler(MALFORMED[case])) as srv:
        pool = ModelPool(
            {"m": _cfg(srv.base_url, price=price)},
            store=store,
            cache=cache,
            max_cost=10.0,
            backoff_base=0.001,
        )
        with pytest.raises(ModelError) as e:
            _ask(pool)
        assert srv.requests == 2  # retried as configured (max_retries 1)
    assert e.value.kind == "bad_response"
    assert "\n" not in str(e.value) and len(str(e.value)) < 400
    calls = store.calls()
    assert [(c.status, c.error_kind, c.attempts) for c in calls] == [("error", "bad_response", 2)]
    assert len(cache) == 0
    spent, upper = store.spend()
    assert spent == 0.0 and upper == 0.0  # settled: nothing paid, nothing left unsettled
    cache.close()


def test_valid_variants_are_accepted_and_missing_usage_is_estimated(store: RunStore) -> None:
    bodies = [
        json.dumps(_reply(content=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])),
        json.dumps(_reply(usage={"prompt_tokens": 3.0, "completion_tokens": 2})),
        json.dumps(_reply(content="no usage")),
    ]
    got = []
    for body in bodies:
        with CraftedServer(_text_handler(body)) as srv:
            got.append(_ask(ModelPool({"m": _cfg(srv.base_url)}, store=store)))
    assert [c.text for c in got] == ["ab", "fine", "no usage"]
    assert (got[1].usage.input_tokens, got[1].usage.output_tokens) == (3, 2)
    assert got[2].usage.input_tokens > 0 and got[2].usage.output_tokens > 0


def test_a_huge_streamed_body_stops_at_the_cap_without_being_held(store: RunStore) -> None:
    total = 60 * 1024 * 1024
    chunk = b"x" * (64 * 1024)
    written = {"bytes": 0}

    async def endless(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        try:
            await resp.write(b'{"choices": [{"message": {"content": "')
            while written["bytes"] < total:
                await resp.write(chunk)
                written["bytes"] += len(chunk)
        except (ConnectionError, asyncio.CancelledError):
            pass
        return resp

    with CraftedServer(endless) as srv:
        pool = ModelPool(
            {"m": _cfg(srv.base_url, max_response_bytes=1_000_000, max_retries=3)}, store=store
        )
        tracemalloc.start()
        t0 = time.monotonic()
        with pytest.raises(ModelError) as e:
            _ask(pool)
        elapsed = time.monotonic() - t0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert srv.requests == 1  # an oversized reply is not asked for again
    assert e.value.kind == "too_large" and "max_response_bytes" in str(e.value)
    assert peak < 16 * 1024 * 1024  # far below the 60 MB the server would send
    assert written["bytes"] < total
    assert elapsed < 10
    assert [c.error_kind for c in store.calls()] == ["too_large"]


@pytest.mark.parametrize(("status", "kind"), [(401, "auth"), (403, "auth"), (404, "not_found")])
def test_auth_and_unknown_model_fail_fast_once_and_nothing_more_is_sent(
    status: int, kind: str, store: RunStore
) -> None:
    body = json.dumps({"error": {"message": "nope", "type": "invalid_request_error"}})
    with CraftedServer(_text_handler(body, status)) as srv:
        pool = ModelPool({"m": _cfg(srv.base_url, max_retries=6)}, store=store)

        async def go() -> list[Any]:
            try:
                first = await asyncio.gather(
                    pool.complete("m", [Message.text("user", "a")], role="t"),
                    return_exceptions=True,
                )
                later = await asyncio.gather(
                    *(
                        pool.complete("m", [Message.text("user", f"b{i}")], role="t")
                        for i in range(5)
                    ),
                    return_exceptions=True,
                )
                return first + later
            finally:
                await pool.aclose()

        t0 = time.monotonic()
        results = asyncio.run(go())
        assert time.monotonic() - t0 < 2.0
        assert srv.requests == 1
    assert all(isinstance(r, EndpointError) and r.kind == kind for r in results)
    assert f"HTTP {status}" in str(results[0]) and srv.base_url in str(results[0])
    assert [(c.status, c.error_kind) for c in store.calls()] == [("error", kind)]
    assert pool.dead_models().keys() == {"m"}


@pytest.mark.parametrize(("status", "retried"), [(400, False), (409, False), (408, True)])
def test_only_timeouts_rate_limits_and_server_errors_are_retried(
    status: int, retried: bool, store: RunStore
) -> None:
    with CraftedServer(_text_handler('{"error": {"message": "x"}}', status)) as srv:
        pool = ModelPool({"m": _cfg(srv.base_url, max_retries=2)}, store=store, backoff_base=0.001)
        with pytest.raises(ModelError):
            _ask(pool)
        assert srv.requests == (3 if retried else 1)


def test_an_endpoint_echoing_the_key_leaves_no_key_in_any_stored_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-live-0123456789abcdefSECRETvalue"
    monkeypatch.setenv("MEMEARENA_TEST_ECHO_KEY", secret)

    async def echo(request: web.Request) -> web.StreamResponse:
        await request.read()
        auth = request.headers.get("Authorization", "")
        return web.json_response(_reply(content=f"you sent {auth} and {secret[::-1][::-1]}"))

    async def fail_echo(request: web.Request) -> web.StreamResponse:
        await request.read()
        auth = request.headers.get("Authorization", "")
        return web.json_response({"error": {"message": f"bad key {auth}"}}, status=400)

    run = tmp_path / "run"
    store = RunStore(run / "run.db")
    cache = ResponseCache(tmp_path / "cache.sqlite")
    with CraftedServer(echo) as ok_srv, CraftedServer(fail_echo) as bad_srv:
        cfg = _cfg(ok_srv.base_url, api_key_env="MEMEARENA_TEST_ECHO_KEY")
        bad = _cfg(bad_srv.base_url, api_key_env="MEMEARENA_TEST_ECHO_KEY")
        pool = ModelPool({"m": cfg, "bad": bad}, store=store, cache=cache)

        async def go() -> Any:
            try:
                c = await pool.complete("m", [Message.text("user", "hi")], role="t")
                with pytest.raises(ModelError) as e:
                    await pool.complete("bad", [Message.text("user", "hi")], role="t")
                return c, e.value
            finally:
                await pool.aclose()

        completion, error = asyncio.run(go())
    store.close()
    cache.close()
    assert secret not in completion.text and "***" in completion.text
    assert secret not in str(error)
    for path in [*run.iterdir(), *tmp_path.glob("cache.sqlite*")]:
        assert secret.encode() not in path.read_bytes(), path


def test_run_database_and_cache_are_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        RunStore(tmp_path / "new-run" / "run.db").close()
        ResponseCache(tmp_path / "cache-root" / "cache.sqlite").close()
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new-run").stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "new-run" / "run.db").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "cache-root" / "cache.sqlite").stat().st_mode) == 0o600


_CHILD = """
import asyncio, sys
from memearena.config import OpenAIModelConfig, Price
from memearena.models import Message, ModelPool
from memearena.store import RunStore
cfg = OpenAIModelConfig(provider="openai", model="crafted", base_url=sys.argv[1],
                        price=Price(input=1000.0, output=1000.0), max_tokens=100, timeout=60)
store = RunStore(sys.argv[2])
pool = ModelPool({"m": cfg}, store=store)
asyncio.run(pool.complete("m", [Message.text("user", "hello there")], role="target"))
"""


def test_a_kill_mid_call_leaves_the_call_on_record_as_an_upper_bound_of_spend(
    tmp_path: Path,
) -> None:
    arrived = threading.Event()

    async def hang(request: web.Request) -> web.StreamResponse:
        await request.read()
        arrived.set()
        await asyncio.sleep(30)
        return web.json_response(_reply())

    db = tmp_path / "run" / "run.db"
    with CraftedServer(hang) as srv:
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, srv.base_url, str(db)])
        try:
            assert arrived.wait(30), "the request never reached the server"
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(10)
    with RunStore(db) as store:
        calls = store.calls()
        spent, upper = store.spend()
        usage = store.usage_summary()["m"]
    assert [c.status for c in calls] == ["sent"]
    # 3 prompt tokens + 100 output tokens at $1000 per 1M tokens
    assert calls[0].cost_bound_usd == pytest.approx((3 + 100) * 1000 / 1e6)
    assert spent == 0.0 and upper == pytest.approx(calls[0].cost_bound_usd)
    assert usage["unsettled"] == 1 and usage["unsettled_usd"] == pytest.approx(upper)
    con = sqlite3.connect(db)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.close()


def test_a_resumed_pool_counts_earlier_spend_against_the_cap(store: RunStore) -> None:
    body = json.dumps(_reply(usage={"prompt_tokens": 100, "completion_tokens": 100}))
    price = Price(input=1000.0, output=1000.0)  # $0.20 a call
    with CraftedServer(_text_handler(body)) as srv:
        cfg = _cfg(srv.base_url, price=price, max_tokens=100)
        for i in range(2):
            _ask(ModelPool({"m": cfg}, store=store, max_cost=0.5), f"q{i}")
        assert store.spend()[0] == pytest.approx(0.4)
        pool = ModelPool({"m": cfg}, store=store, max_cost=0.5)
        assert pool.run_spent_usd == pytest.approx(0.4)
        from memearena.errors import BudgetExceeded

        with pytest.raises(BudgetExceeded, match="higher --max-cost"):
            _ask(pool, "q3")
        assert srv.requests == 2  # the third call was never sent
    assert len(store.calls()) == 2


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0])
def test_a_cap_that_is_not_a_finite_non_negative_number_is_refused(bad: float) -> None:
    from memearena.errors import ConfigError

    with pytest.raises(ConfigError, match="--max-cost"):
        ModelPool({"m": _cfg("http://127.0.0.1:9/v1")}, max_cost=bad)


def _chained(*excs: BaseException) -> BaseException:
    """``excs[0]`` raised from ``excs[1]`` raised from ... (as the SDK wraps transport errors)."""
    for outer, inner in itertools.pairwise(excs):
        outer.__cause__ = inner
    return excs[0]


def test_refused_connections_and_unknown_hosts_are_told_from_retryable_failures() -> None:
    from memearena.models.backends import connection_failure_kind

    refused = _chained(TimeoutError("timed out"), OSError("connect"), ConnectionRefusedError())
    unknown = _chained(OSError("connect"), socket.gaierror(socket.EAI_NONAME, "unknown"))
    flaky_dns = _chained(OSError("connect"), socket.gaierror(socket.EAI_AGAIN, "try again"))
    reset = _chained(OSError("read"), ConnectionResetError())
    assert connection_failure_kind(refused) == "connection_refused"
    assert connection_failure_kind(unknown) == "dns"
    assert connection_failure_kind(flaky_dns) is None
    assert connection_failure_kind(reset) is None
    assert connection_failure_kind(TimeoutError()) is None


def test_calls_waiting_for_a_slot_when_the_model_dies_are_not_sent_nor_recorded(
    store: RunStore,
) -> None:
    gate = asyncio.Event()

    async def slow_401(request: web.Request) -> web.StreamResponse:
        await request.read()
        await asyncio.sleep(0.2)
        return web.json_response({"error": {"message": "bad key"}}, status=401)

    with CraftedServer(slow_401) as srv:
        pool = ModelPool({"m": _cfg(srv.base_url, max_concurrency=1)}, store=store)

        async def go() -> list[Any]:
            gate.set()
            try:
                return await asyncio.gather(
                    *(
                        pool.complete("m", [Message.text("user", f"q{i}")], role="t")
                        for i in range(4)
                    ),
                    return_exceptions=True,
                )
            finally:
                await pool.aclose()

        results = asyncio.run(go())
        assert srv.requests == 1
    assert all(isinstance(r, EndpointError) for r in results)
    assert [(c.status, c.error_kind) for c in store.calls()] == [("error", "auth")]
