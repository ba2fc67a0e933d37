"""A run directory's tables as files people load: ``memearena export DIR --table T --format F``.

One fixed schema per table (``TABLES``, documented in docs/exports.md), the same columns in
JSONL, CSV and Parquet, so a table written today loads the same way tomorrow. Every table that
came from model calls carries the ``request_hash`` of the call it came from (``calls`` and
``requests`` are keyed by it) and, where it is about a meme, the meme's id (``meme``), so the
tables join to each other and to ``calls``.

Read only from the run directory: ``run.db`` (through ``RunStore``'s public methods) and the
methods' output files. Model output and dataset text are untrusted: a CSV cell that a
spreadsheet would read as a formula is written inert (``report.safe.csv_safe``); nested values
are JSON text in CSV and Parquet."""

from __future__ import annotations

import csv
import hashlib
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from memearena.engine.results import MissingExtraError, read_jsonl
from memearena.errors import MemearenaError
from memearena.report.safe import csv_safe

if TYPE_CHECKING:
    from memearena.store import RunStore

__all__ = ["FORMATS", "LABELS", "TABLES", "Column", "Table", "export_table", "table_rows"]

Kind = Literal["string", "int", "float", "bool", "json"]
FORMATS = ("jsonl", "csv", "parquet")

_BATCH = 5_000
"""Rows per Parquet row group written: memory follows a batch, not the table."""


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


def _cols(*spec: tuple[str, Kind, str]) -> tuple[Column, ...]:
    return tuple(Column(*c) for c in spec)


_MEME: tuple[str, Kind, str] = ("meme", "string", "The meme's id (the dataset's canonical id).")
_RH: tuple[str, Kind, str] = (
    "request_hash",
    "string",
    "The request hash of the call it came from (calls.request_hash).",
)

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table(
            "calls",
            "model call (a retry of a request, a cache hit and a re-ask are calls too)",
            "run.db",
            _cols(
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
        ),
        Table(
            "requests",
            "request as sent, once per request hash",
            "run.db",
            _cols(
                ("key", "string", "The request hash (calls.request_hash)."),
                ("key_version", "int", "The version of the request-key recipe."),
                ("endpoint", "json", "Where it was sent (provider, base URL, model id)."),
                ("messages", "json", "The messages as sent, images by content hash."),
                ("params", "json", "Generation parameters."),
            ),
        ),
        Table(
            "battles",
            "resolved Arena battle (a judge's verdict on one criterion, both orders)",
            "battles.jsonl, battles.self_judged.jsonl",
            _cols(
                _MEME,
                ("source", "string", "The dataset entry the meme came from."),
                ("setting", "string", "The guideline setting judged under."),
                ("context", "string", "The context level the answers were given with."),
                ("criterion", "string", "The criterion judged."),
                ("judge", "string", "The judge model."),
                ("model_a", "string", "The first target."),
                ("model_b", "string", "The second target."),
                ("winner", "string", "model_a, model_b or tie."),
                ("request_hash", "string", "The verdict's request, first order."),
                ("request_hash_2", "string", "The verdict's request, swapped order (or null)."),
                (
                    "self_judged",
                    "bool",
                    "The judge is of a target's family: left out of the ranking.",
                ),
            ),
        ),
        Table(
            "answers",
            "stored answer of a model about a meme (Arena answers, Adapt answers, Judge-audit"
            " responses)",
            "run.db artifacts",
            _cols(
                ("method", "string", "arena, adapt or judge_audit."),
                _MEME,
                ("model", "string", "The answering model."),
                ("context", "string", "Arena: the context level (else null)."),
                ("category", "string", "Adapt: the harm category asked about (else null)."),
                ("repeat", "int", "Adapt: the repeat (else null)."),
                (
                    "variant",
                    "string",
                    "Adapt: '' the original on its own image, 'loop' the "
                    "original on the erased image, 'rw:<hash>' a rewrite (else null).",
                ),
                _RH,
                ("text", "string", "The answer (untrusted model output)."),
                ("format_ok", "bool", "Arena: it had the requested sections (else null)."),
                ("refused", "bool", "Adapt: the model refused (else null)."),
            ),
        ),
        Table(
            "scores",
            "Adapt score of a target's answer about an original meme",
            "adapt_scores.jsonl",
            _cols(
                _MEME,
                ("model", "string", "The target."),
                ("category", "string", "The harm category."),
                ("repeat", "int", "The repeat."),
                ("outcome", "string", "scored, refused or unparsed."),
                ("score", "float", "The scorers' mean, 1-10 (null unless scored)."),
                ("by_scorer", "json", "Each scorer's score."),
                ("self_scored", "bool", "A scorer scored its own model's answer."),
                ("refused", "bool", "The target refused."),
                ("reason", "string", "Why it has no score."),
                ("image_sha256", "string", "The image shown (the erased image)."),
                (
                    "request_hash",
                    "string",
                    "The answer's request (variant 'loop'; null when the "
                    "request was first reached by another item).",
                ),
                ("original_image_outcome", "string", "The same on the meme's own image."),
                ("original_image_score", "float", "The score on the meme's own image."),
                ("original_image_request_hash", "string", "That answer's request."),
            ),
        ),
        Table(
            "chains",
            "step of an Adapt refinement chain",
            "adapt_chains.jsonl",
            _cols(
                ("chain", "int", "The chain's line in adapt_chains.jsonl (1-based)."),
                ("model", "string", "The target."),
                ("category", "string", "The harm category."),
                ("repeat", "int", "The repeat."),
                ("mode", "string", "conditional (the loop) or control."),
                ("seed", "string", "The chain's seed meme."),
                ("stop", "string", "Why the chain stopped."),
                ("step", "int", "The step (1-based)."),
                _MEME,
                ("misbelief", "string", "The misbelief the rewrite must keep."),
                ("text", "string", "The rewrite (untrusted model output)."),
                ("score_before", "float", "The score before this step."),
                ("score_after", "float", "The score on the rewrite (null when not scored)."),
                ("score_outcome", "string", "scored, refused or unparsed."),
                ("decision", "string", "What the step decided (lowered, held, ...)."),
                (
                    "request_hash",
                    "string",
                    "The target's answer to the rewrite (null when the "
                    "request was first reached by another item).",
                ),
            ),
        ),
        Table(
            "audit_scores",
            "Judge-audit scored pair (a judge's scores of the unbiased and biased item)",
            "judge_audit_scores.jsonl",
            _cols(
                _MEME,
                ("judge", "string", "The audited judge."),
                ("responder", "string", "The model whose response was judged (or null)."),
                ("bias_type", "string", "The perturbation."),
                ("unbiased_score", "float", "The score of the unperturbed item."),
                ("biased_score", "float", "The score of the perturbed item."),
                ("unbiased_status", "string", "ok, abstained, unparsed, refused, ..."),
                ("biased_status", "string", "The same for the perturbed item."),
                (
                    "unbiased_request_hash",
                    "string",
                    "The request of the unperturbed item's score (calls.request_hash; null in"
                    " a log written before requests were recorded).",
                ),
                ("biased_request_hash", "string", "The same for the perturbed item."),
            ),
        ),
    )
}
"""Every table ``memearena export`` writes from a run's outputs, by name (``LABELS`` apart)."""

