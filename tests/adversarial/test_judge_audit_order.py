"""The Judge audit's sections do not depend on the order its scores complete in: a resume or
a no-op re-run finishes jobs in another order, and must show the same examples."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from memearena.config import parse_config
from memearena.engine import steps
from memearena.engine.lifecycle import run_method
from memearena.engine.steps import bounded_map

T = TypeVar("T")
U = TypeVar("U")


def _cfg() -> Any:
    return parse_config(
        {
            "run": "ja",
            "models": {
                "resp-a": {"provider": "sim", "skill": 0.9, "family": "a"},
                "resp-b": {"provider": "sim", "skill": 0.3, "family": "b"},
                "judge-x": {"provider": "sim", "noise": 0.1},
                "judge-y": {"provider": "sim", "noise": 0.3, "ignores_image": 0.5},
            },
            "data": [{"format": "demo", "limit": 4}],
            "judge_audit": {
                "judges": ["judge-x", "judge-y"],
                "responders": ["resp-a", "resp-b"],
                "reference_judge": "judge-x",
                "bootstrap": 20,
                "examples": 2,
            },
        }
    )


async def _reversed_map(
    fn: Callable[[T], Awaitable[U]], items: Iterable[T], window: int = 1
) -> AsyncIterator[tuple[T, U]]:
    """Every result, in the reverse of the normal completion order."""
    done = [pair async for pair in bounded_map(fn, items, window)]
    for pair in reversed(done):
        yield pair


def test_examples_do_not_depend_on_completion_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = run_method("judge_audit", _cfg(), tmp_path / "a", show_progress=False).section
    # The audit's windows (``capped_map``) are built on the engine's ``bounded_map``.
    monkeypatch.setattr(steps, "bounded_map", _reversed_map)
    second = run_method("judge_audit", _cfg(), tmp_path / "b", show_progress=False).section
    assert first["examples"], "the audit chose no examples"
    assert sum(len(v) for v in first["examples"].values()) > 1
    assert first["examples"] == second["examples"]
    assert list(first["examples"]) == list(second["examples"])  # same order of types
