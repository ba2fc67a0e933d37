"""The notebook surface of the top-level package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import memearena


def test_top_level_api_runs_a_small_arena(tmp_path: Path) -> None:
    cfg = memearena.demo_config(bootstrap=10)
    cfg = cfg.model_copy(
        update={
            "data": [cfg.data[0].model_copy(update={"limit": 2})],
            "arena": cfg.arena.model_copy(  # type: ignore[union-attr]
                update={"targets": ["sim-aurora", "sim-ember"], "fusion_rounds": 4}
            ),
        }
    )
    assert memearena.plan_arena(cfg).calls > 0
    result = memearena.run_arena(cfg, tmp_path / "run", show_progress=False)
    assert result.new_calls > 0
    assert [r["model"] for r in result.board["arena"]["overall"]] == ["sim-aurora", "sim-ember"]
    try:
        import pandas  # noqa: F401
    except ImportError:
        return
    # One shape: the leaderboard's figure as value / ci_low / ci_high, the store's tables.
    board = result.leaderboard()
    assert list(board["model"]) == ["sim-aurora", "sim-ember"]
    assert set(board["figure"]) == {"bt"}
    assert (board["ci_low"] <= board["value"]).all() and (board["value"] <= board["ci_high"]).all()
    calls = result.calls()
    assert len(calls) == result.new_calls and calls["role"].str.startswith("arena.").all()
    replies = result.replies()
    assert list(replies["request_hash"]) == list(calls["request_hash"])
    assert replies["response"].notna().any()
    requests = result.requests()
    assert set(requests["key"]) == set(calls["request_hash"])
    assert result.request(str(calls["request_hash"].iloc[0]))["messages"]
    assert set(result.intervals().columns) == {"model", "figure", "value", "ci_low", "ci_high"}
    assert list(result.errors().columns) == ["kind", "key", "reason", "detail", "created_at"]
    # Every battle names the requests its two verdicts came from: it joins the calls.
    battles = result.battles()
    judge_calls = set(calls.loc[calls["role"] == "arena.judge", "request_hash"])
    sent = {h for pair in battles["requests"] for h in pair}
    assert len(battles) and sent and sent <= judge_calls


def test_import_stays_light() -> None:
    code = (
        "import sys, memearena; print(any(m.startswith(('numpy', 'openai')) for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _fake_run(tmp_path: Path) -> Path:
    """A run directory holding every method's section, written by hand."""
    import json

    est = {"value": 0.9, "ci_low": 0.8, "ci_high": 0.95}
    judge = {
        "judge": "j1",
        "rank": 1,
        "rank_ci": [1, 2],
        "trust": {**est, "n": 0},
        "overall": est,
        "categories": {"integrality": {**est, "metric": "bd", "pairs": 10}},
        "flags": [],
    }
    board = {
        "arena": {"overall": [{"model": "a", "rank": 1}], "by_judge": {}},
        "adapt": {"models": []},
        "judge_audit": {"leaderboard": [judge]},
    }
    (tmp_path / "leaderboard.json").write_text(json.dumps(board), encoding="utf-8")
    return tmp_path


def test_a_corrupt_output_line_is_one_error_naming_file_and_line(tmp_path: Path) -> None:
    import pytest

    pytest.importorskip("pandas")
    run = _fake_run(tmp_path)
    for name in ("adapt_scores.jsonl", "judge_audit_scores.jsonl", "adapt_chains.jsonl"):
        (run / name).write_text('{"ok": 1}\n{"trunc\n', encoding="utf-8")
    results = memearena.open_run(run)
    assert isinstance(results, memearena.RunResults)
    for read, name in (
        (results.adapt.scores, "adapt_scores.jsonl"),
        (results.adapt.chains, "adapt_chains.jsonl"),
        (results.judge_audit.scores, "judge_audit_scores.jsonl"),
    ):
        with pytest.raises(memearena.MemearenaError, match=rf"{name}:2: not valid JSON"):
            read()


def test_judge_audit_frame_carries_trust_rank_range_and_category_intervals(
    tmp_path: Path,
) -> None:
    import pytest

    pytest.importorskip("pandas")
    results = memearena.open_run(_fake_run(tmp_path))
    assert isinstance(results, memearena.RunResults)
    row = results.judge_audit.leaderboard().iloc[0]
    assert row["figure"] == "trust"
    assert (row["value"], row["ci_low"], row["ci_high"]) == (0.9, 0.8, 0.95)
    assert (row["rank_ci_low"], row["rank_ci_high"]) == (1, 2)
    figures = results.judge_audit.intervals().set_index("figure")
    cat = figures.loc["category.integrality"]
    assert (cat["value"], cat["ci_low"], cat["ci_high"]) == (0.9, 0.8, 0.95)


def test_unknown_breakdown_names_the_known_ones_in_words(tmp_path: Path) -> None:
    import pytest

    pytest.importorskip("pandas")
    results = memearena.open_run(_fake_run(tmp_path))
    assert isinstance(results, memearena.RunResults)
    with pytest.raises(memearena.MemearenaError) as err:
        results.arena.leaderboard_df(by="nope")
    assert "(have: judge)" in str(err.value) and "[" not in str(err.value)
