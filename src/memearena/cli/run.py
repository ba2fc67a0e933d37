"""Running a method from the command line, the same for every method: ``CONFIG [--out DIR]
[--dry-run] [--max-cost USD]`` over the run lifecycle (``memearena.engine.lifecycle``).

Exit codes: 0 complete, 1 incomplete or nothing usable, 2 bad input (nothing was run),
3 the spend cap was reached (``memearena.engine.status``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from memearena.errors import MemearenaError

if TYPE_CHECKING:
    from memearena.config import RunConfig

__all__ = ["DryRunOpt", "MaxCostOpt", "NoProgressOpt", "OutOpt", "run_or_plan"]

OutOpt = Annotated[Path | None, typer.Option("--out", help="Output root (default ./runs).")]
DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Print planned calls, tokens and cost; call nothing.")
]
MaxCostOpt = Annotated[
    float | None, typer.Option("--max-cost", help="Stop cleanly before spending more USD.")
]
NoProgressOpt = Annotated[
    bool, typer.Option("--no-progress", help="No progress bars (the summary is still printed).")
]


def run_or_plan(
    method: str,
    config: Path,
    *,
    out: Path | None,
    dry_run: bool,
    max_cost: float | None,
    no_progress: bool,
    console: Console,
    err_console: Console,
    options: Callable[[RunConfig], dict[str, Any]] | None = None,
) -> None:
    """Load ``config``; print the plan (``--dry-run``) or run ``method`` and print its summary;
    exit with the run's code. ``options``: the method's options, read from the loaded config."""
    from memearena.config import check_wall_time, load_config
    from memearena.engine.lifecycle import plan_method, print_run_summary, run_method

    cfg = load_config(config)
    if getattr(cfg, method, None) is None:
        raise MemearenaError(f"{config}: {method}: section is missing")
    opts = options(cfg) if options is not None else {}
    if dry_run:
        from memearena.cli.models import warn_missing_keys
        from memearena.report.console import print_plan

        plan = plan_method(method, cfg, **opts)
        providers = {name: m.provider for name, m in cfg.models.items()}
        print_plan(console, cfg.run, plan.per_model, providers)
        check_wall_time(cfg, {m: row["calls"] for m, row in plan.per_model.items()})
        warn_missing_keys(cfg, err_console)
        return
    root = out or Path("runs")
    result = run_method(
        method,
        cfg,
        root / cfg.run,
        max_cost=max_cost,
        console=console,
        show_progress=not no_progress,
        cache_path=root / "cache.sqlite",
        **opts,
    )
    print_run_summary(console, result)
    if result.exit_code:
        raise typer.Exit(result.exit_code)
