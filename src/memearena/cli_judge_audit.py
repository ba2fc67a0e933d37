"""``memearena judge-audit``: run the Judge audit (``judge-audit CONFIG`` or ``judge-audit run
CONFIG``) and re-analyse any judge run's scored pairs (``judge-audit metrics SCORES.jsonl``).

Registered by the main app as ``app.add_typer(judge_audit_app, name="judge-audit")``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from memearena.config import check_option_ranges
from memearena.errors import DataError, MemearenaError
from memearena.jsonsafe import dumps_strict, jsonl_lines, loads_bounded
from memearena.report.safe import console_safe, shown
from memearena.stats.judge_bias import BIAS_TYPES, BiasPair, BiasTable, bias_table

__all__ = ["judge_audit_app", "load_scored_pairs", "metrics_table"]


class _RunByDefault(TyperGroup):
    """``judge-audit CONFIG ...`` means ``judge-audit run CONFIG ...``."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


judge_audit_app = typer.Typer(
    cls=_RunByDefault,
    help="Audit judges: compositional bias (BD/BC) and position, verbosity, self-enhancement.",
    no_args_is_help=True,
)


def _fail(message: str) -> typer.Exit:
    Console(stderr=True, highlight=False, soft_wrap=True).print(
        f"[red]error:[/red] {console_safe(' '.join(message.split()))}"
    )
    return typer.Exit(2)


def _score(row: dict[str, Any], name: str, where: str, scale: float) -> float | None:
    v = row.get(name)
    if v is None:
        return None  # unparsed: excluded and counted, never a number
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise DataError(f"{where}: field {name!r}: must be a number or null, got {shown(v)}")
    if not 1 <= v <= scale:
        raise DataError(f"{where}: field {name!r}: {v} is outside 1-{scale:g}")
    return float(v)


def load_scored_pairs(path: Path, *, judge: str | None = None, scale: float = 10) -> list[BiasPair]:
    """Scored pairs from ``{"id", "bias_type", "unbiased_score", "biased_score"}`` lines (an
    optional ``judge`` field selects one judge's rows); a bad line is a DataError naming it."""
    pairs: list[BiasPair] = []
    judges: set[str] = set()
    # Bounded parsing and a BOM accepted: a deep, huge-number or garbled line is one error
    # naming it, never a traceback.
    for n, line in jsonl_lines(path):
        where = f"{path}:{n}"
        try:
            row = loads_bounded(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{where}: invalid JSON ({e.msg})") from None
        except ValueError as e:
            raise DataError(f"{where}: invalid JSON ({e})") from None
        if not isinstance(row, dict):
            raise DataError(f"{where}: expected a JSON object")
        item = row.get("id")
        if not isinstance(item, str | int) or isinstance(item, bool) or not str(item).strip():
            raise DataError(f"{where}: field 'id': missing or empty")
        bias_type = row.get("bias_type")
        if not isinstance(bias_type, str) or bias_type not in BIAS_TYPES:
            raise DataError(
                f"{where}: field 'bias_type': unknown bias type {shown(bias_type)}; "
                f"expected one of {', '.join(BIAS_TYPES)}"
            )
        row_judge = row.get("judge")
        if row_judge is not None:
            judges.add(str(row_judge))
            if judge is not None and str(row_judge) != judge:
                continue
        pairs.append(
            BiasPair(
                str(item),
                str(bias_type),
                _score(row, "unbiased_score", where, scale),
                _score(row, "biased_score", where, scale),
            )
        )
    if judge is None and len(judges) > 1:
        raise DataError(
            f"{path}: rows hold several judges ({', '.join(sorted(judges)[:5])}); "
            "choose one with --judge"
        )
    if judge is not None and judge not in judges:
        raise DataError(f"{path}: no rows for judge {judge!r}")
    if not pairs:
        raise DataError(f"{path}: no scored pairs")
    return pairs


def metrics_table(table: BiasTable) -> Table:
    """A rich table of a BD/BC table: one row per type, category and overall."""
    out = Table(title="Compositional bias (BD / BC, higher is better)")
    for name, justify in [
        ("category", "left"),
        ("bias type", "left"),
        ("metric", "left"),
        ("value", "right"),
        ("95% CI", "right"),
        ("pairs", "right"),
        ("excluded", "right"),
    ]:
        out.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]

    def cells(f: Any) -> list[str]:
        if f.value is None:
            return ["no data", "", str(f.pairs), str(f.excluded)]
        ci = "" if f.ci_low is None else f"{f.ci_low:.3f} – {f.ci_high:.3f}"
        return [f"{f.value:.3f}", ci, str(f.pairs), str(f.excluded)]

    for cat in table.categories:
        for t, fig in table.types.items():
            if BIAS_TYPES[t][0] == cat:
                out.add_row(cat, t, fig.metric.upper(), *cells(fig))
        out.add_row("", f"({cat} mean)", "", *cells(table.categories[cat]), end_section=True)
    out.add_row("", "overall", "", *cells(table.overall))
    return out


