"""Content-addressed response cache: identical requests are never paid for twice."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from json.encoder import encode_basestring as _enc
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memearena.errors import StoreError
from memearena.models.types import Completion, GenParams, ImagePart, Message, TextPart, Usage
from memearena.store.runstore import (
    PAGE_CACHE_KIB,
    WAL_CHECKPOINT_PAGES,
    checkpoint,
    create_private,
)
from memearena.store.sqlite_util import insert_many

if TYPE_CHECKING:
    from memearena.config import ModelConfig

__all__ = [
    "CACHE_KEY_VERSION",
    "ResponseCache",
    "endpoint_id",
    "key_for_endpoint",
    "key_from_parts",
    "key_prefix",
    "params_json",
    "payload_from_parts",
    "payload_key",
    "request_key",
]

CACHE_KEY_VERSION = 1
"""Part of every key; bumping it invalidates every cached response."""

# Fields of a simulated model that shape its answers (limits, price and latency do not).
_SIM_BEHAVIOUR_EXCLUDE = {
    "max_concurrency",
    "rpm",
    "timeout",
    "max_retries",
    "price",
    "latency_ms",
    "structured_outputs",  # a request parameter (in the params part when it applies)
    "max_response_bytes",
}
# Behaviour fields added after keys were pinned enter the key only when set (not 0), so caches
# written before they existed stay valid.
_SIM_ADDED_BEHAVIOUR = (
    "ignores_image",
    "query_trust",
    "text_sway",
    "category_skill",
    "guideline_damping",
    "family_misbeliefs",
)


def _message_json(m: Message) -> list[Any]:
    # Images are keyed by content hash, never by their base64 (huge, and encoding-dependent).
    parts: list[Any] = []
    for p in m.content:
        if isinstance(p, TextPart):
            parts.append(["text", p.text])
        elif isinstance(p, ImagePart):
            parts.append(["image", p.sha256])
    return [m.role, parts]


def endpoint_id(model_cfg: ModelConfig, model_name: str) -> str:
    """Canonical JSON naming what answers a request: provider, model id, sorted base URLs (for a
    simulated model: its name and every setting that shapes its answers)."""
    if model_cfg.provider == "openai":
        endpoint: Any = ["openai", model_cfg.model, sorted(model_cfg.urls())]
    else:
        behaviour = model_cfg.model_dump(mode="json", exclude=_SIM_BEHAVIOUR_EXCLUDE)
        for name in _SIM_ADDED_BEHAVIOUR:
            if not behaviour.get(name):
                behaviour.pop(name, None)
        endpoint = ["sim", model_name, behaviour]
    return json.dumps(endpoint, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _canonical_payload(endpoint: str, messages: Sequence[Message], params: GenParams) -> str:
    """The canonical JSON the key hashes, built the straightforward way (the definition that
    ``key_for_endpoint``'s fast path reproduces byte for byte)."""
    values: list[Any] = [params.temperature, params.top_p, params.max_tokens, params.seed]
    values.append(params.reasoning_effort)
    if params.response_format is not None:  # only when set: earlier keys stay valid
        values.append(params.response_format)
    payload = [CACHE_KEY_VERSION, endpoint, [_message_json(m) for m in messages], values]
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


_INF = float("inf")

# ``_enc`` encodes a JSON string exactly as ``json.dumps(..., ensure_ascii=False)`` writes it (the
# same C function), so the hand-built payload below matches _canonical_payload byte for byte.


def key_prefix(endpoint: str) -> str:
    """The constant head of every payload for one endpoint (precomputed once per model)."""
    return f"[{CACHE_KEY_VERSION},{_enc(endpoint)},["


def _param_json(v: object) -> str:
    if v is None:
        return "null"
    if type(v) is str:
        return _enc(v)
    t = type(v)
    if t is int or (t is float and v == v and v not in (_INF, -_INF)):
        return repr(v)  # what json.dumps writes for a plain int or finite float
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def params_json(params: GenParams) -> str:
    """The parameters' part of the payload (precomputed once per model for its defaults)."""
    base = (
        f"[{_param_json(params.temperature)},{_param_json(params.top_p)},"
        f"{_param_json(params.max_tokens)},{_param_json(params.seed)},"
        f"{_param_json(params.reasoning_effort)}"
    )
    # A later field: written only when set, so the keys of earlier requests stay valid.
    if params.response_format is not None:
        base += "," + _enc(params.response_format)
    return base + "]"


_KEY_JSON = "_key_json"


def _message_key_json(m: Message) -> str:
    """One message's part of the payload, encoded once per message object: a request's
    messages are keyed several times (the step's fingerprint, then the call; one prompt sent to
    every judge), and a message is immutable, so its encoding never goes stale."""
    got = m.__dict__.get(_KEY_JSON)
    if got is not None:
        return got  # type: ignore[no-any-return]
    parts = []
    for p in m.content:
        if isinstance(p, TextPart):
            parts.append('["text",' + _enc(p.text) + "]")
        elif isinstance(p, ImagePart):
            parts.append('["image",' + _enc(p.sha256) + "]")
    out = "[" + _enc(m.role) + ",[" + ",".join(parts) + "]]"
    object.__setattr__(m, _KEY_JSON, out)  # not a field: equality, hash and repr ignore it
    return out


def _messages_json(messages: Sequence[Message]) -> str:
    return ",".join([_message_key_json(m) for m in messages])


def payload_from_parts(
    prefix: str,
    endpoint: str,
    messages: Sequence[Message],
    params: GenParams,
    params_part: str | None = None,
) -> str:
    """The canonical JSON a request key hashes (endpoint, messages with images as their
    sha256, parameters), from ``key_prefix(endpoint)`` and, optionally, a precomputed
    ``params_json(params)``: assembled from JSON-encoded pieces instead of a nested structure
    dumped whole (the same bytes, several times cheaper). It is the request as sent, on record
    in the run store (``RunStore.request``)."""
    try:
        return (
            prefix
            + _messages_json(messages)
            + "],"
            + (params_json(params) if params_part is None else params_part)
            + "]"
        )
    except TypeError:  # a non-str text, role or hash: the generic encoder decides
        return _canonical_payload(endpoint, messages, params)


def payload_key(payload: str) -> str:
    """The request key of a canonical payload (its sha256)."""
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def key_from_parts(
    prefix: str,
    endpoint: str,
    messages: Sequence[Message],
    params: GenParams,
    params_part: str | None = None,
) -> str:
    """``key_for_endpoint`` from ``key_prefix(endpoint)`` and, optionally, a precomputed
    ``params_json(params)`` (the sha256 of ``payload_from_parts``)."""
    return payload_key(payload_from_parts(prefix, endpoint, messages, params, params_part))


def key_for_endpoint(endpoint: str, messages: Sequence[Message], params: GenParams) -> str:
    """``request_key`` with the endpoint part precomputed by ``endpoint_id``."""
    return key_from_parts(key_prefix(endpoint), endpoint, messages, params)


def request_key(
    model_cfg: ModelConfig, model_name: str, messages: Sequence[Message], params: GenParams
) -> str:
    """sha256 over canonical JSON of the endpoint (provider, model id, sorted base URLs), the
    messages with images as their sha256, and the parameters. Stable across processes."""
    return key_for_endpoint(endpoint_id(model_cfg, model_name), messages, params)


_INSERT = "INSERT OR IGNORE INTO responses (key, value, created_at) VALUES (?, ?, ?)"

# Replies (~1 KB each) are appended in rowid order and only the compact key index takes the
# random inserts of hash keys, so it stays in the page cache and a commit dirties one index leaf
# and the table's tail per entry. Keyed by the hash itself (WITHOUT ROWID), every insert landed
# on a random leaf holding two or three replies: page splits, a file 3x larger, and reads and
# commits that grew dearer with the cache (139 vs 25-68 us an entry from 25,000 to 258,000
# entries, bench/store_statements.py).
_CREATE = (
    "CREATE TABLE IF NOT EXISTS responses ("
    " id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, value TEXT NOT NULL,"
    " created_at REAL NOT NULL)"
)


def _value_json(c: Completion) -> str:
    """The stored value: ``json.dumps`` of text, model, token counts and finish reason (default
    separators, non-ASCII kept), assembled from encoded pieces when the fields have their usual
    types (``json.dumps`` with options builds a new encoder per call: several times slower)."""
    u = c.usage
    i, o, fin = u.input_tokens, u.output_tokens, c.finish_reason
    if type(i) is int and type(o) is int and (fin is None or type(fin) is str):
        try:
            return (
                '{"text": '
                + _enc(c.text)
                + ', "model": '
                + _enc(c.model)
                + f', "input_tokens": {i}, "output_tokens": {o}, "finish_reason": '
                + ("null" if fin is None else _enc(fin))
                + "}"
            )
        except TypeError:  # a non-str text or model: the generic encoder decides
            pass
    return json.dumps(
        {
            "text": c.text,
            "model": c.model,
            "input_tokens": i,
            "output_tokens": o,
            "finish_reason": fin,
        },
        ensure_ascii=False,
    )


class ResponseCache:
    """Completions by request key, in their own SQLite file (WAL), shareable between runs and
    processes. Only the stack decides what goes in: never errors, refusals or empty outputs."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._commit_db: sqlite3.Connection | None = None
        try:
            create_private(self.path)  # cached replies are run data: owner only
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            # NORMAL, not OFF, although this is only a cache: in WAL mode NORMAL skips the fsync
            # per commit (a power loss may drop the last writes, never corrupt the file), while
            # OFF also skips the fsyncs around checkpoints, and SQLite documents that an OS crash
            # or power loss can then corrupt the database (a process crash, kill -9 included, is
            # safe either way). A corrupt cache would fail later runs or serve damaged entries:
            # not worth the ~8 us a call that OFF saves here.
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")  # see there
            self._db.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")  # random keys, see there
            # A cache written before this layout keeps its WITHOUT ROWID table: the statements
            # below read and write both layouts alike.
            self._db.execute(_CREATE)
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"{self.path}: cannot open response cache ({e})") from None

    def get(self, key: str) -> Completion | None:
        """The cached completion (``cached=True``, zero cost), or None."""
        try:
            row = self._db.execute("SELECT value FROM responses WHERE key=?", (key,)).fetchone()
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: cache read failed ({e})") from None
        if row is None:
            return None
        v = json.loads(row[0])
        return Completion(
            text=v["text"],
            model=v["model"],
            usage=Usage(v["input_tokens"], v["output_tokens"]),
            latency_s=0.0,
            finish_reason=v["finish_reason"],
            refusal=False,
            cached=True,
            cost_usd=0.0,
        )

    def put(self, key: str, completion: Completion) -> None:
        """Store a completion under ``key`` (an existing entry is kept)."""
        self.put_many(((key, completion),))

    def commit_db(self) -> sqlite3.Connection:
        """The connection ``put_many`` may be given by a writer committing in its own thread
        (opened on first use, closed with the cache; one thread at a time)."""
        if self._commit_db is None:
            try:
                db = sqlite3.connect(
                    self.path, isolation_level=None, timeout=30.0, check_same_thread=False
                )
                db.execute("PRAGMA synchronous=NORMAL")  # per connection: see __init__
                db.execute(f"PRAGMA wal_autocheckpoint={WAL_CHECKPOINT_PAGES}")
                db.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
            except sqlite3.Error as e:
                raise StoreError(f"{self.path}: cannot open response cache ({e})") from None
            self._commit_db = db
        return self._commit_db

    def put_many(
        self, entries: Iterable[tuple[str, Completion]], db: sqlite3.Connection | None = None
    ) -> None:
        """Store several completions in one transaction (one commit instead of one each; an
        existing entry is kept), through ``db`` (``commit_db``) or the cache's own connection.
        All or none are written."""
        now = time.time()
        # In key order: one forward pass over the B-tree instead of random seeks.
        rows = sorted((key, _value_json(c), now) for key, c in entries)
        try:
            insert_many(db or self._db, _INSERT, rows)
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: cache write failed ({e})") from None

    def delete(self, key: str) -> None:
        """Drop the entry under ``key`` (none: nothing happens)."""
        try:
            with self._db:
                self._db.execute("DELETE FROM responses WHERE key = ?", (key,))
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: cache write failed ({e})") from None

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        """Copy the write-ahead log back into the cache file and close it (idempotent)."""
        if self._commit_db is not None:
            self._commit_db.close()
            self._commit_db = None
        checkpoint(self._db)  # a closed connection's error is ignored there
        self._db.close()
