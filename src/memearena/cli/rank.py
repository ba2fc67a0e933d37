"""`memearena rank BATTLES`: leaderboard of any pairwise battles (Chatbot Arena format).

Registered by the main app as `app.command("rank")(rank_command)`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from memearena.errors import MemearenaError
from memearena.jsonsafe import dumps_strict
from memearena.report.safe import clip, name_cell, shown, strip_control
from memearena.stats.battles import BattleTable, read_battle_table
from memearena.stats.bt import FALLBACK_PRIOR, MAX_BOOTSTRAP
from memearena.stats.leaderboard import MISSING_GROUP, LeaderboardRow
from memearena.stats.rank_table import TableRanking, rank_table


def _table(rows: list[LeaderboardRow], title: str | None = None) -> Table:
    # A battle file's model names and field values are untrusted: shown inert (name_cell).
    # Light borders, no edge padding and short headers keep it within 80 columns with room
    # for a model name of about 20 characters; longer names fold, and past
    # NAME_CHARS they are cut with "…" (a 20 MB name took rich minutes to lay out); the full
    # name stays in --json.
    table = Table(
        title=name_cell(title) if title is not None else None,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("model", overflow="fold")
    for name in ("rank", "UB", "BT", "95% CI", "Elo", "win %", "battles"):
        table.add_column(name, justify="right", no_wrap=True)
    for r in rows:
        table.add_row(
            name_cell(r.model) + ("" if r.mle else " *"),
            str(r.rank),
            str(r.rank_ub),
            f"{r.bt:.1f}",
            f"{r.ci_low:.1f} – {r.ci_high:.1f}",
            f"{r.elo:.1f}",
            f"{100 * r.win_rate:.1f}",
            str(r.battles),
        )
    return table


def _groups(table: BattleTable, group_by: str | None) -> dict[str | None, BattleTable]:
    if group_by is None:
        return {None: table}
    if not table.fields[group_by].present:
        raise MemearenaError(
            f"--group-by {group_by!r}: no battle has this field "
            "(fields of the Chatbot Arena format: judge, criterion, item, or any extra field)"
        )
    groups = table.group_by(group_by)
    return {MISSING_GROUP if k is None else k: v for k, v in sorted(groups.items(), key=_order)}


def _cores() -> int:
    """Processes that read a large battle file (the cores this process may run on, up to 8)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


def _order(item: tuple[str | None, BattleTable]) -> str:
    return MISSING_GROUP if item[0] is None else item[0]


def rank_command(
    battles: Annotated[
        Path, typer.Argument(help="Battles: JSONL (or a JSON array) with model_a, model_b, winner.")
    ],
    bootstrap: Annotated[
        int,
        typer.Option(help=f"Bootstrap rounds for the 95% intervals (0 to {MAX_BOOTSTRAP:,})."),
    ] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
    anchor: Annotated[
        str | None, typer.Option(help="Pin this model at 1000 (default: the mean is 1000).")
    ] = None,
    group_by: Annotated[
        str | None,
        typer.Option("--group-by", help="One leaderboard per value of this battle field."),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print JSON instead of a table.")
    ] = False,
    skip_bad: Annotated[
        bool, typer.Option("--skip-bad", help="Skip malformed lines (listed on stderr).")
    ] = False,
    prior: Annotated[
        float,
        typer.Option(
            help="Weak prior: virtual ties per model. 0 fits the plain MLE, and falls back to "
            f"{FALLBACK_PRIOR:g} (rows flagged mle=false) where no MLE exists."
        ),
    ] = 0.0,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            help="Bootstrap whole clusters of battles sharing this field (e.g. item), not "
            "single battles.",
        ),
    ] = None,
) -> None:
    """Rank models from pairwise battles: Bradley–Terry with bootstrap CIs, Elo, win rate."""
    err = Console(stderr=True, soft_wrap=True, highlight=False, markup=False)
    results: dict[str | None, TableRanking] = {}
    try:
        if not 0 <= bootstrap <= MAX_BOOTSTRAP:
            raise MemearenaError(
                f"--bootstrap must be between 0 and {MAX_BOOTSTRAP:,}; got {bootstrap}"
            )
        if not 0 <= prior < float("inf"):
            raise MemearenaError(f"--prior must be a finite number >= 0; got {prior}")
        fields = [f for f in (group_by, cluster) if f is not None]
        table = read_battle_table(battles, fields=fields, skip_bad=skip_bad, workers=_cores())
        for skipped in table.skipped:
            err.print(
                strip_control(clip(f"skipped {battles}:{skipped.line}: {skipped.reason}", 2000))
            )
        if len(table) == 0:
            raise MemearenaError(
                f"{battles}: no battles to rank"
                + (f" ({len(table.skipped)} malformed line(s) skipped)" if table.skipped else "")
            )
        for key, group in _groups(table, group_by).items():
            try:
                results[key] = rank_table(
                    group,
                    bootstrap=bootstrap,
                    seed=seed,
                    anchor=anchor,
                    prior=prior,
                    cluster=cluster,
                )
            except MemearenaError as exc:
                if key is None:
                    raise
                raise MemearenaError(f"{group_by}={key!r}: {exc}") from None
    except MemearenaError as exc:
        # One line on stderr, exit 2: the contract for every user-facing error.
        typer.echo(f"error: {strip_control(clip(' '.join(str(exc).split()), 2000))}", err=True)
        raise typer.Exit(2) from None

    for key, ranking in results.items():
        if ranking.fallback is not None:
            where = "" if key is None else f"{group_by}={shown(key)}: "
            err.print(
                strip_control(
                    f"warning: {where}{ranking.fallback}; fitted with a weak prior of "
                    f"{FALLBACK_PRIOR:g} virtual tie(s) per model (rows flagged mle=false)"
                )
            )

    def dump(rows: list[LeaderboardRow]) -> dict[str, object]:
        return {"models": [r.model_dump() for r in rows]}

    if json_out:
        if group_by is None:
            payload: dict[str, object] = dump(results[None].rows)
        else:
            payload = {"groups": {str(k): dump(r.rows) for k, r in results.items()}}
        if cluster is not None:  # the default output stays exactly the `rank --json` contract
            payload["bootstrap_unit"] = f"cluster:{cluster}"
        typer.echo(dumps_strict(payload, indent=2))
        return
    out = Console(highlight=False)
    for key, ranking in results.items():
        title = None if key is None else f"{group_by} = {key}"
        out.print(_table(ranking.rows, title))
        battles_total = sum(r.battles for r in ranking.rows) // 2
        unit = f"clusters of {cluster!r}" if cluster else "battles"
        note = (
            f"{ranking.fit.note}; {bootstrap} bootstrap rounds over {unit} (seed {seed}); "
            f"{battles_total} battles"
        )
        if ranking.fallback is not None:
            note += "; * no finite MLE: weak prior"
        out.print(strip_control(note), markup=False)
    out.print(
        "UB: rank upper bound, 1 + the models whose interval lies entirely above this one's",
        markup=False,
    )