@judge_audit_app.command("metrics")
def metrics_command(
    scores: Annotated[
        Path,
        typer.Argument(help='JSONL of {"id", "bias_type", "unbiased_score", "biased_score"}.'),
    ],
    json_out: Annotated[
        bool, typer.Option("--json", help="Print JSON instead of a table.")
    ] = False,
    judge: Annotated[
        str | None, typer.Option("--judge", help="Only rows whose 'judge' field is this.")
    ] = None,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap rounds over items.")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
    scale: Annotated[float, typer.Option(help="Top of the score scale (S).")] = 10,
) -> None:
    """BD/BC per bias type, category and overall, with pair counts and intervals (bootstrap
    over items), from any judge run's scored pairs; null scores are unparsed and excluded."""
    try:
        check_option_ranges({"bootstrap": bootstrap, "scale": scale})
        pairs = load_scored_pairs(scores, judge=judge, scale=scale)
        table = bias_table(pairs, scale=scale, n_boot=bootstrap, seed=seed)
    except MemearenaError as e:
        raise _fail(str(e)) from None
    if json_out:
        doc = table.model_dump()
        typer.echo(dumps_strict(doc, indent=2))
        return
    console = _console()
    console.print(metrics_table(table))
    console.print(
        f"{len(pairs)} pairs over {len({p.item for p in pairs})} items; "
        f"{bootstrap} bootstrap rounds over items (seed {seed})",
        markup=False,
    )


def _console() -> Console:
    import sys

    # Piped output (logs, CI) gets a fixed width wide enough for the tables.
    return Console(highlight=False) if sys.stdout.isatty() else Console(width=120, highlight=False)


@judge_audit_app.command("run")
def run_command(
    config: Annotated[Path, typer.Argument(help="Run config (YAML) with a judge_audit section.")],
    out: Annotated[Path | None, typer.Option("--out", help="Output root (default ./runs).")] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print planned calls, tokens and cost; call nothing.")
    ] = False,
    max_cost: Annotated[
        float | None, typer.Option("--max-cost", help="Stop cleanly before spending more USD.")
    ] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress")] = False,
) -> None:
    """Run (or resume) the Judge audit of a config's judges."""
    from memearena.config import load_config
    from memearena.report.console import print_plan
    from memearena.report.judge_audit import print_judge_audit_summary
    from memearena.runner_judge_audit import plan_judge_audit, run_judge_audit

    try:
        cfg = load_config(config)
        if cfg.judge_audit is None:
            raise MemearenaError(f"{config}: judge_audit: section is missing")
        if dry_run:
            print_plan(_console(), cfg, plan_judge_audit(cfg))
            return
        root = out or Path("runs")
        result = run_judge_audit(
            cfg,
            root / cfg.run,
            max_cost=max_cost,
            cache_path=root / "cache.sqlite",
            console=_console(),
            show_progress=not no_progress,
        )
    except MemearenaError as e:
        raise _fail(str(e)) from None
    except KeyboardInterrupt:
        Console(stderr=True).print("interrupted: re-run the same command to resume")
        raise typer.Exit(130) from None
    print_judge_audit_summary(_console(), result)
    if result.stopped:
        raise typer.Exit(3)
    if not result.usable:
        raise typer.Exit(1)
