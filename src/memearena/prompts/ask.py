"""One agent call with validated output and a bounded re-ask."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from memearena.errors import ModelError, ParseError
from memearena.models.types import Completion, GenParams, Message
from memearena.prompts.render import reask_message

__all__ = ["AskResult", "ModelPoolLike", "ask"]

T = TypeVar("T")


class ModelPoolLike(Protocol):
    """What ``ask`` needs from the call stack (``memearena.models.ModelPool`` provides it)."""

    async def complete(
        self,
        model: str,
        messages: list[Message],
        *,
        role: str,
        params: GenParams | None = None,
        key: str | None = None,
    ) -> Completion:
        """One completion; raises ModelError on permanent failure, BudgetExceeded on budget.
        ``key``: the request's key as the pool computed it, when the caller has it."""
        ...


@dataclass(frozen=True)
class AskResult(Generic[T]):
    """The outcome of one agent call: exactly one of ``value``, ``error`` or ``refusal`` is set."""

    value: T | None
    """The parsed output; None on refusal or error."""
    raw: list[str] = field(default_factory=list)
    """Every raw output received, in order (re-asks included)."""
    error: str | None = None
    """``"unparseable: <reason>"`` or ``"model error: <message>"``; None otherwise."""
    refusal: bool = False
    """The model refused (never re-asked, never parsed)."""
    attempts: int = 0
    """Calls made, the first one included."""

    @property
    def ok(self) -> bool:
        """A parsed value came back."""
        return self.error is None and not self.refusal


def _result(
    value: T | None, raw: list[str], error: str | None, refusal: bool, attempts: int
) -> AskResult[T]:
    # The same object as ``AskResult(...)``, its fields filled at once: a frozen dataclass's
    # ``__init__`` sets each through ``object.__setattr__`` (a third of an ask's own CPU).
    res: AskResult[T] = object.__new__(AskResult)
    res.__dict__.update(value=value, raw=raw, error=error, refusal=refusal, attempts=attempts)
    return res


async def ask(
    pool: ModelPoolLike,
    model: str,
    role: str,
    messages: Sequence[Message],
    parser: Callable[[str], T],
    *,
    max_reasks: int = 2,
    params: GenParams | None = None,
    key: str | None = None,
) -> AskResult[T]:
    """Call ``model`` as ``role`` and parse its output; on a ParseError show the model its output
    and the reason and ask again, at most ``max_reasks`` times. BudgetExceeded propagates.

    ``key``: ``pool.request_key(model, messages, params)`` when the caller computed it (the
    first request is then not keyed again; a re-ask is another request, keyed by the pool)."""
    convo = list(messages)
    raw: list[str] = []
    reason = ""
    asked: list[list[Message]] = []  # the requests whose replies did not parse
    for attempt in range(1, max_reasks + 2):
        try:
            if key is not None and attempt == 1:
                completion = await pool.complete(model, convo, role=role, params=params, key=key)
            else:
                completion = await pool.complete(model, convo, role=role, params=params)
        except ModelError as e:
            return _result(None, raw, f"model error: {e}", False, attempt)
        raw.append(completion.text)
        if completion.refusal:
            # A refusal is its own outcome: re-asking would only count it twice.
            return _result(None, raw, None, True, attempt)
        try:
            return _result(parser(completion.text), raw, None, False, attempt)
        except ParseError as e:
            reason = str(e) or "output does not match the required format"
            asked.append(convo)
        convo = [*convo, Message.text("assistant", completion.text), reask_message(reason)]
    # A reply that did not parse stays paid for while a re-ask may still succeed (a run
    # stopped mid-way replays it and its re-asks instead of paying for them again); once every
    # re-ask failed, none of them is replayed, so a re-run asks afresh.
    uncache = getattr(pool, "uncache", None)
    if uncache is not None:
        for request in asked:
            uncache(model, request, params)
    # An output that never parses is recorded as a failure, never turned into a default answer.
    return _result(None, raw, f"unparseable: {reason}", False, max_reasks + 1)
