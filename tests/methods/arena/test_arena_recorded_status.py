"""A re-run that finds every step on record reads the status counts stored by the run that
derived them; any change to what they are counted from (config, records, memes) counts again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import memearena.methods.arena.method as arena_method
from memearena.config import DatasetConfig, RunConfig, SimModelConfig
from memearena.engine.lifecycle import RunResult, run_method
from memearena.methods.arena.config import ArenaConfig


def _config(limit: int = 3, seed: int = 0) -> RunConfig:
    sim = {
        "t-a": SimModelConfig(provider="sim", skill=0.9, family="a"),
        "t-b": SimModelConfig(provider="sim", skill=0.4, family="b", refusal_rate=0.2),
        "j-one": SimModelConfig(provider="sim", skill=0.85, family="one", format_error_rate=0.1),
        "j-two": SimModelConfig(provider="sim", skill=0.8, family="two"),
    }
    return RunConfig(
        run="r",
        seed=seed,
        models=sim,
        data=[DatasetConfig(format="demo", limit=limit)],
        arena=ArenaConfig(
            targets=["t-a", "t-b"],
            judges=["j-one", "j-two"],
            context_model="j-one",
            fusion_rounds=2,
            bootstrap=10,
        ),
    )


def _rows(result: RunResult) -> list[tuple[Any, ...]]:
    s = result.status
    return [(r.model, r.role, r.planned, r.done, r.refused) for r in s.models] + [
        ("battles", s.battles, s.complete, tuple(s.problems))
    ]


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How often the status counts were derived from the records (not read)."""
    calls: list[int] = []
    derive = arena_method.status_counts

    def counting(*args: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(1)
        return derive(*args, **kwargs)

    monkeypatch.setattr(arena_method, "status_counts", counting)
    return calls


def test_a_noop_rerun_reads_the_stored_counts_and_a_change_counts_again(
    tmp_path: Path, counted: list[int]
) -> None:
    from memearena.store import RunStore

    run_dir = tmp_path / "run"
    fresh = run_method("arena", _config(limit=2), run_dir, show_progress=False)
    assert len(counted) == 1 and fresh.status.battles > 0
    again = run_method("arena", _config(limit=2), run_dir, show_progress=False)
    assert again.new_calls == 0 and again.analysis_reused
    assert len(counted) == 1  # read, not derived
    assert _rows(again) == _rows(fresh)

    # Fewer memes: no new call, yet what the status counts changed.
    fewer = run_method("arena", _config(limit=1), run_dir, show_progress=False)
    assert fewer.new_calls == 0 and len(counted) == 2
    alone = run_method("arena", _config(limit=1), tmp_path / "alone", show_progress=False)
    assert _rows(fewer) == _rows(alone) and fewer.status.models[0].planned == 1

    # A changed config (the world's seed): new calls, counted again.
    seeded = run_method("arena", _config(limit=1, seed=1), run_dir, show_progress=False)
    assert seeded.new_calls > 0 and len(counted) == 4

    # A damaged record is only a cache: counted again, the same counts.
    with RunStore(run_dir / "run.db") as store:
        store.set_meta(arena_method.STATUS_COUNTS, "{not json")
    damaged = run_method("arena", _config(limit=1, seed=1), run_dir, show_progress=False)
    assert damaged.new_calls == 0 and len(counted) == 5
    assert _rows(damaged) == _rows(seeded)


@pytest.mark.parametrize("policy", ["exclude", "include"])
def test_the_battles_counted_from_the_analysis_are_every_battle_written(
    tmp_path: Path, policy: str
) -> None:
    """The analysis hands the status its count of the battles it read: every battle, the
    self-judged ones included, under either self-judging policy."""
    cfg = _config(limit=2)
    assert cfg.arena is not None
    models = {**cfg.models, "j-one": cfg.models["j-one"].model_copy(update={"family": "a"})}
    arena = cfg.arena.model_copy(update={"self_judging": policy})
    cfg = cfg.model_copy(update={"models": models, "arena": arena})
    result = run_method("arena", cfg, tmp_path, show_progress=False)
    lines = sum(
        len(p.read_text().splitlines())
        for p in (tmp_path / "battles.jsonl", tmp_path / "battles.self_judged.jsonl")
        if p.exists()
    )
    assert (tmp_path / "battles.self_judged.jsonl").exists() == (policy == "exclude")
    assert result.status.battles == lines > 0
