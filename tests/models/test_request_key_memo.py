"""``request_key`` keeps the payload and key it computed for the ``complete`` that sends the very
same request; a reply is never cached or recorded under a key that is not its own request's,
whatever was keyed before (another model, other params, equal but new message objects, message
objects that died and whose ids were reused)."""

from __future__ import annotations

from pathlib import Path

import pytest
from models_helpers import FakeBackend, run, sim_cfg

from memearena.models import GenParams, ModelPool, ResponseCache
from memearena.models.cache import request_key as independent_key
from memearena.models.types import Message
from memearena.store import RunStore

CFGS = {"a": sim_cfg(), "b": sim_cfg(temperature=0.3)}


def _oracle(model: str, msgs: list[Message], params: GenParams | None) -> str:
    """The key of the request, computed without the pool."""
    cfg = CFGS[model]
    return independent_key(cfg, model, msgs, GenParams.of(cfg).merged(params))


def _msgs(text: str) -> list[Message]:
    return [Message.text("system", "judge"), Message.text("user", text)]


def _pool(tmp_path: Path) -> tuple[ModelPool, RunStore, ResponseCache]:
    store = RunStore(tmp_path / "run.db")
    cache = ResponseCache(tmp_path / "cache.db")
    backends = {name: FakeBackend() for name in CFGS}
    return ModelPool(CFGS, store=store, cache=cache, backends=backends), store, cache


def _assert_every_record_is_its_own(store: RunStore, cache: ResponseCache, sent: list) -> None:
    """Each call row, stored request and cache entry names the key of the request it was."""
    calls = store.calls()
    assert len(calls) == len(sent)
    for rec, (model, msgs, params) in zip(calls, sent, strict=True):
        want = _oracle(model, msgs, params)
        assert rec.request_hash == want
        assert rec.model == model
        req = store.request(want)
        assert req is not None
        assert req["messages"][-1]["content"][0]["text"] == msgs[-1].plain_text()
        hit = cache.get(want)
        assert hit is not None
        assert hit.text.endswith(f"to {msgs[-1].plain_text()}")


def _send_and_check(pool: ModelPool, store: RunStore, cache: ResponseCache, sent: list) -> None:
    """Send ``sent`` (model, messages, params) in order, then check every record's key."""

    async def go() -> None:
        for model, msgs, params in sent:
            await pool.complete(model, msgs, role="t", params=params)
        await pool.aclose()

    run(go())
    _assert_every_record_is_its_own(store, cache, sent)
    store.close()
    cache.close()


def test_complete_after_request_key_uses_the_request_s_own_key(tmp_path: Path) -> None:
    pool, store, cache = _pool(tmp_path)
    hot = GenParams(temperature=0.9)
    m1, m2 = _msgs("one"), _msgs("two")
    # Keyed for one model / params, sent for another: each call must get its own key.
    assert pool.request_key("a", m1) == _oracle("a", m1, None)
    assert pool.request_key("a", m2, hot) == _oracle("a", m2, hot)
    assert pool.request_key("b", m1) == _oracle("b", m1, None)
    sent = [
        ("b", m1, None),  # keyed for b: the kept key
        ("a", m2, None),  # keyed only with other params
        ("a", list(m1), None),  # a new list of the very same message objects: the kept key
        ("b", [Message(m.role, m.content) for m in m2], hot),  # equal, new objects
        ("a", m2, hot),  # keyed with these params: the kept key
        ("a", [*m1, Message.text("user", "more")], None),  # a longer conversation
    ]

    _send_and_check(pool, store, cache, sent)


def test_a_reused_id_of_a_dead_message_never_serves_its_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every object gets the same id in the pool, the worst case of ids reused after their
    # objects died: only the identity check stands between a request and another's key.
    import memearena.models.pool as pool_module

    monkeypatch.setattr(pool_module, "id", lambda _obj: 7, raising=False)
    pool, store, cache = _pool(tmp_path)
    sent: list = []

    async def go() -> None:
        for i in range(5):
            dead = _msgs(f"dead {i}")
            pool.request_key("a", dead)
            del dead  # freed at once (no cycle): its memo entry now names a dead object
            live = _msgs(f"live {i}")
            sent.append(("a", live, None))
            await pool.complete("a", live, role="t")
            kept = _msgs(f"kept {i}")
            pool.request_key("a", kept)
            other = _msgs(f"other {i}")  # alive, same (fake) ids as kept's: not the same request
            sent.append(("a", other, None))
            await pool.complete("a", other, role="t")
        await pool.aclose()

    run(go())
    _assert_every_record_is_its_own(store, cache, sent)
    store.close()
    cache.close()


def test_the_memo_is_bounded(tmp_path: Path) -> None:
    from memearena.models.pool import REQUEST_MEMO_SIZE

    pool, store, cache = _pool(tmp_path)
    keep = [_msgs(f"q{i}") for i in range(REQUEST_MEMO_SIZE + 50)]
    for msgs in keep:
        pool.request_key("a", msgs)
    assert len(pool._request_memo) == REQUEST_MEMO_SIZE
    # The oldest were dropped: sending one still records it under its own key.
    sent = [("a", keep[0], None), ("a", keep[-1], None)]

    _send_and_check(pool, store, cache, sent)
