"""Battle file reader: good files, every kind of malformed line, skip_bad."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memearena.errors import DataError
from memearena.stats import Battle, load_battles, parse_battles


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


GOOD = [
    {"model_a": "x", "model_b": "y", "winner": "model_a", "judge": "j1", "criterion": "c1"},
    {"model_a": "y", "model_b": "z", "winner": "tie", "item": 17, "source": "fhm"},
    {"model_a": "z", "model_b": "x", "winner": "tie (bothbad)", "judge": None},
    {"model_a": "x", "model_b": "z", "winner": "model_b"},
]


def test_good_jsonl_keeps_optional_and_extra_fields(tmp_path: Path) -> None:
    path = write(tmp_path, "b.jsonl", "\n".join(json.dumps(r) for r in GOOD) + "\n\n")
    battles, skipped = load_battles(path)
    assert skipped == []
    assert [b.winner for b in battles] == ["model_a", "tie", "tie (bothbad)", "model_b"]
    assert battles[0].judge == "j1" and battles[0].criterion == "c1"
    assert battles[1].item == "17"  # integer item ids are kept as text
    assert battles[1].field("source") == "fhm"
    assert battles[0].field("source") is None
    assert [b.score_a for b in battles] == [1.0, 0.5, 0.5, 0.0]


def test_json_array_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, "b.json", json.dumps(GOOD, indent=2))
    battles, _ = load_battles(path)
    assert len(battles) == 4 and battles[2].model_a == "z"


def test_json_array_error_names_the_elements_line(tmp_path: Path) -> None:
    text = '[\n  {"model_a": "x", "model_b": "y", "winner": "model_a"},\n  {"model_a": "x"}\n]'
    path = write(tmp_path, "b.json", text)
    with pytest.raises(DataError, match=r"b\.json:3: field 'model_b': missing"):
        load_battles(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"model_b": "y", "winner": "tie"}', "field 'model_a': missing"),
        ('{"model_a": "x", "model_b": "y"}', "field 'winner': missing"),
        (
            '{"model_a": "", "model_b": "y", "winner": "tie"}',
            "field 'model_a': must be a non-empty",
        ),
        ('{"model_a": "x", "model_b": 3, "winner": "tie"}', "field 'model_b': must be a non-empty"),
        ('{"model_a": "x", "model_b": "x", "winner": "tie"}', "field 'model_b': must differ"),
        ('{"model_a": "x", "model_b": "y", "winner": "tie", "judge": 5}', "field 'judge'"),
    ],
)
def test_malformed_line_names_file_line_and_field(tmp_path: Path, line: str, message: str) -> None:
    rows = [json.dumps(GOOD[0])] * 3 + [line] + [json.dumps(GOOD[1])]
    path = write(tmp_path, "battles.jsonl", "\n".join(rows))
    with pytest.raises(DataError) as info:
        load_battles(path)
    text = str(info.value)
    assert text.startswith(f"{path}:4: ")
    assert message in text
    assert "\n" not in text


def test_bad_winner_message_is_exact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [json.dumps(GOOD[0])] * 6 + ['{"model_a": "x", "model_b": "y", "winner": "A"}']
    write(tmp_path, "battles.jsonl", "\n".join(rows))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError) as info:
        load_battles("battles.jsonl")
    assert str(info.value) == (
        "battles.jsonl:7: field 'winner': must be one of model_a, model_b, tie, "
        "tie (bothbad); got 'A'"
    )


def test_blank_lines_still_count_for_line_numbers() -> None:
    text = json.dumps(GOOD[0]) + "\n\n" + '{"model_a": "x"}\n'
    with pytest.raises(DataError, match=r"^f:3: "):
        parse_battles(text, source="f")


def test_skip_bad_records_and_skips(tmp_path: Path) -> None:
    self_battle = '{"model_a": "q", "model_b": "q", "winner": "tie"}'
    rows = [json.dumps(GOOD[0]), "oops", json.dumps(GOOD[1]), self_battle]
    path = write(tmp_path, "b.jsonl", "\n".join(rows))
    battles, skipped = load_battles(path, skip_bad=True)
    assert len(battles) == 2
    assert [s.line for s in skipped] == [2, 4]
    assert "invalid JSON" in skipped[0].reason and "must differ" in skipped[1].reason


def test_missing_file_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file"):
        load_battles(tmp_path / "nope.jsonl")


def test_battle_model_rejects_self_battles() -> None:
    with pytest.raises(ValueError):
        Battle(model_a="x", model_b="x", winner="tie")
