"""Requests as sent: the canonical payload of every call's request (endpoint, messages with
images by content hash, parameters), compressed and kept once per request key.

A request's key is the sha256 of its payload, so a stored request can be checked against the
call rows that name it. Requests of one role share most of their text (the template, the
system prompt), so each is compressed against a preset dictionary: the first request of its
role in the run, kept in ``request_dicts`` (a request is never read without the dictionary it
was packed with; ``dict`` 0 means none).

Bodies are Zstandard frames against that dictionary used as raw content (the compressor
digests it once per role, not once per request: about 10 us a demo request instead of zlib's
36 at level 6, for 5% more bytes). Run databases written before keep their zlib bodies (the
dictionary as zlib's preset ``zdict``); a body is read by its first bytes (the Zstandard frame
magic, which no zlib stream starts with), so both kinds mix in one table.

A body is untrusted once the database leaves the run (a shared or downloaded run directory): a
frame of a few KiB can declare and hold gigabytes, so a body is unpacked as a stream, up to
``MAX_PAYLOAD_BYTES``, and one past it is refused (``PayloadTooLarge``), never allocated.

A Zstandard context is never used by two threads at once (concurrent use corrupts its output or
crashes the process): each thread has its own compressors and decompressors (the viewer unpacks
requests in several page threads), with its own digested dictionaries."""

from __future__ import annotations

import json
import sqlite3
import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memearena.errors import StoreError

if TYPE_CHECKING:
    import zstandard

__all__ = [
    "MAX_PAYLOAD_BYTES",
    "PARAM_NAMES",
    "REQUESTS_SCHEMA",
    "PayloadTooLarge",
    "RequestPacker",
    "decode_payload",
    "unpack",
]

REQUESTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS request_dicts (
    id INTEGER PRIMARY KEY,
    role TEXT NOT NULL,
    body BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    dict INTEGER NOT NULL,
    body BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_request_hash ON calls(request_hash);
"""
"""Created on every open (``IF NOT EXISTS``): additive, so older readers are unaffected. The
index on ``calls(request_hash)`` links a request (and the artifact whose key ends with it) to
the calls that sent it.

Requests are appended in rowid order and only the compact key index takes the random inserts
of hash keys: keyed by the hash itself (WITHOUT ROWID, the first layout, which older run
databases keep), every insert landed on a random leaf holding a dozen bodies, and each commit
wrote more pages (about 3 us a call more at ten calls a commit). Every statement here names its
columns, so both layouts are read and written alike."""

PARAM_NAMES = ("temperature", "top_p", "max_tokens", "seed", "reasoning_effort", "response_format")
"""The positional parameters of a payload (``models.cache.params_json``), in order."""

MAX_PAYLOAD_BYTES = 64 * 1024 * 1024
"""The largest payload a stored request unpacks to (images travel by hash: a demo request is
a few KiB, a long multi-turn judge request well under a MiB)."""

_LEVEL = 3  # Zstandard's default: level 6 packs 5% smaller at twice the time
_WINDOW = 32 * 1024  # a dictionary is the last 32 KiB of its role's first payload
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _zstd_dict(body: bytes) -> zstandard.ZstdCompressionDict:
    import zstandard  # lazy: only a run that records or reads requests needs it

    return zstandard.ZstdCompressionDict(body, dict_type=zstandard.DICT_TYPE_RAWCONTENT)


@dataclass(slots=True)
class _Dict:
    id: int
    body: bytes
    local: threading.local = field(default_factory=threading.local, repr=False)
    """This thread's compressor (``local.compressor``): one per thread, never shared."""

    def compress(self, raw: bytes) -> bytes:
        compressor: zstandard.ZstdCompressor | None = getattr(self.local, "compressor", None)
        if compressor is None:
            import zstandard

            # No checksum (SQLite pages carry none either; the key re-hashes the payload), no
            # dictionary id (the row names its dictionary); the content size is kept, so a
            # reader knows what it unpacks before it does.
            compressor = self.local.compressor = zstandard.ZstdCompressor(
                level=_LEVEL,
                dict_data=_zstd_dict(self.body),
                write_checksum=False,
                write_dict_id=False,
            )
        return compressor.compress(raw)


class RequestPacker:
    """Compresses payloads for one run database, each against its role's dictionary (created
    from the role's first payload, written at once: one row per role per run)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._dicts: dict[str, _Dict] = {}
        for rid, role, body in db.execute("SELECT id, role, body FROM request_dicts ORDER BY id"):
            self._dicts[role] = _Dict(int(rid), bytes(body))  # the latest of a role wins

    def pack(
        self, role: str, payload: str, db: sqlite3.Connection | None = None
    ) -> tuple[int, bytes]:
        """``(dict id, compressed payload)``; a role's dictionary, on its first request, is
        written at once through ``db`` (the packer's own connection if None), in no
        transaction: on record before any request packed with it."""
        raw = payload.encode("utf-8")
        d = self._dicts.get(role)
        if d is None:
            body = raw[-_WINDOW:]
            cur = (db or self._db).execute(
                "INSERT INTO request_dicts (role, body) VALUES (?, ?)", (role, body)
            )
            d = self._dicts[role] = _Dict(int(cur.lastrowid or 0), body)
        return d.id, d.compress(raw)


_DECOMPRESSORS_PER_THREAD = 64
"""Decompressors a thread keeps (the latest used), one per dictionary."""

_THREAD = threading.local()


def _decompressor(zdict: bytes | None) -> zstandard.ZstdDecompressor:
    """This thread's decompressor for ``zdict`` (made on first use in the thread)."""
    cache: OrderedDict[bytes | None, zstandard.ZstdDecompressor] | None = getattr(
        _THREAD, "decompressors", None
    )
    if cache is None:
        cache = _THREAD.decompressors = OrderedDict()
    dctx = cache.get(zdict)
    if dctx is not None:
        cache.move_to_end(zdict)
        return dctx
    import zstandard

    dctx = cache[zdict] = (
        zstandard.ZstdDecompressor()
        if zdict is None
        else zstandard.ZstdDecompressor(dict_data=_zstd_dict(zdict))
    )
    if len(cache) > _DECOMPRESSORS_PER_THREAD:
        cache.popitem(last=False)
    return dctx


class PayloadTooLarge(StoreError, ValueError):
    """A stored request body unpacks past the bound (a damaged or crafted row)."""


def unpack(body: bytes, zdict: bytes | None, max_bytes: int = MAX_PAYLOAD_BYTES) -> str:
    """A stored payload back as text (``zdict``: the body of its ``request_dicts`` row), a
    Zstandard body or a zlib one (run databases written before Zstandard). Raises
    ``PayloadTooLarge`` for a body declaring or unpacking past ``max_bytes``, before holding
    more than that (a frame holds no more than it declares, or fails)."""
    body = bytes(body)
    if body[:4] == _ZSTD_MAGIC:
        import zstandard

        dctx = _decompressor(None if zdict is None else bytes(zdict))
        declared = zstandard.frame_content_size(body)  # -1: not declared
        if declared > max_bytes:
            raise PayloadTooLarge(
                f"a stored request declares {declared:,} bytes, past {max_bytes:,}"
            )
        if declared >= 0:  # the writer's frames: one allocation of the declared size
            raw = dctx.decompress(body)
        else:
            with dctx.stream_reader(body, read_across_frames=True) as reader:
                raw = reader.read(max_bytes + 1)
    else:
        do = zlib.decompressobj() if zdict is None else zlib.decompressobj(zdict=zdict)
        raw = do.decompress(body, max_bytes + 1)
        if len(raw) <= max_bytes:
            raw += do.flush()  # the input is consumed: only what zlib still buffers
            if not do.eof:
                raise zlib.error("incomplete or truncated stream")
    if len(raw) > max_bytes:
        raise PayloadTooLarge(f"a stored request unpacks past {max_bytes:,} bytes")
    return raw.decode("utf-8")


def _unnest(value: Any) -> Any:
    """An endpoint identity with its JSON-in-JSON parts decoded (a simulated model's identity
    wraps its endpoint's JSON text with the world's fingerprint)."""
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return _unnest(json.loads(value))
        except ValueError:
            return value
    if isinstance(value, list):
        return [_unnest(v) for v in value]
    return value


def decode_payload(payload: str) -> dict[str, Any]:
    """A payload as named fields: ``key_version``, ``endpoint`` (what answered: provider, model
    id, base URLs; for a simulated model its settings and world), ``messages`` (``role``,
    ``content``: ``{"type": "text", "text"}`` or ``{"type": "image", "sha256"}``) and
    ``params`` (only those set)."""
    version, endpoint, messages, params = json.loads(payload)
    endpoint_value = _unnest(endpoint)
    out_msgs = []
    for role, parts in messages:
        content = [
            {"type": "text", "text": v} if kind == "text" else {"type": "image", "sha256": v}
            for kind, v in parts
        ]
        out_msgs.append({"role": role, "content": content})
    named = {k: v for k, v in zip(PARAM_NAMES, params, strict=False) if v is not None}
    return {
        "key_version": version,
        "endpoint": endpoint_value,
        "messages": out_msgs,
        "params": named,
    }
