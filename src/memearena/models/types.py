"""Message, content and completion types shared by every backend and the call stack."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from memearena.config import ModelConfig

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class TextPart:
    """A piece of text in a message."""

    text: str


@dataclass(frozen=True)
class ImagePart:
    """An image in a message: sent as a data URL, identified (and cached) by its content hash."""

    data_url: str
    sha256: str


ContentPart = TextPart | ImagePart


@dataclass(frozen=True)
class Message:
    """One chat message: a role and an ordered tuple of text / image parts."""

    role: Role
    content: tuple[ContentPart, ...]

    @staticmethod
    def text(role: Role, text: str) -> Message:
        """A message holding a single text part."""
        return Message(role, (TextPart(text),))

    def plain_text(self) -> str:
        """The message's text parts joined (images omitted)."""
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))


@dataclass(frozen=True)
class GenParams:
    """Generation parameters sent with a request; None means the endpoint's default."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    reasoning_effort: str | None = None
    # JSON text of an OpenAI ``response_format`` (structured outputs with a JSON schema), kept
    # as text so the params stay hashable; None: free text.
    response_format: str | None = None

    @classmethod
    def of(cls, model: ModelConfig) -> GenParams:
        """The generation parameters a configured model is called with."""
        return cls(
            temperature=model.temperature,
            top_p=model.top_p,
            max_tokens=model.max_tokens,
            seed=model.seed,
            reasoning_effort=model.reasoning_effort,
        )

    def merged(self, other: GenParams | None) -> GenParams:
        """These params with every non-None field of ``other`` taking precedence."""
        if other is None:
            return self
        values = {k: v for k, v in other.__dict__.items() if v is not None}
        return GenParams(**{**self.__dict__, **values})


@dataclass(frozen=True)
class Usage:
    """Token counts of one call."""

    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class Completion:
    """What one model call returned, after the call stack (cache, retries) is done with it."""

    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    finish_reason: str | None = None
    refusal: bool = False
    cached: bool = False
    cost_usd: float = 0.0


@dataclass(frozen=True)
class RawReply:
    """What one endpoint returned for one request, before accounting and refusal detection."""

    text: str
    usage: Usage
    finish_reason: str | None
    refusal_field: str | None = None
