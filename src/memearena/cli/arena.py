"""``memearena arena CONFIG [--compare-settings]``: the Arena's command (registered by the main
app for the ``arena`` method, as ``memearena.cli.<method>``'s ``<method>_command``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from memearena.cli.run import (
    DryRunOpt,
    MaxCostOpt,
    NoProgressOpt,
    OutOpt,
    console,
    err_console,
    one_line_errors,
)

__all__ = ["arena_command"]


@one_line_errors
def arena_command(
    config: Annotated[Path, typer.Argument(help="Run config (YAML).")],
    out: OutOpt = None,
    dry_run: DryRunOpt = False,
    max_cost: MaxCostOpt = None,
    compare_settings: Annotated[
        bool,
        typer.Option(
            "--compare-settings",
            help="Judge the same answers under every guideline setting; compare judge NDCG.",
        ),
    ] = False,
    no_progress: NoProgressOpt = False,
) -> None:
    """Run (or resume) the Arena: contexts, answers, guideline fusion, pairwise battles."""
    from memearena.cli.run import run_or_plan

    run_or_plan(
        "arena",
        config,
        out=out,
        dry_run=dry_run,
        max_cost=max_cost,
        no_progress=no_progress,
        console=console,
        err_console=err_console,
        options=lambda cfg: {"settings": _settings(cfg.arena, compare_settings)},
    )


def _settings(acfg: Any, compare: bool) -> list[str]:
    if not compare:
        return [acfg.setting]
    chosen = [acfg.setting, *(s for s in ("memearena", "none", "self") if s != acfg.setting)]
    if acfg.human_guidelines is not None and "human" not in chosen:
        chosen.append("human")
    return chosen
