"""The chat-completions wire format as the simulated server reads it: request messages back into
``Message``s, and the generation parameters of a request body. Shared by the live endpoint
(``server.py``) and the batch endpoints (``batch.py``)."""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

from memearena.models.types import ContentPart, GenParams, ImagePart, Message, Role, TextPart

__all__ = ["BadRequest", "parse_messages", "request_params"]


class BadRequest(Exception):
    """A request body the endpoint refuses (answered 400)."""


_ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
}


def _image_part(url: Any) -> ImagePart:
    if not isinstance(url, str):
        raise BadRequest("image_url.url must be a string")
    if url.startswith("data:"):
        header, sep, payload = url.partition(",")
        if not sep or ";base64" not in header:
            raise BadRequest("image data URL must be base64-encoded")
        try:
            raw = base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise BadRequest("image data URL is not valid base64") from None
        return ImagePart(url, hashlib.sha256(raw).hexdigest())
    # A remote URL cannot be fetched offline: identify it by the URL itself.
    return ImagePart(url, hashlib.sha256(url.encode()).hexdigest())


def parse_messages(raw: Any) -> list[Message]:
    """Chat-completions wire messages back into ``Message``s (ValueError if malformed)."""
    if not isinstance(raw, list) or not raw:
        raise BadRequest("'messages' must be a non-empty array")
    out: list[Message] = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict):
            raise BadRequest(f"messages[{i}] must be an object")
        role = _ROLES.get(m.get("role"))  # type: ignore[arg-type]
        if role is None:
            raise BadRequest(f"messages[{i}].role {m.get('role')!r} is not supported")
        content = m.get("content")
        parts: list[ContentPart] = []
        if content is None:
            pass
        elif isinstance(content, str):
            parts.append(TextPart(content))
        elif isinstance(content, list):
            for j, p in enumerate(content):
                kind = p.get("type") if isinstance(p, dict) else None
                if kind == "text" and isinstance(p.get("text"), str):
                    parts.append(TextPart(p["text"]))
                elif kind == "image_url" and isinstance(p.get("image_url"), dict):
                    parts.append(_image_part(p["image_url"].get("url")))
                else:
                    raise BadRequest(f"messages[{i}].content[{j}] is not a text or image part")
        else:
            raise BadRequest(f"messages[{i}].content must be a string or an array")
        out.append(Message(role, tuple(parts)))
    return out


def request_params(body: dict[str, Any]) -> GenParams:
    """The generation parameters a request body asks for."""
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    return GenParams(
        temperature=body.get("temperature"),
        top_p=body.get("top_p"),
        max_tokens=max_tokens,
        seed=body.get("seed"),
        reasoning_effort=body.get("reasoning_effort"),
    )
