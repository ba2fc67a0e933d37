"""Read-only access to a run directory's own files for the label queues and figures.

``run.db`` is opened with ``mode=ro`` and ``query_only`` (a labelling session must leave it
byte-identical); every file is read only when it resolves inside the run directory, and JSON
is parsed with bounds (the files hold model output)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

from memearena.jsonsafe import loads_bounded
from memearena.labels.errors import LabelError
from memearena.store.requests import decode_payload, unpack

__all__ = ["RunFiles"]

_BOARD_BYTES = 1 << 30
_LINE_BYTES = 1 << 24


class RunFiles:
    """One run directory, read-only (see the module)."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = Path(run_dir)
        if not self.dir.is_dir():
            raise LabelError(f"{self.dir}: not a directory")
        self._root = self.dir.resolve()
        self._db: sqlite3.Connection | None = None
        self._zdicts: dict[int, bytes] | None = None

    def inside(self, name: str) -> Path | None:
        """``name`` in the run directory (links resolved) when it is a file there, else None."""
        try:
            path = (self._root / name).resolve()
        except (OSError, RuntimeError):
            return None
        return path if path.is_relative_to(self._root) and path.is_file() else None

    @cached_property
    def board(self) -> dict[str, Any]:
        path = self.inside("leaderboard.json")
        if path is None:
            return {}
        try:
            doc = loads_bounded(path.read_bytes(), max_bytes=_BOARD_BYTES, allow_nan=True)
        except (OSError, ValueError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def jsonl(self, name: str) -> Iterator[dict[str, Any]]:
        """The objects of a JSON-lines file of the run (a damaged line is skipped)."""
        path = self.inside(name)
        if path is None:
            return
        try:
            with path.open("rb") as f:
                for line in f:
                    if not line.strip() or len(line) > _LINE_BYTES:
                        continue
                    try:
                        row = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(row, dict):
                        yield row
        except OSError:
            return

    def has(self, name: str) -> bool:
        return self.inside(name) is not None

    @property
    def db(self) -> sqlite3.Connection | None:
        if self._db is None:
            path = self.inside("run.db")
            if path is None:
                return None
            try:
                db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, check_same_thread=False)
                db.execute("PRAGMA query_only=1")
            except sqlite3.Error:
                return None
            self._db = db
        return self._db

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        db = self.db
        if db is None:
            return []
        try:
            return db.execute(sql, params).fetchall()
        except sqlite3.Error:
            return []  # an older run without the table, or a damaged file: nothing to show

    def artifact(self, kind: str, key: str) -> dict[str, Any] | None:
        rows = self.query("SELECT value FROM artifacts WHERE kind=? AND key=?", (kind, key))
        if not rows:
            return None
        try:
            value = json.loads(rows[0][0])
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def artifacts(self, kind: str, prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
        rows = self.query(
            "SELECT key, value FROM artifacts WHERE kind=? AND key >= ? AND key < ? ORDER BY key",
            (kind, prefix, prefix + "\U0010ffff"),
        )
        out = []
        for k, v in rows:
            try:
                value = json.loads(v)
            except ValueError:
                continue
            if isinstance(value, dict):
                out.append((k, value))
        return out

    def request(self, key: str) -> dict[str, Any] | None:
        """A request as sent, decoded (None when not on record or unreadable)."""
        rows = self.query("SELECT dict, body FROM requests WHERE key=?", (key,))
        if not rows:
            return None
        if self._zdicts is None:
            self._zdicts = {
                int(i): bytes(b) for i, b in self.query("SELECT id, body FROM request_dicts")
            }
        d, body = rows[0]
        try:
            return decode_payload(unpack(body, self._zdicts.get(int(d))))
        except Exception:  # untrusted bytes: any decoder may raise
            return None

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
