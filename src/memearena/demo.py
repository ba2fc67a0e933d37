"""``memearena demo``: the Arena on the bundled demo memes with simulated models, offline."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from memearena.config import ArenaConfig, DatasetConfig, RunConfig
from memearena.runner import ArenaRunResult, run_arena
from memearena.sim.catalogue import DEMO_CONTEXT_MODEL, DEMO_JUDGES, DEMO_TARGETS, demo_models


def demo_config(*, seed: int = 0, bootstrap: int = 1000) -> RunConfig:
    """The demo run: simulated targets of known skill, a simulated panel with one
    self-preferring judge, the bundled synthetic memes."""
    return RunConfig(
        run="demo",
        seed=seed,
        models=dict(demo_models()),
        data=[DatasetConfig(format="demo")],
        arena=ArenaConfig(
            targets=list(DEMO_TARGETS),
            judges=list(DEMO_JUDGES),
            context_model=DEMO_CONTEXT_MODEL,
            bootstrap=bootstrap,
        ),
    )


def run_demo(
    run_dir: Path, *, console: Console | None = None, show_progress: bool = True
) -> ArenaRunResult:
    """Run (or resume) the demo in ``run_dir`` and print its summary."""
    from memearena.report.console import print_arena_summary

    console = console or Console()
    console.print(
        "[bold]memearena demo[/bold] — Arena on the bundled synthetic memes with "
        "[yellow]simulated[/yellow] models (offline; not a result about real models)"
    )
    result = run_arena(demo_config(), run_dir, console=console, show_progress=show_progress)
    print_arena_summary(console, result)
    from memearena.pipelines.adapt.demo import run_adapt_demo

    run_adapt_demo(run_dir, console=console, show_progress=show_progress)
    return result
