"""Helpers of the Adapt tests: a small demo config, a scripted world, a direct pipeline run."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memearena.config import DatasetConfig, RunConfig
from memearena.engine.pool import sim_world
from memearena.engine.rundir import load_memes
from memearena.methods.adapt.config import AdaptConfig
from memearena.methods.adapt.stages import AdaptOutcome, AdaptPipeline
from memearena.models import ModelPool
from memearena.models.types import GenParams, Message, TextPart
from memearena.sim.catalogue import demo_models
from memearena.store import RunStore

Override = Callable[[str, str, Sequence[Message], GenParams], str | None]


def small_config(limit: int | None = 8, **adapt: Any) -> RunConfig:
    """Two simulated targets on the first ``limit`` demo memes (Race and Gender for 8)."""
    fields: dict[str, Any] = {
        "targets": ["sim-aurora", "sim-ember"],
        "miner": "sim-judge-falcon",
        "text_judge": "sim-judge-falcon",
        "image_examiner": "sim-judge-falcon",
        "instruction_writer": "sim-judge-falcon",
        "narrator": "sim-judge-falcon",
        "reference_model": "sim-judge-falcon",
        "reference_judge": "sim-judge-harbor",
        "scorers": ["sim-judge-harbor"],
        "refiner": "sim-judge-grove",
        "checker": "sim-judge-falcon",
        "repeats": 1,
        "reference_candidates": 2,
        "seed_samples": 1,
        "steps": 3,
        "bootstrap": 100,
        "window": 8,
        **adapt,
    }
    return RunConfig(
        run="t",
        models=dict(demo_models()),
        data=[DatasetConfig(format="demo", limit=limit)],
        cache=False,
        adapt=AdaptConfig.model_validate(fields),
    )


def prompt_text(messages: Sequence[Message]) -> str:
    return "\n".join(
        p.text for m in messages if m.role == "user" for p in m.content if isinstance(p, TextPart)
    )


def tag(text: str, name: str) -> str | None:
    m = re.search(f"<{name}>\\n?(.*?)\\n?</{name}>", text, re.S)
    return m.group(1).strip() if m else None


class Scripted:
    """The simulated world, with some roles answered by test functions (None: the world)."""

    def __init__(self, world: Any, overrides: dict[str, Override]) -> None:
        self.world = world
        self.overrides = overrides
        self.calls: list[tuple[str, str]] = []

    def respond(self, model: str, role: str, messages: Sequence[Message], params: GenParams) -> str:
        self.calls.append((model, role))
        fn = self.overrides.get(role)
        out = fn(model, role, messages, params) if fn else None
        return out if out is not None else self.world.respond(model, role, messages, params)


def run_pipeline(
    cfg: RunConfig, run_dir: Path, overrides: dict[str, Override] | None = None
) -> tuple[AdaptOutcome, RunStore, Scripted]:
    """Run Adapt directly (no cache) with a scripted world; the store is left open."""
    run_dir.mkdir(parents=True, exist_ok=True)
    store = RunStore(run_dir / "run.db")
    memes = load_memes(cfg, store).memes
    world = sim_world(cfg, memes)
    assert cfg.adapt is not None
    world.adapt.null_world = cfg.adapt.sim.null_world
    scripted = Scripted(world, overrides or {})
    pool = ModelPool(cfg.models, store=store, cache=None, responder=scripted)

    async def go() -> AdaptOutcome:
        try:
            return await AdaptPipeline(
                cfg, memes, pool, store, on_image=world.adapt.register_image
            ).run()
        finally:
            await pool.aclose()

    return asyncio.run(go()), store, scripted


def served_config(base_url: str, limit: int | None = 8, **adapt: Any) -> RunConfig:
    """``small_config`` with every model an endpoint of the simulated server at ``base_url``
    (the pipeline then tells the world nothing: it sees only what was sent)."""
    cfg = small_config(limit, **adapt)
    models = {
        name: {
            "provider": "openai",
            "base_url": base_url,
            "model": name,
            "family": m.family,
            "max_concurrency": 8,
            "max_retries": 2,
        }
        for name, m in demo_models().items()
    }
    return RunConfig.model_validate({**cfg.model_dump(exclude={"models"}), "models": models})


class ServedRecord:
    """What one request carried and got back, as the server saw it."""

    def __init__(
        self, model: str, role: str, messages: Sequence[Message], params: GenParams, reply: str
    ) -> None:
        from memearena.models.types import ImagePart

        text = prompt_text(messages)
        self.model = model
        self.role = role
        self.meme_text = tag(text, "meme_text")
        self.answer = tag(text, "answer")
        self.images = [p.sha256 for m in messages for p in m.content if isinstance(p, ImagePart)]
        self.seed = params.seed
        self.reply = reply


class ServedRecorder:
    """The simulated world behind the server, recording every request and reply."""

    def __init__(self, world: Any) -> None:
        self.world = world
        self.requests: list[ServedRecord] = []

    def respond(self, model: str, role: str, messages: Sequence[Message], params: GenParams) -> str:
        reply = str(self.world.respond(model, role, messages, params))
        self.requests.append(ServedRecord(model, role, messages, params, reply))
        return reply
