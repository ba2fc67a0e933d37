"""`memearena rank` as a user meets it: refused values and group titles as the battle file wrote
them (JSON, never a Python repr), and a table that fits 80 columns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from memearena.cli.rank import rank_command

app = typer.Typer()
app.command("rank")(rank_command)
app.command("noop", hidden=True)(lambda: None)  # keeps `rank` a named sub-command
runner = CliRunner()

GOOD = {"model_a": "x", "model_b": "y", "winner": "model_a"}


def rank(*args: str) -> typer.testing.Result:
    return runner.invoke(app, ["rank", *args])


@pytest.mark.parametrize(
    ("bad", "shown"),
    [
        ({"model_a": None}, "field 'model_a': must be a non-empty string; got null"),
        ({"model_b": ["y"]}, "field 'model_b': must be a non-empty string; got [\"y\"]"),
        ({"winner": ["tie"]}, 'tie (bothbad); got ["tie"]'),
        ({"winner": True}, "tie (bothbad); got true"),
        ({"judge": {"n": 1}}, "field 'judge': must be a string or null; got {\"n\": 1}"),
    ],
)
def test_a_refused_value_is_quoted_as_json(tmp_path: Path, bad: dict, shown: str) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps({**GOOD, **bad}) + "\n")
    result = rank(str(path))
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {path}:2: field ")
    assert shown in result.output
    assert "None" not in result.output and "True" not in result.output


def test_group_titles_of_non_text_values_are_their_json(tmp_path: Path) -> None:
    # Chatbot Arena's own battle files carry booleans (`anony`) and objects (`conv_metadata`).
    rows = [
        {**GOOD, "winner": w, "anony": k % 2 == 0, "meta": {"turns": k % 2}}
        for k, w in enumerate(["model_a", "model_b", "tie", "model_a"] * 3)
    ]
    path = tmp_path / "b.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    table = rank(str(path), "--group-by", "anony", "--bootstrap", "10")
    assert table.exit_code == 0, table.output
    assert "anony = true" in table.output and "anony = false" in table.output
    assert "True" not in table.output and "False" not in table.output
    as_json = rank(str(path), "--group-by", "meta", "--bootstrap", "10", "--json")
    assert as_json.exit_code == 0, as_json.output
    assert sorted(json.loads(as_json.output)["groups"]) == ['{"turns": 0}', '{"turns": 1}']


def test_the_table_shows_common_model_names_whole_within_80_columns(tmp_path: Path) -> None:
    names = ["gpt-4-0613", "llama-2-70b-chat", "vicuna-33b-v1.3", "mixtral-8x7b-instruct"]
    rows = [
        {"model_a": a, "model_b": b, "winner": w}
        for k, (a, b) in enumerate((a, b) for a in names for b in names if a != b)
        for w in (["model_a", "model_b", "tie"][k % 3], "model_b")
    ]
    path = tmp_path / "b.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = rank(str(path), "--bootstrap", "10")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80
    for name in names:  # each on its row, never folded over two lines
        assert any(line.split()[:1] == [name] for line in lines), result.output
