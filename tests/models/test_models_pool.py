"""The call stack with in-process backends: cache, budget, limits, timeout, retries, records."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from models_helpers import FakeBackend, ScriptedResponder, openai_cfg, run, sim_cfg, user

import memearena.models.pool as pool_module
from memearena.config import Price
from memearena.errors import BudgetExceeded, ModelError, StoreError, TransientModelError
from memearena.models import GenParams, ModelPool, RawReply, ResponseCache, Usage
from memearena.models.pool import GROUP_TURNS
from memearena.store import RunStore


@pytest.fixture(autouse=True, params=["on the loop", "in the writer's thread"])
def commits_where(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Every test here runs with the group commits on the event loop (the default) and in the
    writer's thread: the same guarantees either way."""
    in_thread = request.param != "on the loop"
    monkeypatch.setattr(ModelPool, "commit_in_thread", in_thread)
    # A commit of free results waits this long for more (``FREE_GROUP_S``): short, so the
    # tests that let it come (``_due_commits_ended``) stay fast.
    monkeypatch.setattr(pool_module, "FREE_GROUP_S", 0.02)
    return in_thread


def _hook_commits(store: RunStore, monkeypatch: pytest.MonkeyPatch, seen: Callable[..., None]):
    """Call ``seen(rows)`` before each group commit of call rows, wherever it runs (the
    loop's ``write_call_rows``, the writer's ``write_group``)."""
    group, rows_only = store.write_group, store.write_call_rows

    def write_group(db, rows, *rest):  # type: ignore[no-untyped-def]
        seen(rows)
        group(db, rows, *rest)

    def write_call_rows(rows, *rest):  # type: ignore[no-untyped-def]
        seen(rows)
        rows_only(rows, *rest)

    monkeypatch.setattr(store, "write_group", write_group)
    monkeypatch.setattr(store, "write_call_rows", write_call_rows)


@pytest.fixture
def store(tmp_path: Path) -> RunStore:
    s = RunStore(tmp_path / "run.db")
    yield s
    s.close()


@pytest.fixture
def cache(tmp_path: Path) -> ResponseCache:
    c = ResponseCache(tmp_path / "cache.db")
    yield c
    c.close()


def test_identical_request_is_served_from_cache_without_a_backend_call(store, cache):
    backend = FakeBackend()
    pool = ModelPool({"m": sim_cfg()}, store=store, cache=cache, backends={"m": backend})

    async def go():
        first = await pool.complete("m", user("hi"), role="target")
        second = await pool.complete("m", user("hi"), role="target")
        return first, second

    first, second = run(go())
    assert backend.calls == 1
    assert not first.cached and second.cached
    assert second.text == first.text and second.cost_usd == 0.0
    assert [c.status for c in store.calls()] == ["ok", "cached"]
    assert store.calls()[1].cost_usd == 0.0


@pytest.mark.parametrize(
    "reply",
    [
        RawReply("I'm sorry, but I can't help with that.", Usage(10, 10), "stop"),
        RawReply("", Usage(10, 0), "stop"),
        RawReply("   ", Usage(10, 1), "stop"),
        RawReply("partial text", Usage(10, 2), "content_filter"),
        RawReply("", Usage(10, 0), "stop", refusal_field="I refuse."),
    ],
    ids=["refusal-phrase", "empty", "blank", "content-filter", "refusal-field"],
)
def test_refusal_empty_or_filtered_output_is_never_cached(store, cache, reply):
    backend = FakeBackend(lambda n, m, r: reply)
    pool = ModelPool({"m": sim_cfg()}, store=store, cache=cache, backends={"m": backend})

    async def go():
        await pool.complete("m", user("q"), role="target")
        return await pool.complete("m", user("q"), role="target")

    second = run(go())
    assert backend.calls == 2
    assert not second.cached
    assert len(cache) == 0
    assert "cached" not in {c.status for c in store.calls()}


