"""Arena configs that would distort the judge measures are refused in one line before any call."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from memearena.cli import app

runner = CliRunner()


def _config(tmp_path: Path, judges: list[str]) -> Path:
    models = {name: {"provider": "sim", "family": name} for name in ("a", "b", "j1", "j2")}
    cfg = {
        "run": "dup",
        "models": models,
        "data": [{"format": "demo", "limit": 2}],
        "arena": {"targets": ["a", "b"], "judges": judges, "context_model": "j1"},
    }
    path = tmp_path / "arena.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_a_judge_listed_twice_is_refused_before_any_call(tmp_path: Path) -> None:
    path = _config(tmp_path, ["j1", "j2", "j1"])
    for extra in (["--dry-run"], []):
        result = runner.invoke(app, ["arena", str(path), "--out", str(tmp_path / "runs"), *extra])
        assert result.exit_code == 2, result.output
        assert "arena.judges: 'j1' is listed more than once" in result.output
        assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "runs" / "dup" / "run.db").exists()


def test_distinct_judges_still_run(tmp_path: Path) -> None:
    path = _config(tmp_path, ["j1", "j2"])
    result = runner.invoke(app, ["arena", str(path), "--out", str(tmp_path / "runs"), "--dry-run"])
    assert result.exit_code == 0, result.output
