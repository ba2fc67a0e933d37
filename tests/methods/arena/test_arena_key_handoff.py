"""Every Arena step hands the pool the request key it computed for its artifact, and that key
is the request's own: with every handed key re-derived from the messages sent (the image's
data in place of its hash), the run makes exactly the calls it plans, none refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_arena import small_config

from memearena.engine.lifecycle import plan_method, run_method
from memearena.models import ModelPool


def test_every_step_hands_its_own_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = small_config(limit=2)
    handed: dict[str, int] = {}
    bare: dict[str, int] = {}
    complete = ModelPool.complete

    async def spy(self: ModelPool, model: str, messages: Any, **kw: Any) -> Any:
        tally = handed if kw.get("key") is not None else bare
        tally[kw["role"]] = tally.get(kw["role"], 0) + 1
        return await complete(self, model, messages, **kw)

    monkeypatch.setattr(ModelPool, "complete", spy)
    monkeypatch.setattr(ModelPool, "verify_keys", True)
    planned = plan_method("arena", cfg).calls
    handed.clear()
    bare.clear()
    result = run_method("arena", cfg, tmp_path / "run", show_progress=False)
    assert result.new_calls == planned
    assert result.exit_code == 0
    assert {"arena.context", "arena.answer", "arena.guideline_draft", "arena.judge"} <= set(handed)
    assert bare == {}  # no re-ask in this world: every call is a step's first request