LABELS = Table(
    "labels",
    "current human label: the latest answer of one annotator on one item of one queue (every"
    " answer ever given stays in `labels.sqlite`)",
    "labels.sqlite (`memearena.labels.LabelStore.labels`)",
    _cols(
        ("id", "int", "The label's row in the label store."),
        ("queue", "string", "battles, guidelines, rewrites or perturbations."),
        ("item_key", "string", "The labelled item's key in its queue."),
        ("annotator", "string", "Who labelled it (as they named themselves)."),
        ("answer", "json", "Each answered field of the queue and its choice."),
        ("created", "float", "Unix time the label was written."),
        ("ui_version", "string", "The labelling interface's version."),
    ),
)
"""The run's human labels: a table only where a person (or the demo's simulated annotators)
labelled the run."""

TABLE_NAMES = (*TABLES, LABELS.name)


# -- rows ------------------------------------------------------------------------------------


def _store(run_dir: Path) -> RunStore:
    from memearena.store import RunStore

    db = run_dir / "run.db"
    if not db.is_file():
        raise MemearenaError(f"{db}: no run database here")
    return RunStore(db)


def _calls(run_dir: Path) -> Iterator[dict[str, Any]]:
    names = [c.name for c in TABLES["calls"].columns]
    with _store(run_dir) as store:
        for record in store.iter_calls():
            yield {n: getattr(record, n) for n in names}


def _requests(run_dir: Path) -> Iterator[dict[str, Any]]:
    with _store(run_dir) as store:
        yield from store.iter_requests()


def _need(path: Path, what: str) -> Path:
    if not path.is_file():
        raise MemearenaError(f"{path.parent}: no {what} in this run ({path.name} is missing)")
    return path


def _battles(run_dir: Path) -> Iterator[dict[str, Any]]:
    main = _need(run_dir / "battles.jsonl", "battles")
    for path, self_judged in ((main, False), (run_dir / "battles.self_judged.jsonl", True)):
        if not path.is_file():
            continue
        for row in read_jsonl(path):
            reqs = row.get("requests") if isinstance(row.get("requests"), list) else []
            yield {
                "meme": row.get("item"),
                **{k: row.get(k) for k in ("source", "setting", "context", "criterion")},
                **{k: row.get(k) for k in ("judge", "model_a", "model_b", "winner")},
                "request_hash": reqs[0] if reqs else None,
                "request_hash_2": reqs[1] if len(reqs) > 1 else None,
                "self_judged": self_judged,
            }