def test_refusal_is_its_own_recorded_outcome(store):
    backend = FakeBackend(lambda n, m, r: "I cannot assist with this request.")
    pool = ModelPool({"m": sim_cfg()}, store=store, backends={"m": backend})
    c = run(pool.complete("m", user("q"), role="target"))
    assert c.refusal
    assert store.calls()[0].status == "refusal"
    assert store.usage_summary()["m"]["refusals"] == 1


def test_permanent_error_is_recorded_and_never_cached(store, cache):
    def fail(n, m, r):
        raise ModelError("HTTP 400: bad request")

    backend = FakeBackend(fail)
    pool = ModelPool({"m": sim_cfg()}, store=store, cache=cache, backends={"m": backend})
    with pytest.raises(ModelError, match="bad request"):
        run(pool.complete("m", user("q"), role="judge"))
    assert backend.calls == 1  # a non-transient error is not retried
    rec = store.calls()[0]
    assert (rec.status, rec.role, rec.attempts) == ("error", "judge", 1)
    assert "bad request" in (rec.error or "")
    assert len(cache) == 0


def test_transient_errors_are_retried_to_success(store):
    def flaky(n, m, r):
        if n < 3:
            raise TransientModelError("HTTP 500")
        return "fine"

    backend = FakeBackend(flaky)
    cfg = sim_cfg(max_retries=5)
    pool = ModelPool({"m": cfg}, store=store, backends={"m": backend}, backoff_base=0.001)
    c = run(pool.complete("m", user("q"), role="target"))
    assert c.text == "fine" and backend.calls == 4
    rec = store.calls()[0]
    assert rec.status == "ok" and rec.attempts == 4


def test_retries_give_up_after_max_retries_with_the_reason(store):
    def always(n, m, r):
        raise TransientModelError("HTTP 503: overloaded")

    backend = FakeBackend(always)
    pool = ModelPool(
        {"m": sim_cfg(max_retries=2)}, store=store, backends={"m": backend}, backoff_base=0.001
    )
    with pytest.raises(ModelError, match=r"overloaded.*3 attempts"):
        run(pool.complete("m", user("q"), role="target"))
    assert backend.calls == 3
    rec = store.calls()[0]
    assert rec.status == "error" and rec.attempts == 3


def test_retry_after_is_honoured(store):
    def limited(n, m, r):
        if n == 0:
            raise TransientModelError("HTTP 429", retry_after=0.3)
        return "ok"

    backend = FakeBackend(limited)
    pool = ModelPool({"m": sim_cfg()}, store=store, backends={"m": backend}, backoff_base=0.001)
    t = time.perf_counter()
    run(pool.complete("m", user("q"), role="target"))
    assert time.perf_counter() - t >= 0.29
    assert backend.times[1] - backend.times[0] >= 0.29


def test_timeout_is_retried_then_recorded_as_error(store):
    backend = FakeBackend(delay=5.0)
    cfg = sim_cfg(timeout=0.05, max_retries=2)
    pool = ModelPool({"m": cfg}, store=store, backends={"m": backend}, backoff_base=0.001)
    t = time.perf_counter()
    with pytest.raises(ModelError, match="no reply within"):
        run(pool.complete("m", user("q"), role="target"))
    assert time.perf_counter() - t < 2
    assert backend.calls == 3
    rec = store.calls()[0]
    assert rec.status == "error" and rec.attempts == 3


def test_only_the_pools_own_timeout_becomes_a_timeout(store):
    pool = ModelPool(
        {"m": sim_cfg(timeout=0.05, max_retries=0)},
        store=store,
        backends={"m": FakeBackend(delay=5)},
    )

    async def go():
        task = asyncio.create_task(pool.complete("m", user("a"), role="target"))
        await asyncio.sleep(0.01)
        task.cancel()  # the caller's cancel is a cancel, never a retried timeout
        with pytest.raises(asyncio.CancelledError):
            await task
        with pytest.raises(TimeoutError):  # the caller's shorter deadline is the caller's
            async with asyncio.timeout(0.01):
                await pool.complete("m", user("b"), role="target")
        with pytest.raises(ModelError, match="no reply within"):  # the pool's own
            await pool.complete("m", user("c"), role="target")
        current = asyncio.current_task()
        assert current is not None and current.cancelling() == 0  # nothing left pending
        await asyncio.sleep(0.01)  # and this task is not cancelled later

    run(go())
    assert [c.status for c in store.calls()] == ["error"]


