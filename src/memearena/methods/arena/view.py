"""Rendering of the Arena: its console summary and its part of the report. Reads only the
``arena`` and ``simulated`` keys of ``leaderboard.json``; every name goes through
``console_safe``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console

from memearena.report.console import (
    fmt_estimate,
    judge_tables,
    leaderboard_table,
    print_sensitivity,
    print_settings,
)
from memearena.report.safe import console_safe

__all__ = ["print_arena_summary"]

_fmt = fmt_estimate


def print_arena_summary(console: Console, board: Mapping[str, Any]) -> None:
    """Leaderboard, sensitivity, judge bias, panel agreement, settings and the simulated check
    (read from the ``arena`` and ``simulated`` keys of ``leaderboard.json``)."""
    arena = board.get("arena", {})
    if arena.get("overall"):
        unit = console_safe(arena.get("bootstrap_unit", "battle"))
        console.print(
            leaderboard_table(
                f"Arena — setting {console_safe(arena['setting'])}: "
                f"{arena['battles']:,} battles ranked (intervals resample {unit}s)",
                arena["overall"],
                arena.get("win_rates"),
            )
        )
        own = arena.get("self_judged_battles")
        if own:
            # The run's closing line counts every resolved battle: say how the two add up.
            policy = arena.get("self_judging")
            ranked = arena["battles"] + (own if policy == "exclude" else 0)
            console.print(
                f"{own:,} battles in which a judge compared its own family's model: "
                f"self_judging = {console_safe(policy)} ({ranked:,} resolved in all)"
            )
        print_sensitivity(console, arena)
        for table in judge_tables(arena.get("judges", []), console.width, unit=unit):
            console.print(table)
        alpha = (arena.get("panel") or {}).get("krippendorff_alpha")
        if alpha:
            console.print(f"Panel agreement: Krippendorff's α = {_fmt(alpha)}")
    settings = arena.get("settings")
    if settings:
        print_settings(console, settings, arena.get("settings_comparison") or {})
    sim = board.get("simulated")
    if sim:
        tau = (sim.get("leaderboard_vs_truth") or {}).get("kendall_tau") or sim["kendall_tau"]
        console.print(
            "[yellow]simulated targets[/yellow]: true order "
            f"{' > '.join(console_safe(m) for m in sim['true_ranking'])}; "
            f"recovered Kendall τ = {_fmt(tau)}"
        )
