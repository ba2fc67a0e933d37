"""The Adapt driver: mining -> misbeliefs -> references -> scoring (per repeat) -> refinement.

Every stage streams its jobs through ``bounded_map`` (a bounded window in flight) and every
model call is an idempotent step in ``run.db``: a re-run resumes, a killed run loses only the
calls in flight. The records the analysis needs (one per scored original, one per refinement
chain) are rebuilt from the stored steps on every run, so they always match the current config.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from memearena.config import RunConfig
from memearena.data import Meme
from memearena.engine.progress import StageProgress
from memearena.engine.steps import bounded_map
from memearena.errors import BudgetExceeded, ConfigError
from memearena.methods.adapt.common import AdaptContext, Category
from memearena.methods.adapt.mining import mine
from memearena.methods.adapt.misbelief import misbelief
from memearena.methods.adapt.reference import reference
from memearena.methods.adapt.refine import (
    MODES,
    EmbeddingRetriever,
    Retriever,
    Sample,
    choose_seeds,
    misbelief_vectors,
    refine_chain,
)
from memearena.methods.adapt.scoring import answer_and_score
from memearena.models import ModelPool, ResponseCache
from memearena.store import RunStore

__all__ = [
    "TYPICAL_OUTPUT_TOKENS",
    "AdaptOutcome",
    "AdaptPipeline",
    "AdaptRunResult",
    "plan_adapt",
    "run_adapt",
]

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
    ) -> None:
        if cfg.adapt is None:
            raise ConfigError("config: 'adapt' section is missing")
        self.ctx = AdaptContext(
            cfg, pool, store, progress or StageProgress(enabled=False), on_image
        )
        self.memes = list(memes)

    async def run(self) -> AdaptOutcome:
        """The whole method; a budget stop returns what was done with ``stopped`` set."""
        out = AdaptOutcome(memes=len(self.memes))
        try:
            await self._run(out)
        except BudgetExceeded as e:
            out.stopped = str(e)
        return out

    def _mark(self, out: AdaptOutcome, stage: str) -> None:
        total = int(sum(u.get("calls", 0) for u in self.ctx.pool.usage().values()))
        out.stage_calls[stage] = total - sum(out.stage_calls.values())

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
        async for (m, c), mb in bounded_map(lambda it: misbelief(ctx, *it), items, acfg.window):
            if mb is not None:
                beliefs[(m.uid, c.name)] = mb
        usable = [(m, c, beliefs[(m.uid, c.name)]) for m, c in items if (m.uid, c.name) in beliefs]
        self._mark(out, "misbeliefs")

        ctx.progress.stage("references", len(usable))
        refs: dict[tuple[str, str], dict[str, Any] | None] = {}

        async def ref_one(it: tuple[Meme, Category, str]) -> dict[str, Any] | None:
            m, c, mb = it
            r = await reference(ctx, m.uid, m.text, ctx.image(m), c, mb)
            ctx.progress.advance("references")
            return r

        async for (m, c, _), got in bounded_map(ref_one, usable, acfg.window):
            refs[(m.uid, c.name)] = got

        self._mark(out, "references")
        jobs = [
            (r, t, m, c, mb)
            for r in range(acfg.repeats)
            for t in acfg.targets
            for m, c, mb in usable
        ]
        ctx.progress.stage("scoring", len(jobs))

        async def score_one(job: tuple[int, str, Meme, Category, str]) -> dict[str, Any] | None:
            r, t, m, c, _ = job
            sc = await answer_and_score(
                ctx, t, m.uid, m.text, ctx.image(m), c, refs.get((m.uid, c.name)), r
            )
            ctx.progress.advance("scoring")
            return sc.record() if sc is not None else None

        samples: dict[tuple[str, str, int], list[Sample]] = {}
        async for (r, t, m, c, mb), rec in bounded_map(score_one, jobs, acfg.window):
            if rec is None:
                out.pending += 1
                continue
            out.originals.append(
                {"target": t, "category": c.name, "meme": m.uid, "repeat": r, **rec}
            )
            if rec["outcome"] == "scored":
                samples.setdefault((t, c.name, r), []).append(Sample(m, c, mb, rec["score"]))
        out.originals.sort(key=lambda o: (o["target"], o["category"], o["meme"], o["repeat"]))
        self._mark(out, "scoring")

        modes = MODES if acfg.control else MODES[:1]
        vectors: dict[str, list[float]] | None = None
        if acfg.retrieval == "embeddings":
            texts = [s.misbelief for group in samples.values() for s in group]
            vectors, _ = await misbelief_vectors(ctx, texts)
            self._mark(out, "embeddings")
        chain_jobs: list[tuple[str, int, str, Sample, Retriever]] = []
        for (t, cname, r), pool in sorted(samples.items()):
            retriever: Retriever
            if vectors is None:
                retriever = Retriever(pool)
            elif all(s.misbelief in vectors for s in pool):
                retriever = EmbeddingRetriever(pool, vectors)
            else:  # an embedding failed (on record): this group's chains wait for a re-run
                n = len(pool) if acfg.seed_samples is None else min(acfg.seed_samples, len(pool))
                out.pending += n * len(modes)
                continue
            for seed in choose_seeds(ctx, t, cname, r, pool):
                chain_jobs.extend((t, r, mode, seed, retriever) for mode in modes)
        ctx.progress.stage("refinement", len(chain_jobs))

        async def chain_one(job: tuple[str, int, str, Sample, Retriever]) -> dict[str, Any] | None:
            return await refine_chain(ctx, *job)

        async for _, ch in bounded_map(chain_one, chain_jobs, acfg.window):
            if ch is None:
                out.pending += 1
            else:
                out.chains.append(ch)
        out.chains.sort(
            key=lambda c: (c["target"], c["category"], c["repeat"], c["mode"], c["seed"])
        )
        self._mark(out, "refinement")


@dataclass
class AdaptRunResult:
    """Where a finished (or budget-stopped) Adapt run left its outputs."""

    run_dir: Path
    outcome: AdaptOutcome
    section: dict[str, Any]
    new_calls: int
    cost_usd: float
    stopped: str | None


def _open(
    cfg: RunConfig,
    memes: Sequence[Meme],
    store: RunStore | None,
    cache_path: Path | None,
    max_cost: float | None,
) -> tuple[ModelPool, Callable[[str, str], None]]:
    """The model pool (with the simulated world, its Adapt switches set) and the image hook."""
    from memearena.runner import sim_world

    acfg = cfg.adapt
    assert acfg is not None
    world = sim_world(cfg, memes)
    world.adapt.null_world = acfg.sim.null_world
    # The null world answers the same requests differently: its replies must never be cached
    # alongside (or replayed as) the ordinary world's.
    use_cache = cache_path is not None and cfg.cache and not acfg.sim.null_world
    cache = ResponseCache(cache_path) if use_cache and cache_path is not None else None
    pool = ModelPool(cfg.models, store=store, cache=cache, max_cost=max_cost, responder=world)
    return pool, world.adapt.register_image


def run_adapt(
    cfg: RunConfig,
    run_dir: str | Path,
    *,
    max_cost: float | None = None,
    cache_path: Path | None = None,
    console: Console | None = None,
    show_progress: bool = True,
    bootstrap: int | None = None,
) -> AdaptRunResult:
    """Run (or resume) Adapt in ``run_dir``; add its section to ``leaderboard.json``, write the
    report, the lineage (``adapt_chains.jsonl``) and the human-labelling export."""
    from memearena.methods.adapt.analysis import adapt_section
    from memearena.methods.adapt.view import write_adapt_outputs
    from memearena.runner import load_memes, snapshot_config

    if cfg.adapt is None:
        raise ConfigError("config: 'adapt' section is missing")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    store = RunStore(run_dir / "run.db")
    try:
        snapshot_config(cfg, store)
        memes = load_memes(cfg, store).memes
        calls_before = store.last_call_id()
        pool, on_image = _open(cfg, memes, store, cache_path or run_dir / "cache.sqlite", max_cost)

        async def go() -> AdaptOutcome:
            try:
                with StageProgress(console, enabled=show_progress) as progress:
                    pipe = AdaptPipeline(cfg, memes, pool, store, progress, on_image)
                    return await pipe.run()
            finally:
                await pool.aclose()

        outcome = asyncio.run(go())
        section = adapt_section(cfg, outcome, bootstrap=bootstrap)
        write_adapt_outputs(run_dir, cfg, outcome, section)
        new_calls = store.count_new_calls(calls_before)  # counted in SQL, not loaded
        return AdaptRunResult(
            run_dir, outcome, section, new_calls, store.total_cost(), outcome.stopped
        )
    finally:
        store.close()


def plan_adapt(cfg: RunConfig) -> Any:
    """Dry run: Adapt with every model stood in for by a simulated one of the same name (no
    endpoint is called). Counts follow the simulated run's path (refinement chains stop where
    simulated scores stop them), so they are an estimate; tokens use typical reply lengths."""
    from memearena.runner import load_memes, planned_from_calls, stand_in_config

    sim_cfg = stand_in_config(cfg)
    with tempfile.TemporaryDirectory(prefix="memearena-plan-") as tmp:
        store = RunStore(Path(tmp) / "run.db")
        try:
            memes = load_memes(sim_cfg).memes
            pool, on_image = _open(sim_cfg, memes, store, None, None)

            async def go() -> None:
                try:
                    await AdaptPipeline(sim_cfg, memes, pool, store, None, on_image).run()
                finally:
                    await pool.aclose()

            asyncio.run(go())
            return planned_from_calls(cfg, store.iter_calls(), TYPICAL_OUTPUT_TOKENS)
        finally:
            store.close()
