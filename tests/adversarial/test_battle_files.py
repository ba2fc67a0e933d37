"""Hostile battle files for `memearena rank`: each gives one error line naming the line (exit 2)
or is accepted, consistently on every path of the reader; never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memearena.cli import app
from memearena.errors import DataError
from memearena.stats import load_battles, read_battle_table

runner = CliRunner()

GOOD = [
    json.dumps({"model_a": a, "model_b": b, "winner": w})
    for a, b, w in [("x", "y", "model_a"), ("y", "x", "model_a"), ("x", "y", "tie")] * 3
]


def battle(**extra: object) -> str:
    return json.dumps({"model_a": "x", "model_b": "y", "winner": "tie", **extra})


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


BIG = "9" * 5000
REFUSED = [
    # (the hostile line, what its one-line error says)
    ('{"model_a": "x", "model_b": "y", "winner": "tie", "z": ' + deep(5000) + "}", "nested"),
    ('{"model_a": "x", "model_b": "y", "winner": "tie", "z": ' + deep(33) + "}", "nested"),
    (deep(5000), "nested"),
    ('{"model_a": ' + BIG + ', "model_b": "y", "winner": "tie"}', "field 'model_a'"),
    ('{"model_a": "x", "model_b": "y", "winner": "tie", "item": ' + BIG + "}", "field 'item'"),
    ('{"model_a": "x", "model_b": "y", "winner": "tie", "s": NaN}', "invalid JSON"),
    ('{"model_a": "x", "model_b": "y", "winner": "tie", "s": -Infinity}', "invalid JSON"),
]


@pytest.mark.parametrize(("line", "message"), REFUSED)
def test_hostile_line_is_one_error_line_naming_it(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text("\n".join([*GOOD[:4], line, *GOOD[4:]]) + "\n")
    for read in (load_battles, read_battle_table):
        with pytest.raises(DataError) as info:
            read(path)
        assert str(info.value).startswith(f"{path}:5: ") and message in str(info.value)
    result = runner.invoke(app, ["rank", str(path), "--json", "--bootstrap", "10"])
    assert result.exit_code == 2 and result.stdout == ""
    (only,) = result.stderr.strip().splitlines()
    assert f"{path}:5: " in only and "Traceback" not in result.output
    skipped = runner.invoke(app, ["rank", str(path), "--json", "--bootstrap", "10", "--skip-bad"])
    assert skipped.exit_code == 0, skipped.output
    assert f"{path}:5:" in skipped.stderr
    assert sum(r["battles"] for r in json.loads(skipped.stdout)["models"]) == 2 * len(GOOD)


def test_unread_fields_may_hold_long_numbers_and_moderate_nesting(tmp_path: Path) -> None:
    """A field the ranking never reads is never turned into a value (as by the fast path)."""
    path = tmp_path / "b.jsonl"
    extra = [battle(tstamp=float("1e3"), big=int(BIG[:300]), conv=json.loads(deep(30)))]
    path.write_text("\n".join([*GOOD, *extra]))
    assert len(load_battles(path).battles) == len(read_battle_table(path)) == len(GOOD) + 1
    result = runner.invoke(app, ["rank", str(path), "--json", "--bootstrap", "10"])
    assert result.exit_code == 0, result.output
    # ...but the same number in a field that is read (here: grouped by) is refused.
    grouped = runner.invoke(app, ["rank", str(path), "--group-by", "big", "--bootstrap", "10"])
    assert grouped.exit_code == 2
    assert "field 'big': holds a number out of range" in grouped.stderr


def test_a_bom_is_accepted_as_in_dataset_files(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_bytes(("\ufeff" + "\n".join(GOOD[:5]) + "\n\ufeff" + "\n".join(GOOD[5:])).encode())
    result = runner.invoke(app, ["rank", str(path), "--json", "--bootstrap", "10"])
    assert result.exit_code == 0, result.output
    assert sum(r["battles"] for r in json.loads(result.stdout)["models"]) == 2 * len(GOOD)
    array = tmp_path / "b.json"
    array.write_bytes(("\ufeff" + "[" + ",".join(GOOD) + "]").encode())
    assert len(read_battle_table(array)) == len(load_battles(array).battles) == len(GOOD)


def test_bytes_that_are_not_utf8_name_their_line(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_bytes("\n".join(GOOD[:2]).encode() + b'\n{"model_a": "x\xff", "model_b": "y"}\n')
    result = runner.invoke(app, ["rank", str(path)])
    assert result.exit_code == 2
    assert f"{path}:3: not UTF-8 text" in result.stderr


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no battles to rank"),
        ("\n\n  \n", "no battles to rank"),
        ("[]", "no battles to rank"),
        ("[" + GOOD[0], "invalid JSON"),
        ("[" + GOOD[0] + "] trailing", "data after the array"),
    ],
)
def test_empty_or_broken_files_exit_2(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "b.jsonl"
    path.write_text(text)
    result = runner.invoke(app, ["rank", str(path)])
    assert result.exit_code == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_directory_is_not_a_battle_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["rank", str(tmp_path)])
    assert result.exit_code == 2 and "is a directory" in result.stderr
