"""`memearena rank`: table, --json contract, --group-by, --anchor, one-line errors with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from memearena.cli_rank import rank_command

app = typer.Typer()
app.command("rank")(rank_command)
app.command("noop", hidden=True)(lambda: None)  # keeps `rank` a named sub-command, as in cli.py
runner = CliRunner()

ROWS = [
    ("x", "y", "model_a", "relevance"),
    ("y", "x", "model_b", "relevance"),
    ("x", "y", "tie", "accuracy"),
    ("y", "z", "model_a", "accuracy"),
    ("z", "y", "tie (bothbad)", "relevance"),
    ("x", "z", "model_a", "accuracy"),
    ("z", "x", "model_a", "relevance"),
    ("y", "z", "model_b", "accuracy"),
    ("x", "y", "model_b", "accuracy"),
    ("z", "x", "model_b", "relevance"),
]


@pytest.fixture
def battles(tmp_path: Path) -> Path:
    path = tmp_path / "battles.jsonl"
    lines = [
        json.dumps({"model_a": a, "model_b": b, "winner": w, "criterion": c, "judge": "j1"})
        for a, b, w, c in ROWS
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def rank(*args: str) -> typer.testing.Result:
    return runner.invoke(app, ["rank", *args])


def test_default_output_is_a_table_with_the_anchor_note(battles: Path) -> None:
    result = rank(str(battles), "--bootstrap", "50")
    assert result.exit_code == 0, result.output
    for text in ("model", "95% CI", "Elo", "win rate", "battles", "x", "y", "z"):
        assert text in result.stdout
    assert "mean of all models = 1000" in result.stdout


def test_json_follows_the_contract(battles: Path) -> None:
    result = rank(str(battles), "--json", "--bootstrap", "50", "--seed", "3")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert list(payload) == ["models"]
    rows = payload["models"]
    assert [r["rank"] for r in rows] == [1, 2, 3]
    assert all(
        list(r) == ["model", "rank", "elo", "bt", "ci_low", "ci_high", "win_rate", "battles"]
        for r in rows
    )
    assert sum(r["battles"] for r in rows) == 2 * len(ROWS)
    again = json.loads(rank(str(battles), "--json", "--bootstrap", "50", "--seed", "3").stdout)
    assert again == payload  # seeded


def test_group_by_gives_one_leaderboard_per_value(battles: Path) -> None:
    result = rank(str(battles), "--json", "--bootstrap", "20", "--group-by", "criterion")
    assert result.exit_code == 0, result.output
    groups = json.loads(result.stdout)["groups"]
    assert set(groups) == {"accuracy", "relevance"}
    assert all(set(g) == {"models"} for g in groups.values())
    table = rank(str(battles), "--bootstrap", "20", "--group-by", "criterion")
    assert "criterion = accuracy" in table.stdout


def test_anchor_puts_that_model_at_1000(battles: Path) -> None:
    result = rank(str(battles), "--json", "--bootstrap", "20", "--anchor", "y")
    rows = {r["model"]: r for r in json.loads(result.stdout)["models"]}
    assert rows["y"]["bt"] == 1000.0
    assert "y = 1000" in rank(str(battles), "--bootstrap", "20", "--anchor", "y").stdout


def test_malformed_file_exits_2_with_one_line(battles: Path) -> None:
    battles.write_text(battles.read_text() + '{"model_a": "x", "model_b": "y", "winner": "A"}\n')
    result = rank(str(battles), "--json")
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert f"{battles}:11: field 'winner'" in lines[0]


def test_skip_bad_reports_skipped_lines_and_keeps_json_clean(battles: Path) -> None:
    battles.write_text(battles.read_text() + "not json\n")
    result = rank(str(battles), "--json", "--skip-bad", "--bootstrap", "20")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["models"]
    assert f"{battles}:11" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.jsonl"], "no such file"),
        (["{f}", "--anchor", "nobody"], "anchor model 'nobody'"),
    ],
)
def test_user_errors_exit_2(battles: Path, args: list[str], message: str) -> None:
    result = rank(*[a.format(f=battles) for a in args])
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_disconnected_battles_exit_2_naming_components(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    rows = [("a", "b", "tie"), ("a", "b", "model_a"), ("c", "d", "tie"), ("d", "c", "model_a")]
    path.write_text(
        "\n".join(
            json.dumps(dict(zip(("model_a", "model_b", "winner"), r, strict=True))) for r in rows
        )
    )
    result = rank(str(path))
    assert result.exit_code == 2
    assert "{a, b}; {c, d}" in result.stderr
    assert rank(str(path), "--prior", "1", "--bootstrap", "10").exit_code == 0
