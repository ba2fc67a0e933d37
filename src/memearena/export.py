"""A run directory's tables as files people load: ``memearena export DIR --table T --format F``.

One fixed schema per table (``tables()``, documented in docs/exports.md), the same columns in
JSONL, CSV and Parquet, so a table written today loads the same way tomorrow. The tables every
run has (``calls``, ``requests``, ``answers``, ``labels``) are this module's; a method's own
tables, and its part of ``answers``, are declared by its package (``TABLES`` of its
``tables.py``, a :class:`MethodTables`, loaded through
``memearena.engine.registry.method_tables``): this module names no method. Every table that
came from model calls carries the ``request_hash`` of the call it came from (``calls`` and
``requests`` are keyed by it) and, where it is about a meme, the meme's id (``meme``), so the
tables join to each other and to ``calls``.

Read only from the run directory: ``run.db`` (through ``RunStore``'s public methods) and the
methods' output files. Model output and dataset text are untrusted: a CSV cell that a
spreadsheet would read as a formula is written inert (``report.safe.csv_safe``); nested values
are JSON text in CSV and Parquet."""

from __future__ import annotations

import csv
import json
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from memearena.engine.registry import method_names, method_tables
from memearena.engine.results import MissingExtraError
from memearena.errors import MemearenaError
from memearena.report.safe import csv_safe

if TYPE_CHECKING:
    from memearena.store import RunStore

__all__ = [
    "FORMATS",
    "MEME",
    "REQUEST_HASH",
    "Answers",
    "Column",
    "MethodTables",
    "Table",
    "as_int",
    "columns",
    "export_table",
    "exports_doc",
    "labels_table",
    "need",
    "open_store",
    "table_names",
    "table_rows",
    "tables",
]

Kind = Literal["string", "int", "float", "bool", "json"]
FORMATS = ("jsonl", "csv", "parquet")
LABELS = "labels"
"""The human labels' table (``labels_table``), apart: only a labelled run has it."""

_BATCH = 5_000
"""Rows per Parquet row group written: memory follows a batch, not the table."""

Rows = Iterator[dict[str, Any]]


@dataclass(frozen=True)
class Column:
    """One column of an export table."""

    name: str
    kind: Kind
    doc: str


@dataclass(frozen=True)
class Table:
    """One export table: its columns, what a row is and where it is read from."""

    name: str
    row: str
    source: str
    columns: tuple[Column, ...]
    read: Callable[[Path], Rows] | None = field(default=None, compare=False, repr=False)
    """Its rows from the run directory, streamed (MemearenaError when the run lacks its
    source, raised by the first row)."""


@dataclass(frozen=True)
class Answers:
    """A method's part of the ``answers`` table: the stored answers of its models about
    memes."""

    what: str
    """What they are, for the table's description ("Arena answers")."""
    keys: tuple[Column, ...] = ()
    """Its own columns among the coordinates (before ``request_hash``), null in other rows."""
    facts: tuple[Column, ...] = ()
    """Its own columns after ``text``, null in other rows."""
    read: Callable[[RunStore], Rows] | None = field(default=None, compare=False, repr=False)
    """Its rows from the run's store (``meme``, ``model``, ``request_hash``, ``text`` and its
    own columns)."""


@dataclass(frozen=True)
class MethodTables:
    """What a method's package exports (``TABLES`` of its ``tables.py``)."""

    tables: tuple[Table, ...] = ()
    answers: Answers | None = None
    joins: str = ""
    """How its tables join, a sentence or two for docs/exports.md's joins paragraph."""


ColumnSpec = tuple[str, Kind, str]


def columns(*spec: Column | ColumnSpec) -> tuple[Column, ...]:
    """A table's columns from (name, kind, doc) triples."""
    return tuple(c if isinstance(c, Column) else Column(*c) for c in spec)


MEME: ColumnSpec = ("meme", "string", "The meme's id (the dataset's canonical id).")
REQUEST_HASH: ColumnSpec = (
    "request_hash",
    "string",
    "The request hash of the call it came from (calls.request_hash).",
)


# -- rows ------------------------------------------------------------------------------------


def open_store(run_dir: Path) -> RunStore:
    """The run's store (MemearenaError when the directory has no ``run.db``)."""
    from memearena.store import RunStore

    db = run_dir / "run.db"
    if not db.is_file():
        raise MemearenaError(f"{db}: no run database here")
    return RunStore(db)


