"""``ask``: bounded re-ask on parse errors; refusals and model errors are their own outcomes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from memearena.errors import BudgetExceeded, ModelError, ParseError
from memearena.models.types import Completion, GenParams, Message
from memearena.prompts import AskResult, ModelPoolLike, ask, parse_verdicts, render
from memearena.prompts.schemas import CRITERIA

GOOD = (
    '{"verdicts": {'
    + ", ".join(f'"{c}": {{"winner": "A", "rationale": "r"}}' for c in CRITERIA)
    + "}}"
)
MESSAGES = [Message.text("system", "sys"), Message.text("user", "judge this")]


class FakePool:
    """Replies from a script: a string, a refusal marker, or an exception to raise."""

    def __init__(self, script: Sequence[str | BaseException | tuple[str, bool]]) -> None:
        self.script = list(script)
        self.calls: list[tuple[str, list[Message], str, GenParams | None]] = []

    async def complete(
        self,
        model: str,
        messages: list[Message],
        *,
        role: str,
        params: GenParams | None = None,
    ) -> Completion:
        self.calls.append((model, list(messages), role, params))
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, tuple):
            return Completion(text=item[0], model=model, refusal=item[1])
        return Completion(text=item, model=model)


def _parser(text: str) -> dict[str, object]:
    return dict(parse_verdicts(text, CRITERIA))


def _reason(text: str) -> str:
    with pytest.raises(ParseError) as e:
        _parser(text)
    return str(e.value)


def _ask(pool: FakePool, **kw: object) -> AskResult[dict[str, object]]:
    p: ModelPoolLike = pool
    return asyncio.run(ask(p, "judge-1", "arena.judge", MESSAGES, _parser, **kw))  # type: ignore[arg-type]


def test_success_on_the_first_try() -> None:
    params = GenParams(temperature=0.0)
    pool = FakePool([GOOD])
    res = _ask(pool, params=params)
    assert res.ok and res.value is not None and res.attempts == 1 and res.raw == [GOOD]
    assert pool.calls == [("judge-1", MESSAGES, "arena.judge", params)]


def test_reask_then_success() -> None:
    pool = FakePool(["Response A wins.", GOOD])
    res = _ask(pool)
    assert res.ok and res.attempts == 2 and res.raw == ["Response A wins.", GOOD]
    second = pool.calls[1][1]
    assert second[: len(MESSAGES)] == MESSAGES
    assert second[-2] == Message.text("assistant", "Response A wins.")
    expected = render("common/reask.j2", reason=_reason("Response A wins."))
    assert second[-1] == Message.text("user", expected)


def test_reasks_exhausted_is_an_error_never_a_tie() -> None:
    pool = FakePool(["tie", "tie", "tie", GOOD])
    res = _ask(pool, max_reasks=2)
    assert res.value is None and not res.refusal and not res.ok
    assert res.error is not None and res.error.startswith("unparseable: ")
    assert res.attempts == 3 and len(pool.calls) == 3 and len(res.raw) == 3


def test_no_reasks_when_max_reasks_is_zero() -> None:
    pool = FakePool(["nope"])
    res = _ask(pool, max_reasks=0)
    assert res.error is not None and res.attempts == 1


def test_a_refusal_is_not_reasked() -> None:
    pool = FakePool([("I'm sorry, but I can't help with that.", True), GOOD])
    res = _ask(pool)
    assert res.refusal and res.value is None and res.error is None and res.attempts == 1
    assert len(pool.calls) == 1


def test_a_model_error_is_recorded() -> None:
    pool = FakePool([ModelError("HTTP 400: bad image")])
    res = _ask(pool)
    assert res.error == "model error: HTTP 400: bad image" and res.value is None


def test_a_model_error_after_a_reask_keeps_the_raw_outputs() -> None:
    pool = FakePool(["garbage", ModelError("timeout")])
    res = _ask(pool)
    assert res.error == "model error: timeout" and res.raw == ["garbage"] and res.attempts == 2


def test_budget_exceeded_propagates() -> None:
    with pytest.raises(BudgetExceeded):
        _ask(FakePool([BudgetExceeded("over budget")]))


def test_the_callers_messages_are_not_mutated() -> None:
    msgs = list(MESSAGES)
    asyncio.run(ask(FakePool(["bad", GOOD]), "m", "arena.judge", msgs, _parser))
    assert msgs == MESSAGES
