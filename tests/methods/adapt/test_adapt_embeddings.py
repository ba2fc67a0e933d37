"""Adapt retrieval by embeddings: order by cosine similarity, vectors stored as artifacts keyed
by content (a re-run pays nothing twice), the dry run counting embedding calls."""

from __future__ import annotations

from pathlib import Path

import pytest
from adapt_helpers import run_pipeline, small_config

from memearena.data import Meme
from memearena.engine.lifecycle import plan_method
from memearena.errors import TransientModelError
from memearena.methods.adapt.common import Category
from memearena.methods.adapt.refine import EMBED_ROLE, EmbeddingRetriever, Sample
from memearena.models.embeddings import SimEmbedder

CAT = Category("Race", "d", "i")
EMB = "sim-judge-harbor"


def sample(uid: str, misbelief: str, score: float = 5.0) -> Sample:
    return Sample(Meme(id=uid, source="t", text=uid), CAT, misbelief, score)


def test_embedding_retrieval_ranks_by_cosine_then_id() -> None:
    # Hand-made vectors: the order follows the angle to the query, not shared words.
    vectors = {
        "q": [1.0, 0.0, 0.0],
        "near": [0.9, 0.1, 0.0],
        "mid": [0.5, 0.5, 0.0],
        "far": [0.0, 0.0, 1.0],
        "opposite": [-1.0, 0.0, 0.0],
    }
    pool = [
        sample("a", "far"),
        sample("b", "mid"),
        sample("c", "near"),
        sample("d", "opposite"),
        sample("e", "mid"),
    ]
    r = EmbeddingRetriever(pool, vectors)
    q = sample("q", "q")
    assert [s.meme.id for s in r.ranked(q)] == ["c", "b", "e", "a", "d"]
    assert [s.meme.id for s in r.ranked(q, {"t:c", "t:b"})] == ["e", "a", "d"]
    assert r.ranked(pool[2])[0].meme.id in ("b", "e")  # never itself
    assert "c" not in [s.meme.id for s in r.ranked(pool[2])]


def embed_calls(store) -> list:
    return [c for c in store.calls() if c.role == EMBED_ROLE]


def test_embeddings_retrieval_runs_and_a_rerun_pays_nothing_twice(tmp_path: Path) -> None:
    cfg = small_config(retrieval="embeddings", embedding_model=EMB)
    out, store, _ = run_pipeline(cfg, tmp_path / "run")
    try:
        calls = embed_calls(store)
        vectors = store.artifacts("adapt.embedding")
        assert calls and all(c.status == "ok" and c.model == EMB for c in calls)
        # One call per distinct misbelief, each stored with its text and vector.
        assert len(calls) == len(vectors) == len({v["text"] for _, v in vectors})
        assert all(v["model"] == EMB and len(v["vector"]) == 256 for _, v in vectors)
        assert out.chains and out.pending == 0
        assert out.stage_calls["embeddings"] == len(calls)
        n_before = len(store.calls())
    finally:
        store.close()

    out2, store2, _ = run_pipeline(cfg, tmp_path / "run")
    try:
        new = store2.calls()[n_before:]
        assert not [c for c in new if c.role == EMBED_ROLE]  # read back, never re-embedded
        assert [c["steps"] for c in out2.chains] == [c["steps"] for c in out.chains]
    finally:
        store2.close()


def test_a_failed_embedding_leaves_refinement_pending_then_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The embedding model is unknown to the first run's pool: every embedding fails (on
    # record), refinement waits; the second run embeds and refines.
    cfg = small_config(retrieval="embeddings", embedding_model=EMB)
    good = cfg.models[EMB]
    broken = cfg.model_copy(
        update={"models": {**cfg.models, EMB: good.model_copy(update={"max_retries": 0})}}
    )

    async def boom(self, texts, role):
        raise TransientModelError("simulated outage", kind="http_503")

    with monkeypatch.context() as mp:
        mp.setattr(SimEmbedder, "embed", boom)
        out, store, _ = run_pipeline(broken, tmp_path / "run")
    try:
        assert not out.chains and out.pending > 0
        assert embed_calls(store) and all(c.status == "error" for c in embed_calls(store))
        assert any(e.kind == "adapt.embedding" for e in store.errors())
        assert store.artifacts("adapt.embedding") == []
    finally:
        store.close()
    out2, store2, _ = run_pipeline(broken, tmp_path / "run")
    try:
        assert out2.chains and out2.pending == 0
        assert not [e for e in store2.errors() if e.kind == "adapt.embedding"]
    finally:
        store2.close()


def test_dry_run_counts_embedding_calls() -> None:
    cfg = small_config(retrieval="embeddings", embedding_model=EMB)
    plan = plan_method("adapt", cfg)
    bm25 = plan_method("adapt", small_config())
    emb_calls = plan.per_model[EMB]["calls"] - bm25.per_model[EMB]["calls"]
    assert emb_calls > 0


def test_vectors_of_different_sizes_across_calls_stop_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memearena.errors import ModelError
    from memearena.models import Usage
    from memearena.models.embeddings import EmbedReply

    sizes = iter(range(2, 10_000))

    async def ragged(self, texts, role):
        return EmbedReply([[1.0] * next(sizes) for _ in texts], Usage(1, 0))

    monkeypatch.setattr(SimEmbedder, "embed", ragged)
    cfg = small_config(retrieval="embeddings", embedding_model=EMB)
    with pytest.raises(ModelError, match="vectors of different sizes") as e:
        run_pipeline(cfg, tmp_path / "run")
    assert "\n" not in str(e.value)