def need(path: Path, what: str) -> Path:
    """``path``, or MemearenaError saying the run has no ``what``."""
    if not path.is_file():
        raise MemearenaError(f"{path.parent}: no {what} in this run ({path.name} is missing)")
    return path


def as_int(value: Any) -> int | None:
    """``value`` as an int, or None."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _or(names: list[str]) -> str:
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else "".join(names)


def _method_tables() -> list[tuple[str, MethodTables]]:
    """Every registered method's tables, in registration order."""
    return [(name, t) for name in method_names() if (t := method_tables(name)) is not None]


def _calls(run_dir: Path) -> Rows:
    names = [c.name for c in _CALLS.columns]
    with open_store(run_dir) as store:
        for record in store.iter_calls():
            yield {n: getattr(record, n) for n in names}


def _requests(run_dir: Path) -> Rows:
    with open_store(run_dir) as store:
        yield from store.iter_requests()


_CALLS = Table(
    "calls",
    "model call (a retry of a request, a cache hit and a re-ask are calls too)",
    "run.db",
    columns(
        (
            "request_hash",
            "string",
            "The request's hash (requests.key); many calls may share one.",
        ),
        ("model", "string", "The model's name in the config."),
        ("role", "string", "What the call was for, `<method>.<role>`."),
        ("status", "string", "ok, cached, refused, error, sent (unsettled), ..."),
        ("input_tokens", "int", "Prompt tokens reported (or counted)."),
        ("output_tokens", "int", "Completion tokens reported."),
        ("cost_usd", "float", "What the call cost, from the config's prices."),
        ("latency_s", "float", "Seconds from send to reply."),
        ("attempts", "int", "Attempts made (retries included)."),
        ("error", "string", "The error, when it failed."),
        ("response", "string", "The reply's text (untrusted model output)."),
        ("created_at", "float", "Unix time it was recorded."),
        ("call_id", "string", "The call's id."),
        ("cost_bound_usd", "float", "The most it could have cost (reserved when sent)."),
        ("error_kind", "string", "The error's kind, when it failed."),
    ),
    read=_calls,
)
_REQUESTS = Table(
    "requests",
    "request as sent, once per request hash",
    "run.db",
    columns(
        ("key", "string", "The request hash (calls.request_hash)."),
        ("key_version", "int", "The version of the request-key recipe."),
        ("endpoint", "json", "Where it was sent (provider, base URL, model id)."),
        ("messages", "json", "The messages as sent, images by content hash."),
        ("params", "json", "Generation parameters."),
    ),
    read=_requests,
)


def _answers_table(parts: list[tuple[str, Answers]]) -> Table:
    """``answers``: every method's stored answers, one schema (a method's own columns null in
    the others' rows)."""

    def read(run_dir: Path) -> Rows:
        blank = dict.fromkeys(c.name for c in table.columns)
        with open_store(run_dir) as store:
            for name, answers in parts:
                for row in answers.read(store) if answers.read is not None else ():
                    yield blank | {"method": name, **row}

    table = Table(
        "answers",
        f"stored answer of a model about a meme ({', '.join(a.what for _, a in parts)})",
        "run.db artifacts",
        columns(
            ("method", "string", f"{_or([name for name, _ in parts])}."),
            MEME,
            ("model", "string", "The answering model."),
            *(c for _, a in parts for c in a.keys),
            REQUEST_HASH,
            ("text", "string", "The answer (untrusted model output)."),
            *(c for _, a in parts for c in a.facts),
        ),
        read=read,
    )
    return table


def tables() -> dict[str, Table]:
    """Every table ``memearena export`` writes from a run's outputs, by name (``labels``
    apart): ``calls``, ``requests`` and ``answers``, then each registered method's own, in
    registration order."""
    owned = _method_tables()
    out = {t.name: t for t in (_CALLS, _REQUESTS)}
    answers = [(name, m.answers) for name, m in owned if m.answers is not None]
    if answers:
        out["answers"] = _answers_table(answers)
    for name, m in owned:
        for t in m.tables:
            if t.name in out or t.name == LABELS:
                raise MemearenaError(f"export table {t.name!r} of {name} is declared twice")
            out[t.name] = t
    return out