def test_concurrency_limit_holds():
    backend = FakeBackend(delay=0.02)
    pool = ModelPool({"m": sim_cfg(max_concurrency=3)}, backends={"m": backend})

    async def go():
        await asyncio.gather(*(pool.complete("m", user(f"q{i}"), role="t") for i in range(20)))

    run(go())
    assert backend.calls == 20
    assert backend.max_in_flight == 3


def test_rpm_limit_spaces_requests():
    backend = FakeBackend()
    pool = ModelPool({"m": sim_cfg(rpm=600)}, backends={"m": backend})  # one per 0.1 s
    started: list[float] = []

    async def go():
        started.append(asyncio.get_running_loop().time())
        await asyncio.gather(*(pool.complete("m", user(f"q{i}"), role="t") for i in range(5)))

    run(go())
    # The k-th request's slot is at least k intervals after the first request could start; a
    # loaded machine only delays a call past its slot, never before it, so this holds under load
    # (gaps between neighbours do not: a late first call shortens the next gap).
    times = sorted(backend.times)
    assert len(times) == 5
    for k, t in enumerate(times):
        assert t - started[0] >= k * 0.1 - 0.005, (k, t - started[0])


def test_budget_stops_before_the_call_that_would_exceed_it(store):
    backend = FakeBackend()  # every reply: 100 input + 50 output tokens
    cfg = sim_cfg(price=Price(input=1000.0, output=1000.0))  # $0.001 per token
    pool = ModelPool({"m": cfg}, store=store, backends={"m": backend}, max_cost=0.2)
    params = GenParams(max_tokens=50)

    async def go():
        await pool.complete("m", user("q1"), role="t", params=params)  # costs $0.15
        await pool.complete("m", user("q2"), role="t", params=params)  # ~$0.05 more: over

    with pytest.raises(BudgetExceeded, match="max-cost"):
        run(go())
    assert backend.calls == 1  # nothing sent for the refused call
    assert pool.spent_usd == pytest.approx(0.15)
    # The sent row was settled in place; the refused call, never sent, leaves no row.
    assert [c.status for c in store.calls()] == ["ok"]
    assert pool.stopped is not None and "higher --max-cost" in pool.stopped
    assert store.total_cost() == pytest.approx(0.15)


def test_budget_counts_calls_in_flight():
    backend = FakeBackend(delay=0.05)
    cfg = sim_cfg(price=Price(input=0.0, output=1000.0))  # max_tokens 100 -> est. $0.10 each
    pool = ModelPool({"m": cfg}, backends={"m": backend}, max_cost=0.25)

    async def go():
        return await asyncio.gather(
            *(
                pool.complete("m", user(f"q{i}"), role="t", params=GenParams(max_tokens=100))
                for i in range(5)
            ),
            return_exceptions=True,
        )

    results = run(go())
    assert sum(isinstance(r, BudgetExceeded) for r in results) == 3
    assert backend.calls == 2


def test_params_merge_model_defaults_and_role_passes_through(store):
    backend = FakeBackend()
    cfg = sim_cfg(temperature=0.7, max_tokens=300)
    pool = ModelPool({"m": cfg}, store=store, backends={"m": backend})
    run(pool.complete("m", user("q"), role="context", params=GenParams(temperature=0.0)))
    assert backend.params[0] == GenParams(temperature=0.0, max_tokens=300)
    assert backend.roles == ["context"]
    assert store.calls()[0].role == "context"


