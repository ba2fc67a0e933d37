"""A run refused before any call (exit 2, "nothing was called") leaves no run folder behind
when it created it, and never removes a folder that was there before."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from memearena.cli import app

runner = CliRunner()
KEY = "MEMEARENA_TEST_KEY_THAT_IS_NOT_SET"

CFG = {
    "run": "refused",
    "models": {
        "t1": {"provider": "sim", "skill": 0.9, "family": "one"},
        "t2": {"provider": "sim", "skill": 0.3, "family": "two"},
        "j": {"provider": "sim", "skill": 0.8, "family": "judge"},
    },
    "data": [{"format": "demo", "limit": 2}],
    "arena": {
        "targets": ["t1", "t2"],
        "judges": ["j"],
        "context_model": "j",
        "fusion_rounds": 1,
        "bootstrap": 10,
    },
}
REMOTE = {
    "provider": "openai",
    "model": "some-model",
    "base_url": "http://127.0.0.1:9/v1",
    "api_key_env": KEY,
}


def _write(tmp_path: Path, cfg: dict[str, object]) -> Path:
    p = tmp_path / "cfg.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def _with_remote_judge() -> dict[str, object]:
    return {**CFG, "models": {**CFG["models"], "j": REMOTE}}  # type: ignore[dict-item]


def test_a_missing_key_leaves_no_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY, raising=False)
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["arena", str(_write(tmp_path, _with_remote_judge())), "--out", str(out)]
    )
    assert result.exit_code == 2, result.output
    assert KEY in result.output
    assert not (out / "refused").exists()
    assert not out.exists()  # the output root was made by this invocation too


def test_a_refused_resume_keeps_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY, raising=False)
    out = tmp_path / "out"
    first = runner.invoke(
        app, ["arena", str(_write(tmp_path, CFG)), "--out", str(out), "--no-progress"]
    )
    assert first.exit_code == 0, first.output
    again = runner.invoke(
        app, ["arena", str(_write(tmp_path, _with_remote_judge())), "--out", str(out)]
    )
    assert again.exit_code == 2, again.output
    assert (out / "refused" / "run.db").is_file()
    assert (out / "refused" / "leaderboard.json").is_file()


def test_an_existing_empty_folder_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY, raising=False)
    out = tmp_path / "out"
    (out / "refused").mkdir(parents=True)
    result = runner.invoke(
        app, ["arena", str(_write(tmp_path, _with_remote_judge())), "--out", str(out)]
    )
    assert result.exit_code == 2, result.output
    assert (out / "refused").is_dir()
