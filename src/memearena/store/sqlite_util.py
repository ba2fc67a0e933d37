"""Small SQLite helpers shared by the run store and the response cache."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any


def insert_many(db: sqlite3.Connection, sql: str, rows: Sequence[Sequence[Any]]) -> None:
    """Insert ``rows`` with ``sql`` in one transaction: all of them or none (autocommit
    connection; a single row is its own transaction). Raises ``sqlite3.Error``."""
    if not rows:
        return
    if len(rows) == 1:
        db.execute(sql, rows[0])
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        db.executemany(sql, rows)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
