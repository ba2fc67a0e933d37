"""The label store: ``DIR/labels.sqlite``, beside ``run.db`` and never inside it.

Contract (the viewer's labelling pages, the CLI and the demo's simulated annotators write
through it; agreement figures read it):

- one table of labels, **append-only** (SQLite triggers refuse UPDATE and DELETE): a
  changed mind is a new row, and for figures the latest answer per (queue, item,
  annotator) wins (``LabelStore.labels``); every row stays for the record;
- WAL with a busy timeout, each label its own transaction: two annotators (two browser
  sessions, or a session and an import) may write at once;
- an answer is validated against its queue's fields (``queues.fields_of``) before it is
  written; a bad one raises ``LabelError`` with a one-line message naming the field;
- the file is 0600 in the (0700) run directory; ``run.db`` is never opened here.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memearena.labels.errors import LabelError
from memearena.labels.queues import fields_of

__all__ = [
    "LABELS_FILE",
    "MAX_ANNOTATOR",
    "MAX_ITEM_KEY",
    "UI_VERSION",
    "Label",
    "LabelError",
    "LabelStore",
    "check_annotator",
]

LABELS_FILE = "labels.sqlite"
UI_VERSION = "labels-1"
"""The labelling interface's version, recorded with every label (a changed form or wording
makes older labels distinguishable)."""
MAX_ANNOTATOR = 64
MAX_ITEM_KEY = 256
_BUSY_MS = 10_000
_SCHEMA = 1


@dataclass(frozen=True)
class Label:
    """One stored label: one annotator's answer on one item of one queue."""

    id: int
    queue: str
    item_key: str
    annotator: str
    answer: dict[str, Any]
    created: float
    """Unix time the label was written."""
    ui_version: str


