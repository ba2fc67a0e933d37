"""The model layer: message types, backends (OpenAI-compatible, lean or through the SDK;
simulated), the response cache and the call stack (``ModelPool``) every model call goes
through."""

from memearena.models.accounting import cost_usd, estimate_tokens
from memearena.models.backends import (
    ROLE_HEADER,
    ChatBackend,
    OpenAIBackend,
    RawReply,
    SimBackend,
    SimResponder,
)
from memearena.models.cache import ResponseCache, request_key
from memearena.models.lean import LeanBackend
from memearena.models.pool import ModelPool
from memearena.models.refusal import detect_refusal
from memearena.models.types import (
    Completion,
    ContentPart,
    GenParams,
    ImagePart,
    Message,
    TextPart,
    Usage,
)

__all__ = [
    "ROLE_HEADER",
    "ChatBackend",
    "Completion",
    "ContentPart",
    "GenParams",
    "ImagePart",
    "LeanBackend",
    "Message",
    "ModelPool",
    "OpenAIBackend",
    "RawReply",
    "ResponseCache",
    "SimBackend",
    "SimResponder",
    "TextPart",
    "Usage",
    "cost_usd",
    "detect_refusal",
    "estimate_tokens",
    "request_key",
]
