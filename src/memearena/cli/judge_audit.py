"""``memearena judge-audit``: run the Judge audit (``judge-audit CONFIG`` or ``judge-audit run
CONFIG``) and re-analyse any judge run's scored pairs (``judge-audit metrics SCORES.jsonl``).

Registered by the main app as ``app.add_typer(judge_audit_app, name="judge-audit")``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from memearena.cli.run import DryRunOpt, MaxCostOpt, NoProgressOpt, OutOpt
from memearena.errors import DataError, MemearenaError
from memearena.jsonsafe import dumps_strict, jsonl_lines, loads_bounded
from memearena.report.safe import console_safe, shown

if TYPE_CHECKING:  # imported where used: every other command (`rank`, `--help`) skips them
    from memearena.data.mmjudgebias import ScoreReading
    from memearena.stats.judge_bias import BiasPair, BiasTable

__all__ = ["ScoredPairs", "judge_audit_app", "load_scored_pairs", "metrics_legend", "metrics_table"]


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


@dataclass(frozen=True)
class ScoredPairs:
    """What a scores file holds: the pairs that can be scored and the rows that cannot."""

    pairs: list[BiasPair]
    """Pairs in the file (a null score is an unparsed judgement: kept, excluded by the table)."""
    excluded_rows: list[tuple[int | str, str]]
    """(line, or file of a judgements folder, reason) for every row left out: a score missing,
    not a number or (without the reference's reading) out of range, an unknown bias type, no
    id, or a line that is not a JSON object."""
    reading: ScoreReading = field(default_factory=lambda: _default_reading())
    """How the scores were read, with what the reference's reading converted or kept."""


def _default_reading() -> ScoreReading:
    from memearena.data.mmjudgebias import ScoreReading

    return ScoreReading(reference=False)


class _RowError(Exception):
    pass


def _row_pair(line: str, reading: ScoreReading) -> tuple[BiasPair, str | None]:
    from memearena.stats.judge_bias import BIAS_TYPES, BiasPair

    # Bounded parsing: a deep, huge-number or garbled line is that row's error, never a
    # traceback.
    try:
        row = loads_bounded(line)
    except json.JSONDecodeError as e:
        raise _RowError(f"invalid JSON ({e.msg})") from None
    except ValueError as e:
        raise _RowError(f"invalid JSON ({e})") from None
    if not isinstance(row, dict):
        raise _RowError("expected a JSON object")
    item = row.get("id")
    if not isinstance(item, str | int) or isinstance(item, bool) or not str(item).strip():
        raise _RowError("field 'id': missing or empty")
    bias_type = row.get("bias_type")
    if not isinstance(bias_type, str) or bias_type not in BIAS_TYPES:
        raise _RowError(
            f"field 'bias_type': unknown bias type {shown(bias_type)}; "
            f"expected one of {', '.join(BIAS_TYPES)}"
        )
    row_judge = row.get("judge")
    try:
        u = reading.score(row, "unbiased_score")
        b = reading.score(row, "biased_score")
    except ValueError as e:
        raise _RowError(str(e)) from None
    return BiasPair(str(item), str(bias_type), u, b), None if row_judge is None else str(row_judge)


def load_scored_pairs(
    path: Path, *, judge: str | None = None, scale: float = 10, reference_parsing: bool = False
) -> ScoredPairs:
    """Scored pairs from ``{"id", "bias_type", "unbiased_score", "biased_score"}`` lines (an
    optional ``judge`` field selects one judge's rows), or from MM-JudgeBias's own judgement
    files: a ``judgements/seed_N/`` folder of per-sample JSON records, or one such record
    (``.json``; ``judge`` is its model key). A row that cannot be scored is left out and
    recorded with its line (or file) and reason, never a refusal of the whole file (a UTF-8
    BOM is accepted on any line); an unreadable file, one that is not UTF-8, one with several
    judges and no choice, or one without a usable row is a DataError. ``reference_parsing``
    reads scores as MM-JudgeBias does (``ScoreReading``), counting what that changed."""
    from memearena.data.mmjudgebias import ScoreReading, load_judgements
    from memearena.stats.judge_bias import BiasPair

    reading = ScoreReading(reference=reference_parsing, scale=scale)
    pairs: list[BiasPair] = []
    excluded: list[tuple[int | str, str]] = []
    if path.is_dir() or path.suffix.lower() == ".json":
        files = load_judgements(path, reading, judge=judge)
        pairs = [BiasPair(*p) for p in files.pairs]
        excluded = list(files.excluded)
    else:
        judges: set[str] = set()
        for n, line in jsonl_lines(path):
            try:
                pair, row_judge = _row_pair(line, reading)
            except _RowError as e:
                excluded.append((n, str(e)))
                continue
            if row_judge is not None:
                judges.add(row_judge)
                if judge is not None and row_judge != judge:
                    continue
            pairs.append(pair)
        if judge is None and len(judges) > 1:
            raise DataError(
                f"{path}: rows hold several judges ({', '.join(sorted(judges)[:5])}); "
                "choose one with --judge"
            )
        if judge is not None and judge not in judges:
            raise DataError(f"{path}: no rows for judge {judge!r}")
    if not pairs:
        first = ""
        if excluded:
            where = "line" if isinstance(excluded[0][0], int) else "file"
            first = f" (first: {where} {excluded[0][0]}: {excluded[0][1]})"
        raise DataError(f"{path}: no scored pairs; {len(excluded)} rows excluded{first}")
    return ScoredPairs(pairs, excluded, reading)


_REFERENCE_MARK = "*"
"""Marks a value set by the reference's convention (BD 0.0 of a type with no pair y > 1)."""
_NO_DATA_MARK = "†"
"""Marks "no data" of such a type without reference compatibility."""


def metrics_table(table: BiasTable) -> Table:
    """A rich table of a BD/BC table: one row per type, category and overall. It fits an
    80-column console: each category heads its rows (with its metric), and a conventional
    value carries a mark that ``metrics_legend`` explains."""
    from memearena.stats.judge_bias import BIAS_CATEGORIES, BIAS_TYPES

    out = Table(title="Compositional bias (BD / BC, higher is better)")
    out.add_column("bias type", overflow="fold")
    for name in ("value", "95% CI", "pairs", "excluded"):
        out.add_column(name, justify="right", no_wrap=True)

    def cells(f: Any) -> list[str]:
        if f.value is None:
            label = f"no data{_NO_DATA_MARK}" if f.note and "y > 1" in f.note else "no data"
            return [label, "", str(f.pairs), str(f.excluded)]
        ci = "" if f.ci_low is None else f"{f.ci_low:.3f} – {f.ci_high:.3f}"
        value = f"{f.value:.3f}" + (_REFERENCE_MARK if f.note else "")
        return [value, ci, str(f.pairs), str(f.excluded)]

    for cat, metric in BIAS_CATEGORIES.items():
        out.add_row(f"{cat} ({metric.upper()})", "", "", "", "", style="bold")
        for t, fig in table.types.items():
            if BIAS_TYPES[t][0] == cat:
                out.add_row(f"  {t}", *cells(fig))
        out.add_row(f"  ({cat} mean)", *cells(table.categories[cat]), end_section=True)
    out.add_row("overall", *cells(table.overall))
    return out


def metrics_legend(table: BiasTable) -> list[str]:
    """The lines that explain the marks ``metrics_table`` put on its values."""
    figs = [*table.types.values(), *table.categories.values(), table.overall]
    lines = []
    if any(f.value is not None and f.note for f in figs):
        lines.append(f"{_REFERENCE_MARK} BD 0.0 by the reference's convention: no pair with y > 1")
    if any(f.value is None and f.note and "y > 1" in f.note for f in figs):
        lines.append(
            f"{_NO_DATA_MARK} no data (no pair with y > 1): the reference would report 0.0"
        )
    return lines


_METRICS_HELP = (
    "BD/BC per bias type, category and overall, with pair counts and intervals (bootstrap "
    "over items), from any judge run's scored pairs; null scores are unparsed and excluded, "
    "a row that cannot be scored is left out and counted."
)
"""One line of text (a docstring's line breaks would reach the help as they are)."""


@judge_audit_app.command(
    "metrics",
    help=_METRICS_HELP,
    short_help="BD/BC per bias type, category and overall, with intervals, from scored pairs.",
)
def metrics_command(
    scores: Annotated[
        Path,
        typer.Argument(
            help='JSONL of {"id", "bias_type", "unbiased_score", "biased_score"}, or '
            "MM-JudgeBias's judgements/seed_N/ folder (or one of its per-sample .json files)."
        ),
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
    no_reference_compat: Annotated[
        bool,
        typer.Option(
            "--no-reference-compat",
            help="BD of a type whose every unbiased score is 1 is 'no data'; by default it is "
            "0.0 and averaged in, as MM-JudgeBias's evaluate.py does.",
        ),
    ] = False,
    # The default, spelt out; hidden so the help's option column fits 80 columns.
    reference_compat_flag: Annotated[bool, typer.Option("--reference-compat", hidden=True)] = False,
    reference_parsing: Annotated[
        bool,
        typer.Option(
            "--reference-parsing",
            help="Read scores as MM-JudgeBias does: a string score is converted, a null one "
            "is read from the reply by its last-number fallback, none is clamped (counted).",
        ),
    ] = False,
) -> None:
    """``judge-audit metrics``: see ``_METRICS_HELP``."""
    from memearena.config import check_option_ranges
    from memearena.stats.judge_bias import bias_table

    if no_reference_compat and reference_compat_flag:
        raise _fail("--reference-compat and --no-reference-compat: choose one")
    reference_compat = not no_reference_compat
    try:
        check_option_ranges({"bootstrap": bootstrap, "scale": scale})
        loaded = load_scored_pairs(
            scores, judge=judge, scale=scale, reference_parsing=reference_parsing
        )
        table = bias_table(
            loaded.pairs,
            scale=scale,
            n_boot=bootstrap,
            seed=seed,
            reference_compat=reference_compat,
        )
    except MemearenaError as e:
        raise _fail(str(e)) from None
    pairs = loaded.pairs
    excluded = loaded.excluded_rows
    if json_out:
        doc: dict[str, Any] = table.model_dump()
        doc["excluded_rows"] = {
            "count": len(excluded),
            "rows": [
                {"line" if isinstance(n, int) else "file": n, "reason": r}
                for n, r in excluded[:100]
            ],
        }
        doc["score_reading"] = {
            "rule": "reference" if reference_parsing else "strict",
            **loaded.reading.counts,
        }
        typer.echo(dumps_strict(doc, indent=2))
        return
    console = _console()
    console.print(metrics_table(table))
    for line in metrics_legend(table):
        console.print(line, markup=False)
    console.print(
        f"{len(pairs)} pairs over {len({p.item for p in pairs})} items; "
        f"{bootstrap} bootstrap rounds over items (seed {seed})",
        markup=False,
    )
    console.print(
        "reference-compatible (BD of an all-1 type is 0.0)"
        if reference_compat
        else "not reference-compatible (BD of an all-1 type is no data)",
        markup=False,
    )
    c = loaded.reading.counts
    console.print(
        (
            f"scores read as MM-JudgeBias does: {c['from_string']} from a string, "
            f"{c['from_text']} from the reply text (last-number fallback), "
            f"{c['out_of_range']} outside 1-{scale:g} kept unclamped"
        )
        if reference_parsing
        else "scores read strictly: a number in range or null (unparsed)",
        markup=False,
    )
    if excluded:
        console.print(f"{len(excluded)} rows excluded:", markup=False)
        for n, reason in excluded[:10]:
            at = f"{scores}:{n}" if isinstance(n, int) else str(n)
            console.print(f"  {console_safe(at)}: {console_safe(reason)}", markup=False)
        if len(excluded) > 10:
            console.print(f"  … and {len(excluded) - 10} more (--json lists them)", markup=False)


def _console() -> Console:
    import sys

    # Piped output (logs, CI) gets 80 columns, as every other command: the tables fit it.
    return Console(highlight=False) if sys.stdout.isatty() else Console(width=80, highlight=False)


@judge_audit_app.command("run")
def run_command(
    config: Annotated[Path, typer.Argument(help="Run config (YAML) with a judge_audit section.")],
    out: OutOpt = None,
    dry_run: DryRunOpt = False,
    max_cost: MaxCostOpt = None,
    no_progress: NoProgressOpt = False,
) -> None:
    """Run (or resume) the Judge audit of a config's judges."""
    from memearena.cli.run import run_or_plan

    try:
        run_or_plan(
            "judge_audit",
            config,
            out=out,
            dry_run=dry_run,
            max_cost=max_cost,
            no_progress=no_progress,
            console=_console(),
            err_console=Console(stderr=True),
        )
    except MemearenaError as e:
        raise _fail(str(e)) from None
    except KeyboardInterrupt:
        Console(stderr=True).print("interrupted: re-run the same command to resume")
        raise typer.Exit(130) from None