def _adapt_for(value: Mapping[str, Any]) -> tuple[str, str, str, str, int | None] | None:
    """(meme, variant, category, target, repeat) an Adapt step names in its ``for``."""
    parts = str(value.get("for") or "").split("|")
    if len(parts) < 5:
        return None
    try:
        repeat: int | None = int(parts[4])
    except ValueError:
        repeat = None
    return parts[0], parts[1], parts[2], parts[3], repeat


def _answers(run_dir: Path) -> Iterator[dict[str, Any]]:
    blank = dict.fromkeys(c.name for c in TABLES["answers"].columns)
    with _store(run_dir) as store:
        for key, value in store.artifacts("answer"):  # meme|level|model|request
            meme, level, model, request = (key.rsplit("|", 3) + [None] * 4)[:4]
            yield blank | {
                "method": "arena",
                "meme": meme,
                "model": model,
                "context": level,
                "request_hash": request,
                "text": value.get("text"),
                "format_ok": value.get("format_ok"),
            }
        for key, value in store.artifacts("adapt.answer"):  # the request hash
            named = _adapt_for(value)
            meme, variant, category, _, repeat = named or (None, None, None, None, None)
            yield blank | {
                "method": "adapt",
                "meme": meme,
                "model": value.get("model"),
                "category": category,
                "repeat": repeat,
                "variant": variant,
                "request_hash": key,
                "text": value.get("answer"),
                "refused": bool(value.get("refusal")),
            }
        for key, value in store.artifacts("ja_response"):  # meme|responder|request
            meme, model, request = (key.rsplit("|", 2) + [None] * 3)[:3]
            yield blank | {
                "method": "judge_audit",
                "meme": meme,
                "model": model,
                "request_hash": request,
                "text": value.get("text"),
            }


def _adapt_requests(run_dir: Path) -> dict[tuple[str, str, str, str, int | None], str]:
    """Each Adapt answer's request hash by the (meme, variant, category, target, repeat) that
    first reached it (a request reached again by another item names only the first)."""
    out: dict[tuple[str, str, str, str, int | None], str] = {}
    if not (run_dir / "run.db").is_file():
        return out
    with _store(run_dir) as store:
        for key, value in store.artifacts("adapt.answer"):
            named = _adapt_for(value)
            if named is not None:
                out.setdefault(named, key)
    return out


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _scores(run_dir: Path) -> Iterator[dict[str, Any]]:
    rows = read_jsonl(_need(run_dir / "adapt_scores.jsonl", "Adapt scores"))
    requests = _adapt_requests(run_dir)
    for row in rows:
        meme, cat, model = row.get("meme"), row.get("category"), row.get("target")
        repeat = _int(row.get("repeat"))
        image = row.get("image") if isinstance(row.get("image"), dict) else {}
        own = row.get("original_image") if isinstance(row.get("original_image"), dict) else {}
        yield {
            "meme": meme,
            "model": model,
            "category": cat,
            "repeat": repeat,
            **{k: row.get(k) for k in ("outcome", "score", "by_scorer", "self_scored")},
            **{k: row.get(k) for k in ("refused", "reason")},
            "image_sha256": image.get("sha256"),
            # The erased image equals the meme's own where nothing was erased: one request,
            # named by whichever of the two reached it first.
            "request_hash": requests.get((meme, "loop", cat, model, repeat))
            or (
                requests.get((meme, "", cat, model, repeat))
                if image.get("sha256") and image.get("sha256") == own.get("sha256")
                else None
            ),
            "original_image_outcome": own.get("outcome"),
            "original_image_score": own.get("score"),
            "original_image_request_hash": (
                requests.get((meme, "", cat, model, repeat)) if own else None
            ),
        }


def _chains(run_dir: Path) -> Iterator[dict[str, Any]]:
    rows = read_jsonl(_need(run_dir / "adapt_chains.jsonl", "Adapt chains"))
    requests = _adapt_requests(run_dir)
    for n, chain in enumerate(rows, start=1):
        model, cat, repeat = chain.get("target"), chain.get("category"), _int(chain.get("repeat"))
        for st in chain.get("steps") or []:
            text = st.get("text")
            variant = "rw:" + hashlib.sha256(text.encode()).hexdigest()[:16] if text else None
            meme = st.get("meme")
            yield {
                "chain": n,
                "model": model,
                "category": cat,
                "repeat": repeat,
                **{k: chain.get(k) for k in ("mode", "seed", "stop")},
                "step": _int(st.get("step")),
                "meme": meme,
                "misbelief": st.get("misbelief"),
                "text": text,
                **{k: st.get(k) for k in ("score_before", "score_after", "score_outcome")},
                "decision": st.get("decision") or st.get("outcome"),
                "request_hash": (
                    requests.get((meme, variant, cat, model, repeat)) if variant else None
                ),
            }


