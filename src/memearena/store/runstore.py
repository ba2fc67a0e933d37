"""The run database: one SQLite file (WAL) per run directory holding everything a run produces."""

from __future__ import annotations

import asyncio
import csv
import hashlib
import json
import os
import sqlite3
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Protocol, TextIO

import msgspec

from memearena.errors import StoreError
from memearena.report.safe import csv_safe
from memearena.store.images import ImageStore
from memearena.store.keyfilter import KeyFilter
from memearena.store.requests import REQUESTS_SCHEMA, RequestPacker, decode_payload, unpack
from memearena.store.sqlite_util import insert_many

__all__ = [
    "SCHEMA_VERSION",
    "USAGE_FIELDS",
    "CallRecord",
    "ErrorRecord",
    "GroupWriter",
    "RunStore",
    "artifact_key",
    "checkpoint",
    "create_private",
]

PAGE_CACHE_KIB = 32 * 1024
"""SQLite's page cache per connection (KiB; its default is 2 MB). Artifact and cache keys are
hashes, so inserts land at random in indexes that outgrow a small cache within a few hundred
memes; each miss is a read from the file."""

PROCESS_HEAP_KIB = PAGE_CACHE_KIB
"""SQLite's soft heap limit for the whole process (KiB): the connections' page caches (the run
store's and the response cache's) share one page cache's worth, so near it SQLite recycles
least recently used pages instead of growing; memory stays flat however large the files get."""

WAL_CHECKPOINT_PAGES = 10_000
"""Pages the write-ahead log may hold before SQLite copies them back into the database file
(its default is 1,000). A run's commits keep re-dirtying the same index pages (random keys),
and each checkpoint copies every page once however often it changed since the last one: a
longer log copies fewer pages per call (about 5% of Adapt's CPU at 240 memes). It costs up to
~40 MB of log on disk while a run is open, given back at the last checkpoint on close."""

USAGE_FIELDS: tuple[str, ...] = (
    "calls",
    "cached",
    "errors",
    "refusals",
    "budget",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "latency_s",
    "unsettled",
    "unsettled_usd",
)
"""Per-model usage counters, in the order ``RunStore.usage_summary`` computes them
(``unsettled``: calls sent but never settled, e.g. in flight at a kill; ``unsettled_usd``: the
most they can have cost)."""

SCHEMA_VERSION = 3
"""Bumped on any schema change; an older database is upgraded in place (additive changes only),
a newer one is refused, never rewritten."""

