"""A judge's two triplets of a pair, asked side by side: results, failures and cancellation as
``asyncio.gather(..., return_exceptions=True)`` gives them."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from memearena.methods.judge_audit.stages import JudgeAuditPipeline, _Request


def _pipe(recent: set[str], fail: dict[str, BaseException], log: list[str]) -> Any:
    async def score(judge: str, req: _Request, *, lookup: bool = True) -> dict[str, Any]:
        log.append(f"start {req.key}")
        if req.key not in recent:
            await asyncio.sleep(0.01)
        log.append(f"end {req.key}")
        if req.key in fail:
            raise fail[req.key]
        return {"score": req.key}

    def key(req: _Request) -> str:
        assert req.key is not None
        return req.key

    return SimpleNamespace(_recent={("ja_score", k): {} for k in recent}, _score=score, _key=key)


def _req(key: str) -> _Request:
    r = _Request("j", [])
    r.key = key
    return r


def _both(pipe: Any) -> Any:
    return JudgeAuditPipeline._side_by_side(pipe, "j", _req("u"), _req("b"), True, True)


def test_both_triplets_are_in_flight_together_and_a_failure_is_returned() -> None:
    log: list[str] = []
    got = asyncio.run(_both(_pipe(set(), {"u": ValueError("bad")}, log)))
    assert isinstance(got[0], ValueError) and got[1] == {"score": "b"}
    assert log.index("start b") < log.index("end u")  # side by side


def test_an_unbiased_answered_a_moment_ago_needs_nothing_beside_it() -> None:
    log: list[str] = []
    got = asyncio.run(_both(_pipe({"u"}, {}, log)))
    assert got == ({"score": "u"}, {"score": "b"})
    assert log == ["start u", "end u", "start b", "end b"]


def test_cancelling_the_pair_cancels_its_biased_step() -> None:
    log: list[str] = []

    async def go() -> None:
        task = asyncio.ensure_future(_both(_pipe(set(), {}, log)))
        await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.02)  # a biased step left running would end by now

    asyncio.run(go())
    assert "start b" in log and "end b" not in log and "end u" not in log
