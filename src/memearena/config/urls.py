"""An endpoint's ``base_url``, parsed once: what may be in it and how a path is appended.

Threat: a ``base_url`` is written verbatim into the config snapshot (run.db), the run facts
(leaderboard.json, report.html), exports and error messages, and it keys every cached request.
A key in it (``user:pass@``, ``?key=...``) would land in all of them, so a URL carrying
credentials is refused when the config is read, with a message that names neither the secret
nor the URL and points to ``api_key_env``. A query that holds no secret (Azure's
``api-version``) is kept, and the endpoint's path goes before it, not after."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit, urlunsplit

__all__ = ["check_base_url", "endpoint_url", "split_query"]

_SECRET_NAME = re.compile(
    r"key|token|secret|passw|pwd|sig|auth|credential|session|bearer", re.IGNORECASE
)
"""Query parameter names that carry a credential (``key``, ``api_key``, ``access_token``,
``sig``, ``X-Amz-Signature``, ``auth``, ...)."""

_TOKEN_VALUE = re.compile(r"(?=.*[A-Za-z])(?=.*\d)[A-Za-z0-9_\-.~+/=]{20,}")
"""A query value shaped like a key: 20 or more token characters, letters and digits mixed."""

_KEY_PREFIXES = ("sk-", "sk_", "pk-", "aiza", "xai-", "gsk_", "hf_", "ghp_", "glpat-")

_HINT = (
    "put the key in the environment variable named by api_key_env instead "
    "(a URL is written into the run's files)"
)


def check_base_url(url: str) -> None:
    """Raise ValueError when ``url`` carries credentials: a user or password before the host,
    or a query parameter whose name or value looks like a secret. The message never repeats
    the secret (nor the URL, which holds it)."""
    parts = urlsplit(url)
    if "@" in parts.netloc:
        raise ValueError(f"must not hold credentials (user:password@ before the host); {_HINT}")
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        shown = name if name.isprintable() and len(name) <= 40 else "(unnamed)"
        if _SECRET_NAME.search(name):
            raise ValueError(f"query parameter {shown!r} looks like a credential; {_HINT}")
        v = value.strip()
        if v.lower().startswith(_KEY_PREFIXES) or _TOKEN_VALUE.fullmatch(v):
            raise ValueError(f"the value of query parameter {shown!r} looks like a key; {_HINT}")


def split_query(url: str) -> tuple[str, dict[str, str]]:
    """``url`` without its query string, and the query's parameters (for a client that sends
    them on every request itself, as the ``openai`` SDK's ``default_query``)."""
    parts = urlsplit(url)
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    return base, dict(parse_qsl(parts.query, keep_blank_values=True))


def endpoint_url(base: str, path: str) -> str:
    """``path`` (``/chat/completions``) appended to ``base``'s path, ``base``'s query kept after
    it: ``https://h/v1?api-version=1`` → ``https://h/v1/chat/completions?api-version=1``."""
    parts = urlsplit(base)
    joined = parts.path.rstrip("/") + path
    return urlunsplit((parts.scheme, parts.netloc, joined, parts.query, ""))
