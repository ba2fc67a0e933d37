"""The Adapt stages in order: mining -> misbeliefs -> references -> scoring (per repeat) ->
refinement (one module each; this one runs them).

Every stage streams its jobs through ``capped_map`` (a bounded window in flight; once the
spend cap stops the pool, the jobs in flight finish and no other starts) and every model call
is an idempotent step in ``run.db``: a re-run resumes, a killed run loses only the calls in
flight. Each original is answered and scored on the image its rewrites will be shown with (the
text-erased image, with its original text: the loop's ``s``) and, apart, on its own image (the
"original image" figure, ``original_image_score``). The records the analysis needs (one per
scored original, one per refinement chain) are rebuilt from the stored steps on every run, so
they always match the current config.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, cast

from memearena.config import RunConfig
from memearena.data import Meme
from memearena.engine.progress import StageProgress
from memearena.engine.steps import capped_map
from memearena.errors import BudgetExceeded, ConfigError
from memearena.methods.adapt.common import AdaptContext, Category
from memearena.methods.adapt.erase import EraseFlagged, check_refine_images
from memearena.methods.adapt.mining import mine
from memearena.methods.adapt.misbelief import misbelief
from memearena.methods.adapt.reference import reference
from memearena.methods.adapt.refine import (
    MODES,
    EmbeddingRetriever,
    Retriever,
    Sample,
    choose_seeds,
    load_retrieval,
    loop_image,
    misbelief_vectors,
    refine_group,
    seed_count,
)
from memearena.methods.adapt.scoring import answer_and_score, both
from memearena.models import ModelPool
from memearena.models.types import ImagePart
from memearena.store import RunStore

__all__ = [
    "TYPICAL_OUTPUT_TOKENS",
    "AdaptOutcome",
    "AdaptPipeline",
]

_IN_GROUP: ContextVar[bool] = ContextVar("adapt_in_group", default=False)
"""Set in a refinement group's task (and the tasks it starts, which copy its context)."""


class _StageCalls:
    """The model pool as the stages see it, counting the calls asked from inside refinement
    groups: scoring and refinement overlap, so the pool's running total cannot split them."""

    def __init__(self, pool: ModelPool) -> None:
        self._pool = pool
        self.refinement = 0
        # Asked for on every step: bound once, not looked up through __getattr__ each time.
        self.request_key = pool.request_key
        self.uncache = pool.uncache

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    def complete(self, *args: Any, **kwargs: Any) -> Awaitable[Any]:
        # The pool's own coroutine, counted when it is asked for (``ask`` awaits it at once).
        if _IN_GROUP.get():
            self.refinement += 1
        return self._pool.complete(*args, **kwargs)


_GroupJob = tuple[str, int, str, list[Sample], Retriever]
"""One refinement group's chains in one mode: (target, repeat, mode, seeds, retriever)."""


def _control_first(mode: str) -> int:
    return 0 if mode == "control" else 1


TYPICAL_OUTPUT_TOKENS: dict[str, int] = {
    "adapt.miner": 60,
    "adapt.category_judge": 80,
    "adapt.image_examiner": 40,
    "adapt.instruction": 120,
    "adapt.narrator": 60,
    "adapt.answer": 350,
    "adapt.reference": 400,
    "adapt.reference_judge": 40,
    "adapt.score": 200,
    "adapt.refine": 80,
    "adapt.check": 50,
}
"""Output tokens a real model typically writes per Adapt role (the dry run's floor)."""


