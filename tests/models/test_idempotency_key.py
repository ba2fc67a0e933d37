"""The ``Idempotency-Key`` a chat request carries: a resumed run sends a request a kill left in
flight under the key the killed run used, so a server that honours keys answers it once; a
reply received and not used (garbled, refused, dropped as unusable) is never replayed, because
the next attempt goes under a new key. Counted at the simulated server (``idempotency=True``)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from models_helpers import openai_cfg, run, user

from memearena.models import Message, ModelPool
from memearena.models.backends import idempotency_key
from memearena.models.types import GenParams
from memearena.sim.server import IDEMPOTENCY_HEADER, BackgroundServer
from memearena.store import RunStore


class Counting:
    """Numbers its replies (``reply 1``, ``reply 2``, ...): a replayed reply shows its number;
    a text containing ``refuse`` is refused."""

    def __init__(self) -> None:
        self.n = 0

    def respond(self, model: str, role: str, messages: Sequence[Message], p: GenParams) -> str:
        self.n += 1
        if "refuse" in messages[-1].plain_text():
            return "I'm sorry, but I can't help with that."
        return f"reply {self.n}"


def _post(srv: BackgroundServer, text: str, key: str) -> dict[str, Any]:
    """The request a pool sends for ``user(text)`` to model sim-a, sent as a killed run left
    it: the server answers, nobody reads the reply."""
    body = {"model": "sim-a", "messages": [{"role": "user", "content": text}]}
    req = urllib.request.Request(
        f"{srv.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", IDEMPOTENCY_HEADER: key},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        out: dict[str, Any] = json.loads(r.read())
    return out


def _pool(srv: BackgroundServer, store: RunStore, **kw: Any) -> ModelPool:
    return ModelPool({"m": openai_cfg(srv.base_url, **kw)}, store=store, backoff_base=0.01)


@pytest.mark.parametrize("client", ["lean", "sdk"])
def test_a_request_left_in_flight_is_answered_once_for_the_resumed_run(
    tmp_path: Path, client: str
) -> None:
    with BackgroundServer(Counting(), idempotency=True) as srv:
        store = RunStore(tmp_path / "run.db")
        try:
            pool = _pool(srv, store, client=client)
            key = pool.request_key("m", user("hello"))
            # The killed run's attempt: billed at the server, its reply never read.
            lost = _post(srv, "hello", idempotency_key(key, 0))
            got = run(pool.complete("m", user("hello"), role="r"))
            run(pool.aclose())
        finally:
            store.close()
        stats = srv.stats()
    assert got.text == lost["choices"][0]["message"]["content"] == "reply 1"
    assert stats["replayed"] == 1 and stats["paid_twice"] == 0


def test_a_garbled_reply_is_never_replayed_to_its_retry(tmp_path: Path) -> None:
    # Every reply of the first attempt's lineage is garbled; the retry goes under a new key.
    with BackgroundServer(
        Counting(), idempotency=True, fail_rate=1.0, faults=("malformed",)
    ) as srv:
        store = RunStore(tmp_path / "run.db")
        try:
            pool = _pool(srv, store, max_retries=2)
            with pytest.raises(Exception, match="garbled"):
                run(pool.complete("m", user("hello"), role="r"))
            run(pool.aclose())
        finally:
            store.close()
        stats = srv.stats()
    assert stats["replayed"] == 0 and stats["requests"] == 3  # three attempts, three answers


def test_a_refused_or_dropped_reply_is_asked_afresh_by_the_next_run(tmp_path: Path) -> None:
    with BackgroundServer(Counting(), idempotency=True) as srv:
        path = tmp_path / "run.db"
        texts = []
        for _ in range(2):  # two invocations on one run directory
            store = RunStore(path)
            try:
                pool = _pool(srv, store)
                refused = run(pool.complete("m", user("please refuse"), role="r"))
                got = run(pool.complete("m", user("hello"), role="r"))
                pool.uncache("m", user("hello"))  # its output stayed unusable
                texts.append((refused.refusal, got.text))
                run(pool.aclose())
            finally:
                store.close()
        stats = srv.stats()
    # Neither reply was replayed to the second run: each was answered afresh.
    assert texts == [(True, "reply 2"), (True, "reply 4")]
    assert stats["replayed"] == 0