def labels_table() -> Table:
    """``labels``: the run's human labels (a table only where a person, or the demo's simulated
    annotators, labelled the run)."""
    from memearena.labels.queues import queue_names

    return Table(
        LABELS,
        "current human label: the latest answer of one annotator on one item of one queue"
        " (every answer ever given stays in `labels.sqlite`)",
        "labels.sqlite (`memearena.labels.LabelStore.labels`)",
        columns(
            ("id", "int", "The label's row in the label store."),
            ("queue", "string", f"{_or(list(queue_names()))}."),
            ("item_key", "string", "The labelled item's key in its queue."),
            ("annotator", "string", "Who labelled it (as they named themselves)."),
            ("answer", "json", "Each answered field of the queue and its choice."),
            ("created", "float", "Unix time the label was written."),
            ("ui_version", "string", "The labelling interface's version."),
        ),
    )


def table_names() -> tuple[str, ...]:
    """Every table's name (``labels`` last)."""
    return (*tables(), LABELS)


def _labels(run_dir: Path) -> tuple[list[str], Rows]:
    """The run's current human labels (``DIR/labels.sqlite``, read by ``LabelStore``; a
    damaged store is LabelError, one line)."""
    if not (run_dir / "labels.sqlite").is_file():
        raise MemearenaError(f"{run_dir}: no labels in this run")
    from memearena.labels import LabelStore  # only where the run has labels

    with LabelStore(run_dir, create=False) as store:
        rows = [asdict(label) for label in store.labels()]
    if not rows:
        raise MemearenaError(f"{run_dir}: no labels in this run")
    return [c.name for c in labels_table().columns], iter(rows)


def table_rows(run_dir: Path, table: str) -> tuple[list[str], Rows]:
    """A table's column names and its rows (streamed where the source allows); MemearenaError
    for an unknown table or one the run does not hold."""
    run_dir = Path(run_dir)
    if table == LABELS:
        return _labels(run_dir)
    known = tables()
    t = known.get(table)
    if t is None or t.read is None:
        raise MemearenaError(
            f"--table: must be one of {', '.join((*known, LABELS))}, got {table!r}"
        )
    cols = [c.name for c in t.columns]
    rows = t.read(run_dir)
    first = next(rows, None)  # a missing source is an error now, not after the file is opened
    return cols, _chain_first(first, rows)


def _chain_first(first: dict[str, Any] | None, rest: Rows) -> Iterator[Any]:
    if first is not None:
        yield first
        yield from rest


# -- writers ---------------------------------------------------------------------------------


def _kinds(table: str) -> dict[str, Kind]:
    t = labels_table() if table == LABELS else tables()[table]
    return {c.name: c.kind for c in t.columns}


