"""A run that ends leaves its data in run.db, not in the write-ahead log, even while a reader
(the viewer) holds the database open: run.db copied alone is a whole database."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from memearena.store import CallRecord, RunStore


def _fill(store: RunStore, n: int) -> None:
    store.record_calls(
        CallRecord(f"h{i}", "m", "arena.judge", "ok", response="x" * 200) for i in range(n)
    )
    for i in range(n):
        store.put_artifact("answer", f"k{i}", {"text": "y" * 100})


def test_run_db_copied_alone_after_a_run_with_a_reader_open_is_whole(tmp_path: Path) -> None:
    db = tmp_path / "run" / "run.db"
    store = RunStore(db)
    reader = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    assert reader.execute("SELECT count(*) FROM calls").fetchone() == (0,)
    _fill(store, 500)
    assert reader.execute("SELECT count(*) FROM calls").fetchone() == (500,)
    store.close()  # the reader is still open
    copy = tmp_path / "copy" / "run.db"
    copy.parent.mkdir()
    shutil.copyfile(db, copy)  # run.db alone: no -wal, no -shm
    con = sqlite3.connect(copy)
    try:
        assert con.execute("SELECT count(*) FROM calls").fetchone() == (500,)
        assert con.execute("SELECT count(*) FROM artifacts").fetchone() == (500,)
    finally:
        con.close()
        reader.close()
    other = sqlite3.connect(db)  # the journal mode stays as designed (it is kept in the file)
    assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    other.close()
