"""Garbled replies: two uninterrupted Arena runs against the same faulty server end with the
same battles (a re-asked reply's outcome does not depend on which request the fault hit), and
an unparseable required output (a context) is asked again on a re-run, never reused as final."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from memearena.config import load_config
from memearena.engine.lifecycle import run_method
from memearena.sim.catalogue import DEMO_JUDGES, DEMO_TARGETS
from memearena.sim.serve import demo_world
from memearena.sim.server import BackgroundServer

TARGETS = ["sim-aurora", "sim-cirrus", "sim-ember"]
JUDGES = ["sim-judge-falcon", "sim-judge-grove"]


def write_config(path: Path, base_url: str, *, limit: int = 3, **arena: Any) -> Path:
    catalogue = {**DEMO_TARGETS, **DEMO_JUDGES}
    models = {
        name: {
            "provider": "openai",
            "base_url": base_url,
            "model": name,
            "family": catalogue[name].family,
            "max_concurrency": 32,
            "max_retries": 8,
        }
        for name in TARGETS + JUDGES
    }
    cfg = {
        "run": "garbled",
        "seed": 0,
        "models": models,
        "data": [{"format": "demo", "limit": limit}],
        "arena": {
            "targets": TARGETS,
            "judges": JUDGES,
            "context_model": JUDGES[0],
            "fusion_rounds": 2,
            "bootstrap": 10,
            **arena,
        },
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


def battles(run_dir: Path) -> list[str]:
    return sorted((run_dir / "battles.jsonl").read_text(encoding="utf-8").splitlines())


@pytest.fixture(scope="module")
def garbling() -> Iterator[BackgroundServer]:
    with BackgroundServer(
        demo_world(seed=0), process=True, fail_rate=0.3, faults=("malformed", "500"), seed=7
    ) as srv:
        yield srv


def test_two_runs_against_one_garbling_server_give_the_same_battles(
    garbling: BackgroundServer, tmp_path: Path
) -> None:
    cfg = load_config(write_config(tmp_path / "c.yaml", garbling.base_url, limit=2, max_reasks=3))
    first = run_method("arena", cfg, tmp_path / "one", show_progress=False)
    second = run_method("arena", cfg, tmp_path / "two", show_progress=False)
    assert garbling.stats()["faults"]["malformed"] > 0
    assert first.stopped is None and second.stopped is None
    one, two = battles(tmp_path / "one"), battles(tmp_path / "two")
    assert one, "no battles"
    assert one == two, f"{sum(a != b for a, b in zip(one, two, strict=False))} rows differ"


class UnparseableContexts:
    """The demo world, except that while `broken` the context model's replies never parse."""

    def __init__(self) -> None:
        self.world = demo_world(seed=0)
        self.broken = True
        self.context_calls = 0

    def respond(self, model: str, role: str, messages: Any, params: Any) -> str:
        if role == "arena.context":
            self.context_calls += 1
            if self.broken:
                return "I would rather describe the audiences in prose."
        return str(self.world.respond(model, role, messages, params))


def test_an_unparseable_context_is_asked_again_on_a_rerun_and_the_run_completes(
    tmp_path: Path,
) -> None:
    responder = UnparseableContexts()
    with BackgroundServer(responder) as srv:  # in this process: the test flips `broken`
        cfg = load_config(write_config(tmp_path / "c.yaml", srv.base_url, limit=1))
        first = run_method("arena", cfg, tmp_path / "run", show_progress=False)
        asked_first = responder.context_calls
        assert first.status is not None and first.status.exit_code != 0
        assert asked_first == cfg.arena.max_reasks + 1  # type: ignore[union-attr]
        responder.broken = False
        second = run_method("arena", cfg, tmp_path / "run", show_progress=False)
    # The unparseable outcome was not reused as final: the re-run asked again and completed.
    assert responder.context_calls > asked_first
    assert second.status is not None and second.status.exit_code == 0
    assert second.leaderboard["arena"]["overall"]