def _cell(value: Any, kind: Kind) -> Any:
    """A value as its column's type (nested values as JSON text)."""
    if value is None:
        return None
    if kind == "json":
        return json.dumps(value, ensure_ascii=False)
    if kind == "string":
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if kind == "bool":
        return bool(value)
    if kind == "int":
        return as_int(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _write_jsonl(rows: Iterable[dict[str, Any]], cols: list[str], f: IO[str]) -> int:
    n = 0
    for row in rows:
        f.write(json.dumps({c: row.get(c) for c in cols}, ensure_ascii=False) + "\n")
        n += 1
    return n


def _write_csv(
    rows: Iterable[dict[str, Any]], cols: list[str], kinds: dict[str, Kind], f: IO[str]
) -> int:
    writer = csv.writer(f)
    writer.writerow([csv_safe(c) for c in cols])
    n = 0
    for row in rows:
        # Dataset and model text is untrusted: no cell may start a spreadsheet formula.
        writer.writerow([csv_safe(_cell(row.get(c), kinds.get(c, "string"))) for c in cols])
        n += 1
    return n


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtraError(
            "Parquet export needs pyarrow: pip install 'memearena[parquet]'"
        ) from None
    return pa, pq


def _write_parquet(
    rows: Iterator[dict[str, Any]], cols: list[str], kinds: dict[str, Kind], path: Path
) -> int:
    pa, pq = _pyarrow()
    types = {"string": pa.string(), "json": pa.string(), "int": pa.int64()}
    types |= {"float": pa.float64(), "bool": pa.bool_()}
    schema = pa.schema([(c, types[kinds.get(c, "string")]) for c in cols])
    n = 0
    with pq.ParquetWriter(path, schema) as writer:
        while True:
            batch = [r for _, r in zip(range(_BATCH), rows, strict=False)]
            if not batch and n:
                break
            data = {c: [_cell(r.get(c), kinds.get(c, "string")) for r in batch] for c in cols}
            writer.write_table(pa.table(data, schema=schema))
            n += len(batch)
            if not batch:
                break
    return n


def export_table(run_dir: Path, table: str, fmt: str, to: Path | None) -> tuple[int, Path | None]:
    """Write ``table`` of ``run_dir`` as ``fmt`` to ``to`` (None: ``DIR/<table>.<fmt>``; ``-``:
    stdout, not for Parquet); returns the rows written and the file (None for stdout)."""
    if fmt not in FORMATS:
        raise MemearenaError(f"--format: must be jsonl, csv or parquet, got {fmt!r}")
    if fmt == "parquet":
        _pyarrow()  # the missing extra is named before anything is read
    stdout = to is not None and str(to) == "-"
    if stdout and fmt == "parquet":
        raise MemearenaError("--to -: Parquet is written to a file, not to stdout")
    cols, rows = table_rows(run_dir, table)
    kinds = _kinds(table)
    if stdout:
        n = _write_text(rows, cols, kinds, fmt, sys.stdout)
        sys.stdout.flush()
        return n, None
    target = to or Path(run_dir) / f"{table}.{fmt}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "parquet":
            return _write_parquet(rows, cols, kinds, target), target
        with target.open("w", encoding="utf-8", newline="") as f:
            return _write_text(rows, cols, kinds, fmt, f), target
    except OSError as e:
        raise MemearenaError(f"{target}: cannot write export ({e.strerror or e})") from None


def _write_text(
    rows: Iterator[dict[str, Any]], cols: list[str], kinds: dict[str, Kind], fmt: str, f: IO[str]
) -> int:
    if fmt == "jsonl":
        return _write_jsonl(rows, cols, f)
    return _write_csv(rows, cols, kinds, f)


JOINS_WIDTH = 87
"""The joins paragraph's line width in docs/exports.md."""


def _joins() -> list[str]:
    """The joins paragraph: how every table joins, then how each method's own tables do."""
    said = [
        "**Joins.** Every row that came from a model call names that call's request:"
        " `request_hash` (in `requests`, `key`) joins to `calls.request_hash`; a request can"
        " have several calls (retries, cache hits). Rows about a meme carry its id in `meme`,"
        " the dataset's canonical id, the same in every table and method.",
        *(m.joins for _, m in _method_tables() if m.joins),
        "Integer columns with nulls load in pandas as floats.",
    ]
    return textwrap.wrap(" ".join(said), JOINS_WIDTH, break_on_hyphens=False)


def exports_doc() -> str:
    """docs/exports.md: every table's schema (a test keeps the file equal to this)."""
    out = [
        "# Exports",
        "",
        "`memearena export DIR --table TABLE --format jsonl|csv|parquet [--to FILE]` writes one",
        "table of a run directory (default `DIR/TABLE.FORMAT`; `--to -` writes JSONL or CSV to",
        "stdout). Each table has one schema, the same columns in every format. Parquet needs",
        "pyarrow (`pip install 'memearena[parquet]'`). In CSV and Parquet a `json` column holds",
        "JSON text; in CSV a cell that a spreadsheet would read as a formula (starting with `=`,",
        "`+`, `-`, `@`, a tab or a carriage return) gets a leading `'`. Text written by models or",
        "taken from datasets is untrusted: escape it before rendering it anywhere.",
        "",
        *_joins(),
        "",
        "`labels` is the run's human labels (`DIR/labels.sqlite`); a run without labels says so.",
        "`--table artifacts` and `--table errors` export `run.db`'s raw tables (JSONL or CSV",
        "only), as before.",
        "",
    ]
    for t in (*tables().values(), labels_table()):
        out += [f"## `{t.name}`", "", f"One row per {t.row}. Read from {t.source}.", ""]
        out += ["| column | type | meaning |", "|---|---|---|"]
        out += [f"| `{c.name}` | {c.kind} | {c.doc} |" for c in t.columns]
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":  # python -m memearena.export > docs/exports.md
    # The package's own module, not this __main__ copy: the methods' tables are built from it.
    from memearena import export

    sys.stdout.write(export.exports_doc())
