"""Readable summaries printed at the end of a command.

Every name and message shown here may come from a config, a dataset or a model: it goes through
``console_safe`` (no markup, no control sequences). Tables fit an 80-column terminal: names
wrap instead of being cut to nothing, and a table too wide splits in parts that repeat the name
column (``fitted_tables``). A method's own tables are in its view (``methods/<name>/view.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.table import Table

from memearena.report.safe import NAME_CHARS, console_safe, name_cell


def _fmt(x: Any, digits: int = 3) -> str:
    """A number, an estimate ``{"value", "ci_low", "ci_high"}`` with its interval, or —."""
    if isinstance(x, dict):
        if x.get("value") is None:
            return "—"
        if x.get("ci_low") is None or x.get("ci_high") is None:
            return _fmt(x["value"], digits)
        return interval_text(x["value"], x["ci_low"], x["ci_high"])
    return "—" if x is None else f"{x:.{digits}f}" if isinstance(x, float) else str(x)


INTERVAL_NOTE = "v±h, or v (lo–hi) where not centred on v"
"""How ``interval_text`` writes an interval, for a table's caption."""


def interval_text(value: float, low: float, high: float) -> str:
    """``v±h`` when the interval is centred on the value (each side within a tenth of the
    width, as shown to 2 decimals), else ``v (lo–hi)``: a percentile interval of [0.80, 1.00]
    around 1.00 is not ``1.00±0.10``."""
    v, lo, hi = (round(float(t), 2) for t in (value, low, high))
    if abs((v - lo) - (hi - v)) <= max(0.011, 0.1 * (hi - lo)):
        return f"{value:.2f}±{(high - low) / 2:.2f}"
    return f"{value:.2f} ({low:.2f}–{high:.2f})"


def fmt_estimate(x: Any, digits: int = 3) -> str:
    """A number, an estimate ``{"value", "ci_low", "ci_high"}`` with its interval
    (``interval_text``), or —."""
    return _fmt(x, digits)


def name_column(table: Table, header: str, names: list[str]) -> None:
    """A name column that wraps long names rather than cutting them to an ellipsis."""
    longest = min(max((len(n) for n in names), default=len(header)), NAME_CHARS)
    table.add_column(header, overflow="fold", min_width=min(max(longest, len(header)), 16))


def number_column(table: Table, header: str) -> None:
    """A right-aligned number column that never wraps."""
    table.add_column(header, justify="right", no_wrap=True)


def print_plan(
    console: Console,
    run: str,
    per_model: Mapping[str, Mapping[str, float]],
    providers: Mapping[str, str],
) -> None:
    """The --dry-run table: planned calls, tokens and cost per model (``providers``: each
    model's provider)."""
    table = Table(
        title=f"planned calls for run {console_safe(repr(run))} (dry run: nothing was called)"
    )
    name_column(table, "model", list(per_model))
    table.add_column("provider", no_wrap=True)
    for col in ("calls", "in tokens", "out tokens", "est. USD"):
        number_column(table, col)
    for name, row in sorted(per_model.items()):
        provider = providers.get(name, "?")
        table.add_row(
            name_cell(name),
            provider,
            f"{int(row['calls']):,}",
            f"{int(row['input_tokens']):,}",
            f"{int(row['output_tokens']):,}",
            f"{row['cost_usd']:.2f}",
        )
    calls = int(sum(r["calls"] for r in per_model.values()))
    cost = sum(r["cost_usd"] for r in per_model.values())
    table.add_row("total", "", f"{calls:,}", "", "", f"{cost:.2f}", style="bold")
    console.print(table)
    console.print(
        "Counts assume no re-asks and no refusals (a model the simulator serves keeps its own "
        "rates); input tokens are counted on the real prompts "
        "(~chars/4, 85 per image), output tokens are typical reply lengths per role. "
        "Set --max-cost to cap the real spend."
    )


_NAME_CAP = 24  # a longer name wraps inside its column


def fitted_tables(
    title: str,
    name_header: str,
    names: list[str],
    headers: list[str],
    cells: list[list[str]],
    width: int = 80,
    *,
    caption: str | None = None,
) -> list[Table]:
    """A name column and number columns: one table, or several that repeat the name column,
    each fitting ``width`` columns, so no name is ever cut to nothing (names are console-safe
    already; a name longer than 24 characters wraps)."""
    name_w = min(max([len(name_header), *(len(n) for n in names)]), _NAME_CAP)
    col_w = [max([len(h), *(len(row[c]) for row in cells)]) for c, h in enumerate(headers)]
    groups: list[list[int]] = [[]]
    used = name_w + 4  # left border, padding, right border
    for c, w in enumerate(col_w):
        if groups[-1] and used + w + 3 > width:
            groups.append([])
            used = name_w + 4
        groups[-1].append(c)
        used += w + 3
    tables = []
    for i, cols in enumerate(groups):
        part = f" ({i + 1}/{len(groups)})" if len(groups) > 1 else ""
        last = i == len(groups) - 1
        table = Table(title=title + part, caption=caption if last else None)
        table.add_column(name_header, overflow="fold", min_width=name_w)
        for c in cols:
            number_column(table, headers[c])
        for name, row in zip(names, cells, strict=True):
            table.add_row(name, *(row[c] for c in cols))
        tables.append(table)
    return tables