def _printable(value: str, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise LabelError(f"{what} must be text")
    value = value.strip()
    if not value:
        raise LabelError(f"{what} is empty")
    if len(value) > limit:
        raise LabelError(f"{what} is longer than {limit} characters")
    # Names and keys reach pages, terminals and CSV files: no control or format characters.
    if any(not ch.isprintable() for ch in value):
        raise LabelError(f"{what} holds a control character")
    return value


def check_annotator(name: str) -> str:
    """The annotator name as stored (stripped), or LabelError (empty, too long, control
    characters)."""
    return _printable(name, "annotator name", MAX_ANNOTATOR)


def validate_answer(queue: str, answer: Mapping[str, Any]) -> dict[str, str]:
    """The answer as stored: every field known to the queue, every value one of its choices,
    at least one field answered. LabelError names the first problem."""
    if not isinstance(answer, Mapping):
        raise LabelError("answer must be a mapping of field to choice")
    fields = {f.name: f for f in fields_of(queue)}
    out: dict[str, str] = {}
    for name, value in answer.items():
        field = fields.get(str(name))
        if field is None:
            raise LabelError(
                f"{queue}: unknown field {str(name)[:40]!r}; fields are {', '.join(fields)}"
            )
        if value is None or value == "":
            continue  # a field left unanswered
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise LabelError(f"{queue}.{field.name}: value must be one of {field.choices}")
        text = str(value).strip()
        if text not in field.choices:
            raise LabelError(
                f"{queue}.{field.name}: {text[:20]!r} is not one of {', '.join(field.choices)}"
            )
        out[field.name] = text
    if not out:
        raise LabelError(f"{queue}: the answer has no field answered")
    return {f: out[f] for f in fields if f in out}


_DDL = (
    """CREATE TABLE IF NOT EXISTS labels (
        id INTEGER PRIMARY KEY,
        queue TEXT NOT NULL,
        item_key TEXT NOT NULL,
        annotator TEXT NOT NULL,
        answer TEXT NOT NULL,
        created REAL NOT NULL,
        ui_version TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS labels_item ON labels(queue, annotator, item_key)",
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # Append-only: a label once written is the record of what was answered, then.
    """CREATE TRIGGER IF NOT EXISTS labels_no_update BEFORE UPDATE ON labels
       BEGIN SELECT RAISE(ABORT, 'labels are append-only'); END""",
    """CREATE TRIGGER IF NOT EXISTS labels_no_delete BEFORE DELETE ON labels
       BEGIN SELECT RAISE(ABORT, 'labels are append-only'); END""",
)


class LabelStore:
    """``DIR/labels.sqlite``: see the module. Safe to share between threads of one process
    (one connection behind a lock); other processes write through their own."""

    def __init__(self, run_dir: Path, *, create: bool = True) -> None:
        self.path = Path(run_dir) / LABELS_FILE
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        if not self.path.exists() and not create:
            return  # nothing labelled yet: reads are empty, a write is refused
        if not Path(run_dir).is_dir():
            raise LabelError(f"{run_dir}: not a directory")
        if self.path.is_symlink():
            raise LabelError(f"{self.path}: a link, not the run's own label store")
        try:
            # Created 0600 before SQLite opens it: labels name people.
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
            db = sqlite3.connect(
                self.path, timeout=_BUSY_MS / 1000, isolation_level=None, check_same_thread=False
            )
            db.execute(f"PRAGMA busy_timeout={_BUSY_MS}")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            for sql in _DDL:
                db.execute(sql)
            db.execute(
                "INSERT OR IGNORE INTO meta(name, value) VALUES ('schema', ?)", (str(_SCHEMA),)
            )
            (schema,) = db.execute("SELECT value FROM meta WHERE name='schema'").fetchone()
        except (OSError, sqlite3.Error) as e:
            raise LabelError(f"{self.path}: cannot open the label store ({e})") from None
        if str(schema) != str(_SCHEMA):
            db.close()
            raise LabelError(f"{self.path}: label store schema {schema}, expected {_SCHEMA}")
        self._db = db

    def __enter__(self) -> LabelStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def add(
        self,
        *,
        queue: str,
        item_key: str,
        annotator: str,
        answer: Mapping[str, Any],
        ui_version: str = UI_VERSION,
        created: float | None = None,
    ) -> Label:
        """Append one label (validated: see ``validate_answer``); the stored row."""
        stored = validate_answer(queue, answer)
        key = _printable(item_key, "item key", MAX_ITEM_KEY)
        who = check_annotator(annotator)
        ui = _printable(ui_version, "UI version", 64)
        when = time.time() if created is None else float(created)
        if not math.isfinite(when):
            raise LabelError("label time must be a finite number")
        text = json.dumps(stored, sort_keys=True, ensure_ascii=False)
        with self._lock:
            if self._db is None:
                raise LabelError(f"{self.path}: the label store is not open for writing")
            try:
                cur = self._db.execute(
                    "INSERT INTO labels(queue, item_key, annotator, answer, created, ui_version)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (queue, key, who, text, when, ui),
                )
            except sqlite3.Error as e:
                raise LabelError(f"{self.path}: label not written ({e})") from None
            row_id = int(cur.lastrowid or 0)
        return Label(row_id, queue, key, who, stored, when, ui)

    def add_many(self, labels: Sequence[Mapping[str, Any]]) -> int:
        """Append many labels (each a mapping of ``add``'s keyword arguments) in one
        transaction: all of them or none (the first bad one raises LabelError naming its
        position). Returns how many were written."""
        rows = []
        for i, lab in enumerate(labels, start=1):
            try:
                stored = validate_answer(str(lab.get("queue")), lab.get("answer") or {})
                key = _printable(lab.get("item_key"), "item key", MAX_ITEM_KEY)  # type: ignore[arg-type]
                who = check_annotator(lab.get("annotator"))  # type: ignore[arg-type]
                ui = _printable(lab.get("ui_version") or UI_VERSION, "UI version", 64)
                when = float(lab["created"]) if lab.get("created") is not None else time.time()
            except (LabelError, TypeError, ValueError) as e:
                raise LabelError(f"label {i}: {e}") from None
            if not math.isfinite(when):
                raise LabelError(f"label {i}: label time must be a finite number")
            text = json.dumps(stored, sort_keys=True, ensure_ascii=False)
            rows.append((str(lab.get("queue")), key, who, text, when, ui))
        with self._lock:
            if self._db is None:
                raise LabelError(f"{self.path}: the label store is not open for writing")
            try:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany(
                    "INSERT INTO labels(queue, item_key, annotator, answer, created, ui_version)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    rows,
                )
                self._db.execute("COMMIT")
            except sqlite3.Error as e:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise LabelError(f"{self.path}: labels not written ({e})") from None
        return len(rows)

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        with self._lock:
            if self._db is None:
                return []
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.Error as e:
                raise LabelError(f"{self.path}: cannot read labels ({e})") from None

    def all_labels(self, queue: str | None = None) -> list[Label]:
        """Every row ever written (in order), changed answers included."""
        where, params = ("WHERE queue=?", (queue,)) if queue else ("", ())
        rows = self._rows(
            "SELECT id, queue, item_key, annotator, answer, created, ui_version FROM labels "
            f"{where} ORDER BY id",
            params,
        )
        out = []
        for i, q, k, a, ans, c, ui in rows:
            try:
                answer = json.loads(ans)
            except ValueError:
                answer = {}
            out.append(Label(int(i), q, k, a, answer if isinstance(answer, dict) else {}, c, ui))
        return out

    def labels(self, queue: str | None = None) -> list[Label]:
        """The current labels: the latest answer per (queue, item, annotator), in the order
        they were first given."""
        latest: dict[tuple[str, str, str], Label] = {}
        first: dict[tuple[str, str, str], int] = {}
        for lab in self.all_labels(queue):
            k = (lab.queue, lab.item_key, lab.annotator)
            first.setdefault(k, lab.id)
            latest[k] = lab
        return sorted(
            latest.values(), key=lambda lab: first[(lab.queue, lab.item_key, lab.annotator)]
        )

    def done_keys(self, queue: str, annotator: str) -> set[str]:
        """The item keys ``annotator`` has labelled in ``queue``."""
        rows = self._rows(
            "SELECT DISTINCT item_key FROM labels WHERE queue=? AND annotator=?",
            (queue, annotator.strip()),
        )
        return {k for (k,) in rows}

    def annotators(self, queue: str | None = None) -> list[str]:
        """Everyone who labelled (in ``queue``), sorted."""
        where, params = ("WHERE queue=?", (queue,)) if queue else ("", ())
        return [a for (a,) in self._rows(f"SELECT DISTINCT annotator FROM labels {where}", params)]

    def count(self) -> int:
        """Rows written (every answer, changed ones included)."""
        rows = self._rows("SELECT COUNT(*) FROM labels", ())
        return int(rows[0][0]) if rows else 0