CallStatus = Literal["sent", "ok", "cached", "refusal", "error", "budget"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY,
    request_hash TEXT NOT NULL,
    model TEXT NOT NULL,
    role TEXT NOT NULL,
    status TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    latency_s REAL NOT NULL,
    attempts INTEGER NOT NULL,
    error TEXT,
    response TEXT,
    created_at REAL NOT NULL,
    call_id TEXT,
    cost_bound_usd REAL NOT NULL DEFAULT 0,
    error_kind TEXT
);
CREATE INDEX IF NOT EXISTS calls_model ON calls(model);
CREATE TABLE IF NOT EXISTS artifacts (
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (kind, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS errors (
    kind TEXT NOT NULL,
    key TEXT NOT NULL,
    reason TEXT NOT NULL,
    detail TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (kind, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshots (
    id INTEGER PRIMARY KEY,
    created_at REAL NOT NULL,
    config TEXT NOT NULL,
    prompt_hashes TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS members (
    view TEXT NOT NULL,
    coord TEXT NOT NULL,
    meme TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ref1 TEXT,
    ref2 TEXT,
    ref3 TEXT,
    PRIMARY KEY (view, coord)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS members_seq ON members(view, seq);
CREATE INDEX IF NOT EXISTS members_meme ON members(meme);
CREATE TABLE IF NOT EXISTS items_done (
    item TEXT PRIMARY KEY,
    digest TEXT NOT NULL,
    idx INTEGER NOT NULL,
    counts TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS image_hashes (
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    recipe TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    PRIMARY KEY (path, size, mtime_ns, recipe)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
"""

_CHUNK = 500
"""Keys per batched look-up (well under SQLite's bound-parameter limit)."""


# Columns added to ``calls`` after schema version 1 was released: added in place on open
# (old readers select named columns, so they keep working).
_CALL_COLUMNS_ADDED = (
    ("call_id", "TEXT"),
    ("cost_bound_usd", "REAL NOT NULL DEFAULT 0"),
    ("error_kind", "TEXT"),
    # 1 once the reply was found unusable for good (``ModelPool.uncache``): never reused.
    ("dropped", "INTEGER NOT NULL DEFAULT 0"),
)


@dataclass(frozen=True)
class CallRecord:
    """One model call: ``sent`` (recorded before it is sent, settled in place when it ends) or
    as it ended: served from cache, answered, refused, failed or over budget."""

    request_hash: str
    model: str
    role: str
    status: CallStatus
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    attempts: int = 0
    error: str | None = None
    response: str | None = None
    created_at: float = 0.0
    call_id: str | None = None
    """Identifies a sent call's row so it can be settled in place (None for cached calls)."""
    cost_bound_usd: float = 0.0
    """The most this call can have cost (its estimate at the spend cap: prompt + max output)."""
    error_kind: str | None = None
    """Machine-readable failure reason (``bad_response``, ``auth``, ``timeout``, ...)."""


@dataclass(frozen=True)
class ErrorRecord:
    """A pipeline step that failed for one item, with the reason shown in the report."""

    kind: str
    key: str
    reason: str
    detail: str
    created_at: float


_CALL_COLUMNS = tuple(f.name for f in fields(CallRecord))
_INSERT_CALL = (
    f"INSERT INTO calls ({', '.join(_CALL_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _CALL_COLUMNS)})"
)
_SELECT_CALLS = f"SELECT {', '.join(_CALL_COLUMNS)} FROM calls ORDER BY id"
_SETTLE_COLUMNS = (
    "status",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "latency_s",
    "attempts",
    "error",
    "response",
    "created_at",
    "error_kind",
)
# Only a row still ``sent`` is settled: a settlement never rewrites a finished call.
_INSERT_REQUEST = "INSERT OR IGNORE INTO requests (key, dict, body) VALUES (?, ?, ?)"
_SETTLE_CALL = (
    f"UPDATE calls SET {', '.join(f'{c}=?' for c in _SETTLE_COLUMNS)} "
    "WHERE call_id=? AND status='sent'"
)
_WITHDRAW_CALL = "DELETE FROM calls WHERE call_id=? AND status='sent'"
_DROP_REPLIES = "UPDATE calls SET dropped=1 WHERE request_hash=? AND status='ok'"
_REPLY_ON_RECORD = (
    "SELECT response, input_tokens, output_tokens FROM calls"
    " WHERE request_hash=? AND status='ok' AND response IS NOT NULL AND dropped=0"
    " ORDER BY id DESC LIMIT 1"
)


def _call_row(r: CallRecord) -> tuple[Any, ...]:
    # A flat tuple by hand: dataclasses.astuple deep-copies every field.
    return (
        r.request_hash,
        r.model,
        r.role,
        r.status,
        r.input_tokens,
        r.output_tokens,
        r.cost_usd,
        r.latency_s,
        r.attempts,
        r.error,
        r.response,
        r.created_at or time.time(),
        r.call_id,
        r.cost_bound_usd,
        r.error_kind,
    )


_PendingStep = tuple[str, str, dict[str, Any] | None, tuple[str, str] | None, bool]
"""A queued step outcome: ``(kind, key, value, error, clear_error)``."""


@dataclass
class _StepBatch:
    """Pending steps taken for one commit, as rows."""

    arts: list[tuple[str, str, str, float]]
    errs: list[tuple[str, str, str, str, float]]
    clears: list[tuple[str, str]]


class GroupWriter(Protocol):
    """What writes call rows to a store in groups (the model pool): the store has it commit
    what it holds before any write or read of its own, so a step's rows are never committed
    before the call rows they came from, and it schedules the store's queued steps into its
    next group commit."""

    def flush_pending(self) -> None:
        """Commit everything queued now (call rows, cache entries and the store's steps)."""

    def schedule_flush(self) -> None:
        """Have everything queued committed within a few event-loop turns."""

    def wait_commit(self) -> None:
        """Wait for a commit of its running in another thread, if any (its own write lock)."""


def _write_group(
    db: sqlite3.Connection,
    requests: Sequence[tuple[str, int, bytes]],
    rows: Sequence[tuple[Any, ...]],
    settle: Sequence[tuple[Any, ...]],
    withdrawn: Sequence[tuple[str]],
    dropped: Sequence[tuple[str]],
    steps: _StepBatch | None,
) -> None:
    """One group commit through ``db``: requests, new call rows, settlements, withdrawn rows,
    dropped replies, then the steps, all or none. Raises ``sqlite3.Error``."""
    parts = [
        (sql, batch)
        for sql, batch in (
            (_INSERT_REQUEST, requests),
            (_INSERT_CALL, rows),
            (_SETTLE_CALL, settle),
            (_WITHDRAW_CALL, withdrawn),
            (_DROP_REPLIES, dropped),
        )
        if batch
    ]
    if steps is None and len(parts) < 2:
        for sql, batch in parts:
            insert_many(db, sql, batch)
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        for sql, batch in parts:
            db.executemany(sql, batch)
        if steps is not None:
            RunStore.write_steps(db, steps)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


CHECKPOINT_WAIT_MS = 2000
"""How long a closing database waits for readers before its final checkpoint settles for what
it can copy (a reader mid-query holds the log's newest pages)."""


def checkpoint(db: sqlite3.Connection) -> None:
    """Copy every page of the write-ahead log back into the database file and empty the log,
    so the file alone is the whole database (copied, mailed, or opened without its -wal).
    SQLite does this itself only when the last connection closes: a reader left open (the
    viewer) would keep the data in the log. The journal mode stays WAL. Best effort: a reader
    in a transaction may keep the newest pages in the log, never losing them."""
    try:
        db.execute(f"PRAGMA busy_timeout={CHECKPOINT_WAIT_MS}")
        busy = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        if busy:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")
    except sqlite3.Error:
        pass  # the data is safe in the log; the next open or close checkpoints it


def create_private(path: Path) -> None:
    """Create ``path``'s missing parent folders (0700) and the file itself (0600) unless it
    exists: run files hold prompts, replies and spend, readable by their owner only."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))


def artifact_key(*parts: object) -> str:
    """A deterministic key from parts, joined by ``|`` (e.g. ``fhm:42|ctx1|gpt-4o``)."""
    return "|".join(str(p) for p in parts)


_decode = msgspec.json.Decoder().decode


def _loads(text: str) -> Any:
    """A stored value back (msgspec: several times faster than ``json``; values ``json`` wrote
    that are not strict JSON, e.g. NaN, fall back to ``json``)."""
    try:
        return _decode(text)
    except msgspec.DecodeError:
        return json.loads(text)


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""What ``json.dumps`` builds for these arguments on every call, built once (the same text)."""


def _dumps(value: Any, default: Any = None) -> str:
    # Key order is kept as written: readers may rely on it (e.g. contexts in level order).
    if default is None:
        return _ENCODER.encode(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=default)


class RunStore:
    """The run database. Each write is its own transaction (``record_calls`` /
    ``record_call_rows``: one for the whole batch), committed when the method returns: a kill at
    any moment leaves a usable database, and artifacts are first-write-wins so a re-run never
    duplicates them.

    ``commit_step`` queues a step's outcome and returns at once; the queue is committed in
    order, write-ahead: with the call rows of the attached ``GroupWriter`` (the model pool) in
    its next group commit (at the latest a few event-loop turns later, or before the next call
    it sends, whichever comes first), or by the store itself at the next turn when no writer is
    attached, and always before any other write or any read that could see it (so nothing
    written later, a member view or an item's completion record, is ever committed before the
    steps it names). Point look-ups (``get_artifact``, ``get_artifacts``, ``has_artifact``)
    see the queue without committing it."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        # Queued step outcomes, the artifact each key will hold once they are committed (first
        # write wins), and the loop a commit of the store's own is scheduled on.
        self._steps: list[_PendingStep] = []
        self._step_first: dict[tuple[str, str], dict[str, Any]] = {}
        # The same for the steps handed to a commit in the writer's thread, until it ends:
        # taken from the queue, not yet readable from the database.
        self._step_inflight: dict[tuple[str, str], dict[str, Any]] = {}
        self._steps_loop: asyncio.AbstractEventLoop | None = None
        # Every artifact key this store queued or wrote (a fixed-size filter, made on first
        # use): a step its caller found absent needs no look-up here unless it is in it.
        self._written: KeyFilter | None = None
        self._writer: weakref.ref[GroupWriter] | None = None
        # A commit of queued steps that failed with nobody waiting: raised by the next step.
        self._failed: StoreError | None = None
        self._closed = False
        self._packer: RequestPacker | None = None
        # The second connection a writer's background commits go through (``commit_db``).
        self._commit_db: sqlite3.Connection | None = None
        try:
            # The run directory and database hold prompts, replies and spend: owner only.
            create_private(self.path)
            # Autocommit: every statement is atomic on its own; explicit BEGIN where needed.
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"{self.path}: cannot open run database ({e})") from None
        try:
            self._init_schema()
        except sqlite3.DatabaseError as e:
            self._db.close()
            raise StoreError(f"{self.path}: not a usable run database ({e})") from None
        except StoreError:
            self._db.close()
            raise

    def attach_writer(self, writer: GroupWriter) -> None:
        """Make ``writer`` (a model pool writing this store's call rows) the one whose group
        commits carry the queued steps, after committing what an earlier one still holds. The
        store keeps only a weak reference: a writer that is gone has nothing left to commit."""
        self._sync()
        self._writer = weakref.ref(writer)

    @property
    def pending_steps(self) -> bool:
        """Whether step outcomes are queued, not yet committed."""
        return bool(self._steps)

    def _sync(self) -> None:
        """Commit everything queued, the writer's call rows first: before any other write (the
        write-ahead order) and before a read that must see it. Raises a failed write."""
        writer = self._writer() if self._writer is not None else None
        if writer is not None:
            writer.flush_pending()  # its commit carries the queued steps, after its rows
        if self._steps:
            self._commit_steps()
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed

    def _quiet(self) -> None:
        """Wait for the writer's commit running in its thread, if any, before a write that
        needs no order against the queue (so it never waits on the database's write lock)."""
        writer = self._writer() if self._writer is not None else None
        if writer is not None:
            writer.wait_commit()

    def _init_schema(self) -> None:
        db = self._db
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
        db.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
        db.execute(f"PRAGMA soft_heap_limit={PROCESS_HEAP_KIB * 1024}")
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: schema version {version} is newer than this memearena "
                f"supports ({SCHEMA_VERSION}); upgrade memearena"
            )
        if version < SCHEMA_VERSION:
            # Version 2's member views lacked the item column: they are derived data (rebuilt
            # by the next run from the artifacts), so they are dropped rather than migrated.
            upgrade = "DROP TABLE IF EXISTS members;" if version == 2 else ""
            try:
                db.executescript(
                    "BEGIN IMMEDIATE;"
                    + upgrade
                    + _SCHEMA
                    + f"PRAGMA user_version={SCHEMA_VERSION}; COMMIT;"
                )
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        have = {row[1] for row in db.execute("PRAGMA table_info(calls)")}
        if any(name not in have for name, _ in _CALL_COLUMNS_ADDED):
            # Checked again under the write lock: another process opening the same new file
            # at once may have added them since (adding one twice fails).
            db.execute("BEGIN IMMEDIATE")
            try:
                have = {row[1] for row in db.execute("PRAGMA table_info(calls)")}
                for name, decl in _CALL_COLUMNS_ADDED:
                    if name not in have:
                        db.execute(f"ALTER TABLE calls ADD COLUMN {name} {decl}")
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        db.execute(
            "CREATE UNIQUE INDEX IF NOT EXISTS calls_call_id ON calls(call_id)"
            " WHERE call_id IS NOT NULL"
        )
        # A resumed call looks its request up by key (a reply on record is never paid again):
        # REQUESTS_SCHEMA's calls_request_hash is that index; a second one on the same column
        # (older run directories have it) only costs every insert.
        db.execute("DROP INDEX IF EXISTS calls_request")
        db.executescript(REQUESTS_SCHEMA)

    def close(self) -> None:
        """Commit what is queued, copy the write-ahead log back into run.db and close the
        database (idempotent)."""
        if self._closed:
            return
        try:
            self._sync()
        finally:
            try:
                if self._commit_db is not None:
                    self._commit_db.close()
                    self._commit_db = None
                checkpoint(self._db)
            finally:
                self._db.close()
                self._closed = True

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._closed

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _write(self, sql: str, params: tuple[Any, ...]) -> sqlite3.Cursor:
        try:
            return self._db.execute(sql, params)
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: write failed ({e})") from None

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: read failed ({e})") from None

    # calls ---------------------------------------------------------------------------------

    def record_call(self, rec: CallRecord) -> None:
        """Append one call record (committed when this returns)."""
        self._sync()
        self._write(_INSERT_CALL, _call_row(rec))

    def record_calls(self, records: Iterable[CallRecord]) -> None:
        """Append several call records in one transaction: all are committed when this returns,
        or (on error) none is."""
        self.record_call_rows([_call_row(r) for r in records])

    def record_call_rows(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """``record_calls`` for rows already laid out as ``CallRecord`` fields, in field order
        with ``created_at`` set: one transaction, one commit for all (what keeps the model
        stack's per-call cost low: ``ModelPool`` commits the calls that end together at once)."""
        self._sync()
        try:
            insert_many(self._db, _INSERT_CALL, rows)
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: write failed ({e})") from None

    def settle_call_rows(self, rows: Sequence[tuple[Any, ...]]) -> None:
        """Settle ``sent`` calls in place, in one transaction: each row is the final
        ``status, input_tokens, output_tokens, cost_usd, latency_s, attempts, error, response,
        created_at, error_kind`` followed by the ``call_id`` of the sent row."""
        self._sync()
        try:
            insert_many(self._db, _SETTLE_CALL, rows)
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: write failed ({e})") from None

    def write_call_rows(
        self,
        rows: Sequence[tuple[Any, ...]],
        settle: Sequence[tuple[Any, ...]],
        requests: Sequence[tuple[str, int, bytes]] = (),
        withdrawn: Sequence[tuple[str]] = (),
        dropped: Sequence[tuple[str]] = (),
    ) -> None:
        """``record_call_rows(rows)``, ``settle_call_rows(settle)`` and, first,
        ``record_request_rows(requests)`` in one transaction (one commit for all, as the model
        stack's group commit writes them): all or none. ``withdrawn`` names, by call id, rows
        on record as ``sent`` whose request never left after all (its model died while it
        waited for a send slot): they are removed, last. ``dropped`` names, by request key,
        replies found unusable for good (``reply_on_record`` never returns them again), marked
        after the rows above, so a reply settled in this same commit is marked too.

        The queued steps (``commit_step``) ride along, written after the calls: a step is
        queued only once the calls it came from returned, and their rows were queued before,
        so they are committed before it or with it in this transaction, never after it."""
        steps = self._take_steps()
        try:
            _write_group(self._db, requests, rows, settle, withdrawn, dropped, steps)
        except sqlite3.Error as e:
            failure = StoreError(f"{self.path}: write failed ({e})")
            if steps is not None:  # the steps are lost too: their next commit_step says so
                self._failed = failure
            raise failure from None

    def commit_db(self) -> sqlite3.Connection:
        """The connection a writer's commits in its own thread go through (opened on first
        use, closed with the store): one thread at a time, and never while this store's own
        connection writes (its writer waits for that commit before any write of the store's
        own, ``GroupWriter.flush_pending``). Reads through the store see a commit once it
        ended; what it carries stays visible until then (``take_steps``)."""
        if self._commit_db is None:
            try:
                db = sqlite3.connect(
                    self.path, isolation_level=None, timeout=30.0, check_same_thread=False
                )
                db.execute("PRAGMA synchronous=NORMAL")
                db.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
                db.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
            except sqlite3.Error as e:
                raise StoreError(f"{self.path}: cannot open run database ({e})") from None
            self._commit_db = db
        return self._commit_db

    def take_steps(self) -> _StepBatch | None:
        """The queued steps, taken for a commit in the writer's thread (``write_group``); they
        stay visible to look-ups until ``steps_committed`` is called."""
        inflight = self._step_first
        batch = self._take_steps()
        if batch is not None:
            self._step_inflight = inflight
        return batch

    def steps_committed(self, batch: _StepBatch | None, error: BaseException | None) -> None:
        """The commit carrying ``batch`` (from ``take_steps``) ended, with ``error`` or not:
        its steps are read from the database now, or (failed) are lost, which the next
        ``commit_step`` raises."""
        self._step_inflight = {}
        if batch is not None and error is not None and self._failed is None:
            self._failed = (
                error
                if isinstance(error, StoreError)
                else StoreError(f"{self.path}: write failed ({error})")
            )

    def write_group(
        self,
        db: sqlite3.Connection,
        rows: Sequence[tuple[Any, ...]],
        settle: Sequence[tuple[Any, ...]],
        requests: Sequence[tuple[str, str, str]],
        withdrawn: Sequence[tuple[str]],
        dropped: Sequence[tuple[str]],
        steps: _StepBatch | None,
    ) -> None:
        """``write_call_rows`` through ``db`` (``commit_db``, in the writer's thread), with
        ``requests`` as ``(key, role, payload)`` packed here and the steps ``take_steps`` took.
        Touches no state of the store's but the request packer's (used by one thread at a
        time: the writer's commits never overlap one of the store's own)."""
        try:
            packed = [(k, *self._pack(db, role, payload)) for k, role, payload in requests]
            _write_group(db, packed, rows, settle, withdrawn, dropped, steps)
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: write failed ({e})") from None

    def reply_on_record(self, key: str) -> tuple[str, int, int] | None:
        """``(response, input_tokens, output_tokens)`` of the latest answer paid for under
        request ``key`` (``ok``, not empty, not dropped), or None: a request whose answer is on
        record is never sent again, whatever stopped the run that paid for it. (A refusal is
        not an answer: like the response cache, the record never replays one.)

        Reads only what is committed, without committing the queue first: the model pool asks
        this before each call it would send, and keeps the replies it has not committed yet
        itself (a commit per call would undo its group commit)."""
        rows = self._read(_REPLY_ON_RECORD, (key,))
        if not rows or not str(rows[0][0]).strip():
            return None
        response, n_in, n_out = rows[0]
        return str(response), int(n_in), int(n_out)

    def replies_not_used(self, key: str, up_to_id: int) -> int:
        """Replies to request ``key`` received and not used, in calls up to row ``up_to_id``: a
        refusal, or an answer dropped as unusable (a model pool sends such a request again
        under a new ``Idempotency-Key``, so a server that honours keys answers afresh)."""
        sql = (
            "SELECT COUNT(*) FROM calls WHERE request_hash=? AND id<=?"
            " AND (dropped=1 OR status='refusal')"
        )
        return int(self._read(sql, (key, up_to_id))[0][0])

    def has_replies_not_used(self) -> bool:
        """Whether any refusal or dropped answer is on record (a fresh run has none)."""
        sql = "SELECT 1 FROM calls WHERE status='refusal' OR dropped=1 LIMIT 1"
        return bool(self._read(sql))

    def has_replies(self) -> bool:
        """Whether any answer is on record (``ok``): a fresh run has none to look up."""
        return bool(self._read("SELECT 1 FROM calls WHERE status='ok' LIMIT 1"))

    def calls(self) -> list[CallRecord]:
        """Every call record, oldest first."""
        self._sync()
        return [CallRecord(*row) for row in self._read(_SELECT_CALLS)]

    def iter_calls(self, after_id: int = 0) -> Iterator[CallRecord]:
        """Call records with row id above ``after_id``, oldest first, streamed in chunks (memory
        follows the chunk, not the table)."""
        self._sync()
        sql = _SELECT_CALLS.replace("ORDER BY id", "WHERE id > ? ORDER BY id")
        for row in self._stream(sql, (after_id,)):
            yield CallRecord(*row)

    def call_spend(self, roles: Iterable[str]) -> Iterator[tuple[str, float, float]]:
        """``(model, cost_usd, latency_s)`` of the calls of these roles that reached a model (not
        cached, not over budget), oldest first, as ``iter_calls`` would give them, streamed; the
        filter runs in SQLite."""
        self._sync()
        wanted = tuple(sorted(set(roles)))
        if not wanted:
            return
        marks = ", ".join("?" for _ in wanted)
        sql = (
            "SELECT model, cost_usd, latency_s FROM calls WHERE role IN "
            f"({marks}) AND status NOT IN ('cached', 'budget') ORDER BY id"
        )
        for model, cost, secs in self._stream(sql, wanted):
            yield str(model), float(cost), float(secs)

    def last_call_id(self) -> int:
        """Row id of the latest call record (0 when none): a mark for ``count_new_calls``."""
        self._sync()
        return int(self._read("SELECT COALESCE(MAX(id), 0) FROM calls")[0][0])

    def count_new_calls(self, after_id: int = 0) -> int:
        """Calls recorded after ``after_id`` that reached a model (not cached, not over budget)."""
        self._sync()
        sql = "SELECT COUNT(*) FROM calls WHERE id > ? AND status NOT IN ('cached', 'budget')"
        return int(self._read(sql, (after_id,))[0][0])

    def callers(self, request_hashes: Iterable[str]) -> dict[str, set[tuple[str, str]]]:
        """For each request hash with calls on record, the ``(role, model)`` of those calls
        (indexed look-ups; hashes without calls are absent)."""
        self._sync()
        out: dict[str, set[tuple[str, str]]] = {}
        keys = sorted(set(request_hashes))
        for i in range(0, len(keys), 500):
            chunk = tuple(keys[i : i + 500])
            marks = ", ".join("?" for _ in chunk)
            sql = f"SELECT request_hash, role, model FROM calls WHERE request_hash IN ({marks})"
            for key, role, model in self._read(sql, chunk):
                out.setdefault(str(key), set()).add((str(role), str(model)))
        return out

    def usage_summary(self, role_prefix: str = "") -> dict[str, dict[str, float]]:
        """Per model: calls, cached, errors, refusals, budget, tokens, cost, summed latency, and
        calls sent but never settled (``unsettled``) with the most they can have cost; only the
        calls whose role starts with ``role_prefix`` (one method's: ``"adapt."``)."""
        self._sync()
        rows = self._read(
            "SELECT model, COUNT(*),"
            " SUM(status='cached'), SUM(status='error'), SUM(status='refusal'),"
            " SUM(status='budget'), SUM(input_tokens), SUM(output_tokens),"
            " SUM(cost_usd), SUM(latency_s), SUM(status='sent'),"
            " SUM(CASE WHEN status='sent' THEN cost_bound_usd ELSE 0 END)"
            " FROM calls WHERE substr(role, 1, ?) = ? GROUP BY model ORDER BY model",
            (len(role_prefix), role_prefix),
        )
        return {r[0]: dict(zip(USAGE_FIELDS, (v or 0 for v in r[1:]), strict=True)) for r in rows}

    def total_cost(self) -> float:
        """Summed cost of every settled call, in USD."""
        self._sync()
        return float(self._read("SELECT COALESCE(SUM(cost_usd), 0) FROM calls")[0][0])

    def spend(self) -> tuple[float, float]:
        """``(spent, upper_bound)`` in USD over every invocation of this run: the settled cost,
        and that plus the most that calls sent but never settled (a kill mid-call) can cost."""
        self._sync()
        spent, unsettled = self._read(
            "SELECT COALESCE(SUM(cost_usd), 0),"
            " COALESCE(SUM(CASE WHEN status='sent' THEN cost_bound_usd ELSE 0 END), 0)"
            " FROM calls"
        )[0]
        return float(spent), float(spent) + float(unsettled)

    def call_errors(self, since: float = 0.0) -> dict[str, dict[str, int]]:
        """Per model, failed calls by reason (``error_kind``), recorded at or after ``since``."""
        self._sync()
        rows = self._read(
            "SELECT model, COALESCE(error_kind, 'error'), COUNT(*) FROM calls"
            " WHERE status='error' AND created_at>=? GROUP BY 1, 2 ORDER BY 1, 2",
            (since,),
        )
        out: dict[str, dict[str, int]] = {}
        for model, kind, n in rows:
            out.setdefault(model, {})[kind] = int(n)
        return out

    # artifacts -----------------------------------------------------------------------------

    def put_artifact(self, kind: str, key: str, value: dict[str, Any]) -> bool:
        """Store one step's output; the first write wins. True if this call wrote it."""
        self._sync()
        self._written_filter().add((kind, key))
        cur = self._write(
            "INSERT OR IGNORE INTO artifacts (kind, key, value, created_at) VALUES (?, ?, ?, ?)",
            (kind, key, _dumps(value), time.time()),
        )
        return cur.rowcount == 1

    def get_artifact(self, kind: str, key: str) -> dict[str, Any] | None:
        """The stored value (or the one queued to be), or None."""
        queued = self._step_first.get((kind, key)) or self._step_inflight.get((kind, key))
        if queued is not None:
            return queued
        rows = self._read("SELECT value FROM artifacts WHERE kind=? AND key=?", (kind, key))
        return _loads(rows[0][0]) if rows else None

    def get_artifacts(self, kind: str, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The stored values of those ``keys`` that exist (batched look-ups, one query per
        chunk of keys): a resumed stage checks its steps without a read per step."""
        wanted = list(dict.fromkeys(keys))
        out: dict[str, dict[str, Any]] = {}
        for i in range(0, len(wanted), _CHUNK):
            chunk = wanted[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._read(
                f"SELECT key, value FROM artifacts WHERE kind=? AND key IN ({marks})",
                (kind, *chunk),
            )
            for k, v in rows:
                out[k] = _loads(v)
        for queue in (self._step_inflight, self._step_first):  # not yet committed
            if queue:
                for k in wanted:
                    queued = queue.get((kind, k))
                    if queued is not None:
                        out[k] = queued
        return out

    def has_artifact(self, kind: str, key: str) -> bool:
        """Whether an artifact is stored (or queued) under (kind, key)."""
        if (kind, key) in self._step_first or (kind, key) in self._step_inflight:
            return True
        return bool(self._read("SELECT 1 FROM artifacts WHERE kind=? AND key=?", (kind, key)))

    def artifacts(self, kind: str) -> list[tuple[str, dict[str, Any]]]:
        """Every (key, value) of one kind, ordered by key."""
        self._sync()
        rows = self._read("SELECT key, value FROM artifacts WHERE kind=? ORDER BY key", (kind,))
        return [(k, _loads(v)) for k, v in rows]

    def count_artifacts(self, kind: str | None = None) -> int:
        """Number of artifacts, of one kind or of all."""
        self._sync()
        if kind is None:
            return int(self._read("SELECT COUNT(*) FROM artifacts")[0][0])
        return int(self._read("SELECT COUNT(*) FROM artifacts WHERE kind=?", (kind,))[0][0])

    # steps: group commit -------------------------------------------------------------------

    async def commit_step(
        self,
        kind: str,
        key: str,
        value: dict[str, Any] | None,
        *,
        error: tuple[str, str] | None = None,
        clear_error: bool = False,
        absent: bool = False,
    ) -> dict[str, Any] | None:
        """Queue one step's outcome: its artifact (unless ``value`` is None), its error record
        ``(reason, detail)`` or the removal of an earlier one; returns the artifact the key
        holds once committed (first write wins: one already stored, or queued by an earlier
        step, is returned instead of ``value``; the key is looked up here, so a caller that
        skipped its own look-up still gets what is stored).

        ``absent``: the caller found no artifact under the key before computing the step (its
        own look-up or a batched one; there is one writer per run directory). Then only a write
        of this store since can have stored one, and the look-up is made only for a key this
        store may have queued or written before (``KeyFilter``), not for every step.

        Returns without waiting for the commit (see the class docstring for when it comes):
        a kill before it loses only steps whose results no request sent since depends on,
        and a re-run computes them again (from the cache where it holds their replies).
        Raises the error of an earlier commit of queued steps that failed."""
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed
        stored = value
        if value is not None:
            k = (kind, key)
            stored = self._step_first.get(k) or self._step_inflight.get(k)
            if stored is None:
                if self._written_filter().add(k) or not absent:
                    rows = self._read("SELECT value FROM artifacts WHERE kind=? AND key=?", k)
                    stored = _loads(rows[0][0]) if rows else value
                else:
                    stored = value
                self._step_first[k] = stored
        self._steps.append((kind, key, value, error, clear_error))
        writer = self._writer() if self._writer is not None else None
        if writer is not None:
            writer.schedule_flush()
        else:
            loop = asyncio.get_running_loop()
            if self._steps_loop is not loop:
                self._steps_loop = loop
                loop.call_soon(self._flush_steps)
        return stored

    def _written_filter(self) -> KeyFilter:
        if self._written is None:
            self._written = KeyFilter()
        return self._written

    def _take_steps(self) -> _StepBatch | None:
        """The queued steps as rows to write (None when there are none)."""
        if not self._steps:
            return None
        pending, self._steps = self._steps, []
        self._step_first = {}
        now = time.time()
        arts: list[tuple[str, str, str, float]] = []
        # The last error or clearing queued per key wins, as it would written one by one.
        last: dict[tuple[str, str], tuple[str, str] | None] = {}
        for kind, key, value, error, clear_error in pending:
            if error is not None:
                last[(kind, key)] = error
            elif clear_error:
                last[(kind, key)] = None
            if value is not None:
                arts.append((kind, key, _dumps(value), now))
        errs = [(*k, e[0], e[1], now) for k, e in last.items() if e is not None]
        clears = [k for k, e in last.items() if e is None]
        return _StepBatch(arts, errs, clears)

    @staticmethod
    def write_steps(db: sqlite3.Connection, batch: _StepBatch) -> None:
        """Write a step batch inside the caller's transaction (first write wins)."""
        if batch.arts:
            db.executemany(
                "INSERT OR IGNORE INTO artifacts (kind, key, value, created_at)"
                " VALUES (?, ?, ?, ?)",
                batch.arts,
            )
        if batch.clears:
            db.executemany("DELETE FROM errors WHERE kind=? AND key=?", batch.clears)
        if batch.errs:
            db.executemany(
                "INSERT OR REPLACE INTO errors (kind, key, reason, detail, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                batch.errs,
            )

    def _commit_steps(self) -> None:
        """Commit the queued steps in one transaction of their own; raises a failed write."""
        batch = self._take_steps()
        if batch is None:
            return
        try:
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                self.write_steps(db, batch)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: write failed ({e})") from None

    def _flush_steps(self) -> None:
        """The store's own scheduled commit (no writer attached when the steps were queued):
        through the writer if one was attached since. A failure is kept for the next step."""
        self._steps_loop = None
        if self._closed:
            return
        try:
            self._sync()
        except StoreError as e:
            self._failed = e
        except Exception as e:  # the writer's own failure (it reports it to its callers too)
            self._failed = StoreError(f"{self.path}: write failed ({e})")

    # members: which artifacts make up a run's current outcome ------------------------------

    def clear_view(self, view: str) -> None:
        """Forget a view's members."""
        self._sync()
        self._write("DELETE FROM members WHERE view=?", (view,))

    def add_members(
        self,
        view: str,
        item: str,
        rows: Sequence[tuple[str, int, str | None, str | None, str | None]],
    ) -> None:
        """Add one item's ``(coord, seq, ref1, ref2, ref3)`` rows to a view in one transaction
        (a row with the same coord is replaced). Refs are artifact keys; ``seq`` orders the
        view."""
        self._sync()
        try:
            insert_many(
                self._db,
                "INSERT OR REPLACE INTO members (view, coord, meme, seq, ref1, ref2, ref3)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(view, r[0], item, *r[1:]) for r in rows],
            )
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: write failed ({e})") from None

    def drop_item(self, item: str) -> None:
        """Forget an item's members in every view and its completion record (it is about to
        be listed again)."""
        self._sync()
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("DELETE FROM items_done WHERE item=?", (item,))
                self._db.execute("DELETE FROM members WHERE meme=?", (item,))
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: write failed ({e})") from None

    def item_done(self, item: str) -> tuple[str, int, dict[str, Any]] | None:
        """``(digest, index, counts)`` recorded when every step of an item ended final."""
        rows = self._read("SELECT digest, idx, counts FROM items_done WHERE item=?", (item,))
        if not rows:
            return None
        digest, idx, counts = rows[0]
        return str(digest), int(idx), json.loads(counts)

    def mark_item_done(self, item: str, digest: str, idx: int, counts: dict[str, Any]) -> None:
        """Record that every step of an item, as ``digest`` describes them, ended final and its
        members are listed: a re-run with the same digest need not look at its steps again."""
        self._sync()
        self._write(
            "INSERT OR REPLACE INTO items_done (item, digest, idx, counts) VALUES (?, ?, ?, ?)",
            (item, digest, idx, _dumps(counts)),
        )

    def move_item(self, item: str, old_idx: int, idx: int, shift: int) -> None:
        """Give an item's members the order of its new position ``idx`` (``seq`` holds the
        item's index above ``shift`` bits)."""
        self._sync()
        mask = (1 << shift) - 1
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute(
                    "UPDATE members SET seq = (? << ?) | (seq & ?) WHERE meme=?",
                    (idx, shift, mask, item),
                )
                self._db.execute("UPDATE items_done SET idx=? WHERE item=?", (idx, item))
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: write failed ({e})") from None

    def retain_items(self, items: Iterable[str]) -> None:
        """Forget the members and completion records of every item not in ``items`` (those a
        changed selection left out)."""
        self._sync()
        try:
            db = self._db
            db.execute("CREATE TEMP TABLE IF NOT EXISTS keep_items (item TEXT PRIMARY KEY)")
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM keep_items")
                db.executemany(
                    "INSERT OR IGNORE INTO keep_items (item) VALUES (?)", ((i,) for i in items)
                )
                db.execute("DELETE FROM members WHERE meme NOT IN (SELECT item FROM keep_items)")
                db.execute("DELETE FROM items_done WHERE item NOT IN (SELECT item FROM keep_items)")
                db.execute("DELETE FROM keep_items")
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: write failed ({e})") from None

    def view_digest(self, view: str) -> str:
        """sha256 of a view's members (coords, order and artifact refs): equal digests, equal
        views."""
        self._sync()
        h = hashlib.sha256()
        for row in self._stream(
            "SELECT coord, seq, ref1, ref2, ref3 FROM members WHERE view=? ORDER BY seq", (view,)
        ):
            h.update(_dumps(row).encode("utf-8"))
            h.update(b"\n")
        return h.hexdigest()

    def errors_digest(self) -> str:
        """sha256 of the error records' (kind, key, reason): what a report shows of them."""
        self._sync()
        h = hashlib.sha256()
        for row in self._stream("SELECT kind, key, reason FROM errors ORDER BY kind, key"):
            h.update(_dumps(row).encode("utf-8"))
            h.update(b"\n")
        return h.hexdigest()

    def count_members(self, view: str) -> int:
        """Number of members of a view."""
        self._sync()
        return int(self._read("SELECT COUNT(*) FROM members WHERE view=?", (view,))[0][0])

    def _member_sql(self, kinds: tuple[str | None, str | None, str | None]) -> str:
        cols, joins = [], []
        for i, kind in enumerate(kinds, start=1):
            if kind is None:
                cols.append("NULL")
            else:
                cols.append(f"a{i}.value")
                joins.append(f"LEFT JOIN artifacts a{i} ON a{i}.kind=? AND a{i}.key=m.ref{i}")
        return (
            f"SELECT m.coord, m.ref1, m.ref2, m.ref3, {', '.join(cols)} FROM members m "
            + " ".join(joins)
        )

    def iter_members(
        self,
        view: str,
        kinds: tuple[str | None, str | None, str | None] = (None, None, None),
        *,
        coord_prefix: str | None = None,
        by_coord: bool = False,
    ) -> Iterator[tuple[str, tuple[str | None, ...], tuple[dict[str, Any] | None, ...]]]:
        """A view's members in ``seq`` order (or in ``coord`` order, which keeps an item's
        members together whatever their ``seq``) as ``(coord, refs, values)``, where
        ``values[i]`` is the artifact of kind ``kinds[i]`` under ``refs[i]`` (None if absent or
        not asked for); streamed, so memory follows the chunk, not the view. ``coord_prefix``
        narrows the view to the coords that start with it."""
        self._sync()
        params: list[Any] = [k for k in kinds if k is not None]
        sql = self._member_sql(kinds) + " WHERE m.view=?"
        params.append(view)
        if coord_prefix is not None:
            sql += " AND m.coord >= ? AND m.coord < ?"
            params += [coord_prefix, coord_prefix + "\U0010ffff"]
        sql += " ORDER BY m.coord" if by_coord else " ORDER BY m.seq"
        for row in self._stream(sql, tuple(params)):
            values = tuple(None if v is None else _loads(v) for v in row[4:])
            yield row[0], (row[1], row[2], row[3]), values

    def _stream(self, sql: str, params: tuple[Any, ...] = (), chunk: int = 1000) -> Iterator[Any]:
        try:
            cur = self._db.execute(sql, params)
            while True:
                rows = cur.fetchmany(chunk)
                if not rows:
                    return
                yield from rows
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: read failed ({e})") from None

    # requests as sent ----------------------------------------------------------------------

    def pack_request(self, role: str, payload: str) -> tuple[int, bytes]:
        """A request's canonical payload (``models.cache.payload_from_parts``) compressed for
        ``record_request_rows``: ``(dict id, body)``."""
        try:
            return self._pack(self._db, role, payload)
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: write failed ({e})") from None

    def _pack(self, db: sqlite3.Connection, role: str, payload: str) -> tuple[int, bytes]:
        if self._packer is None:
            self._packer = RequestPacker(db)
        return self._packer.pack(role, payload, db)

    def record_request_rows(self, rows: Sequence[tuple[str, int, bytes]]) -> None:
        """Keep ``(key, dict id, body)`` requests in one transaction; a key already on record
        is kept as it is (the key is the payload's hash: same key, same request)."""
        self._sync()
        try:
            insert_many(self._db, _INSERT_REQUEST, rows)
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: write failed ({e})") from None

    def request(self, key: str) -> dict[str, Any] | None:
        """The request on record under ``key`` (``store.requests.decode_payload``'s fields plus
        ``key``), or None (a call recorded before requests were kept)."""
        self._sync()
        rows = self._read(
            "SELECT r.body, d.body FROM requests r LEFT JOIN request_dicts d ON d.id = r.dict"
            " WHERE r.key=?",
            (key,),
        )
        if not rows:
            return None
        body, zdict = rows[0]
        return {"key": key, **decode_payload(unpack(body, zdict))}

    def iter_requests(self) -> Iterator[dict[str, Any]]:
        """Every request on record, ordered by key (``request``'s fields), streamed."""
        self._sync()
        zdicts = {int(i): bytes(b) for i, b in self._read("SELECT id, body FROM request_dicts")}
        for key, d, body in self._stream("SELECT key, dict, body FROM requests ORDER BY key"):
            yield {"key": key, **decode_payload(unpack(body, zdicts.get(int(d))))}

    # image hashes and run metadata ---------------------------------------------------------

    @cached_property
    def images(self) -> ImageStore:
        """The images the run's models were sent, kept by hash beside this database."""
        return ImageStore(self.path.parent)

    def put_image_bytes(self, sha256: str, data: bytes) -> None:
        """Keep an image a model was sent (its encoded bytes, hashing to ``sha256``) once, in
        the run directory (``store.images``)."""
        self.images.put(sha256, data)

    def image_sha(self, path: str, size: int, mtime_ns: int, recipe: str) -> str | None:
        """The content hash recorded for an image file as it was (size, mtime) prepared by
        ``recipe``, or None: a resumed step needs the hash for its key, not the image."""
        self._sync()
        rows = self._read(
            "SELECT sha256 FROM image_hashes WHERE path=? AND size=? AND mtime_ns=? AND recipe=?",
            (path, size, mtime_ns, recipe),
        )
        return str(rows[0][0]) if rows else None

    def put_image_sha(self, path: str, size: int, mtime_ns: int, recipe: str, sha: str) -> None:
        """Record an image file's prepared content hash (see ``image_sha``)."""
        self._quiet()
        self._write(
            "INSERT OR REPLACE INTO image_hashes (path, size, mtime_ns, recipe, sha256)"
            " VALUES (?, ?, ?, ?, ?)",
            (path, size, mtime_ns, recipe, sha),
        )

    def record_counts(self, *, artifacts: bool = True) -> list[int]:
        """Rows of each kind of record (calls, members, errors, finished items, and artifacts
        unless ``artifacts`` is false: counting them reads every one) and the newest call's
        id: a change that adds or removes any record changes them."""
        self._sync()
        tables = (
            "calls",
            "members",
            "errors",
            "items_done",
            *(("artifacts",) if artifacts else ()),
        )
        counts = [int(self._read(f"SELECT COUNT(*) FROM {t}")[0][0]) for t in tables]
        return [*counts, self.last_call_id()]

    def meta_digest(self, skip: tuple[str, ...] = ()) -> str:
        """sha256 of the run-level values (names and values), but those whose name starts with
        one of ``skip``."""
        h = hashlib.sha256()
        for name, value in self._read("SELECT name, value FROM meta ORDER BY name"):
            if not str(name).startswith(skip):
                h.update(_dumps([name, value]).encode("utf-8") + b"\n")
        return h.hexdigest()

    def get_meta(self, name: str) -> str | None:
        """A run-level value recorded under ``name`` (e.g. the digest of the last analysis)."""
        rows = self._read("SELECT value FROM meta WHERE name=?", (name,))
        return str(rows[0][0]) if rows else None

    def set_meta(self, name: str, value: str) -> None:
        """Record a run-level value under ``name`` (the latest wins)."""
        self._quiet()
        self._write("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", (name, value))

    # errors --------------------------------------------------------------------------------

    def record_error(self, kind: str, key: str, reason: str, detail: str = "") -> None:
        """Record why a step failed for one item; one row per (kind, key), the latest wins, so a
        resumed run that fails again does not duplicate it."""
        self._sync()
        self._write(
            "INSERT OR REPLACE INTO errors (kind, key, reason, detail, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (kind, key, reason, detail, time.time()),
        )

    def errors(self, kind: str | None = None) -> list[ErrorRecord]:
        """Recorded failures (of one kind or all), ordered by kind and key."""
        self._sync()
        cols = "kind, key, reason, detail, created_at"
        if kind is None:
            rows = self._read(f"SELECT {cols} FROM errors ORDER BY kind, key")
        else:
            rows = self._read(f"SELECT {cols} FROM errors WHERE kind=? ORDER BY key", (kind,))
        return [ErrorRecord(*r) for r in rows]

    def clear_errors(self, kind: str, key: str) -> None:
        """Forget the failure of one item (a resumed step succeeded)."""
        self._sync()
        self._write("DELETE FROM errors WHERE kind=? AND key=?", (kind, key))

    # config snapshots ----------------------------------------------------------------------

    def save_snapshot(self, config: dict[str, Any], prompt_hashes: dict[str, str]) -> None:
        """Append the config and prompt-template hashes of one run start."""
        self._write(
            "INSERT INTO snapshots (created_at, config, prompt_hashes) VALUES (?, ?, ?)",
            (time.time(), _dumps(config, default=str), _dumps(prompt_hashes)),
        )

    def latest_snapshot(self) -> dict[str, Any] | None:
        """``{"created_at", "config", "prompt_hashes"}`` of the latest run start, or None."""
        rows = self._read(
            "SELECT created_at, config, prompt_hashes FROM snapshots ORDER BY id DESC LIMIT 1"
        )
        if not rows:
            return None
        created, config, hashes = rows[0]
        return {
            "created_at": created,
            "config": json.loads(config),
            "prompt_hashes": json.loads(hashes),
        }

    # export --------------------------------------------------------------------------------

    def _rows(self, table: str) -> tuple[list[str], Iterator[dict[str, Any]]]:
        # Streamed from the database: an export's memory follows a chunk, not the table.
        if table == "calls":
            return list(_CALL_COLUMNS), (
                dict(zip(_CALL_COLUMNS, r, strict=True)) for r in self._stream(_SELECT_CALLS)
            )
        if table == "artifacts":
            cols = ["kind", "key", "value", "created_at"]
            rows = self._stream(f"SELECT {', '.join(cols)} FROM artifacts ORDER BY kind, key")
            return cols, (
                {"kind": k, "key": key, "value": _loads(v), "created_at": t}
                for k, key, v, t in rows
            )
        if table == "errors":
            cols = [f.name for f in fields(ErrorRecord)]
            return cols, (
                dict(zip(cols, r, strict=True))
                for r in self._stream(f"SELECT {', '.join(cols)} FROM errors ORDER BY kind, key")
            )
        if table == "requests":
            return ["key", "key_version", "endpoint", "messages", "params"], self.iter_requests()
        raise StoreError(f"unknown table {table!r}; choose calls, requests, artifacts or errors")

    def export(
        self,
        table: Literal["calls", "requests", "artifacts", "errors"],
        path: Path,
        fmt: Literal["jsonl", "csv"],
    ) -> int:
        """Write one table to JSONL or CSV (artifact values as JSON text); returns rows written."""
        if fmt not in ("jsonl", "csv"):
            raise StoreError(f"unknown export format {fmt!r}; choose jsonl or csv")
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("w", encoding="utf-8", newline="") as f:
                return self.write_export(table, f, fmt)
        except OSError as e:
            raise StoreError(f"{path}: cannot write export ({e.strerror})") from None

    def write_export(
        self,
        table: Literal["calls", "requests", "artifacts", "errors"],
        f: TextIO,
        fmt: Literal["jsonl", "csv"],
    ) -> int:
        """Write one table to an open text stream (e.g. stdout); returns rows written. CSV cells
        that a spreadsheet would read as a formula are neutralised (``report.safe.csv_safe``)."""
        self._sync()
        if fmt not in ("jsonl", "csv"):
            raise StoreError(f"unknown export format {fmt!r}; choose jsonl or csv")
        cols, rows = self._rows(table)
        n = 0
        if fmt == "jsonl":
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
                n += 1
            return n
        writer = csv.DictWriter(f, fieldnames=cols)
        writer.writeheader()
        for row in rows:
            for col in ("value", "endpoint", "messages", "params"):
                if col in row:  # JSON text in one cell
                    row[col] = _dumps(row[col])
            writer.writerow({k: csv_safe(v) for k, v in row.items()})
            n += 1
        return n
