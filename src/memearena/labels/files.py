"""Labels in and out: CSV export and import of every queue, a method's own labelling sheet's
import (``LabelQueue.sheet``), and the ``labels`` section of ``leaderboard.json`` (with the
report re-rendered).

CSV schema (one row per item and annotator; UTF-8, header row first):

- ``queue``, ``item_key``: the queue and the item's stable key (``queues``);
- ``title``, ``text_<name>``, ``image_<name>``: what the person sees (export only; an image is the
  sha256 of a file under ``DIR/images/``); never a hidden value (model names, verdicts);
- ``annotator``, ``created`` (Unix time), ``ui_version``: who answered, when, with what;
- one column per field of the queue (``queues.fields_of``), holding one of its choices or
  empty.

Export writes every item (an item nobody labelled: one row with ``annotator`` empty) and every
current label. Import reads ``item_key``, ``annotator`` (or the default given), the field
columns and, when present, ``created`` / ``ui_version``; a row with no field answered is
skipped and counted; a bad row is an error naming the file, line and field, and nothing is
written. Exported cells that a spreadsheet would run as a formula start with an apostrophe
(``report.safe.csv_safe``); import takes it off again.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memearena.labels.errors import LabelError
from memearena.labels.queues import LabelItem, LabelQueue, fields_of, label_queues, queue_items
from memearena.labels.store import LabelStore
from memearena.report.safe import FORMULA_PREFIXES, csv_safe

__all__ = [
    "MAX_CSV_BYTES",
    "export_csv",
    "import_csv",
    "import_sheet",
    "read_csv",
    "sheet_queue",
    "unescape_cell",
    "write_labels_section",
]

MAX_CSV_BYTES = 64 << 20
IMPORTED_UI = "csv-import"


def unescape_cell(cell: str) -> str:
    """A cell as it was before ``csv_safe`` (its apostrophe before a formula prefix removed)."""
    if cell.startswith("'") and cell[1:].startswith(FORMULA_PREFIXES):
        return cell[1:]
    return cell


def export_csv(run_dir: Path, queue: str, out: Path) -> int:
    """Write ``queue``'s items and current labels to ``out`` (see the module); rows written."""
    fields = [f.name for f in fields_of(queue)]
    items = queue_items(run_dir, queue)
    text_cols = sorted({k for it in items for k in it.texts})
    image_cols = sorted({k for it in items for k in it.images})
    store = LabelStore(run_dir, create=False)
    try:
        labels = store.labels(queue)
    finally:
        store.close()
    by_item: dict[str, list[Any]] = {}
    for lab in labels:
        by_item.setdefault(lab.item_key, []).append(lab)
    header = [
        "queue",
        "item_key",
        "title",
        *(f"text_{c}" for c in text_cols),
        *(f"image_{c}" for c in image_cols),
        "annotator",
        "created",
        "ui_version",
        *fields,
    ]
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    n = 0

    def row(it: LabelItem, lab: Any | None) -> list[object]:
        base: list[object] = [
            queue,
            it.key,
            it.title,
            *(it.texts.get(c, "") for c in text_cols),
            *(it.images.get(c, "") for c in image_cols),
        ]
        if lab is None:
            return [*base, "", "", "", *("" for _ in fields)]
        return [
            *base,
            lab.annotator,
            f"{lab.created:.3f}",
            lab.ui_version,
            *(lab.answer.get(f, "") for f in fields),
        ]

    for it in items:
        for lab in by_item.get(it.key) or [None]:
            w.writerow([csv_safe(c) for c in row(it, lab)])
            n += 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(buf.getvalue(), encoding="utf-8")
    return n


