"""``memearena profile DIR``: one profile per model across the methods a run directory holds,
and how far the methods agree (``memearena.engine.profile``).

Registered by the main app as ``app.command("profile")(profile_command)``. Every model and
method name shown comes from a config or a model: printed inert (``name_cell``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from memearena.report.safe import console_safe, name_cell

__all__ = ["estimate_text", "print_profile", "profile_command"]


def estimate_text(est: Any, digits: int = 2) -> str:
    """``value [low, high]``, ``value`` without an interval, ``–`` without a value."""
    if not isinstance(est, dict) or not isinstance(est.get("value"), int | float):
        return "–"
    v, lo, hi = est["value"], est.get("ci_low"), est.get("ci_high")
    if isinstance(lo, int | float) and isinstance(hi, int | float):
        return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"
    return f"{v:.{digits}f}"


def _rank(part: dict[str, Any]) -> str | None:
    if part.get("rank") is None:
        return None
    text = f"{part['rank']} of {part.get('ranked') or '?'}"
    rr = part.get("rank_range")
    if isinstance(rr, list) and len(rr) == 2:
        text += f" (its interval allows {rr[0]}–{rr[1]})"
    return text


def _model_table(entry: dict[str, Any]) -> Table:
    table = Table(
        title=name_cell(entry["model"]),
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )
    table.add_column("method", overflow="fold", max_width=18)
    table.add_column("figure", overflow="fold")
    table.add_column("value [95% CI]", overflow="fold")
    for part in entry["parts"]:
        title = name_cell(part["title"])
        rows: list[tuple[str, str]] = []
        rank = _rank(part)
        if rank is not None:
            rows.append(("rank", rank))
        rows += [(console_safe(f["figure"]), estimate_text(f)) for f in part["figures"]]
        if part["flags"]:
            rows.append(("flagged", console_safe(", ".join(part["flags"]))))
        rows += [("note", console_safe(n)) for n in part["notes"]]
        for i, (figure, value) in enumerate(rows):
            table.add_row(title if i == 0 else "", figure, value)
    return table


def _agreement_table(rows: list[dict[str, Any]], bootstrap: int) -> Table:
    table = Table(
        title="Agreement between the methods (Spearman ρ of their scores on shared models)",
        title_justify="left",
        caption=(
            f"95% percentile bootstrap intervals ({bootstrap:,} draws) over the unit named; "
            "ρ > 0: the methods order the models alike"
        ),
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )
    table.add_column("methods (score)", overflow="fold")
    table.add_column("models", justify="right")
    table.add_column("ρ [95% CI]", no_wrap=True)
    table.add_column("resampled", overflow="fold")
    table.add_column("where they disagree", overflow="fold")
    for r in rows:
        who = (
            f"{name_cell(r['a_title'])} ({console_safe(r['a_figure'])}) vs "
            f"{name_cell(r['b_title'])} ({console_safe(r['b_figure'])})"
        )
        unit = f"{r['units']} {r['unit']}s" if r.get("unit") else "–"
        table.add_row(
            who,
            str(len(r["models"])),
            estimate_text(r.get("spearman")),
            unit,
            console_safe(r["summary"]),
        )
    return table


def print_profile(console: Console, profile: dict[str, Any]) -> None:
    """The profile as console tables: one per model, then the agreement table and why each
    interval resamples what it does."""
    methods = ", ".join(name_cell(m["title"]) for m in profile["methods"])
    console.print(f"Profiles across {methods}", highlight=False)
    for entry in profile["models"]:
        console.print(_model_table(entry))
    if profile["agreement"]:
        console.print(_agreement_table(profile["agreement"], int(profile["bootstrap"])))
        for r in profile["agreement"]:
            if r.get("why"):
                console.print(
                    f"{name_cell(r['a_title'])} vs {name_cell(r['b_title'])}: "
                    f"{console_safe(r['why'])}",
                    highlight=False,
                )
    else:
        console.print("No two methods score the same role: no agreement to measure.")


def profile_command(
    run_dir: Annotated[Path, typer.Argument(help="A run directory holding several methods.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    bootstrap: Annotated[
        int, typer.Option("--bootstrap", help="Bootstrap draws of each agreement interval.")
    ] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the bootstrap.")] = 0,
) -> None:
    """One profile per model across the methods of a run directory, and their agreement."""
    from memearena.cli.run import console
    from memearena.engine.profile import MAX_BOOTSTRAP, build_profile
    from memearena.errors import MemearenaError

    if not 1 <= bootstrap <= MAX_BOOTSTRAP:
        raise MemearenaError(f"--bootstrap: must be between 1 and {MAX_BOOTSTRAP:,}")
    profile = build_profile(run_dir, bootstrap=bootstrap, seed=seed)
    if json_out:
        from memearena.jsonsafe import dumps_strict

        typer.echo(dumps_strict(profile, indent=1, ensure_ascii=False))
        return
    print_profile(console, profile)