@dataclass
class AdaptOutcome:
    """What one Adapt run produced: the taxonomy, one record per original answer, one per
    refinement chain, and what is left for a re-run."""

    taxonomy: list[dict[str, Any]] = field(default_factory=list)
    taxonomy_version: str = ""
    decisions: list[dict[str, Any]] = field(default_factory=list)
    memes: int = 0
    assigned: int = 0
    originals: list[dict[str, Any]] = field(default_factory=list)
    chains: list[dict[str, Any]] = field(default_factory=list)
    pending: int = 0
    """Steps a model failure left undone (a re-run retries them)."""
    flagged: list[dict[str, Any]] = field(default_factory=list)
    """Memes whose erasure masked more than ``erase_max_mask`` (one record each): finished,
    never scored or refined, never pending."""
    flagged_items: int = 0
    """(target, meme, category, repeat) originals not scored because their meme was flagged."""
    stage_calls: dict[str, int] = field(default_factory=dict)
    """Model calls (cache hits included) made by each stage in this run."""
    stopped: str | None = None


class AdaptPipeline:
    """Runs Adapt over a set of memes with one model pool and one run store."""

    def __init__(
        self,
        cfg: RunConfig,
        memes: Sequence[Meme],
        pool: ModelPool,
        store: RunStore,
        progress: StageProgress | None = None,
        on_image: Callable[[str, str], None] | None = None,
        *,
        dry_run: bool = False,
    ) -> None:
        if cfg.adapt is None:
            raise ConfigError("config: 'adapt' section is missing")
        self._calls = _StageCalls(pool)
        self.ctx = AdaptContext(
            cfg,
            cast("ModelPool", self._calls),
            store,
            progress or StageProgress(enabled=False),
            on_image,
            dry_run=dry_run,
        )
        self.memes = list(memes)
        load_retrieval(cfg.adapt)

    async def run(self) -> AdaptOutcome:
        """The whole method; a budget stop returns what was done with ``stopped`` set."""
        out = AdaptOutcome(memes=len(self.memes))
        check_refine_images(self.ctx, self.memes)  # refused before any call
        try:
            await self._run(out)
        except BudgetExceeded as e:
            out.stopped = str(e)
        return out

    def _mark(self, out: AdaptOutcome, stage: str, *, less: int = 0) -> None:
        """Record the calls since the last mark as ``stage``'s (less ``less``, counted apart)."""
        total = int(sum(u.get("calls", 0) for u in self.ctx.pool.usage().values()))
        out.stage_calls[stage] = total - sum(out.stage_calls.values()) - less

    async def _run(self, out: AdaptOutcome) -> None:
        ctx, acfg = self.ctx, self.ctx.acfg
        mining = await mine(ctx, self.memes)
        self._mark(out, "mining")
        out.taxonomy = [c.__dict__ for c in mining.taxonomy]
        out.taxonomy_version = mining.version
        out.decisions = mining.decisions
        out.pending += mining.incomplete
        cats = {c.name: c for c in mining.taxonomy}
        by_uid = {m.uid: m for m in self.memes}
        items = [
            (by_uid[uid], cats[name])
            for uid in sorted(mining.assignments)
            for name in mining.assignments[uid]
        ]
        out.assigned = len(items)

        ctx.progress.stage("misbeliefs", len(items))
        beliefs: dict[tuple[str, str], str] = {}
        async for (m, c), mb in capped_map(lambda it: misbelief(ctx, *it), items, acfg.window):
            if mb is not None:
                beliefs[(m.uid, c.name)] = mb
        usable = [(m, c, beliefs[(m.uid, c.name)]) for m, c in items if (m.uid, c.name) in beliefs]
        self._mark(out, "misbeliefs")

        ctx.progress.stage("references", len(usable))
        # Two references per item: on the image the loop scores the meme on (its rewrites' image:
        # text-erased by default) and, for the "original image" figure, on its own image.
        refs: dict[tuple[str, str], dict[str, Any] | None] = {}
        loop_refs: dict[tuple[str, str], dict[str, Any] | None] = {}
        shown: dict[str, tuple[ImagePart | None, dict[str, Any]] | EraseFlagged | None] = {}

        async def ref_one(
            it: tuple[Meme, Category, str],
        ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
            m, c, mb = it
            if m.uid not in shown:
                shown[m.uid] = await loop_image(ctx, m, m.text)
            got = shown[m.uid]
            loop_ref = None
            if isinstance(got, EraseFlagged):  # never scored: no reference is needed
                ctx.progress.advance("references")
                return None, None
            # The two references are independent: asked side by side.
            loop_job = (
                reference(ctx, f"{m.uid}|loop", m.text, got[0], c, mb) if got is not None else None
            )
            own_job = (
                reference(ctx, m.uid, m.text, ctx.image(m), c, mb)
                if acfg.original_image_score
                else None
            )
            loop_ref, own = await both(loop_job, own_job)
            ctx.progress.advance("references")
            return loop_ref, own

        async for (m, c, _), (loop_ref, own) in capped_map(ref_one, usable, acfg.window):
            loop_refs[(m.uid, c.name)] = loop_ref
            refs[(m.uid, c.name)] = own

        self._mark(out, "references")
        jobs = [
            (r, t, m, c, mb)
            for r in range(acfg.repeats)
            for t in acfg.targets
            for m, c, mb in usable
        ]
        ctx.progress.stage("scoring", len(jobs))

        async def score_one(
            job: tuple[int, str, Meme, Category, str],
        ) -> dict[str, Any] | EraseFlagged | None:
            r, t, m, c, _ = job
            got = shown.get(m.uid)
            if got is None:  # the erasure failed (on record): a re-run retries it
                return None
            if isinstance(got, EraseFlagged):  # finished: never scored on a flagged erasure
                ctx.progress.advance("scoring")
                return got
            image, image_rec = got
            own_image = ctx.image(m) if acfg.original_image_score else None
            # The loop's s (the original text on the image its rewrites are shown with) and the
            # original-image figure are independent: asked side by side.
            sc, own = await both(
                answer_and_score(
                    ctx, t, m.uid, m.text, image, c, loop_refs.get((m.uid, c.name)), r, tag="loop"
                ),
                answer_and_score(ctx, t, m.uid, m.text, own_image, c, refs.get((m.uid, c.name)), r)
                if acfg.original_image_score
                else None,
            )
            if sc is None:
                return None
            rec: dict[str, Any] = {**sc.record(), "image": image_rec}
            if acfg.original_image_score:
                if own is None:
                    return None
                rec["original_image"] = {
                    **own.record(),
                    "sha256": own_image.sha256 if own_image is not None else None,
                }
            ctx.progress.advance("scoring")
            return rec

        modes = MODES if acfg.control else MODES[:1]
        # The memes a seed may be drawn from: the category's, the same for every target.
        candidates: dict[str, list[str]] = {}
        for m, c, _ in usable:
            candidates.setdefault(c.name, []).append(m.uid)
        samples: dict[tuple[str, str, int], list[Sample]] = {}

        def group_jobs(key: tuple[str, str, int], retriever: Retriever) -> list[_GroupJob]:
            t, cname, r = key
            seeds = choose_seeds(ctx, t, cname, r, retriever.samples, candidates.get(cname))
            # The control hops at every step, so its chains run longest: started first, they
            # do not leave the window's tail to one long group (the order changes no result).
            return [(t, r, mode, seeds, retriever) for mode in sorted(modes, key=_control_first)]

        def pool_of(key: tuple[str, str, int]) -> list[Sample]:
            # Completion order is the endpoint's (latency, concurrency): retrieval ties and the
            # seed draw must not depend on it, or a run is not reproducible from its config.
            return sorted(samples[key], key=lambda s: (s.meme.uid, s.category.name))

        async def chains_of(job: _GroupJob) -> list[dict[str, Any] | None]:
            t, r, mode, seeds, retriever = job
            return await refine_group(ctx, t, r, mode, seeds, retriever)

        def take_chains(chs: list[dict[str, Any] | None]) -> None:
            for ch in chs:
                if ch is None:
                    out.pending += 1
                else:
                    out.chains.append(ch)

        # With BM25 retrieval a group (target, category, repeat) needs only its own originals
        # scored: its chains start as soon as its last original is, while other groups are
        # still being scored, one window shared by score jobs and groups. Embeddings rank over
        # every group's misbeliefs, so they wait for all.
        overlap = acfg.retrieval != "embeddings"
        slots = asyncio.Semaphore(acfg.window)
        stops: list[BudgetExceeded] = []
        left: Counter[tuple[str, str, int]] = Counter((t, c.name, r) for r, t, _, c, _ in jobs)
        running: list[asyncio.Future[list[dict[str, Any] | None] | None]] = []
        planned = 0

        async def windowed_group(job: _GroupJob) -> list[dict[str, Any] | None] | None:
            _IN_GROUP.set(True)  # this task's own context
            async with slots:
                if stops:  # the spend cap: no group starts after it
                    return None
                try:
                    return await chains_of(job)
                except BudgetExceeded as e:
                    stops.append(e)
                    return None

        async def windowed_score(
            job: tuple[int, str, Meme, Category, str],
        ) -> dict[str, Any] | EraseFlagged | None:
            async with slots:
                return await score_one(job)

        def start_group(key: tuple[str, str, int]) -> None:
            nonlocal planned
            if key not in samples:
                return
            new = group_jobs(key, Retriever(pool_of(key)))
            planned += sum(len(j[3]) for j in new)
            ctx.progress.stage("refinement", planned)
            running.extend(asyncio.ensure_future(windowed_group(j)) for j in new)

        try:
            try:
                async for (r, t, m, c, mb), rec in capped_map(
                    windowed_score if overlap else score_one,
                    jobs,
                    acfg.window,
                    stopped=lambda: stops[0] if stops else None,
                ):
                    key = (t, c.name, r)
                    left[key] -= 1
                    if rec is None:
                        out.pending += 1
                    elif isinstance(rec, EraseFlagged):
                        out.flagged_items += 1
                    else:
                        out.originals.append(
                            {"target": t, "category": c.name, "meme": m.uid, "repeat": r, **rec}
                        )
                        got = shown.get(m.uid)
                        if rec["outcome"] == "scored" and isinstance(got, tuple):
                            samples.setdefault(key, []).append(
                                Sample(m, c, mb, rec["score"], got[0])
                            )
                    if overlap and not left[key]:
                        start_group(key)
            except BudgetExceeded as e:
                stops.append(e)
            for fut in running:  # groups in flight run to their end, as any stage's jobs
                chs = await fut
                if chs is not None:
                    take_chains(chs)
        except BaseException:
            for fut in running:
                fut.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise
        out.originals.sort(key=lambda o: (o["target"], o["category"], o["meme"], o["repeat"]))
        out.flagged = sorted(
            (f.record() for f in shown.values() if isinstance(f, EraseFlagged)),
            key=lambda f: str(f["meme"]),
        )
        self._mark(out, "scoring", less=self._calls.refinement)
        if stops:
            raise stops[0]

        if not overlap:
            texts = [s.misbelief for group in samples.values() for s in group]
            vectors, _ = await misbelief_vectors(ctx, texts)
            self._mark(out, "embeddings")
            todo: list[_GroupJob] = []
            for key in sorted(samples):
                pool = pool_of(key)
                if all(s.misbelief in vectors for s in pool):
                    todo += group_jobs(key, EmbeddingRetriever(pool, vectors))
                else:  # an embedding failed (on record): this group's chains wait for a re-run
                    out.pending += seed_count(acfg, len(pool)) * len(modes)
            ctx.progress.stage("refinement", sum(len(j[3]) for j in todo))
            # A group's chains walk in order (each sees what the earlier ones scored, and hops
            # where they did not); groups walk side by side, as many as the window says.
            async for _, chs in capped_map(chains_of, todo, acfg.window):
                take_chains(chs)
        out.chains.sort(
            key=lambda c: (c["target"], c["category"], c["repeat"], c["mode"], c["seed"])
        )
        if overlap:
            out.stage_calls["refinement"] = self._calls.refinement
        else:
            self._mark(out, "refinement")