def read_csv(path: Path) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """A CSV's header and its rows with their line numbers (bounded: ``MAX_CSV_BYTES``; an
    unreadable file is one LabelError line naming it)."""
    try:
        if path.stat().st_size > MAX_CSV_BYTES:
            raise LabelError(f"{path}: larger than {MAX_CSV_BYTES >> 20} MiB")
        text = path.read_text(encoding="utf-8-sig")
    except OSError as e:
        raise LabelError(f"{path}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError:
        raise LabelError(f"{path}: not UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        rows = [(reader.line_num, dict(r)) for r in reader]
    except csv.Error as e:
        raise LabelError(f"{path}:{reader.line_num}: {e}") from None
    return list(reader.fieldnames or []), rows


def import_csv(
    run_dir: Path, path: Path, *, annotator: str | None = None, queue: str | None = None
) -> tuple[int, int]:
    """Append the labels of a CSV (see the module) to ``DIR/labels.sqlite``: (written,
    skipped rows). All rows or none."""
    header, rows = read_csv(path)
    need = ["item_key"]
    if queue is None:
        need.append("queue")
    missing = [c for c in need if c not in header]
    if missing:
        raise LabelError(f"{path}:1: missing column(s) {', '.join(missing)}")
    if "annotator" not in header and not annotator:
        raise LabelError(f"{path}:1: no annotator column: give the annotator's name")
    out: list[dict[str, Any]] = []
    skipped = 0
    queues = label_queues()
    for line, r in rows:
        q = queue or unescape_cell((r.get("queue") or "").strip())
        if q not in queues:
            raise LabelError(f"{path}:{line}: queue: {q[:40]!r} is not one of {', '.join(queues)}")
        answer = {}
        for f in fields_of(q):
            cell = unescape_cell((r.get(f.name) or "").strip())
            if cell:
                answer[f.name] = cell
        if not answer:
            skipped += 1
            continue
        who = unescape_cell((r.get("annotator") or "").strip()) or (annotator or "")
        created = (r.get("created") or "").strip()
        try:
            when = float(created) if created else None
        except ValueError:
            raise LabelError(
                f"{path}:{line}: created: not a Unix time ({created[:30]!r})"
            ) from None
        out.append(
            {
                "queue": q,
                "item_key": unescape_cell((r.get("item_key") or "").strip()),
                "annotator": who,
                "answer": answer,
                "created": when,
                "ui_version": unescape_cell((r.get("ui_version") or "").strip()) or IMPORTED_UI,
                "line": line,
            }
        )
    store = LabelStore(run_dir)
    try:
        try:
            written = store.add_many(out)
        except LabelError as e:
            # "label N: ..." → the file's line of the N-th label
            msg = str(e)
            if msg.startswith("label ") and msg.split(":", 1)[0][6:].isdigit():
                i = int(msg.split(":", 1)[0][6:]) - 1
                raise LabelError(
                    f"{path}:{out[i]['line']}: {msg.split(':', 1)[1].strip()}"
                ) from None
            raise
    finally:
        store.close()
    return written, skipped


def sheet_queue(header: Sequence[str]) -> LabelQueue | None:
    """The queue whose labelling sheet a CSV with this header is (its sheet's columns all in it,
    and no ``item_key`` column: that is a labels CSV), or None."""
    if "item_key" in header:
        return None
    for q in label_queues().values():
        if q.sheet is not None and set(q.sheet.columns) <= set(header):
            return q
    return None


def import_sheet(run_dir: Path, sheet: Path, *, annotator: str) -> tuple[int, int, list[str]]:
    """A method's own labelling sheet, filled in (``LabelQueue.sheet``, the queue found by
    :func:`sheet_queue`), as labels of ``annotator``: (written, unlabelled rows, problems). A
    problem row is listed and not written; the rest are written all or none."""
    header, _ = read_csv(sheet)
    q = sheet_queue(header)
    if q is None or q.sheet is None:
        raise LabelError(f"{sheet}: not a labelling sheet of any queue")
    out, unlabelled, problems = q.sheet.read(Path(run_dir), sheet, annotator)
    store = LabelStore(run_dir)
    try:
        written = store.add_many(out)
    finally:
        store.close()
    return written, unlabelled, problems


def write_labels_section(run_dir: Path, doc: dict[str, Any]) -> Path:
    """Put ``doc`` under ``labels`` in ``leaderboard.json`` (other keys kept) and re-render
    ``report.html``, holding the run's lock (a run writing the directory makes this wait for
    nothing: it is refused with RunLockedError). The report's path."""
    from memearena.engine.leaderboard import merge_leaderboard
    from memearena.engine.lifecycle import write_run_report
    from memearena.store import RunLock

    lock = RunLock(run_dir).acquire()
    try:
        board = merge_leaderboard(run_dir, ["labels"], {"labels": doc})
        return write_run_report(run_dir, board)
    finally:
        lock.release()
