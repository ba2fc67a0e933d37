"""Embeddings: the ``/v1/embeddings`` side of the model layer.

``ModelPool.embed`` sends a request through the same stack as a chat call (cache keyed by
content, limits, budget, retries, accounting at the model's input price, call record, key
scrubbing); this module holds what is specific to embeddings: the backend protocol, the
boundary validation of a reply (a wrong count, a non-finite value or ragged dimensions is a
``bad_response``: recorded, retried, never cached), the cache encoding of vectors, and the
simulated model's deterministic vectors (hashed bag of words, L2-normalised, so texts sharing
words are near)."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from memearena.errors import BadResponse
from memearena.models.accounting import estimate_text_tokens
from memearena.models.types import GenParams, Message, RawReply, Usage

__all__ = [
    "EMBED_KEY_TAG",
    "EMBED_PARAMS",
    "MAX_EMBED_DIMS",
    "SIM_EMBEDDING_DIMS",
    "EmbedAsChat",
    "EmbedReply",
    "EmbeddingBackend",
    "SimEmbedder",
    "cosine",
    "decode_vectors",
    "embed_messages",
    "encode_vectors",
    "sim_embedding",
    "validate_embedding_reply",
]

SIM_EMBEDDING_DIMS = 256
"""Dimensions of a simulated model's vectors."""

MAX_EMBED_DIMS = 65_536
"""Largest vector accepted from an endpoint (larger is a malformed reply)."""

EMBED_KEY_TAG = "embeddings"
"""Joined to a model's endpoint identity in an embeddings cache key: an embeddings request is
never served a chat reply for the same texts, nor the other way round."""

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "of",
        "to",
        "in",
        "on",
        "for",
        "with",
        "by",
        "at",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "that",
        "this",
        "these",
        "those",
        "it",
        "its",
        "as",
        "from",
        "than",
        "then",
        "so",
        "such",
        "can",
        "all",
        "any",
        "every",
        "some",
        "no",
        "not",
        "do",
        "does",
    ]
)


@dataclass(frozen=True)
class EmbedReply:
    """What one endpoint returned for one embeddings request, validated."""

    vectors: list[list[float]]
    usage: Usage


@runtime_checkable
class EmbeddingBackend(Protocol):
    """One raw embeddings endpoint. Raises TransientModelError for retryable failures."""

    async def embed(self, texts: Sequence[str], role: str) -> EmbedReply:
        """Embed ``texts`` (one vector each, in order)."""
        ...


def _stem(word: str) -> str:
    # Crude suffix stripping so "immigrants"/"immigrant" and "steals"/"steal" share a bucket.
    for suffix in ("ing", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def sim_embedding(text: str, dims: int = SIM_EMBEDDING_DIMS) -> list[float]:
    """A deterministic unit vector: hashed, stemmed bag of content words (signed buckets), so
    texts that share words have a high cosine similarity. Empty text maps to a fixed vector."""
    vec = [0.0] * dims
    words = [_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP] or ["<empty>"]
    for w in words:
        h = hashlib.blake2b(w.encode(), digest_size=8).digest()
        idx = int.from_bytes(h[:4], "little") % dims
        vec[idx] += 1.0 if h[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vec))
    if norm == 0.0:  # every word cancelled out: fall back to the first word's bucket
        vec[0] = 1.0
        norm = 1.0
    return [x / norm for x in vec]


class SimEmbedder:
    """The simulated model's embeddings endpoint (in-process, free unless priced)."""

    def __init__(self, name: str, dims: int = SIM_EMBEDDING_DIMS) -> None:
        self.name = name
        self.dims = dims

    async def embed(self, texts: Sequence[str], role: str) -> EmbedReply:
        """One vector per text; input tokens estimated (ceil(chars / 4))."""
        vectors = [sim_embedding(t, self.dims) for t in texts]
        return EmbedReply(vectors, Usage(sum(estimate_text_tokens(t) for t in texts), 0))


