"""Content-addressed response cache: identical requests are never paid for twice."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memearena.errors import StoreError
from memearena.models.types import Completion, GenParams, ImagePart, Message, TextPart, Usage

if TYPE_CHECKING:
    from memearena.config import ModelConfig

__all__ = ["CACHE_KEY_VERSION", "ResponseCache", "endpoint_id", "key_for_endpoint", "request_key"]

CACHE_KEY_VERSION = 1
"""Part of every key; bumping it invalidates every cached response."""

# Fields of a simulated model that shape its answers (limits, price and latency do not).
_SIM_BEHAVIOUR_EXCLUDE = {"max_concurrency", "rpm", "timeout", "max_retries", "price", "latency_ms"}


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
        endpoint = ["sim", model_name, behaviour]
    return json.dumps(endpoint, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def key_for_endpoint(endpoint: str, messages: Sequence[Message], params: GenParams) -> str:
    """``request_key`` with the endpoint part precomputed by ``endpoint_id``."""
    payload = [
        CACHE_KEY_VERSION,
        endpoint,
        [_message_json(m) for m in messages],
        [params.temperature, params.top_p, params.max_tokens, params.seed, params.reasoning_effort],
    ]
    raw = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def request_key(
    model_cfg: ModelConfig, model_name: str, messages: Sequence[Message], params: GenParams
) -> str:
    """sha256 over canonical JSON of the endpoint (provider, model id, sorted base URLs), the
    messages with images as their sha256, and the parameters. Stable across processes."""
    return key_for_endpoint(endpoint_id(model_cfg, model_name), messages, params)


class ResponseCache:
    """Completions by request key, in their own SQLite file (WAL), shareable between runs and
    processes. Only the stack decides what goes in: never errors, refusals or empty outputs."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS responses ("
                " key TEXT PRIMARY KEY, value TEXT NOT NULL, created_at REAL NOT NULL"
                ") WITHOUT ROWID"
            )
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
        value = json.dumps(
            {
                "text": completion.text,
                "model": completion.model,
                "input_tokens": completion.usage.input_tokens,
                "output_tokens": completion.usage.output_tokens,
                "finish_reason": completion.finish_reason,
            },
            ensure_ascii=False,
        )
        try:
            self._db.execute(
                "INSERT OR IGNORE INTO responses (key, value, created_at) VALUES (?, ?, ?)",
                (key, value, time.time()),
            )
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: cache write failed ({e})") from None

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        """Close the cache file (idempotent)."""
        self._db.close()
