"""A re-run that finds nothing changed keeps what the last complete run finished with (its
status, its leaderboard sections) instead of reading the store again, and is indistinguishable
from one that computes them; anything its finish reads that changed — the config, a meme, a
record of the store (a deleted artifact), a run-level value, an output file, the method's
section of leaderboard.json, a run of anything in between — has the finish run in full."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memearena.config import DatasetConfig, RunConfig, SimModelConfig
from memearena.engine import lifecycle
from memearena.engine.lifecycle import RunResult, run_method
from memearena.methods.arena.config import ArenaConfig
from memearena.methods.arena.method import Arena


def _config(limit: int = 2, seed: int = 0, bootstrap: int = 10, price: float = 0.0) -> RunConfig:
    cost: Any = {"input": price, "output": price}  # per 1M tokens
    sim = {
        "t-a": SimModelConfig(provider="sim", skill=0.9, family="a", price=cost),
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
            bootstrap=bootstrap,
        ),
    )


@pytest.fixture
def finishes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How often the Arena's own finish ran (not kept from the record)."""
    calls: list[int] = []
    finish = Arena.finish

    def counting(self: Arena, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return finish(self, *args, **kwargs)

    monkeypatch.setattr(Arena, "finish", counting)
    return calls


@pytest.fixture
def done(tmp_path: Path, finishes: list[int]) -> Iterator[tuple[Path, RunResult]]:
    """A complete run (its finish computed, its record written)."""
    run_dir = tmp_path / "run"
    first = run_method("arena", _config(), run_dir, show_progress=False)
    assert first.status.complete and len(finishes) == 1
    yield run_dir, first


def _again(run_dir: Path, cfg: RunConfig | None = None) -> RunResult:
    return run_method("arena", cfg or _config(), run_dir, show_progress=False)


def _undated(board: dict[str, Any]) -> str:
    return json.dumps(lifecycle._undated(board), sort_keys=True)


def _full(run_dir: Path) -> RunResult:
    """The same re-run with the finish computed in full (no record)."""
    with sqlite3.connect(run_dir / "run.db") as db:
        db.execute("DELETE FROM meta WHERE name LIKE 'finish.%'")
    return _again(run_dir)


def test_a_noop_rerun_keeps_the_finish_and_matches_a_full_one(
    done: tuple[Path, RunResult], finishes: list[int]
) -> None:
    run_dir, first = done
    kept = _again(run_dir)
    assert len(finishes) == 1  # kept: the store was not read again
    assert kept.new_calls == 0 and kept.analysis_reused and kept.exit_code == 0
    full = _full(run_dir)
    assert len(finishes) == 2
    assert kept.status == full.status == first.status
    assert kept.cost_usd == full.cost_usd == first.cost_usd
    assert _undated(kept.leaderboard) == _undated(full.leaderboard)
    # And the record written by a full finish is kept by the next run again.
    _again(run_dir)
    assert len(finishes) == 2


def test_a_changed_config_finishes_in_full(
    done: tuple[Path, RunResult], finishes: list[int]
) -> None:
    run_dir, _ = done
    rerun = _again(run_dir, _config(bootstrap=12))
    assert len(finishes) == 2
    assert rerun.leaderboard["arena"]["run"]["config"]["arena"]["bootstrap"] == 12


def test_a_new_meme_is_run_and_finished_in_full(
    done: tuple[Path, RunResult], finishes: list[int]
) -> None:
    run_dir, first = done
    more = _again(run_dir, _config(limit=3))
    assert more.new_calls > 0 and len(finishes) == 2
    assert more.status.models[0].planned == first.status.models[0].planned + 1


def test_a_deleted_artifact_finishes_in_full(
    done: tuple[Path, RunResult], finishes: list[int]
) -> None:
    run_dir, _ = done
    with sqlite3.connect(run_dir / "run.db") as db:
        key = db.execute("SELECT key FROM artifacts WHERE kind='answer' LIMIT 1").fetchone()
        db.execute("DELETE FROM artifacts WHERE kind='answer' AND key=?", key)
    _again(run_dir)
    assert len(finishes) == 2


def test_a_changed_run_level_value_finishes_in_full(
    done: tuple[Path, RunResult], finishes: list[int]
) -> None:
    run_dir, first = done
    with sqlite3.connect(run_dir / "run.db") as db:
        db.execute("UPDATE meta SET value='{not json' WHERE name='arena.status_counts'")
    rerun = _again(run_dir)
    assert len(finishes) == 2 and rerun.status == first.status


def test_a_run_in_between_finishes_in_full(
    done: tuple[Path, RunResult], finishes: list[int]
) -> None:
    """Any run started since (of any method, even one killed before its end) replaces the
    token the record was written under."""
    run_dir, _ = done
    with sqlite3.connect(run_dir / "run.db") as db:
        db.execute("UPDATE meta SET value='another' WHERE name=?", (lifecycle.RUN_TOKEN_META,))
    _again(run_dir)
    assert len(finishes) == 2


@pytest.mark.parametrize("damage", ["delete battles", "edit section", "damage record"])
def test_damaged_outputs_finish_in_full(
    done: tuple[Path, RunResult], finishes: list[int], damage: str
) -> None:
    run_dir, first = done
    if damage == "delete battles":
        (run_dir / "battles.jsonl").unlink()
    elif damage == "edit section":
        board = json.loads((run_dir / "leaderboard.json").read_text())
        board["arena"]["overall"] = []
        (run_dir / "leaderboard.json").write_text(json.dumps(board))
    else:
        with sqlite3.connect(run_dir / "run.db") as db:
            db.execute("UPDATE meta SET value='{' WHERE name='finish.arena'")
    rerun = _again(run_dir)
    assert len(finishes) == 2  # the record does not vouch for what changed since
    assert (run_dir / "battles.jsonl").exists()
    if damage != "edit section":  # (the Arena's finish keeps a section its digest matches)
        assert _undated(rerun.leaderboard) == _undated(first.leaderboard)


def test_an_incomplete_run_leaves_no_record(tmp_path: Path, finishes: list[int]) -> None:
    run_dir = tmp_path / "run"
    cfg = _config(price=100.0)
    capped = run_method("arena", cfg, run_dir, show_progress=False, max_cost=0.002)
    assert capped.status.stopped and capped.exit_code == 3
    with sqlite3.connect(run_dir / "run.db") as db:
        assert db.execute("SELECT COUNT(*) FROM meta WHERE name='finish.arena'").fetchone() == (0,)


def test_the_report_is_kept_while_its_inputs_are_unchanged(
    done: tuple[Path, RunResult], finishes: list[int]
) -> None:
    run_dir, first = done
    page = (run_dir / "report.html").read_bytes()
    kept = _again(run_dir)
    assert kept.report_kept == first.leaderboard["run"]["date"]
    assert (run_dir / "report.html").read_bytes() == page
    # A changed input renders it again; so does a page whose recorded inputs were edited.
    changed = _again(run_dir, _config(bootstrap=12))
    assert changed.report_kept is None and (run_dir / "report.html").read_bytes() != page
    text = (run_dir / "report.html").read_text()
    (run_dir / "report.html").write_text(text.replace('data-date="', 'data-date="x', 1))
    assert _again(run_dir, _config(bootstrap=12)).report_kept is not None  # the digest holds
    digest = lifecycle.rendered_inputs(run_dir / "report.html")
    assert digest is not None
    (run_dir / "report.html").write_text(text.replace(digest[0], "0" * 64, 1))
    assert _again(run_dir, _config(bootstrap=12)).report_kept is None


@pytest.mark.parametrize(
    ("method", "config"), [("adapt", "adapt.yaml"), ("judge_audit", "judge-audit.yaml")]
)
def test_every_method_keeps_a_finish_equal_to_a_full_one(
    tmp_path: Path, method: str, config: str
) -> None:
    from memearena.config import load_config

    example = load_config(Path(__file__).resolve().parents[2] / "examples" / config)
    cfg = example.model_copy(
        update={"data": [d.model_copy(update={"limit": 2}) for d in example.data]}
    )
    first = run_method(method, cfg, tmp_path, show_progress=False)
    assert first.status.complete
    kept = run_method(method, cfg, tmp_path, show_progress=False)
    assert kept.analysis_reused and kept.new_calls == 0
    with sqlite3.connect(tmp_path / "run.db") as db:
        db.execute("DELETE FROM meta WHERE name LIKE 'finish.%'")
    full = run_method(method, cfg, tmp_path, show_progress=False)
    assert not full.analysis_reused  # computed, not kept
    assert kept.status == full.status and kept.cost_usd == full.cost_usd
    assert _undated(kept.leaderboard) == _undated(full.leaderboard)
