"""`memearena rank BATTLES`: leaderboard of any pairwise battles (Chatbot Arena format).

Registered by the main app as `app.command("rank")(rank_command)`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from memearena.errors import MemearenaError
from memearena.report.safe import console_safe, strip_control
from memearena.stats.battles import Battle, load_battles
from memearena.stats.bt import BTResult
from memearena.stats.leaderboard import LeaderboardRow, group_battles, leaderboard_fit


def _table(rows: list[LeaderboardRow], title: str | None = None) -> Table:
    table = Table(title=title)
    for name, justify in [
        ("model", "left"),
        ("rank", "right"),
        ("BT", "right"),
        ("95% CI", "right"),
        ("Elo", "right"),
        ("win rate", "right"),
        ("battles", "right"),
    ]:
        table.add_column(name, justify=justify, no_wrap=name != "model")  # type: ignore[arg-type]
    for r in rows:
        table.add_row(
            console_safe(r.model),  # a battle file's model names are untrusted
            str(r.rank),
            f"{r.bt:.1f}",
            f"{r.ci_low:.1f} – {r.ci_high:.1f}",
            f"{r.elo:.1f}",
            f"{r.win_rate:.1%}",
            str(r.battles),
        )
    return table


def rank_command(
    battles: Annotated[
        Path, typer.Argument(help="Battles: JSONL (or a JSON array) with model_a, model_b, winner.")
    ],
    bootstrap: Annotated[int, typer.Option(help="Bootstrap rounds for the 95% intervals.")] = 1000,
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
        typer.Option(help="Weak prior: virtual ties per model (for sparse or disconnected data)."),
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
    err = Console(stderr=True, soft_wrap=True, highlight=False)
    try:
        loaded = load_battles(battles, skip_bad=skip_bad)
        for skipped in loaded.skipped:
            line = f"skipped {battles}:{skipped.line}: {skipped.reason}"
            err.print(strip_control(line), markup=False)
        groups: dict[str | None, list[Battle]] = {None: loaded.battles}
        if group_by is not None:
            groups = {k: v for k, v in group_battles(loaded.battles, group_by).items()}
        results: dict[str | None, tuple[list[LeaderboardRow], BTResult]] = {}
        for key, group in groups.items():
            try:
                results[key] = leaderboard_fit(
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
        typer.echo(f"error: {' '.join(str(exc).split())}", err=True)
        raise typer.Exit(2) from None

    def dump(rows: list[LeaderboardRow]) -> dict[str, object]:
        return {"models": [r.model_dump() for r in rows]}

    if json_out:
        if group_by is None:
            payload: dict[str, object] = dump(results[None][0])
        else:
            payload = {"groups": {str(k): dump(rows) for k, (rows, _) in results.items()}}
        if cluster is not None:  # the default output stays exactly the `rank --json` contract
            payload["bootstrap_unit"] = f"cluster:{cluster}"
        typer.echo(json.dumps(payload, indent=2))
        return
    out = Console(highlight=False)
    for key, (rows, fit) in results.items():
        title = None if key is None else f"{group_by} = {key}"
        out.print(_table(rows, title))
        unit = f"clusters of {cluster!r}" if cluster else "battles"
        out.print(
            f"{fit.note}; {bootstrap} bootstrap rounds over {unit} (seed {seed}); "
            f"{sum(r.battles for r in rows) // 2} battles",
            markup=False,
        )
