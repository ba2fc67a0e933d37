"""``memearena demo``: the Arena on the bundled demo memes with simulated models, offline."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from memearena.config import ArenaConfig, DatasetConfig, RunConfig
from memearena.runner import ArenaRunResult, run_arena
from memearena.sim.catalogue import (
    DEMO_CONTEXT_MODEL,
    DEMO_JUDGES,
    DEMO_TARGETS,
    NULL_WORLD,
    demo_models,
)
from memearena.sim.judge_audit import DEMO_AUDIT_JUDGES, demo_audit_config


def demo_config(*, seed: int = 0, bootstrap: int = 1000, null_world: bool = False) -> RunConfig:
    """The demo run: simulated targets of known skill, a simulated panel with one
    self-preferring judge, the bundled synthetic memes. `null_world` sets every world parameter
    through which guidelines can matter to 0 (the null control: settings cannot differ)."""
    models = demo_models()
    if null_world:
        models = {k: v.model_copy(update=NULL_WORLD) for k, v in models.items()}
    return RunConfig(
        run="demo",
        seed=seed,
        models={**models, **{k: v.model_copy() for k, v in DEMO_AUDIT_JUDGES.items()}},
        data=[DatasetConfig(format="demo")],
        arena=ArenaConfig(
            targets=list(DEMO_TARGETS),
            judges=list(DEMO_JUDGES),
            context_model=DEMO_CONTEXT_MODEL,
            bootstrap=bootstrap,
        ),
        judge_audit=demo_audit_config(list(DEMO_JUDGES), bootstrap=bootstrap),
    )


def demo_run_dir(seed: int = 0, null_world: bool = False) -> Path:
    """Default run directory: one per world (seed, null control), so that a run never resumes
    from another world's artifacts."""
    name = "demo" if seed == 0 else f"demo-seed{seed}"
    return Path("runs") / (name + ("-null" if null_world else ""))


def run_demo(
    run_dir: Path,
    *,
    console: Console | None = None,
    show_progress: bool = True,
    seed: int = 0,
    null_world: bool = False,
    compare_settings: bool = False,
) -> ArenaRunResult:
    """Run (or resume) the demo in ``run_dir`` and print its summary; `seed` picks another
    simulated world, `null_world` its null control, `compare_settings` judges the same answers
    under every guideline setting."""
    from memearena.report.console import print_arena_summary

    console = console or Console()
    console.print(
        "[bold]memearena demo[/bold] — Arena on the bundled synthetic memes with "
        "[yellow]simulated[/yellow] models (offline; not a result about real models)"
    )
    from memearena.runner_judge_audit import run_demo_audit

    settings = ["memearena", "none", "self"] if compare_settings else None
    cfg = demo_config(seed=seed, null_world=null_world)
    # The audit runs first, so the Arena can warn about the panel judges it flags.
    cfg = run_demo_audit(cfg, Path(run_dir), console=console, show_progress=show_progress)
    result = run_arena(
        cfg,
        run_dir,
        console=console,
        show_progress=show_progress,
        settings=settings,
    )
    print_arena_summary(console, result)
    from memearena.methods.adapt.demo import run_adapt_demo

    run_adapt_demo(run_dir, console=console, show_progress=show_progress, seed=seed)
    return result
