"""Running a method from the command line, the same for every method: ``CONFIG [--out DIR]
[--dry-run] [--max-cost USD]`` over the run lifecycle (``memearena.engine.lifecycle``).

Exit codes: 0 complete, 1 incomplete or nothing usable, 2 bad input (nothing was run),
3 the spend cap was reached (``memearena.engine.status``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console

from memearena.errors import MemearenaError
from memearena.report.safe import console_safe

if TYPE_CHECKING:
    from memearena.config import RunConfig

__all__ = [
    "DryRunOpt",
    "MaxCostOpt",
    "NoProgressOpt",
    "OutOpt",
    "console",
    "err_console",
    "one_line_errors",
    "print_error",
    "run_or_plan",
]

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


# Piped output (logs, CI) gets a fixed width: the summary tables fit 80 columns.
console = Console() if sys.stdout.isatty() else Console(width=80)
err_console = Console(stderr=True)

F = TypeVar("F", bound=Callable[..., Any])


def print_error(e: BaseException) -> None:
    """One line on stderr: the message may hold untrusted text (names, replies), shown inert."""
    err_console.print(f"[red]error:[/red] {console_safe(e)}", highlight=False, soft_wrap=True)


def one_line_errors(fn: F) -> F:
    """Print a MemearenaError as one line and exit 2 (tracebacks are for bugs only); numeric
    options are range-checked first."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            from memearena.config import check_option_ranges  # lazy: fast --help

            check_option_ranges(kwargs)
            return fn(*args, **kwargs)
        except MemearenaError as e:
            print_error(e)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            err_console.print("interrupted: re-run the same command to resume")
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


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
