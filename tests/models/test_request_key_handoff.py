"""A request key handed to ``complete`` by the code that computed it with ``request_key`` spares
building and hashing the request again, even when the messages sent are other objects (the
prompt with the image's data in place of its hash); a key that is not the request's own is
refused, never recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
from models_helpers import FakeBackend, run, sim_cfg

import memearena.models.pool as pool_module
from memearena.errors import ModelError
from memearena.models import ModelPool, ResponseCache
from memearena.models.cache import request_key as independent_key
from memearena.models.types import GenParams, Message
from memearena.store import RunStore

CFGS = {"a": sim_cfg()}


def _msgs(text: str) -> list[Message]:
    return [Message.text("system", "judge"), Message.text("user", text)]


def _pool(tmp_path: Path) -> tuple[ModelPool, RunStore, ResponseCache]:
    store = RunStore(tmp_path / "run.db")
    cache = ResponseCache(tmp_path / "cache.db")
    return ModelPool(CFGS, store=store, cache=cache, backends={"a": FakeBackend()}), store, cache


def test_a_handed_key_is_not_hashed_again_and_names_the_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool, store, cache = _pool(tmp_path)
    keyed = _msgs("one")
    key = pool.request_key("a", keyed)
    assert key == independent_key(CFGS["a"], "a", keyed, GenParams.of(CFGS["a"]))
    sent = [Message(m.role, m.content) for m in keyed]  # equal, other objects
    hashed: list[str] = []
    real = pool_module.payload_key
    monkeypatch.setattr(pool_module, "payload_key", lambda p: hashed.append(p) or real(p))

    async def go() -> None:
        await pool.complete("a", sent, role="t", key=key)
        await pool.aclose()

    run(go())
    assert hashed == []
    [rec] = store.calls()
    assert rec.request_hash == key
    assert store.request(key) is not None
    assert cache.get(key) is not None
    store.close()
    cache.close()


@pytest.mark.parametrize("checked", [True, False])
def test_a_key_that_is_not_the_request_s_own_is_refused(tmp_path: Path, checked: bool) -> None:
    pool, store, cache = _pool(tmp_path)
    pool.verify_keys = checked
    other = pool.request_key("a", _msgs("other"))
    never_keyed = "0" * 64  # no payload kept for it: the request is keyed and compared

    async def go() -> list[str]:
        errors = []
        wrong = [never_keyed, other] if checked else [never_keyed]
        for key in wrong:
            with pytest.raises(ModelError, match="not this request's"):
                await pool.complete("a", _msgs("mine"), role="t", key=key)
            errors.append(key)
        await pool.aclose()
        return errors

    assert run(go())
    assert store.calls() == []
    store.close()
    cache.close()


def test_the_kept_payloads_are_bounded(tmp_path: Path) -> None:
    pool, store, cache = _pool(tmp_path)
    for i in range(pool_module.REQUEST_MEMO_SIZE + 10):
        pool.request_key("a", _msgs(f"q{i}"))
    assert len(pool._payload_memo) == pool_module.REQUEST_MEMO_SIZE
    store.close()
    cache.close()
