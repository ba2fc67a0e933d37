"""Read-only queries over one run directory (``run.db`` and ``leaderboard.json``) for the
viewer's pages: the pages never see SQL, and nothing here writes. These are the queries every
run has (its overview, calls, requests, images, JSONL outputs); a method's own queries are in
its package (``methods/<name>/pages.py``), over this reader.

Every string returned is untrusted (model output, dataset text, model names from a config):
the templates escape it. Lists are paginated in SQL (``LIMIT``/``OFFSET``), so a page costs
the same on a 10,000-meme run as on the demo; the one exception is the meme index (each meme's
text and image hash, which a method's pages keep in ``RunReader.state``)."""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memearena.engine.registry import method_names, method_pages
from memearena.errors import MemearenaError
from memearena.jsonsafe import loads_bounded
from memearena.store.images import find_image
from memearena.store.requests import decode_payload, unpack
from memearena.view.usage import USAGE_COLUMNS, call_values, calls_stamp, stored_usage, usage

__all__ = [
    "MAX_PER_PAGE",
    "OUTCOMES",
    "DamagedRecord",
    "Page",
    "RunReader",
    "ViewError",
    "find_runs",
    "last_hash",
    "like",
    "outcome_of",
]

OUTCOMES = ("refusal", "parse_failure", "error")
"""Outcomes a list can be filtered by."""

MAX_PER_PAGE = 200


class ViewError(MemearenaError):
    """A directory the viewer cannot show (missing, not a run)."""


class DamagedRecord(ViewError):
    """A record of the run that cannot be read (a damaged or crafted row or file)."""


BOARD_MAX_BYTES = 512 * 1024 * 1024
"""The largest leaderboard.json read (the demo's is under 1 MB)."""


@dataclass(frozen=True)
class Page:
    """One page of a list: its rows, where it starts and whether more follow."""

    rows: list[dict[str, Any]]
    offset: int
    limit: int
    more: bool
    total: int | None = None


def like(text: str) -> str:
    """``text`` as a LIKE pattern matching itself anywhere (``%`` and ``_`` escaped)."""
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def last_hash(key: str) -> str:
    """The request hash that ends an artifact key."""
    return key.rsplit("|", 1)[-1]


def outcome_of(value: dict[str, Any] | None) -> str:
    """A step's outcome as a list shows it: ``ok``, ``refusal``, ``parse_failure`` or, with no
    artifact on record, ``error``."""
    if value is None:
        return "error"
    if value.get("refusal"):
        return "refusal"
    if "error" in value:
        return "parse_failure"
    return "ok"


def _is_run(path: Path) -> bool:
    return (path / "run.db").is_file() or (path / "leaderboard.json").is_file()


def find_runs(root: Path, depth: int = 3) -> list[Path]:
    """Run directories at or under ``root`` (``root`` itself when it is one, with any runs
    nested in it), sorted by path. Raises ViewError when there is none."""
    root = Path(root)
    if not root.is_dir():
        raise ViewError(f"{root}: no such directory")
    found: list[Path] = []

    def walk(p: Path, d: int) -> None:
        if _is_run(p):
            found.append(p)
        if d == 0:
            return
        try:
            children = sorted(c for c in p.iterdir() if c.is_dir() and not c.is_symlink())
        except OSError:
            return
        for c in children:
            walk(c, d - 1)

    walk(root, depth)
    if not found:
        raise ViewError(f"{root}: not a run directory (no run.db or leaderboard.json here)")
    return found