def _vector(v: Any, where: str) -> list[float]:
    if not isinstance(v, list | tuple) or not v:
        raise BadResponse(f"{where} is not a non-empty list of numbers")
    if len(v) > MAX_EMBED_DIMS:
        raise BadResponse(f"{where} has {len(v)} dimensions (at most {MAX_EMBED_DIMS})")
    out: list[float] = []
    for x in v:
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
            raise BadResponse(f"{where} holds a value that is not a finite number ({x!r:.40})")
        out.append(float(x))
    return out


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def validate_embedding_reply(reply: Any, n: int, estimate: int = 0) -> EmbedReply:
    """An embeddings reply (a JSON object or the SDK's response object) validated field by
    field: exactly ``n`` finite vectors of one dimension, ordered by their ``index``; usage
    ``prompt_tokens`` when given, else ``estimate``. BadResponse names the first field that is
    wrong."""
    data = _get(reply, "data")
    if not isinstance(data, list):
        raise BadResponse("embeddings reply has no 'data' list")
    if len(data) != n:
        raise BadResponse(f"embeddings reply holds {len(data)} vectors for {n} inputs")
    slots: list[list[float] | None] = [None] * n
    for pos, item in enumerate(data):
        index = _get(item, "index")
        if index is None:
            index = pos
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
            raise BadResponse(f"data[{pos}].index is not an input position ({index!r:.40})")
        if slots[index] is not None:
            raise BadResponse(f"data[{pos}].index {index} appears twice")
        slots[index] = _vector(_get(item, "embedding"), f"data[{pos}].embedding")
    vectors = [v for v in slots if v is not None]
    dims = {len(v) for v in vectors}
    if len(dims) > 1:
        raise BadResponse(f"embeddings reply has vectors of different sizes {sorted(dims)}")
    prompt_tokens = estimate
    usage = _get(reply, "usage")
    if usage is not None:
        pt = _get(usage, "prompt_tokens")
        if pt is not None:
            if isinstance(pt, bool) or not isinstance(pt, int) or not 0 <= pt <= 100_000_000:
                raise BadResponse(f"usage.prompt_tokens is not a token count ({pt!r:.40})")
            prompt_tokens = pt
    return EmbedReply(vectors, Usage(prompt_tokens, 0))


def encode_vectors(vectors: Sequence[Sequence[float]]) -> str:
    """Vectors as compact JSON (floats round-trip exactly): the cached form."""
    return json.dumps([list(v) for v in vectors], separators=(",", ":"))


def decode_vectors(text: str, n: int) -> list[list[float]] | None:
    """The cached vectors back, validated as a reply would be; None if the entry is unusable
    (then it is treated as a miss and asked again)."""
    try:
        raw = json.loads(text)
        if not isinstance(raw, list):
            return None
        return validate_embedding_reply({"data": [{"embedding": v} for v in raw]}, n).vectors
    except (ValueError, BadResponse):
        return None


def embed_messages(texts: Sequence[str]) -> list[Message]:
    """The texts as the message list an embeddings request is keyed (and estimated) by."""
    return [Message.text("user", t) for t in texts]


EMBED_PARAMS = GenParams()
"""Embeddings take no generation parameters; the key uses these."""


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity (0.0 when either vector is zero; -1.0 for mismatched sizes)."""
    if len(a) != len(b):
        return -1.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return dot / (na * nb)


class EmbedAsChat:
    """One embeddings request behind the chat-backend interface, so it takes the pool's whole
    call path (limits, budget, retries, accounting, record, cache): the reply text is the
    validated vectors, encoded. A reply that fails validation raises BadResponse (retried,
    recorded ``bad_response``, never cached)."""

    batch = False

    def __init__(self, embedder: EmbeddingBackend, texts: Sequence[str]) -> None:
        self._embedder = embedder
        self._texts = list(texts)

    async def chat(self, messages: Sequence[Message], params: GenParams, role: str) -> RawReply:
        """Embed the texts; the vectors re-validated whatever the backend checked."""
        reply = await self._embedder.embed(self._texts, role)
        if not isinstance(reply, EmbedReply):
            raise BadResponse(f"embeddings backend returned a {type(reply).__name__}")
        n = len(self._texts)
        checked = validate_embedding_reply(
            {"data": [{"embedding": v} for v in reply.vectors]}, n
        ).vectors
        return RawReply(encode_vectors(checked), Usage(reply.usage.input_tokens, 0), "stop")
