"""Adapt's steps: one request is one step, answered from the run's own outcome when reached
again; a failure is asked again; a resumed run reads the store; an image file is encoded once
per file state; retrieval ranks as BM25 does."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bm25s
from adapt_helpers import Scripted, small_config

from memearena.data import Meme
from memearena.data.demo import demo_dir
from memearena.engine.pool import sim_world
from memearena.engine.rundir import load_memes
from memearena.engine.steps import counting_steps
from memearena.errors import TransientModelError
from memearena.methods.adapt import common
from memearena.methods.adapt.common import AdaptContext, Category, gather_steps, parse_text
from memearena.methods.adapt.refine import Retriever, Sample
from memearena.models import ModelPool
from memearena.models.types import GenParams, Message
from memearena.store import RunStore

CAT = Category("Race", "d", "i")


def _context(tmp_path: Path, fail: set[str] | None = None) -> tuple[AdaptContext, Scripted]:
    cfg = small_config(2, max_reasks=0)
    store = RunStore(tmp_path / "run.db")
    memes = load_memes(cfg, store).memes
    world = sim_world(cfg, memes)
    failing = fail if fail is not None else set()

    def outage(model: str, role: str, messages: Sequence[Message], params: GenParams) -> None:
        if "outage" in failing:
            raise TransientModelError("simulated outage", kind="http_503")

    scripted = Scripted(world, {"adapt.answer": outage})
    pool = ModelPool(cfg.models, store=store, cache=None, responder=scripted)
    return AdaptContext(cfg, pool, store), scripted


async def _answer(ctx: AdaptContext, text: str, part: int = 0) -> dict[str, Any] | None:
    return await ctx.step(
        "adapt.answer",
        ("m", part),
        "sim-aurora",
        "adapt.answer",
        "adapt/answer.j2",
        parse_text,
        lambda v: {"answer": v},
        max_reasks=0,
        meme_text=text,
        instruction="Explain.",
    )


def test_a_step_reached_again_is_answered_from_the_run_without_a_call(tmp_path: Path) -> None:
    ctx, scripted = _context(tmp_path)

    async def go() -> list[dict[str, Any] | None]:
        try:
            first = await _answer(ctx, "a meme")
            again = await _answer(ctx, "a meme", part=1)  # same request, another item
            both = await asyncio.gather(_answer(ctx, "another"), _answer(ctx, "another"))
            return [first, again, *both]
        finally:
            await ctx.pool.aclose()

    with counting_steps() as tally:
        got = asyncio.run(go())
    assert got[0] == got[1] and got[2] == got[3]
    assert got[0] is not None and "answer" in got[0]
    assert len(scripted.calls) == 2  # one per distinct request
    # Asked four times, called twice: the others are answered again from this run (from its
    # outcome or by joining the call in flight, whichever the scheduling gives), not reused
    # from the run directory.
    answer = tally["adapt.answer"]
    assert (answer.new, answer.reused, answer.again) == (2, 0, 2)
    assert got[1] is not None and got[1]["for"] == got[0]["for"]  # the first writer's lineage
    ctx.store.close()


def test_a_step_whose_caller_is_cancelled_is_called_by_the_one_waiting_for_it(
    tmp_path: Path,
) -> None:
    ctx, _ = _context(tmp_path)
    model = ctx.pool._models["sim-aurora"]
    inner = ctx.pool._backend(model)
    calls: list[int] = []

    class Held:
        """The simulated backend, holding the first call until it is cancelled."""

        async def chat(self, messages: Any, params: Any, role: str) -> Any:
            calls.append(len(calls))
            if len(calls) == 1:
                await asyncio.Event().wait()  # in flight until cancelled
            return await inner.chat(messages, params, role)

    model.backend = Held()  # type: ignore[assignment]

    async def go() -> dict[str, Any] | None:
        try:
            first = asyncio.ensure_future(_answer(ctx, "a meme"))
            while not calls:  # the first caller is in its call
                await asyncio.sleep(0)
            second = asyncio.ensure_future(_answer(ctx, "a meme", part=1))
            await asyncio.sleep(0)  # the second waits for it
            first.cancel()
            return await second
        finally:
            await ctx.pool.aclose()

    got = asyncio.run(go())
    assert got is not None and "answer" in got
    assert got["for"] == "m|1"  # the waiting caller made the step itself
    ctx.store.close()


def test_steps_gathered_keep_their_order_and_a_failure_waits_for_the_rest() -> None:
    ended: list[str] = []

    async def step(name: str, turns: int, fail: bool = False) -> dict[str, Any] | None:
        for _ in range(turns):
            await asyncio.sleep(0)
        ended.append(name)
        if fail:
            raise RuntimeError(name)
        return {"name": name}

    async def go() -> None:
        got = await gather_steps([step("a", 3), step("b", 0), step("c", 1)])
        assert [g["name"] for g in got if g] == ["a", "b", "c"]
        ended.clear()
        try:
            await gather_steps([step("slow", 5), step("fails", 0, fail=True)])
        except RuntimeError as e:
            assert str(e) == "fails"
        else:
            raise AssertionError("the failure was not raised")
        assert sorted(ended) == ["fails", "slow"]  # nothing left running when it is raised

    asyncio.run(go())


def test_a_failed_step_is_asked_again_when_reached_again(tmp_path: Path) -> None:
    fail = {"outage"}
    ctx, scripted = _context(tmp_path, fail)

    async def go() -> list[dict[str, Any] | None]:
        try:
            first = await _answer(ctx, "a meme")
            fail.clear()
            return [first, await _answer(ctx, "a meme")]
        finally:
            await ctx.pool.aclose()

    first, second = asyncio.run(go())
    assert first is None  # only an error record: retried, never memoised
    assert second is not None and "answer" in second
    assert len(scripted.calls) > 1
    ctx.store.close()


def test_a_resumed_run_reads_its_steps_from_the_store(tmp_path: Path) -> None:
    ctx, first_run = _context(tmp_path)

    async def once(c: AdaptContext) -> dict[str, Any] | None:
        try:
            return await _answer(c, "a meme")
        finally:
            await c.pool.aclose()

    first = asyncio.run(once(ctx))
    assert len(first_run.calls) == 1
    ctx.store.close()
    ctx2, scripted2 = _context(tmp_path)  # a new run on the same directory
    with counting_steps() as tally:
        assert asyncio.run(once(ctx2)) == first
    assert scripted2.calls == []
    assert tally["adapt.answer"].reused == 1
    ctx2.store.close()


def test_steps_differing_only_in_parameters_render_their_prompt_once(
    tmp_path: Path, monkeypatch: Any
) -> None:
    ctx, scripted = _context(tmp_path)
    rendered: list[str] = []
    build = common.build_messages

    def counting(template: str, **kw: Any) -> list[Message]:
        rendered.append(template)
        return build(template, **kw)

    monkeypatch.setattr(common, "build_messages", counting)

    async def seeded(seed: int, text: str = "a meme") -> dict[str, Any] | None:
        return await ctx.step(
            "adapt.reference_candidate",
            ("m", seed),
            "sim-judge-falcon",
            "adapt.reference",
            "adapt/reference.j2",
            parse_text,
            lambda v: {"text": v},
            params=GenParams(temperature=0.7, seed=seed),
            max_reasks=0,
            meme_text=text,
            instruction="Explain.",
            misbelief=None,
        )

    async def go() -> list[dict[str, Any] | None]:
        try:
            return [await seeded(0), await seeded(1), await seeded(2), await seeded(0, "other")]
        finally:
            await ctx.pool.aclose()

    got = asyncio.run(go())
    assert all(g is not None and "text" in g for g in got)
    assert len(scripted.calls) == 4  # every seed is its own request, called once
    assert rendered == ["adapt/reference.j2", "adapt/reference.j2"]  # one per distinct prompt
    # The artifact keeps the parsed output; the reply itself is on record with its call.
    replies = {c.response for c in ctx.store.calls()}
    for g in got:
        assert g is not None and "raw" not in g and g["text"] in replies
    ctx.store.close()


def test_memes_sharing_an_image_file_are_encoded_once(tmp_path: Path, monkeypatch: Any) -> None:
    ctx, _ = _context(tmp_path)
    encoded: list[Path] = []
    real = common.prepare_image

    def counting(path: Path, cfg: Any = None) -> Any:
        encoded.append(path)
        return real(path, cfg)

    monkeypatch.setattr(common, "prepare_image", counting)
    seen: list[tuple[str, str]] = []
    ctx.on_image = lambda sha, text, *_: seen.append((sha, text))
    img = demo_dir() / "img" / "m01.png"
    a = Meme(id="a", source="t", text="first", image_path=img)
    b = Meme(id="b", source="t", text="second", image_path=img)
    assert ctx.image(a) == ctx.image(b)
    assert encoded == [img]
    assert [t for _, t in seen] == ["first", "second"]  # the world learns of both memes
    ctx.store.close()


def _sample(uid: str, misbelief: str) -> Sample:
    return Sample(Meme(id=uid, source="t", text=uid), CAT, misbelief, 5.0)


MISBELIEFS = [
    "Vellmarians are lazy farmers who cannot do skilled work.",
    "Women cannot drive cars safely.",
    "Vellmarians are thieves.",
    "Skilled work is beyond Vellmarians, who only farm saltgrass.",
    "Women cannot drive cars safely.",
    "The the of and.",
    "Lazy lazy lazy workers.",
]


def test_retrieval_is_bm25s_ranking_of_each_query() -> None:
    pool = [_sample(chr(97 + i), m) for i, m in enumerate(MISBELIEFS)]
    r = Retriever(pool)
    corpus = bm25s.tokenize(MISBELIEFS, stopwords="en", return_ids=False, show_progress=False)
    ref = bm25s.BM25()
    ref.index(corpus, show_progress=False)
    for query in [*pool, _sample("q", "Vellmarians cannot do skilled work."), _sample("z", "")]:
        q = bm25s.tokenize([query.misbelief], stopwords="en", return_ids=False)[0]
        scores = [float(x) for x in ref.get_scores(q)] if q else [0.0] * len(pool)
        want = [
            s.meme.id
            for _, _, s in sorted(
                (-sc, s.meme.uid, s)
                for sc, s in zip(scores, pool, strict=True)
                if s.meme.uid != query.meme.uid
            )
        ]
        assert [s.meme.id for s in r.ranked(query)] == want
        assert [s.meme.id for s in r.ranked(query, limit=2)] == want[:2]
        assert [s.meme.id for s in r.ranked(query, {"t:a"}, limit=1)] == [
            w for w in want if w != "a"
        ][:1]
    # A sample whose misbelief is not its pool entry's is ranked by its own text.
    moved = _sample("a", "Women cannot drive cars safely.")
    assert [s.meme.id for s in r.ranked(moved)][:2] == ["b", "e"]
