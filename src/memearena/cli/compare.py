"""``memearena compare RUN_A RUN_B [--method M] [--json]``: two runs of a method side by side
(``memearena.engine.compare``): rank changes with intervals, what moved beyond its intervals,
the judges' agreement between the runs and the config keys that differ."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from memearena.report.console import INTERVAL_NOTE, fmt_estimate
from memearena.report.safe import console_safe, name_cell

__all__ = ["compare_command", "print_comparison"]


def _rank(rank: Any, ranges: Any) -> str:
    if rank is None:
        return "—"
    if isinstance(ranges, list | tuple) and len(ranges) == 2 and ranges[0] != ranges[1]:
        return f"{rank} ({ranges[0]}–{ranges[1]})"
    return str(rank)


def _change(change: Any) -> str:
    if not isinstance(change, int):
        return "—"
    return "=" if change == 0 else f"{change:+d}"


def _value(x: Any) -> str:
    return console_safe(x, max_chars=80)


def print_comparison(console: Console, c: dict[str, Any]) -> None:
    """The comparison (``Comparison.to_dict``) as console tables; every name is shown inert."""
    entity = c["entity"]
    console.print(
        f"{console_safe(c['method'])}: A = {console_safe(c['run_a'])}, "
        f"B = {console_safe(c['run_b'])}",
        highlight=False,
    )
    figures = sorted({str(r["figure"]) for r in c["rows"]})
    table = Table(
        title=f"rank and {console_safe(', '.join(figures))} in each run",
        caption=f"rank (its range) A → B; intervals: {INTERVAL_NOTE}",
    )
    table.add_column(entity, overflow="fold", min_width=12)
    for header in ("rank A → B", "A", "B", "moved"):
        table.add_column(header, overflow="fold")
    for r in c["rows"]:
        change = _change(r["rank_change"])
        table.add_row(
            name_cell(r[entity]),
            f"{_rank(r['rank_a'], r['rank_range_a'])} → {_rank(r['rank_b'], r['rank_range_b'])}"
            + (f" [{change}]" if change not in ("—", "=") else ""),
            fmt_estimate(r["a"]) if r["a"] else "—",
            fmt_estimate(r["b"]) if r["b"] else "—",
            "yes" if r["moved"] else "",
        )
    console.print(table)
    moved = [name_cell(m) for m in c["moved"]]
    console.print(
        "moved beyond their intervals (the two intervals do not overlap): "
        + (", ".join(moved) if moved else "none"),
        highlight=False,
    )
    if c["judges"]:
        jt = Table(title="judges' figures in each run")
        jt.add_column("judge", overflow="fold", min_width=12)
        for header in ("figure", "A", "B", "moved"):
            jt.add_column(header, overflow="fold")
        for f in c["judges"]:
            jt.add_row(
                name_cell(f[entity]),
                name_cell(f["figure"]),
                fmt_estimate(f["a"]),
                fmt_estimate(f["b"]),
                "yes" if f["moved"] else "",
            )
        console.print(jt)
    if c["verdicts"]:
        vt = Table(
            title="verdicts given the same way in both runs",
            caption="same meme, context, criterion, setting, judge and pair; interval: "
            "bootstrap over memes",
        )
        for header in ("judge", "verdicts", "memes", "same"):
            vt.add_column(header)
        for v in c["verdicts"]:
            vt.add_row(
                name_cell(v["judge"]), f"{v['verdicts']:,}", f"{v['memes']:,}", fmt_estimate(v)
            )
        console.print(vt)
    if c["config"]:
        ct = Table(title="config differences")
        for header in ("key", "A", "B"):
            ct.add_column(header, overflow="fold")
        for d in c["config"]:
            ct.add_row(name_cell(d["key"]), _value(d["a"]), _value(d["b"]))
        console.print(ct)
    else:
        console.print("config: the same in both runs", highlight=False)


def compare_command(
    run_a: Annotated[Path, typer.Argument(help="A run directory.")],
    run_b: Annotated[Path, typer.Argument(help="Another run directory of the same method.")],
    method: Annotated[
        str | None, typer.Option("--method", help="Which method, when both hold several.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
) -> None:
    """Compare two runs of a method: rank changes with intervals, what moved beyond its
    intervals, the judges' agreement between the runs and the config keys that differ."""
    from memearena.cli.run import console
    from memearena.engine.compare import compare_runs

    c = compare_runs(run_a, run_b, method=method).to_dict()
    if as_json:
        typer.echo(json.dumps(c, ensure_ascii=False, indent=2, default=str))
        return
    print_comparison(console, c)
