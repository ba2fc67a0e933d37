"""Resume on the command line: a run directory of another run is refused in one line (exit 2);
a changed config is resumed and the console says what was reused and what is new."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from memearena.cli import app

runner = CliRunner()


def _config(tmp_path: Path, name: str, **changes: Any) -> Path:
    cfg: dict[str, Any] = {
        "run": "same-name",
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
        **changes,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _arena(config: Path, out: Path) -> Any:
    return runner.invoke(app, ["arena", str(config), "--out", str(out), "--no-progress"])


def test_a_run_directory_of_other_datasets_is_refused_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = _arena(_config(tmp_path, "a"), out)
    assert first.exit_code == 0, first.output
    board = (out / "same-name" / "leaderboard.json").read_text()
    folder = tmp_path / "memes"
    folder.mkdir()
    other = _config(tmp_path, "b", data=[{"format": "folder", "path": str(folder)}])
    refused = _arena(other, out)
    assert refused.exit_code == 2
    lines = [ln for ln in refused.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "other datasets" in lines[0], refused.output
    assert "Traceback" not in refused.output
    # nothing of the run was touched
    assert (out / "same-name" / "leaderboard.json").read_text() == board


def test_a_changed_config_is_resumed_and_the_console_says_what_was_reused(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    assert _arena(_config(tmp_path, "a"), out).exit_code == 0
    changed = _config(
        tmp_path,
        "b",
        arena={
            "targets": ["t1", "t2"],
            "judges": ["j"],
            "context_model": "j",
            "fusion_rounds": 1,
            "bootstrap": 10,
            "criteria": ["instruction_following", "redundancy", "correctness"],
        },
    )
    result = _arena(changed, out)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "contexts: reused 2, new 0" in text
    assert "answers: reused 12, new 0" in text
    assert "guidelines: reused 4, new 0" in text
    assert "judgments: reused 0, new 12" in text  # 2 memes x 3 tasks x 1 pair x 2 orders
    doc = json.loads((out / "same-name" / "leaderboard.json").read_text())
    assert set(doc["arena"]["by_criterion"]) == {
        "instruction_following",
        "redundancy",
        "correctness",
    }
