"""Readable summaries printed at the end of a command.

Every name and message shown here may come from a config, a dataset or a model: it goes through
``console_safe`` (no markup, no control sequences). Tables fit an 80-column terminal: names
wrap instead of being cut to nothing, and the judge table splits in two when it is too wide."""

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


def _name_column(table: Table, header: str, names: list[str]) -> None:
    """A name column that wraps long names rather than cutting them to an ellipsis."""
    longest = min(max((len(n) for n in names), default=len(header)), NAME_CHARS)
    table.add_column(header, overflow="fold", min_width=min(max(longest, len(header)), 16))


def _number_column(table: Table, header: str) -> None:
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
    _name_column(table, "model", list(per_model))
    table.add_column("provider", no_wrap=True)
    for col in ("calls", "in tokens", "out tokens", "est. USD"):
        _number_column(table, col)
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
        "Counts assume no re-asks and no refusals; input tokens are counted on the real prompts "
        "(~chars/4, 85 per image), output tokens are typical reply lengths per role. "
        "Set --max-cost to cap the real spend."
    )


def leaderboard_table(
    title: str,
    rows: list[dict[str, Any]],
    win_rates: Mapping[str, Any] | None = None,
) -> Table:
    """A leaderboard as a rich table (rows as in ``rank --json``); ``win_rates``: each model's
    win-rate interval (``arena.win_rates``), shown beside its win rate."""
    caption = "BT: Bradley–Terry on the Elo scale, mean-anchored to 1000"
    if win_rates:
        caption += "; win % with its 95% interval; Elo: online, in battle order (no interval)"
    table = Table(title=title, caption=caption)
    _number_column(table, "rank")
    _name_column(table, "model", [str(r["model"]) for r in rows])
    for col in ("BT", "95% CI", "Elo", "win %" if win_rates else "win rate", "battles"):
        _number_column(table, col)
    for r in rows:
        wr = (win_rates or {}).get(r["model"]) or {}
        lo, hi = wr.get("ci_low"), wr.get("ci_high")
        if lo is not None and hi is not None:
            win = f"{100 * r['win_rate']:.1f} ({100 * lo:.0f}–{100 * hi:.0f})"
        else:
            win = f"{r['win_rate']:.1%}"
        table.add_row(
            str(r["rank"]),
            name_cell(r["model"]),
            f"{r['bt']:.0f}",
            f"{r['ci_low']:.0f}–{r['ci_high']:.0f}",
            f"{r['elo']:.0f}",
            win,
            str(r["battles"]),
        )
    return table


def _ci(row: dict[str, Any], key: str) -> dict[str, Any] | None:
    """A judge row's point figure and its interval, as an estimate."""
    if row.get(key) is None:
        return None
    return {
        "value": row[key],
        "ci_low": row.get(f"{key}_ci_low"),
        "ci_high": row.get(f"{key}_ci_high"),
    }


SENSITIVITY_TITLES = {
    "self_judging_include": "with self-judged battles included",
    "self_judging_exclude": "with self-judged battles excluded",
    "refusals_as_losses": "with a refusal counted as a loss against every answer of its task",
    "length_controlled": "length-controlled (answer length as a covariate)",
}


def print_sensitivity(console: Console, arena: dict[str, Any]) -> None:
    """The alternative leaderboards: each printed in full when it changes the order."""
    sens = arena.get("sensitivity") or {}
    for key, title in SENSITIVITY_TITLES.items():
        view = sens.get(key)
        if not view:
            continue
        if view.get("order_differs"):
            rows = [
                {"elo": float("nan"), "win_rate": float("nan"), "battles": 0, **r}
                for r in view["overall"]
            ]
            console.print(leaderboard_table(f"Sensitivity: {title} — the order changes", rows))
        else:
            console.print(f"Sensitivity: {title}: same order.")
    effect = (sens.get("length_controlled") or {}).get("length_effect_elo_per_doubling")
    if effect and effect.get("value") is not None:
        console.print(
            f"Length effect: {_fmt(effect)} Elo per doubling of an answer's length relative to "
            "the other's (95% interval)"
        )