class RunReader:
    """One run directory, opened read-only (``run.db`` with ``mode=ro``; the file is never
    written, not even its WAL index when the directory is read-only)."""

    def __init__(self, run_dir: Path) -> None:
        self.dir = Path(run_dir)
        if not _is_run(self.dir):
            raise ViewError(f"{self.dir}: not a run directory (no run.db or leaderboard.json)")
        self._root = self.dir.resolve()
        self.board_error: str | None = None
        """Why leaderboard.json was not read (damaged, or a link out of the run), or None."""
        self._db: sqlite3.Connection | None = None
        db_path = self.dir / "run.db"
        if db_path.is_file() and self.inside("run.db") is None:
            raise ViewError(f"{db_path}: a link to a file outside the run directory, not read")
        if db_path.is_file():
            try:
                self._db = sqlite3.connect(
                    f"{db_path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False
                )
                self._db.execute("PRAGMA query_only=1")
                self._db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            except sqlite3.Error as e:
                raise ViewError(f"{db_path}: not a readable run database ({e})") from None
        self._board: dict[str, Any] | None = None
        self._board_mtime: float | None = None
        self._zdicts: dict[int, bytes] | None = None
        self._summaries: dict[str, tuple[tuple[Any, ...], Any]] = {}
        self.state: dict[str, Any] = {}
        """What a method's queries keep for this run (its indexes, by a name it prefixes with
        its own)."""
        self.lock = threading.Lock()
        """Held while a method's query builds an index kept in ``state``."""

    def close(self) -> None:
        if self._db is not None:
            self._db.close()

    # ------------------------------------------------------------------ basics
    def q(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """The rows of a read-only query (``[]`` where the run has no such table: an older
        run, that part not on record)."""
        if self._db is None:
            return []
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):  # an older run: that part is not on record
                return []
            raise

    def inside(self, name: str) -> Path | None:
        """The file ``name`` of the run directory, links resolved, or None when it resolves
        to a place outside the run directory: only the run's own files are ever read."""
        try:
            path = (self._root / name).resolve()
        except (OSError, RuntimeError):
            return None
        return path if path.is_relative_to(self._root) else None

    def has_table(self, name: str) -> bool:
        """Whether ``run.db`` has the table ``name``."""
        return bool(self.q("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)))

    @property
    def board(self) -> dict[str, Any]:
        """leaderboard.json (re-read when it changes), ``{}`` when absent or unreadable."""
        path = self.inside("leaderboard.json")
        if path is None:
            self.board_error = (
                "leaderboard.json is a link to a file outside the run directory: not read"
            )
            return {}
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return {}
        if self._board is None or self._board_mtime != mtime:
            self.board_error = None
            try:
                # Bounded: a deeply nested or huge file is a damaged record, not a crash.
                board = loads_bounded(path.read_bytes(), max_bytes=BOARD_MAX_BYTES, allow_nan=True)
            except OSError as e:
                board, self.board_error = {}, f"leaderboard.json cannot be read ({e.strerror})"
            except ValueError as e:
                board, self.board_error = {}, f"leaderboard.json is damaged ({e}): not shown"
            if not isinstance(board, dict):
                board, self.board_error = {}, "leaderboard.json is damaged (not an object)"
            self._board = board
            self._board_mtime = mtime
        return self._board

    def artifact(self, kind: str, key: str) -> dict[str, Any] | None:
        rows = self.q("SELECT value FROM artifacts WHERE kind=? AND key=?", (kind, key))
        return json.loads(rows[0][0]) if rows else None

    def prefixed(self, kind: str, prefix: str) -> list[tuple[str, dict[str, Any]]]:
        """The artifacts of ``kind`` whose key starts with ``prefix``, by key."""
        rows = self.q(
            "SELECT key, value FROM artifacts WHERE kind=? AND key >= ? AND key < ? ORDER BY key",
            (kind, prefix, prefix + "\U0010ffff"),
        )
        return [(k, json.loads(v)) for k, v in rows]

    # ------------------------------------------------------------------ overview
    def warm(self) -> None:
        """Compute what the first pages need (overview, filter values, each method's own)."""
        self.overview()
        self.filter_values()
        for name in self.methods():
            pages = method_pages(name)
            if pages is not None and pages.warm is not None:
                pages.warm(self)

    def _stamp(self) -> tuple[Any, ...]:
        """What a run's files look like now: equal stamps, equal contents (a live run moves
        its WAL; a finished one keeps its stamp, so its summaries are computed once)."""
        out: list[Any] = []
        for name in ("run.db", "run.db-wal", "leaderboard.json"):
            try:
                st = (self.dir / name).stat()
                out.append((st.st_size, st.st_mtime_ns))
            except OSError:
                out.append(None)
        return tuple(out)

    def cached(self, name: str, compute: Callable[[], Any]) -> Any:
        """``compute()`` kept under ``name`` while the run's files keep their stamp."""
        stamp = self._stamp()
        hit = self._summaries.get(name)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        value = compute()
        self._summaries[name] = (stamp, value)
        return value

    def methods(self) -> list[str]:
        """The registered methods this run holds results of (read from leaderboard.json only:
        what a page's navigation needs, without the overview's scans of the calls)."""
        board = self.board
        return [m for m in method_names() if m in board]

    def stored_usage(self) -> dict[str, Any] | None:
        """The record of the run's calls (``view.usage``) stored with a method's section of
        leaderboard.json, when it was summed from the calls on record now (None: it was not,
        or there is none; a run written before such records)."""
        return self.cached("usage", self._stored_usage)  # type: ignore[no-any-return]

    def _stored_usage(self) -> dict[str, Any] | None:
        board = self.board
        sections = [m for m in method_names() if m in board]
        if not sections:
            return None
        return stored_usage(board, sections, lambda: calls_stamp(self.q))

    def overview(self) -> dict[str, Any]:
        """Run facts, status, spend, calls, tokens, errors by reason, simulated notes."""
        return dict(self.cached("overview", self._overview))

    def _overview(self) -> dict[str, Any]:
        board = self.board
        run: dict[str, Any] = board["run"] if isinstance(board.get("run"), dict) else {}
        status = board.get("status") if isinstance(board.get("status"), dict) else None
        # The usage a method stored with its section when it was summed from these very
        # calls; else (an older run, a run written to since) one pass over the calls.
        stored = self.stored_usage()
        scanned = stored if stored is not None else usage(self.q)
        models: list[dict[str, Any]] = [dict(m) for m in scanned["models"]]
        totals = {c: sum(m[c] for m in models) for c in USAGE_COLUMNS[1:]}
        errors = [
            {"kind": k, "reason": r, "count": n}
            for k, r, n in self.q(
                "SELECT kind, reason, COUNT(*) FROM errors GROUP BY kind, reason"
                " ORDER BY COUNT(*) DESC, kind, reason"
            )
        ]
        call_errors = [dict(e) for e in scanned["call_errors"]]
        simulated = []
        if isinstance(board.get("simulated"), dict):
            simulated.append(str(board["simulated"].get("note") or "targets are simulated"))
        for method in method_names():
            sec = board.get(method)
            if isinstance(sec, dict) and isinstance(sec.get("simulated"), dict):
                simulated.append(str(sec["simulated"].get("note") or f"{method} is simulated"))
        if not status:
            state = "unknown"
        elif status.get("complete"):
            state = "complete"
        elif any("cap" in str(p) for p in status.get("problems") or []) or status.get("stopped"):
            state = "capped"
        else:
            state = "incomplete"
        return {
            "name": run.get("name") or self.dir.name,
            "date": run.get("date"),
            "seed": run.get("seed"),
            "config_sha256": run.get("config_sha256"),
            "version": run.get("version"),
            "status": status,
            "state": state,
            "problems": [str(p) for p in (status or {}).get("problems") or []],
            "models": models,
            "totals": totals,
            "errors": errors,
            "call_errors": call_errors,
            "simulated": simulated,
            "methods": self.methods(),
            "requests_kept": self.has_table("requests"),
        }

    # ------------------------------------------------------------------ calls
    _CALL_COLS = (
        "id",
        "request_hash",
        "model",
        "role",
        "status",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "latency_s",
        "attempts",
        "error",
        "error_kind",
        "created_at",
    )

    def calls(
        self,
        *,
        model: str = "",
        role: str = "",
        status: str = "",
        offset: int = 0,
        limit: int = 50,
    ) -> Page:
        """Calls on record, oldest first, filtered by model, role and status (``ok``,
        ``cached``, ``refusal``, ``error``, ``sent``, ``budget``)."""
        limit = max(1, min(limit, MAX_PER_PAGE))
        where, params = [], []
        for col, val in (("model", model), ("role", role), ("status", status)):
            if val:
                where.append(f"{col}=?")
                params.append(val)
        sql = f"SELECT {', '.join(self._CALL_COLS)} FROM calls"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id LIMIT ? OFFSET ?"
        rows = self.q(sql, (*params, limit + 1, offset))
        out = [dict(zip(self._CALL_COLS, r, strict=True)) for r in rows[:limit]]
        return Page(out, offset, limit, len(rows) > limit)

    def call_for(self, request_hash: str) -> int | None:
        """The id of the first call that sent this request (None if none is on record)."""
        rows = self.q(
            "SELECT id FROM calls WHERE request_hash=? ORDER BY id LIMIT 1", (request_hash,)
        )
        return int(rows[0][0]) if rows else None

    def call(self, call_id: int) -> dict[str, Any] | None:
        """One call: its record, reply, the request as sent, and the other calls that sent the
        same request (retries of a step, cache hits)."""
        cols = (*self._CALL_COLS, "response", "cost_bound_usd")
        rows = self.q(f"SELECT {', '.join(cols)} FROM calls WHERE id=?", (call_id,))
        if not rows:
            return None
        out = dict(zip(cols, rows[0], strict=True))
        try:
            out["request"], out["request_damage"] = self.request(out["request_hash"]), None
        except DamagedRecord as e:
            out["request"], out["request_damage"] = None, str(e)
        out["same_request"] = [
            {"id": i, "status": s, "created_at": t}
            for i, s, t in self.q(
                "SELECT id, status, created_at FROM calls WHERE request_hash=? AND id<>?"
                " ORDER BY id LIMIT 50",
                (out["request_hash"], call_id),
            )
        ]
        return out

    def call_context(self, request_hash: str, role: str) -> list[dict[str, Any]]:
        """What a call served, where the run records it, as the method owning its role says
        (``{"href", "label", "note"}`` each; ``[]`` when nothing on record names it)."""
        if len(request_hash) != 64:
            return []
        pages = method_pages(role.partition(".")[0])
        if pages is None or pages.served is None:
            return []
        return list(pages.served(self, request_hash, role))

    @staticmethod
    def unpack(body: bytes, zdict: bytes | None) -> str:
        """A stored request body as text (pages render in worker threads: the store keeps a
        decompressor per thread, so bodies unpack in several at once)."""
        return unpack(body, zdict)

    def zdict(self, number: int) -> bytes | None:
        """The compression dictionary ``number`` of the run's requests (None: not on record)."""
        if self._zdicts is None or number not in self._zdicts:
            self._zdicts = {
                int(i): bytes(b) for i, b in self.q("SELECT id, body FROM request_dicts")
            }
        return self._zdicts.get(number)

    def request(self, key: str) -> dict[str, Any] | None:
        """The request on record under ``key``, decoded (None when not kept); DamagedRecord
        when its row cannot be read (a dictionary not on record, a body past the bound)."""
        rows = self.q("SELECT dict, body FROM requests WHERE key=?", (key,))
        if not rows:
            return None
        d, body = rows[0]
        for fresh in (False, True):  # a dictionary written after we first read them: once
            if self._zdicts is None or fresh:
                self._zdicts = {
                    int(i): bytes(b) for i, b in self.q("SELECT id, body FROM request_dicts")
                }
            zdict = self._zdicts.get(int(d))
            if zdict is not None or not int(d):
                break
        else:
            raise DamagedRecord(
                f"request {key}: packed with dictionary {int(d)}, which is not on record"
            )
        try:
            return {"key": key, **decode_payload(self.unpack(body, zdict))}
        except Exception as e:  # untrusted bytes: zlib, zstd, UTF-8 and JSON all raise
            raise DamagedRecord(f"request {key}: unreadable ({type(e).__name__}: {e})") from None

    def filter_values(self) -> dict[str, list[str]]:
        """Values the filters offer: every registered method's (its models, judges,
        criteria, categories...) and the calls' (models, roles, statuses)."""
        return dict(self.cached("filters", self._filter_values))

    def _filter_values(self) -> dict[str, list[str]]:
        stored = self.stored_usage()
        calls = (
            {k: list(stored[k]) for k in ("call_models", "roles")}
            if stored is not None
            else call_values(self.q)
        )
        return {
            **self.method_filter_values(),
            **calls,
            "statuses": ["ok", "cached", "refusal", "error", "sent", "budget"],
        }

    def method_filter_values(self) -> dict[str, list[str]]:
        """Values every registered method's filters offer (read from leaderboard.json only:
        what a method's list pages need, without scanning the calls)."""
        return dict(self.cached("method_filters", self._method_filter_values))

    def _method_filter_values(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for name in method_names():  # each registered method's, empty when the run lacks it
            pages = method_pages(name)
            if pages is not None and pages.filters is not None:
                out.update(pages.filters(self))
        return out

    def __getattr__(self, name: str) -> Any:
        # Reached only for a name that is not an attribute: a registered method's query
        # (``reader.battles(...)``), given this reader.
        if not name.startswith("_"):
            for method in method_names():
                pages = method_pages(method)
                query = pages.queries.get(name) if pages is not None else None
                if query is not None:
                    return functools.partial(query, self)
        raise AttributeError(f"{type(self).__name__!r} has no attribute or query {name!r}")

    def image_bytes(self, sha256: str) -> bytes | None:
        """The bytes of the image with this content hash as the run kept it (``store.images``;
        an older run of a method may have kept its own in a folder its pages name,
        ``image_folders``): only a regular file inside the run directory once links are
        resolved, and only when its bytes still hash to ``sha256``."""
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            return None
        root = self.dir.resolve()
        found = find_image(self.dir, sha256)
        candidates = [found] if found is not None else []
        folders = [
            folder
            for name in method_names()
            if (pages := method_pages(name)) is not None
            for folder in pages.image_folders
        ]
        candidates += [
            self.dir / folder / f"{sha256}.{ext}"
            for folder in folders
            for ext in ("png", "jpg", "jpeg", "webp", "gif")
        ]
        for p in candidates:
            try:
                real = p.resolve(strict=True)
                if not real.is_relative_to(root) or not real.is_file():
                    continue
                data = real.read_bytes()
            except OSError:
                continue
            if hashlib.sha256(data).hexdigest() == sha256:
                return data
        return None

    def dataset_image_path(self, sha256: str) -> Path | None:
        """The dataset file a run without its own copy prepared this image from
        (``image_hashes``, checked unchanged): the caller serves it only once preparing it
        again gives ``sha256``."""
        if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
            return None
        for path, size, mtime_ns in self.q(
            "SELECT path, size, mtime_ns FROM image_hashes WHERE sha256=?", (sha256,)
        ):
            p = Path(path)
            try:
                st = p.stat()
            except OSError:
                continue
            if st.st_size == size and st.st_mtime_ns == mtime_ns:
                return p
        return None

    def jsonl(self, name: str, match: dict[str, str], offset: int = 0, limit: int = 50) -> Page:
        """Rows of the run's JSONL output ``<name>.jsonl`` (a method's, named by its pages)
        whose fields equal ``match``, each with its line number."""
        if not name.isidentifier():
            raise ViewError(f"unknown output {name!r}")
        limit = max(1, min(limit, MAX_PER_PAGE))
        out: list[dict[str, Any]] = []
        seen = 0
        more = False
        for n, row in self.lines(name):
            if any(str(row.get(k)) != v for k, v in match.items() if v):
                continue
            if seen >= offset:
                if len(out) == limit:
                    more = True
                    break
                out.append({"line": n, **row})
            seen += 1
        return Page(out, offset, limit, more)

    def jsonl_line(self, name: str, line: int) -> dict[str, Any] | None:
        for n, row in self.lines(name):
            if n == line:
                return row
        return None

    def lines(self, name: str) -> Iterator[tuple[int, dict[str, Any]]]:
        """The JSON objects of the run's ``<name>.jsonl``, each with its line number (a damaged
        line skipped)."""
        path = self.inside(f"{name}.jsonl")
        if path is None:
            return
        try:
            f = path.open(encoding="utf-8")
        except OSError:
            return
        with f:
            for n, line in enumerate(f, start=1):
                try:
                    row = json.loads(line)
                except (ValueError, RecursionError):  # a damaged line is skipped
                    continue
                if isinstance(row, dict):
                    yield n, row
