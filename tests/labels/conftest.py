"""A small Arena run on the bundled demo memes (simulated models), once a session."""

from __future__ import annotations

import io
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def small_arena(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's Arena on twelve memes and three targets, no bootstrap: battles and guideline
    rounds to label."""
    from rich.console import Console

    from memearena.config import DatasetConfig
    from memearena.demo import demo_config
    from memearena.engine.lifecycle import run_method

    cfg = demo_config(bootstrap=0)
    assert cfg.arena is not None
    # Twelve memes: the bootstrap resamples memes, and a handful of them covers poorly.
    arena = cfg.arena.model_copy(
        update={"fusion_rounds": len(cfg.arena.judges), "targets": cfg.arena.targets[:3]}
    )
    cfg = cfg.model_copy(update={"data": [DatasetConfig(format="demo", limit=12)], "arena": arena})
    run = tmp_path_factory.mktemp("labels") / "arena"
    run_method("arena", cfg, run, console=Console(file=io.StringIO()), show_progress=False)
    return run