def test_cost_and_usage_are_accounted(store):
    backend = FakeBackend()  # 100 in, 50 out
    cfg = sim_cfg(price=Price(input=2.0, output=10.0))
    pool = ModelPool({"m": cfg}, store=store, backends={"m": backend})
    c = run(pool.complete("m", user("q"), role="t"))
    assert c.cost_usd == pytest.approx((100 * 2 + 50 * 10) / 1e6)
    u = pool.usage()["m"]
    assert (u["calls"], u["input_tokens"], u["output_tokens"]) == (1, 100, 50)
    s = store.usage_summary()["m"]
    assert s["cost_usd"] == pytest.approx(u["cost_usd"])
    assert s["calls"] == 1 and s["errors"] == 0


def test_sim_model_calls_the_responder_with_name_role_and_messages(store):
    responder = ScriptedResponder()
    cfg = sim_cfg(latency_ms=1)
    pool = ModelPool({"sim-a": cfg}, store=store, responder=responder)
    c = run(pool.complete("sim-a", user("what is this meme?"), role="judge"))
    assert c.text == "[judge] sim-a: what is this meme?"
    assert c.usage.input_tokens == 5  # ceil(18 / 4)
    model, role, messages, _ = responder.seen[0]
    assert (model, role, messages[0].plain_text()) == ("sim-a", "judge", "what is this meme?")


def test_responder_transient_error_is_retried():
    state = {"n": 0}

    def flaky(model, role, messages):
        state["n"] += 1
        if state["n"] == 1:
            raise TransientModelError("simulated hiccup")
        return "ok"

    pool = ModelPool({"s": sim_cfg()}, responder=ScriptedResponder(flaky), backoff_base=0.001)
    assert run(pool.complete("s", user("q"), role="t")).text == "ok"
    assert state["n"] == 2


def test_sim_model_without_a_world_is_a_model_error():
    pool = ModelPool({"s": sim_cfg()})
    with pytest.raises(ModelError, match="simulated"):
        run(pool.complete("s", user("q"), role="t"))


def test_unknown_model_is_a_model_error():
    pool = ModelPool({"s": sim_cfg()})
    with pytest.raises(ModelError, match="unknown model 'nope'"):
        run(pool.complete("nope", user("q"), role="t"))


def test_missing_api_key_env_var_names_the_variable(monkeypatch):
    monkeypatch.delenv("MEMEARENA_TEST_ABSENT_KEY", raising=False)
    cfg = openai_cfg("http://127.0.0.1:9/v1", api_key_env="MEMEARENA_TEST_ABSENT_KEY")
    pool = ModelPool({"m": cfg})
    with pytest.raises(ModelError, match="MEMEARENA_TEST_ABSENT_KEY"):
        run(pool.complete("m", user("q"), role="t"))


def _on_disk(path: Path, sql: str, *args: object) -> int:
    """What another connection reads now: what a kill -9 would leave."""
    other = sqlite3.connect(path)
    try:
        return int(other.execute(sql, args).fetchone()[0])
    finally:
        other.close()


async def _turns(n: int = GROUP_TURNS + 2) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def _due_commits_ended(pool: ModelPool) -> None:
    """Let the commit due from now start (a few turns; free results only: past
    ``FREE_GROUP_S``), then wait for it to end in the writer's thread (as the store's own
    writes do): no caller of the pool waited for it."""
    await asyncio.sleep(pool_module.FREE_GROUP_S)
    await _turns()
    pool.wait_commit()


async def _until(holds: Callable[[], bool]) -> None:
    """Give the event loop (and the writer's thread) time until ``holds()``, or fail."""
    for _ in range(20_000):
        if holds():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("never held")


