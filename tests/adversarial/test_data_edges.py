"""Dataset files at the edges: unbounded JSON, empty datasets, duplicated columns, BOMs.

Each case must give one error line naming the file (and line or column) or load correctly; never
a traceback, never a silent success.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from memearena.config import DatasetConfig
from memearena.data import load_dataset
from memearena.errors import DataError

DEEP = "[" * 100_000 + "]" * 100_000
HUGE_INT = "9" * 5_000
EDGE_VALUES = {
    "deeply nested": ('{"id": 2, "img": "a.png", "text": "t", "x": ' + DEEP + "}", "nested deeper"),
    "5000-digit int": ('{"id": ' + HUGE_INT + ', "img": "a.png", "text": "t"}', "5,000 characters"),
    "5000-digit float": ('{"id": 2, "img": "a.png", "text": "t", "s": 1' + "0" * 5000 + ".5}",
                         "5,003 characters"),
    "huge exponent": ('{"id": 2, "img": "a.png", "text": "t", "s": 1e999}', "overflows a float"),
    "NaN": ('{"id": 2, "img": "a.png", "text": "t", "s": NaN}', "NaN, which is not a number"),
    "65 levels": ('{"id": 2, "img": "a.png", "text": "t", "x": ' + "[" * 64 + "]" * 64 + "}",
                  "nested deeper than 64"),
}  # fmt: skip
GOOD = {"id": 1, "img": "a.png", "label": 1, "text": "fine"}


def _image(root: Path, name: str = "a.png") -> None:
    root.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), "red").save(root / name)


@pytest.mark.parametrize("case", list(EDGE_VALUES))
def test_unbounded_json_row_is_one_line_error_and_the_rest_load(tmp_path: Path, case: str) -> None:
    bad, needle = EDGE_VALUES[case]
    _image(tmp_path)
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + bad + "\n", encoding="utf-8")
    result = load_dataset(DatasetConfig(format="fhm", path=path))
    assert [m.id for m in result.memes] == ["00001"]
    (err,) = result.errors
    assert err.item == "line 2" and err.kind == "bad row" and needle in err.reason
    assert "\n" not in err.reason and len(err.reason) < 200
    with pytest.raises(DataError) as e:
        load_dataset(DatasetConfig(format="fhm", path=path, strict=True))
    assert str(e.value).startswith(f"{path}:2: invalid JSON") and needle in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("case", ["deeply nested", "5000-digit int", "NaN"])
def test_unbounded_json_in_an_array_file_is_one_line_error(tmp_path: Path, case: str) -> None:
    bad, needle = EDGE_VALUES[case]
    path = tmp_path / "jb.json"
    path.write_text("[\n" + json.dumps(GOOD) + ",\n" + bad + "\n]\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_dataset(DatasetConfig(format="jsonl", path=path))
    msg = str(e.value)
    assert msg.startswith(f"{path}:3: invalid JSON") and needle in msg and "\n" not in msg


@pytest.mark.parametrize(
    ("fmt", "name", "content"),
    [
        ("fhm", "d.jsonl", ""),
        ("fhm", "d.jsonl", "\n  \n\n"),
        ("harm", "d.jsonl", "\ufeff"),
        ("jsonl", "d.json", "[]"),
        ("jsonl", "d.json", "  [ ]  \n"),
        ("csv", "d.csv", "id,image,text\n"),
        ("csv", "d.csv", "id,image,text\n,,\n\n"),
        ("mami", "d.csv", "file_name\tText Transcription\n"),
    ],
)
def test_empty_dataset_is_an_error(tmp_path: Path, fmt: str, name: str, content: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_dataset(DatasetConfig(format=fmt, path=path))  # type: ignore[arg-type]
    assert str(e.value) == f"{path}: empty dataset (no rows)"


def test_empty_folder_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "notes.txt").write_text("no images here")
    with pytest.raises(DataError, match=r"empty dataset \(no images\)"):
        load_dataset(DatasetConfig(format="folder", path=tmp_path / "f"))


def test_filters_that_leave_nothing_are_an_error(tmp_path: Path) -> None:
    _image(tmp_path)
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(dict(GOOD, label=0)) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="no items left after filters"):
        load_dataset(DatasetConfig(format="fhm", path=path, harmful_only=True))


@pytest.mark.parametrize(
    ("fmt", "header", "row", "dup"),
    [
        ("csv", "id,image,text,label,label", "1,a.png,t,1,0", "'label'"),
        ("csv", "id,image,id,text", "1,a.png,2,t", "'id'"),
        ("csv", "id,image,text, text ", "1,a.png,t,u", "'text'"),
        ("mami", "file_name\tmisogynous\tmisogynous\tText Transcription", "a.png\t1\t0\tt",
         "'misogynous'"),
    ],
)  # fmt: skip
def test_duplicated_column_is_an_error_naming_it(
    tmp_path: Path, fmt: str, header: str, row: str, dup: str
) -> None:
    _image(tmp_path)
    path = tmp_path / "d.csv"
    path.write_text(f"{header}\n{row}\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_dataset(DatasetConfig(format=fmt, path=path))  # type: ignore[arg-type]
    assert str(e.value).startswith(f"{path}:1: duplicated column(s) {dup}")


def test_duplicated_caption_column_in_a_folder_is_an_error(tmp_path: Path) -> None:
    _image(tmp_path / "f")
    (tmp_path / "f" / "captions.csv").write_text("file,text,text\na.png,x,y\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"captions\.csv:1: duplicated column\(s\) 'text'"):
        load_dataset(DatasetConfig(format="folder", path=tmp_path / "f"))


@pytest.mark.parametrize(
    ("fmt", "name", "body"),
    [
        ("fhm", "d.jsonl", json.dumps(GOOD) + "\n"),
        ("jsonl", "d.json", json.dumps([{"id": "1", "image": "a.png", "text": "fine"}])),
        ("csv", "d.csv", "id,image,text\n1,a.png,fine\n"),
        ("mami", "d.csv", "file_name\tText Transcription\na.png\tfine\n"),
    ],
)
def test_a_bom_is_accepted_the_same_way_in_every_format(
    tmp_path: Path, fmt: str, name: str, body: str
) -> None:
    _image(tmp_path)
    plain = tmp_path / name
    plain.write_text(body, encoding="utf-8")
    with_bom = tmp_path / f"bom-{name}"
    with_bom.write_bytes(b"\xef\xbb\xbf" + body.encode())
    a = load_dataset(DatasetConfig(format=fmt, path=plain, split="s"))  # type: ignore[arg-type]
    b = load_dataset(DatasetConfig(format=fmt, path=with_bom, split="s"))  # type: ignore[arg-type]
    assert a.errors == b.errors == [] and len(a.memes) == 1
    assert a.memes == b.memes


def test_a_bom_at_the_start_of_a_concatenated_file_is_accepted(tmp_path: Path) -> None:
    _image(tmp_path)
    _image(tmp_path, "b.png")
    path = tmp_path / "d.jsonl"
    second = json.dumps(dict(GOOD, id=2, img="b.png"))
    path.write_bytes(
        b"\xef\xbb\xbf" + json.dumps(GOOD).encode() + b"\n\xef\xbb\xbf" + second.encode()
    )
    result = load_dataset(DatasetConfig(format="fhm", path=path))
    assert result.errors == [] and [m.id for m in result.memes] == ["00001", "00002"]


def test_non_utf8_dataset_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b'\n{"id": 2, "text": "\xff"}\n')
    with pytest.raises(DataError) as e:
        load_dataset(DatasetConfig(format="fhm", path=path))
    assert str(e.value) == f"{path}:2: not valid UTF-8"


def test_data_check_cli_gives_one_line_and_exit_two_for_an_edge(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from memearena.cli import app

    path = tmp_path / "d.csv"
    path.write_text("id,image,image,text\n1,a.png,b.png,t\n", encoding="utf-8")
    cfg = tmp_path / "run.yaml"
    cfg.write_text("models: {}\ndata:\n  - {format: csv, path: d.csv}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["data", "check", str(cfg)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "duplicated column(s) 'image'" in result.stderr
    assert "Traceback" not in result.output


def test_id_filters_that_leave_nothing_name_the_filter(tmp_path: Path) -> None:
    _image(tmp_path)
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(GOOD) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"left after filters \(exclude; 1 well-formed items"):
        load_dataset(DatasetConfig(format="fhm", path=path, exclude=[1]))
    with pytest.raises(DataError, match=r"no items left after filters \(ids;"):
        load_dataset(DatasetConfig(format="fhm", path=path, ids=[]))
