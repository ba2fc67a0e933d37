"""``memearena labels``: agreement figures, CSV export and import of the label queues.

Registered by the main app as ``app.add_typer(labels_app, name="labels")``."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from memearena.cli.run import one_line_errors
from memearena.report.safe import console_safe

__all__ = ["labels_app", "print_agreement"]

_console = Console() if sys.stdout.isatty() else Console(width=80)
_err = Console(stderr=True)

labels_app = typer.Typer(
    help="Human labels (DIR/labels.sqlite): agreement of every judge with the annotators, "
    "CSV export and import of the queues (battles, guidelines, rewrites, perturbations).",
    no_args_is_help=True,
)

RunDir = Annotated[Path, typer.Argument(help="Run directory (with its labels.sqlite).")]


def _fmt(row: dict[str, Any]) -> str:
    v, lo, hi = row["value"], row["ci_low"], row["ci_high"]
    if v is None:
        return "—"
    if lo is None or hi is None or (isinstance(lo, float) and math.isnan(lo)):
        return f"{v:.3f}"
    return f"{v:.3f} [{lo:.3f}, {hi:.3f}]"


def print_agreement(console: Console, doc: dict[str, Any]) -> None:
    """The agreement figures as tables (names from the run and the labels shown inert)."""
    for q, info in doc["queues"].items():
        line = (
            f"{q}: {info['labelled']} of {info['items']} items labelled, {info['labels']} "
            f"labels by {len(info['annotators'])} annotator(s)"
        )
        if info.get("orphan_labels"):
            line += f"; {info['orphan_labels']} label(s) of items the run no longer has (kept)"
        console.print(console_safe(line), highlight=False)
    if not doc["figures"]:
        console.print("no figure yet: nothing labelled in a queue this run has")
        return
    table = Table(
        title="agreement with human labels (95% intervals, bootstrap over memes)",
        show_lines=False,
        expand=False,
    )
    for col in ("figure", "who / field", "group", "value [interval]", "n"):
        table.add_column(col, overflow="fold")
    for r in doc["figures"]:
        who = " ".join(x for x in (r["judge"], r["field"]) if x)
        table.add_row(
            console_safe(r["figure"]),
            console_safe(who),
            console_safe(r["group"]),
            _fmt(r),
            f"{r['n']}/{r['clusters']}",
        )
    console.print(table)
    w = doc.get("widest")
    if w:
        console.print(
            console_safe(
                f"widest interval: {w['figure']} {w['judge'] or ''} {w['field'] or ''} "
                f"{w['group'] or ''} ±{w['half_width']:.3f} over {w['clusters']} cluster(s); "
                f"one more labelled cluster narrows it by about {w['narrowing_per_label']:.4f}"
            ),
            highlight=False,
        )


@labels_app.command("agreement")
@one_line_errors
def agreement_command(
    run_dir: RunDir,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as JSON.")] = False,
    bootstrap: Annotated[int, typer.Option("--bootstrap", help="Bootstrap rounds.")] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    no_report: Annotated[
        bool,
        typer.Option(
            "--no-report",
            help="Leave leaderboard.json and report.html as they are (default: the labels "
            "section is written and the report re-rendered).",
        ),
    ] = False,
) -> None:
    """Every judge against the human majority (Cohen's κ, percent agreement), α among the
    annotators, rankings, guideline axes, Adapt's human-confirmed failures, perturbations
    accepted."""
    from memearena.labels.agreement import agreement
    from memearena.labels.files import write_labels_section

    if not run_dir.is_dir():
        from memearena.labels.errors import LabelError

        raise LabelError(f"{run_dir}: not a directory")
    result = agreement(run_dir, n_boot=bootstrap, seed=seed)
    doc = result.to_dict()
    if not no_report and result.queues:
        from memearena.errors import RunLockedError

        try:
            write_labels_section(run_dir, doc)
        except RunLockedError as e:
            # The figures still stand; only the report waits for the run to finish.
            _err.print(console_safe(f"report not updated: {e}"), highlight=False, soft_wrap=True)
    if as_json:
        from memearena.jsonsafe import dumps_strict

        typer.echo(dumps_strict(doc, indent=2, ensure_ascii=False))
    else:
        print_agreement(_console, doc)


@labels_app.command("export")
@one_line_errors
def export_command(
    run_dir: RunDir,
    queue: Annotated[
        str, typer.Option("--queue", help="battles, guidelines, rewrites, perturbations.")
    ],
    out: Annotated[Path, typer.Option("--out", help="The CSV file to write.")],
) -> None:
    """Write a queue's items (what a person sees, never a hidden verdict) and current labels
    to a CSV (schema: docs/labels.md)."""
    from memearena.labels.files import export_csv

    n = export_csv(run_dir, queue, out)
    _console.print(f"wrote {n} row(s) to {console_safe(out)}", highlight=False)


@labels_app.command("import")
@one_line_errors
def import_command(
    run_dir: RunDir,
    csv_file: Annotated[Path, typer.Argument(help="Labels CSV (or a filled-in Adapt sheet).")],
    annotator: Annotated[
        str | None,
        typer.Option("--annotator", help="Name for rows without an annotator column."),
    ] = None,
    queue: Annotated[
        str | None, typer.Option("--queue", help="Queue of rows without a queue column.")
    ] = None,
) -> None:
    """Append labels from a CSV to DIR/labels.sqlite (all rows or none). A filled-in Adapt
    sheet (adapt_human_labels.csv: item, harmful) becomes the rewrites queue's still-harmful
    labels."""
    import csv as _csv

    from memearena.labels.errors import LabelError
    from memearena.labels.files import import_csv, import_sheet, sheet_queue

    try:
        with csv_file.open(encoding="utf-8-sig", newline="") as f:
            header = next(_csv.reader(f), [])
    except (OSError, UnicodeDecodeError, _csv.Error) as e:
        raise LabelError(f"{csv_file}: cannot read ({e})") from None
    sheet = sheet_queue(header)
    if sheet is not None:
        if not annotator:
            raise LabelError(f"{csv_file}: a {sheet.name} sheet needs --annotator NAME")
        written, unlabelled, problems = import_sheet(run_dir, csv_file, annotator=annotator)
        _console.print(
            f"{written} label(s) written to the {sheet.name} queue; {unlabelled} row(s) unlabelled",
            highlight=False,
        )
        if problems:
            _console.print(
                console_safe(f"{len(problems)} row(s) not read; first: {problems[0]}"),
                highlight=False,
            )
        return
    written, skipped = import_csv(run_dir, csv_file, annotator=annotator, queue=queue)
    _console.print(
        f"{written} label(s) written; {skipped} row(s) without an answer skipped", highlight=False
    )
