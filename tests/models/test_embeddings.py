"""Embeddings through the call stack: simulated vectors, cache, accounting, boundary checks,
the simulated server's ``/v1/embeddings`` with the official client, the OpenAI backend."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from pathlib import Path

import openai
import pytest
from models_helpers import openai_cfg, sim_cfg

from memearena.config import Price
from memearena.errors import ModelError
from memearena.models import ModelPool, Usage
from memearena.models.cache import ResponseCache
from memearena.models.embeddings import (
    EmbedReply,
    cosine,
    sim_embedding,
    validate_embedding_reply,
)
from memearena.sim.server import BackgroundServer
from memearena.store import RunStore


@pytest.fixture
def store(tmp_path: Path):
    s = RunStore(tmp_path / "run.db")
    yield s
    s.close()


@pytest.fixture
def cache(tmp_path: Path):
    c = ResponseCache(tmp_path / "cache.db")
    yield c
    c.close()


def test_sim_vectors_are_unit_deterministic_and_near_for_shared_words() -> None:
    a = sim_embedding("Vellmarians are lazy farmers who cannot do skilled work.")
    b = sim_embedding("Skilled work is beyond Vellmarians, who only farm.")
    c = sim_embedding("Women cannot drive cars safely.")
    assert a == sim_embedding("Vellmarians are lazy farmers who cannot do skilled work.")
    assert math.isclose(sum(x * x for x in a), 1.0) and len(a) == 256
    assert cosine(a, b) > 0.3 > cosine(a, c)
    assert math.isclose(sum(x * x for x in sim_embedding("")), 1.0)  # never a zero vector


class FakeEmbedder:
    """An embeddings backend answering by a script; counts calls."""

    def __init__(self, script) -> None:
        self.script = script
        self.calls = 0

    async def embed(self, texts: Sequence[str], role: str) -> EmbedReply:
        self.calls += 1
        return EmbedReply(self.script(self.calls, list(texts)), Usage(10 * len(texts), 0))

    async def chat(self, *a, **k):  # pragma: no cover - embeddings only
        raise AssertionError("chat not expected")


def test_embed_is_cached_by_content_and_billed_at_the_input_price(store, cache) -> None:
    cfg = sim_cfg(price=Price(input=2.0, output=100.0))
    pool = ModelPool({"e": cfg}, store=store, cache=cache)

    async def go():
        try:
            first = await pool.embed("e", ["alpha beta", "gamma"], role="t.embed")
            again = await pool.embed("e", ["alpha beta", "gamma"], role="t.embed")
            other = await pool.embed("e", ["gamma"], role="t.embed")
            return first, again, other
        finally:
            await pool.aclose()

    first, again, other = asyncio.run(go())
    assert first == again and len(first) == 2 and other[0] == first[1]
    calls = store.calls()
    assert [c.status for c in calls] == ["ok", "cached", "ok"]
    assert calls[0].role == "t.embed" and calls[0].output_tokens == 0
    # Input tokens at the input price; no output is ever billed.
    assert calls[0].cost_usd == pytest.approx(calls[0].input_tokens * 2.0 / 1e6)
    assert calls[0].input_tokens > 0 and calls[1].cost_usd == 0.0
    # A chat request with the same text never shares the embeddings' cache entry.
    assert pool.embed_key("e", ["gamma"]) != pool.request_key("e", [])


@pytest.mark.parametrize(
    ("vectors", "why"),
    [
        ([[1.0, 0.0]], "holds 1 vectors for 2 inputs"),
        ([[1.0, float("nan")], [0.0, 1.0]], "not a finite number"),
        ([[1.0, 0.0], [0.0, 1.0, 0.5]], "different sizes"),
        ([[1.0, 0.0], []], "non-empty list"),
    ],
)
def test_malformed_vectors_are_bad_responses_retried_and_never_cached(
    store, cache, vectors, why
) -> None:
    good = [[1.0, 0.0], [0.0, 1.0]]
    fake = FakeEmbedder(lambda n, texts: vectors if n <= 2 else good)
    pool = ModelPool(
        {"e": sim_cfg(max_retries=1)},
        store=store,
        cache=cache,
        backends={"e": fake},  # type: ignore[dict-item]
        backoff_base=0.001,
    )

    async def go():
        try:
            with pytest.raises(ModelError) as e:
                await pool.embed("e", ["a", "b"], role="t.embed")
            assert why in str(e.value) and e.value.kind == "bad_response"
            assert len(cache) == 0  # never cached
            return await pool.embed("e", ["a", "b"], role="t.embed")
        finally:
            await pool.aclose()

    assert asyncio.run(go()) == good
    assert fake.calls == 3  # two attempts for the bad reply, then a fresh call
    rows = store.calls()
    assert (rows[0].status, rows[0].error_kind, rows[0].attempts) == ("error", "bad_response", 2)
    assert rows[1].status == "ok"


def test_validation_orders_by_index_and_checks_usage() -> None:
    reply = {
        "data": [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1, 0]}],
        "usage": {"prompt_tokens": 7},
    }
    got = validate_embedding_reply(reply, 2)
    assert got.vectors == [[1.0, 0.0], [0.0, 1.0]] and got.usage.input_tokens == 7
    with pytest.raises(ModelError, match="appears twice"):
        validate_embedding_reply(
            {"data": [{"index": 0, "embedding": [1]}, {"index": 0, "embedding": [1]}]}, 2
        )
    with pytest.raises(ModelError, match="prompt_tokens"):
        validate_embedding_reply({"data": [], "usage": {"prompt_tokens": -1}}, 0)


def test_sim_serve_embeddings_with_the_official_client() -> None:
    with BackgroundServer(models=("emb",)) as srv:

        async def go():
            client = openai.AsyncOpenAI(api_key="EMPTY", base_url=srv.base_url, max_retries=0)
            try:
                floats = await client.embeddings.create(
                    model="emb", input=["cats chase mice", "dogs"], encoding_format="float"
                )
                # The SDK's default asks for base64 and decodes it itself.
                default = await client.embeddings.create(model="emb", input="cats chase mice")
                with pytest.raises(openai.NotFoundError):
                    await client.embeddings.create(model="nope", input="x")
                return floats, default
            finally:
                await client.close()

        floats, default = asyncio.run(go())
        stats = srv.stats()
    assert [d.index for d in floats.data] == [0, 1]
    assert floats.data[0].embedding == pytest.approx(sim_embedding("cats chase mice"))
    assert floats.usage.prompt_tokens > 0
    assert default.data[0].embedding == pytest.approx(sim_embedding("cats chase mice"), abs=1e-6)
    assert stats["roles"].get("embeddings", 0) >= 2


def test_pool_embeds_through_the_openai_backend_on_loopback(store) -> None:
    with BackgroundServer(models=("emb",)) as srv:
        models = {
            "e": openai_cfg(srv.base_url, model="emb"),
            "missing": openai_cfg(srv.base_url, model="no-such-model"),
        }
        pool = ModelPool(models, store=store)

        async def go():
            try:
                vecs = await pool.embed("e", ["misbelief one", "misbelief two"], role="t.embed")
                with pytest.raises(ModelError) as e:
                    await pool.embed("missing", ["x"], role="t.embed")
                return vecs, e.value
            finally:
                await pool.aclose()

        vecs, err = asyncio.run(go())
    assert vecs[1] == pytest.approx(sim_embedding("misbelief two"))
    assert err.kind == "not_found" and "\n" not in str(err)
    statuses = [(c.model, c.status) for c in store.calls()]
    assert statuses == [("e", "ok"), ("missing", "error")]
