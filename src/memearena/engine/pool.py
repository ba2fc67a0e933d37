"""The model pool of a run: every model behind the response cache, spend cap, limits, retries
and the batch path, with the simulated world answering the ``provider: sim`` models."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from memearena.config import RunConfig, SimModelConfig
from memearena.data import Meme, demo_annotations
from memearena.errors import ConfigError
from memearena.models import ModelPool, ResponseCache
from memearena.models.backends import SimResponder
from memearena.sim.world import SimWorld
from memearena.store import RunStore

__all__ = ["CACHE_FILE", "check_keys", "open_pool", "sim_world"]

CACHE_FILE = "cache.sqlite"
"""The response cache's file (in the output root, shared by the runs under it)."""


def sim_world(cfg: RunConfig, memes: Sequence[Meme]) -> SimWorld:
    """The simulated world for the config's ``provider: sim`` models (labelled simulated)."""
    sims = {n: m for n, m in cfg.models.items() if isinstance(m, SimModelConfig)}
    return SimWorld(sims, demo_annotations(memes), seed=cfg.seed)


def open_pool(
    cfg: RunConfig,
    world: SimResponder,
    store: RunStore | None,
    *,
    cache_path: Path | None,
    max_cost: float | None,
) -> ModelPool:
    """The model pool of a run: every configured model behind cache, limits and retries."""
    cache = ResponseCache(cache_path) if (cache_path is not None and cfg.cache) else None
    return ModelPool(
        cfg.models,
        store=store,
        cache=cache,
        max_cost=max_cost,
        responder=world,
    )


def check_keys(cfg: RunConfig, models: Iterable[str]) -> None:
    """Every model the run needs has its API key in the environment — checked before any call,
    so that a missing key never leaves the other models' calls paid for an unusable run."""
    for name in dict.fromkeys(models):
        env = getattr(cfg.models.get(name), "api_key_env", None)
        if env and not os.environ.get(env):
            raise ConfigError(
                f"models.{name}.api_key_env: environment variable {env} is not set (it must hold "
                f"the API key of model {name!r}); nothing was called"
            )