def _audit_scores(run_dir: Path) -> Iterator[dict[str, Any]]:
    rows = read_jsonl(_need(run_dir / "judge_audit_scores.jsonl", "Judge-audit scores"))
    for row in rows:
        status = row.get("status") if isinstance(row.get("status"), list) else [None, None]
        yield {
            "meme": row.get("id"),
            **{k: row.get(k) for k in ("judge", "responder", "bias_type")},
            "unbiased_score": row.get("unbiased_score"),
            "biased_score": row.get("biased_score"),
            "unbiased_status": status[0] if status else None,
            "biased_status": status[1] if len(status) > 1 else None,
            # An older log has no request keys: null, never a guess.
            "unbiased_request_hash": row.get("unbiased_request"),
            "biased_request_hash": row.get("biased_request"),
        }


def _labels(run_dir: Path) -> tuple[list[str], Iterator[dict[str, Any]]]:
    """The run's current human labels (``DIR/labels.sqlite``, read by ``LabelStore``; a
    damaged store is LabelError, one line)."""
    if not (run_dir / "labels.sqlite").is_file():
        raise MemearenaError(f"{run_dir}: no labels in this run")
    from memearena.labels import LabelStore  # only where the run has labels

    with LabelStore(run_dir, create=False) as store:
        rows = [asdict(label) for label in store.labels()]
    if not rows:
        raise MemearenaError(f"{run_dir}: no labels in this run")
    return [c.name for c in LABELS.columns], iter(rows)


_READERS: dict[str, Callable[[Path], Iterator[dict[str, Any]]]] = {
    "calls": _calls,
    "requests": _requests,
    "battles": _battles,
    "answers": _answers,
    "scores": _scores,
    "chains": _chains,
    "audit_scores": _audit_scores,
}


def table_rows(run_dir: Path, table: str) -> tuple[list[str], Iterator[dict[str, Any]]]:
    """A table's column names and its rows (streamed where the source allows); MemearenaError
    for an unknown table or one the run does not hold."""
    run_dir = Path(run_dir)
    if table == LABELS.name:
        return _labels(run_dir)
    if table not in _READERS:
        raise MemearenaError(f"--table: must be one of {', '.join(TABLE_NAMES)}, got {table!r}")
    cols = [c.name for c in TABLES[table].columns]
    rows = _READERS[table](run_dir)
    first = next(rows, None)  # a missing source is an error now, not after the file is opened
    return cols, _chain_first(first, rows)


def _chain_first(first: dict[str, Any] | None, rest: Iterator[dict[str, Any]]) -> Iterator[Any]:
    if first is not None:
        yield first
        yield from rest


# -- writers ---------------------------------------------------------------------------------


def _kinds(table: str) -> dict[str, Kind]:
    t = LABELS if table == LABELS.name else TABLES[table]
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
        return _int(value)
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
        "**Joins.** Every row that came from a model call names that call's request:",
        "`request_hash` (in `requests`, `key`) joins to `calls.request_hash`; a request can have",
        "several calls (retries, cache hits). Rows about a meme carry its id in `meme`, the",
        "dataset's canonical id, the same in every table and method. Adapt steps are stored once",
        "per request, named by the first item that reached it: when two items send the same",
        "request, only the first one's row carries its `request_hash` (the other's is null).",
        "`audit_scores` names both scores' requests (`unbiased_request_hash`,",
        "`biased_request_hash`); a request can serve several rows (the unperturbed item is",
        "shared by its bias types), and a log written before requests were recorded has them",
        "null (join it by `meme`, `judge` and `responder`). Integer columns with nulls load in",
        "pandas as floats.",
        "",
        "`labels` is the run's human labels (`DIR/labels.sqlite`); a run without labels says so.",
        "`--table artifacts` and `--table errors` export `run.db`'s raw tables (JSONL or CSV",
        "only), as before.",
        "",
    ]
    for t in (*TABLES.values(), LABELS):
        out += [f"## `{t.name}`", "", f"One row per {t.row}. Read from {t.source}.", ""]
        out += ["| column | type | meaning |", "|---|---|---|"]
        out += [f"| `{c.name}` | {c.kind} | {c.doc} |" for c in t.columns]
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":  # python -m memearena.export > docs/exports.md
    sys.stdout.write(exports_doc())