def test_free_results_ending_apart_share_one_commit_due_once_free_group_s_passed(
    tmp_path, monkeypatch
):
    # Free results only (cache hits, a free in-process model's replies, step outcomes): a kill
    # before their commit loses nothing paid for, so they wait for more to join them.
    store = RunStore(tmp_path / "run.db")
    cache = ResponseCache(tmp_path / "cache.db")
    commits: list[int] = []
    _hook_commits(store, monkeypatch, lambda rows: commits.append(len(rows)))
    pool = ModelPool({"m": sim_cfg()}, store=store, cache=cache, backends={"m": FakeBackend()})
    calls, responses = "SELECT COUNT(*) FROM calls", "SELECT COUNT(*) FROM responses"

    async def go() -> tuple[tuple[int, int], ...]:
        for burst in range(4):  # bursts a few turns apart, as a pipeline's steps end
            await asyncio.gather(
                *(pool.complete("m", user(f"q{burst}-{i}"), role="t") for i in range(5))
            )
            await store.commit_step("step", f"s{burst}", {"n": burst})
            await _turns()
        waiting = (_on_disk(store.path, calls), _on_disk(cache.path, responses))
        await _due_commits_ended(pool)
        return waiting, (_on_disk(store.path, calls), _on_disk(cache.path, responses))

    waiting, committed = run(go())
    assert waiting == (0, 0) and committed == (20, 20)
    assert commits == [20]  # one commit for the four bursts
    assert _on_disk(store.path, "SELECT COUNT(*) FROM artifacts") == 4
    store.close()
    cache.close()