def print_settings(console: Console, settings: dict[str, Any], comparison: dict[str, Any]) -> None:
    """Guideline settings side by side (against the truth in simulated runs, against the
    leave-one-out joint vote, the panel's measured biases), then NDCG per judge per setting."""
    if comparison:
        cols = [
            ("leaderboard_tau_vs_truth", "τ vs truth"),
            ("mean_ndcg_vs_truth", "NDCG vs truth"),
            ("mean_ndcg_vs_loo", "NDCG vs LOO"),
            ("mean_p_prefer_first", "P(first)"),
            ("mean_p_prefer_longer", "P(longer)"),
            ("mean_self_preference", "self-pref."),
        ]
        names = [name_cell(n) for n in comparison]
        figures = [[_fmt(row.get(k)) for k, _ in cols] for row in comparison.values()]
        for t in fitted_tables(
            "Guideline settings compared (panel means)",
            "setting",
            names,
            [label for _, label in cols],
            figures,
            console.width,
            caption="τ and NDCG vs truth: simulated targets only; LOO: leave-one-out joint vote",
        ):
            console.print(t)
    table = Table(title="NDCG per judge per setting (vs the leave-one-out joint vote)")
    judge_names = [j["judge"] for j in next(iter(settings.values())).get("judges", [])]
    _name_column(table, "judge", [str(n) for n in judge_names])
    for s in settings:
        _number_column(table, name_cell(s))
    for name in judge_names:
        cells = []
        for sec in settings.values():
            row = next((j for j in sec.get("judges", []) if j["judge"] == name), None)
            cells.append(_fmt(_ci(row, "ndcg")) if row else "—")
        table.add_row(name_cell(name), *cells)
    means = []
    for sec in settings.values():
        vals = [j["ndcg"] for j in sec.get("judges", []) if j["ndcg"] is not None]
        means.append(_fmt(sum(vals) / len(vals)) if vals else "—")
    table.add_row("mean", *means, style="bold")
    console.print(table)


_JUDGE_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("NDCG", "ndcg", 3),
    ("τ", "kendall_tau", 2),
    ("unparsed", "parse_failures", 0),
    ("consistency", "position_consistency", 3),
    ("P(first)", "p_prefer_first", 3),
    ("P(longer)", "p_prefer_longer", 3),
    ("vs panel", "p_prefer_longer_vs_panel", 3),
    ("self-pref.", "self_preference", 3),
)


def _judge_cell(j: dict[str, Any], key: str, digits: int) -> str:
    if key in ("ndcg", "kendall_tau"):  # point figures with their interval fields
        return _fmt(_ci(j, key), digits) if j.get(key) is not None else "—"
    text = _fmt(j.get(key), digits) if j.get(key) is not None else "—"
    if key == "p_prefer_longer_vs_panel" and j.get("verbosity_flagged"):
        text += " *"
    return text


def judge_tables(
    judges: list[dict[str, Any]], width: int = 80, *, unit: str = "meme"
) -> list[Table]:
    """Judges vs the leave-one-out joint vote: one table, or two sharing the judge column when
    one would not fit ``width`` columns (a judge's name is cut only past NAME_CHARS)."""
    names = [name_cell(j["judge"]) for j in judges]
    cells = [[_judge_cell(j, key, digits) for _, key, digits in _JUDGE_COLUMNS] for j in judges]
    caption = (
        f"95% intervals over {unit}s: {INTERVAL_NOTE}; vs panel: P(longer) minus the other "
        "judges' on the same presentations (* flagged)"
    )
    return fitted_tables(
        "Judges vs the leave-one-out joint vote",
        "judge",
        names,
        [h for h, _, _ in _JUDGE_COLUMNS],
        cells,
        width,
        caption=caption,
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
            _number_column(table, headers[c])
        for name, row in zip(names, cells, strict=True):
            table.add_row(name, *(row[c] for c in cols))
        tables.append(table)
    return tables
