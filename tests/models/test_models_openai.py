"""The OpenAI-compatible backend through the official client, against the simulated server."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import time
from pathlib import Path

import pytest
from models_helpers import ScriptedResponder, openai_cfg, run, user

from memearena.errors import ModelError
from memearena.models import ImagePart, Message, ModelPool, ResponseCache, TextPart
from memearena.sim.faults import FaultPlan
from memearena.sim.server import BackgroundServer
from memearena.store import RunStore

SECRET = "sk-test-SECRET123"


def _image_message(payload: bytes = b"\x89PNG fake image bytes") -> Message:
    url = "data:image/png;base64," + base64.b64encode(payload).decode()
    sha = hashlib.sha256(payload).hexdigest()
    return Message("user", (TextPart("what does this meme mean?"), ImagePart(url, sha)))


def _seed_where(pred, faults=("429",), rate=0.5) -> int:
    return next(s for s in range(10_000) if pred(FaultPlan.of(rate, s, faults)))


def test_identical_request_is_served_from_cache_with_zero_server_calls(tmp_path: Path):
    with BackgroundServer() as srv:
        store = RunStore(tmp_path / "run.db")
        cache = ResponseCache(tmp_path / "cache.db")
        pool = ModelPool({"a": openai_cfg(srv.base_url)}, store=store, cache=cache)

        async def go():
            first = await pool.complete("a", [_image_message()], role="target")
            before = srv.stats()["requests"]
            second = await pool.complete("a", [_image_message()], role="target")
            await pool.aclose()
            return first, second, before

        first, second, before = run(go())
        assert srv.stats()["requests"] == before == 1
        assert second.cached and second.text == first.text == "[target] sim-a: " + (
            "what does this meme mean? (+1 image)"
        )
        assert [c.status for c in store.calls()] == ["ok", "cached"]


def test_refusal_from_the_server_is_not_cached(tmp_path: Path):
    responder = ScriptedResponder(lambda m, r, msgs: "I'm sorry, but I can't help with that.")
    with BackgroundServer(responder) as srv:
        cache = ResponseCache(tmp_path / "cache.db")
        store = RunStore(tmp_path / "run.db")
        pool = ModelPool({"a": openai_cfg(srv.base_url)}, store=store, cache=cache)

        async def go():
            for _ in range(2):
                c = await pool.complete("a", user("explain"), role="target")
                assert c.refusal and not c.cached
            await pool.aclose()

        run(go())
        assert srv.stats()["requests"] == 2
        assert [c.status for c in store.calls()] == ["refusal", "refusal"]


def test_faults_are_retried_to_success_and_the_server_counts_every_attempt(tmp_path: Path):
    store = RunStore(tmp_path / "run.db")
    opts = {"fail_rate": 0.3, "seed": 3, "faults": ("429", "500", "timeout"), "hang_s": 5.0}
    with BackgroundServer(retry_after_s=0.01, **opts) as srv:
        cfg = openai_cfg(srv.base_url, timeout=0.3, max_retries=10)
        pool = ModelPool({"a": cfg}, store=store, backoff_base=0.005)

        async def go():
            out = await asyncio.gather(
                *(pool.complete("a", user(f"q{i}"), role="target") for i in range(40))
            )
            await pool.aclose()
            return out

        out = run(go())
        stats = srv.stats()
    assert [c.text for c in out] == [f"[target] sim-a: q{i}" for i in range(40)]
    # A loaded machine can let an answered request outlive the client's 0.3 s timeout: it is
    # then retried, so the server may complete a few more than 40, never fewer.
    assert stats["completed"] >= 40
    assert stats["requests"] > stats["completed"]
    assert sum(stats["faults"].values()) == stats["requests"] - stats["completed"]
    calls = store.calls()
    assert all(c.status == "ok" for c in calls)
    assert sum(c.attempts for c in calls) == stats["requests"]


def test_server_retry_after_is_honoured():
    seed = _seed_where(lambda p: p.draw(0) == "429" and p.draw(1) is None)
    with BackgroundServer(fail_rate=0.5, seed=seed, faults=("429",), retry_after_s=0.3) as srv:
        pool = ModelPool({"a": openai_cfg(srv.base_url)}, backoff_base=0.001)

        async def go():
            t = time.perf_counter()
            await pool.complete("a", user("q"), role="target")
            await pool.aclose()
            return time.perf_counter() - t

        elapsed = run(go())
        assert srv.stats()["faults"]["429"] == 1 and srv.stats()["requests"] == 2
    assert elapsed >= 0.29


def test_concurrency_limit_holds_at_the_server():
    with BackgroundServer(latency_ms=40) as srv:
        pool = ModelPool({"a": openai_cfg(srv.base_url, max_concurrency=4)})

        async def go():
            await asyncio.gather(*(pool.complete("a", user(f"q{i}"), role="t") for i in range(24)))
            await pool.aclose()

        run(go())
        stats = srv.stats()
    assert stats["completed"] == 24
    assert 2 <= stats["max_in_flight"] <= 4


def test_rpm_limit_spaces_requests_at_the_server():
    with BackgroundServer() as srv:
        pool = ModelPool({"a": openai_cfg(srv.base_url, rpm=1200)})  # one per 50 ms

        async def go():
            t = time.perf_counter()
            await asyncio.gather(*(pool.complete("a", user(f"q{i}"), role="t") for i in range(6)))
            await pool.aclose()
            return time.perf_counter() - t

        assert run(go()) >= 0.24


def test_hang_times_out_is_retried_then_recorded_as_error(tmp_path: Path):
    store = RunStore(tmp_path / "run.db")
    with BackgroundServer(fail_rate=1.0, faults=("timeout",), hang_s=10.0) as srv:
        pool = ModelPool(
            {"a": openai_cfg(srv.base_url, timeout=0.2, max_retries=1)},
            store=store,
            backoff_base=0.001,
        )

        async def go():
            try:
                await pool.complete("a", user("q"), role="t")
            finally:
                await pool.aclose()

        t = time.perf_counter()
        with pytest.raises(ModelError):
            run(go())
        assert time.perf_counter() - t < 3
        assert srv.stats()["requests"] == 2
    rec = store.calls()[0]
    assert rec.status == "error" and rec.attempts == 2 and rec.error


def test_client_error_is_not_retried():
    def bad(model, role, msgs):
        raise ModelError("this simulated model does not exist")

    with BackgroundServer(ScriptedResponder(bad)) as srv:
        pool = ModelPool({"a": openai_cfg(srv.base_url)}, backoff_base=0.001)

        async def go():
            try:
                await pool.complete("a", user("q"), role="t")
            finally:
                await pool.aclose()

        with pytest.raises(ModelError, match=r"HTTP 400.*does not exist"):
            run(go())
        assert srv.stats()["requests"] == 1


def test_a_garbled_reply_is_retried_as_the_same_request_never_answered():
    # A NUL or a leaked special token marks a reply broken in transit: retried like a 500
    # (never parsed, re-asked or cached), so its outcome cannot depend on which request the
    # fault hit.
    with BackgroundServer(fail_rate=1.0, faults=("malformed",)) as srv:
        pool = ModelPool({"a": openai_cfg(srv.base_url, max_retries=2)})

        async def go():
            try:
                await pool.complete("a", user("a long enough question " * 5), role="t")
            finally:
                await pool.aclose()

        with pytest.raises(ModelError, match="garbled reply"):
            run(go())
        assert srv.stats()["faults"]["malformed"] == 3


def test_a_garbled_reply_retried_gets_the_clean_answer():
    seed = next(s for s in range(100) if FaultPlan(0.5, s, ("malformed",)).draw(0))
    with BackgroundServer(fail_rate=0.5, faults=("malformed",), seed=seed) as srv:
        pool = ModelPool({"a": openai_cfg(srv.base_url, max_retries=10)})

        async def go():
            try:
                return await pool.complete("a", user("a question"), role="t")
            finally:
                await pool.aclose()

        c = run(go())
        assert srv.stats()["faults"]["malformed"] >= 1  # the first reply was garbled
        assert "\x00" not in c.text and "<|endoftext|" not in c.text
        assert c.text.endswith("a question")


def test_replicas_share_the_load():
    with BackgroundServer() as a, BackgroundServer() as b:
        pool = ModelPool({"m": openai_cfg([a.base_url, b.base_url])})

        async def go():
            await asyncio.gather(*(pool.complete("m", user(f"q{i}"), role="t") for i in range(20)))
            await pool.aclose()

        run(go())
        ra, rb = a.stats()["requests"], b.stats()["requests"]
    assert ra + rb == 20 and ra >= 5 and rb >= 5


def test_api_key_never_reaches_the_store_cache_or_logs(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("MEMEARENA_TEST_KEY", SECRET)
    for name in (None, "openai", "httpx", "httpx2", "httpcore", "httpcore2", "aiohttp"):
        caplog.set_level(logging.DEBUG, logger=name)
    seed = _seed_where(lambda p: p.draw(0) == "429" and p.draw(1) is None)

    def answer(model, role, msgs):
        if "fail" in msgs[-1].plain_text():
            raise ModelError("rejected (simulated)")
        return "fine"

    store = RunStore(tmp_path / "run.db")
    cache = ResponseCache(tmp_path / "cache.db")
    opts = {"fail_rate": 0.5, "seed": seed, "faults": ("429",), "retry_after_s": 0.01}
    with BackgroundServer(ScriptedResponder(answer), **opts) as srv:
        cfg = openai_cfg(srv.base_url, api_key_env="MEMEARENA_TEST_KEY")
        pool = ModelPool({"a": cfg}, store=store, cache=cache, backoff_base=0.001)

        async def go():
            await pool.complete("a", user("hello"), role="t")
            await pool.complete("a", user("hello"), role="t")
            with pytest.raises(ModelError) as err:
                await pool.complete("a", user("please fail"), role="t")
            await pool.aclose()
            return str(err.value), repr(pool._models["a"].backend)

        msg, backend_repr = run(go())
    store.close()
    cache.close()
    assert SECRET not in msg and SECRET not in backend_repr
    assert SECRET not in caplog.text
    for f in tmp_path.iterdir():
        assert SECRET.encode() not in f.read_bytes(), f.name
    assert {c.status for c in RunStore(tmp_path / "run.db").calls()} == {"ok", "cached", "error"}