def test_free_results_commit_within_a_few_turns_once_free_group_rows_gathered(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(pool_module, "FREE_GROUP_ROWS", 8)
    monkeypatch.setattr(pool_module, "FREE_GROUP_S", 60.0)  # never reached here
    store = RunStore(tmp_path / "run.db")
    commits: list[int] = []
    _hook_commits(store, monkeypatch, lambda rows: commits.append(len(rows)))
    pool = ModelPool({"m": sim_cfg()}, store=store, backends={"m": FakeBackend()})

    async def go() -> int:
        for i in range(10):  # one at a time: the eighth row makes the commit due
            await pool.complete("m", user(f"q{i}"), role="t")
            await _turns(1)
        await _turns()
        pool.wait_commit()
        return _on_disk(store.path, "SELECT COUNT(*) FROM calls")

    assert run(go()) == 8  # the last two wait for more (or for aclose)
    assert commits == [8]
    run(pool.aclose())
    assert _on_disk(store.path, "SELECT COUNT(*) FROM calls") == 10
    store.close()


def test_a_paid_reply_makes_the_commit_of_free_results_waiting_before_it_due_at_once(
    tmp_path, monkeypatch
):
    # A reply paid for is on record a few turns after it returned (a kill then must not let a
    # re-run pay for it again), and takes the free results waiting before it along.
    monkeypatch.setattr(pool_module, "FREE_GROUP_S", 60.0)
    store = RunStore(tmp_path / "run.db")
    cache = ResponseCache(tmp_path / "cache.db")
    paid = sim_cfg(price=Price(input=1.0, output=1.0))  # tracked: settled in place
    pool = ModelPool(
        {"free": sim_cfg(), "paid": paid},
        store=store,
        cache=cache,
        backends={"free": FakeBackend(), "paid": FakeBackend()},
    )
    ok = "SELECT COUNT(*) FROM calls WHERE status='ok'"

    async def go() -> tuple[int, int, int]:
        await asyncio.gather(*(pool.complete("free", user(f"q{i}"), role="t") for i in range(3)))
        await store.commit_step("step", "s", {"n": 1})
        await _turns()
        free_only = _on_disk(store.path, ok)
        await pool.complete("paid", user("bill me"), role="t")
        await _turns()
        pool.wait_commit()
        return (
            free_only,
            _on_disk(store.path, ok),
            _on_disk(cache.path, "SELECT COUNT(*) FROM responses"),
        )

    assert run(go()) == (0, 4, 4)
    assert _on_disk(store.path, "SELECT COUNT(*) FROM artifacts") == 1
    run(pool.aclose())
    store.close()
    cache.close()


def test_a_dependent_request_is_sent_only_once_every_result_it_could_use_is_on_disk(tmp_path):
    # call -> step outcome -> next call: when the next request leaves, the previous call's
    # settled row, its cache entry and the step's artifact are committed (kill-safe).
    store = RunStore(tmp_path / "run.db")
    cache = ResponseCache(tmp_path / "cache.db")
    cfg = sim_cfg(price=Price(input=1.0, output=1.0))  # tracked: a sent row before sending
    depends: dict[str, tuple[str, str]] = {}  # request text -> (previous key, previous step)
    missing: list[tuple[str, int, int, int]] = []

    def at_send(n: int, msgs, role) -> str:
        text = msgs[-1].plain_text()
        if text in depends:
            key, step = depends[text]
            got = (
                _on_disk(
                    store.path,
                    "SELECT COUNT(*) FROM calls WHERE request_hash=? AND status='ok'",
                    key,
                ),
                _on_disk(cache.path, "SELECT COUNT(*) FROM responses WHERE key=?", key),
                _on_disk(store.path, "SELECT COUNT(*) FROM artifacts WHERE key=?", step),
            )
            if got != (1, 1, 1):
                missing.append((text, *got))
        return f"answer {n}"

    pool = ModelPool({"m": cfg}, store=store, cache=cache, backends={"m": FakeBackend(at_send)})

    async def chain(i: int) -> None:
        text = f"start {i}"
        for link in range(3):
            key = pool.request_key("m", user(text))
            done = await pool.complete("m", user(text), role="t")
            step = f"{i}-{link}"
            await store.commit_step("step", step, {"text": done.text})
            text = f"{done.text} then {i}"
            depends[text] = (key, step)

    async def go() -> None:
        await asyncio.gather(*(chain(i) for i in range(4)))
        await pool.aclose()

    run(go())
    assert len(depends) == 12 and missing == []
    assert _on_disk(store.path, "SELECT COUNT(*) FROM artifacts") == 12
    store.close()
    cache.close()


def test_nothing_queued_survives_aclose_uncommitted(tmp_path):
    store = RunStore(tmp_path / "run.db")
    cache = ResponseCache(tmp_path / "cache.db")
    pool = ModelPool({"m": sim_cfg()}, store=store, cache=cache, backends={"m": FakeBackend()})

    async def go() -> tuple[int, int, int]:
        done = await pool.complete("m", user("q"), role="t")
        await store.commit_step("step", "s", {"text": done.text})
        await pool.aclose()  # in the same turn: no scheduled commit has run yet
        return (
            _on_disk(store.path, "SELECT COUNT(*) FROM calls"),
            _on_disk(cache.path, "SELECT COUNT(*) FROM responses"),
            _on_disk(store.path, "SELECT COUNT(*) FROM artifacts"),
        )

    assert run(go()) == (1, 1, 1)
    store.close()
    cache.close()


def test_a_failed_call_is_committed_with_everything_queued_before_its_error_is_raised(tmp_path):
    store = RunStore(tmp_path / "run.db")

    def script(n: int, msgs, role) -> str:
        if n == 1:
            raise ModelError("bad request", kind="bad_request")
        return "fine"

    pool = ModelPool({"m": sim_cfg()}, store=store, backends={"m": FakeBackend(script)})

    async def go() -> tuple[int, int, int]:
        done = await pool.complete("m", user("first"), role="t")
        await store.commit_step("step", "s", {"text": done.text})
        with pytest.raises(ModelError, match="bad request"):
            await pool.complete("m", user("second"), role="t")
        return (
            _on_disk(store.path, "SELECT COUNT(*) FROM calls WHERE status='ok'"),
            _on_disk(store.path, "SELECT COUNT(*) FROM calls WHERE status='error'"),
            _on_disk(store.path, "SELECT COUNT(*) FROM artifacts"),
        )

    assert run(go()) == (1, 1, 1)
    store.close()


def test_a_commit_waiting_for_more_calls_still_puts_every_sent_row_on_disk_before_sending(
    store,
):
    # Replies arriving while others are in flight join one commit a few loop turns later;
    # whatever waits, no request goes out before its ``sent`` row is on disk.
    cfg = sim_cfg(price=Price(input=1.0, output=1.0), max_concurrency=8)  # tracked: costs money
    missing: list[str] = []

    def sent_on_disk(n: int, msgs, role) -> str:
        key = pool.request_key("m", msgs)
        other = sqlite3.connect(store.path)  # what a kill -9 now would leave
        try:
            row = other.execute("SELECT status FROM calls WHERE request_hash=?", (key,)).fetchone()
        finally:
            other.close()
        if row is None or row[0] != "sent":
            missing.append(key)
        return f"answer {n}"

    backend = FakeBackend(sent_on_disk)
    pool = ModelPool({"m": cfg}, store=store, backends={"m": backend})

    async def one(i: int) -> None:
        for _ in range(i % 5):  # replies spread over several loop turns
            await asyncio.sleep(0)
        await pool.complete("m", user(f"q{i}"), role="target")

    async def go() -> None:
        await asyncio.gather(*(one(i) for i in range(40)))
        for i in range(3):  # one call at a time: nothing else in flight, committed at once
            await pool.complete("m", user(f"alone {i}"), role="target")

    run(go())
    assert missing == [] and backend.calls == 43
    assert sorted({c.status for c in store.calls()}) == ["ok"] and len(store.calls()) == 43


def test_a_call_whose_caller_is_cancelled_once_it_returned_is_still_committed(store):
    pool = ModelPool({"m": sim_cfg()}, store=store, backends={"m": FakeBackend()})

    async def caller() -> None:
        await pool.complete("m", user("hi"), role="target")
        await asyncio.sleep(10)

    async def go() -> int:
        task = asyncio.create_task(caller())
        await asyncio.sleep(0)  # the call returned, its record queued
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await _due_commits_ended(pool)
        return _on_disk(store.path, "SELECT COUNT(*) FROM calls WHERE status='ok'")

    assert run(go()) == 1
    assert [c.status for c in store.calls()] == ["ok"]


def test_an_answer_waiting_for_its_commit_already_serves_identical_requests(store, cache):
    backend = FakeBackend()
    pool = ModelPool({"m": sim_cfg()}, store=store, cache=cache, backends={"m": backend})

    async def go():
        first = asyncio.create_task(pool.complete("m", user("hi"), role="target"))
        await asyncio.sleep(0)  # first has its answer, not yet committed
        second = await pool.complete("m", user("hi"), role="target")
        return await first, second

    first, second = run(go())
    assert backend.calls == 1
    assert second.cached and second.text == first.text
    assert sorted(c.status for c in store.calls()) == ["cached", "ok"]


def test_a_failed_commit_is_raised_by_the_next_call_and_the_pool_goes_on(store, monkeypatch):
    # Returned calls do not wait for their commit: its failure reaches the next call (or
    # aclose), never nobody; the records it carried are lost, and the pool is usable again.
    pool = ModelPool({"m": sim_cfg()}, store=store, backends={"m": FakeBackend()})

    def broken(rows):
        raise StoreError("disk full")

    _hook_commits(store, monkeypatch, broken)

    async def go():
        got = await asyncio.gather(
            *(pool.complete("m", user(f"q{i}"), role="target") for i in range(3))
        )
        await _due_commits_ended(pool)  # the scheduled commit runs, and fails
        return got

    assert [c.text for c in run(go())] == [f"answer {i} to q{i}" for i in range(3)]
    with pytest.raises(StoreError, match="disk full"):
        run(pool.complete("m", user("next"), role="target"))
    monkeypatch.undo()
    run(pool.complete("m", user("again"), role="target"))
    assert len(store.calls()) == 1


class _GatedBackend(FakeBackend):
    """Holds every request in flight until ``gate`` is set; the first one may fail once set."""

    def __init__(self, fail_first: BaseException | None = None) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.fail_first = fail_first

    async def chat(self, messages, params, role):  # type: ignore[no-untyped-def]
        n = self.calls
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await self.gate.wait()
        finally:
            self.in_flight -= 1
        if n == 0 and self.fail_first is not None:
            raise self.fail_first
        return RawReply(f"answer {n}", Usage(100, 50), "stop")


def test_the_next_requests_sent_commit_overlaps_the_reply_in_flight(store):
    # One request may be in flight; the next one is put on record (committed ``sent``) while
    # the first waits for its reply, so no concurrency slot idles on a commit.
    cfg = sim_cfg(price=Price(input=1.0, output=1.0), max_concurrency=1)  # tracked
    backend = _GatedBackend()
    pool = ModelPool({"m": cfg}, store=store, backends={"m": backend})

    async def go() -> tuple[int, int, int]:
        calls = [asyncio.create_task(pool.complete("m", user(f"q{i}"), role="t")) for i in (0, 1)]
        # each one's sent commit (a few turns, then the writer's thread)
        await _until(lambda: _on_disk(store.path, "SELECT COUNT(*) FROM calls") == 2)
        staged = (
            _on_disk(store.path, "SELECT COUNT(*) FROM calls WHERE status='sent'"),
            backend.calls,
        )
        backend.gate.set()
        await asyncio.gather(*calls)
        return (*staged, backend.max_in_flight)

    assert run(go()) == (2, 1, 1)  # both on record, one sent, never two in flight
    assert sorted(c.status for c in store.calls()) == ["ok", "ok"]


def test_free_results_commit_within_a_few_turns_while_a_paid_call_is_under_way(
    tmp_path, monkeypatch
):
    # A paid call's own commits (its sent row, then its settlement) come soon and would carry
    # them anyway: free results put off meanwhile would only add commits.
    monkeypatch.setattr(pool_module, "FREE_GROUP_S", 60.0)
    store = RunStore(tmp_path / "run.db")
    gated = _GatedBackend()
    pool = ModelPool(
        {"free": sim_cfg(), "paid": sim_cfg(price=Price(input=1.0, output=1.0))},
        store=store,
        backends={"free": FakeBackend(), "paid": gated},
    )
    ok = "SELECT COUNT(*) FROM calls WHERE status='ok'"

    async def go() -> tuple[int, int]:
        paid = asyncio.create_task(pool.complete("paid", user("bill me"), role="t"))
        await _until(lambda: gated.calls == 1)  # sent, waiting on its reply
        await pool.complete("free", user("q"), role="t")
        await _turns()
        pool.wait_commit()
        during = _on_disk(store.path, ok)
        gated.gate.set()
        await paid
        await _turns()
        pool.wait_commit()
        return during, _on_disk(store.path, ok)

    assert run(go()) == (1, 2)
    run(pool.aclose())
    store.close()


def test_a_call_on_record_when_its_model_dies_is_withdrawn_unsent(store):
    from memearena.errors import EndpointError

    cfg = sim_cfg(price=Price(input=1.0, output=1.0), max_concurrency=1, max_retries=0)
    backend = _GatedBackend(fail_first=EndpointError("gone", kind="not_found"))
    pool = ModelPool({"m": cfg}, store=store, backends={"m": backend})

    async def go() -> list[BaseException | object]:
        calls = [asyncio.create_task(pool.complete("m", user(f"q{i}"), role="t")) for i in (0, 1)]
        # the second on record, waiting for a slot
        await _until(lambda: _on_disk(store.path, "SELECT COUNT(*) FROM calls") == 2)
        backend.gate.set()
        return await asyncio.gather(*calls, return_exceptions=True)

    first, second = run(go())
    assert isinstance(first, EndpointError) and isinstance(second, EndpointError)
    assert backend.calls == 1  # the second never left, though it was on record as sent
    assert [(c.status, c.attempts) for c in store.calls()] == [("error", 1)]
    spent, bound = store.spend()
    assert bound == spent  # nothing left unsettled
