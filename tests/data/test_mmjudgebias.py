"""Loading MM-JudgeBias in both published layouts: parquet files and the ``datasets`` JSON
export, with embedded, path and null (licence-gated) images."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from memearena.data.mmjudgebias import load_mmjudgebias
from memearena.errors import DataError


def _jpeg(color: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (24, 16), color).save(buf, format="JPEG")
    return buf.getvalue()


def _row(i: int, bias_type: str, unbiased: Any, biased: Any) -> dict[str, Any]:
    return {
        "id": i,
        "bias_type": bias_type,
        "bias_category": "integrality",
        "task_type": "Reasoning",
        "domain_type": "Chart",
        "difficulty": "Hard",
        "unbiased_source": "src-a",
        "biased_source": "src-b",
        "response": f"response {i}",
        "unbiased_instruction": f"question {i}",
        "biased_instruction": f"biased question {i}",
        "unbiased_image": unbiased,
        "biased_image": biased,
    }


def _rows(encode: Any) -> list[dict[str, Any]]:
    red, blue = encode(_jpeg("red")), encode(_jpeg("blue"))
    return [
        _row(1, "texture_insertion", {"bytes": red, "path": None}, {"bytes": blue, "path": None}),
        _row(2, "text_dominance", {"bytes": red, "path": None}, None),  # image removed: fine
        _row(3, "image_misalignment", None, {"bytes": blue, "path": None}),  # gated, rebuilt
        _row(4, "visual_transformation", None, None),  # gated, not rebuilt: error
        _row(5, "made_up_bias", {"bytes": red, "path": None}, None),  # unknown type: error
        _row(6, "unnecessary_image", None, {"bytes": blue, "path": None}),  # text-only unbiased
    ]


def _check(result: Any, tmp_path: Path) -> None:
    ids = [r.id for r in result.rows]
    assert ids == ["1", "2", "3", "6"]
    by_id = {r.id: r for r in result.rows}
    assert by_id["2"].biased_image is None
    assert by_id["3"].unbiased_image == tmp_path / "images" / "0003_unbiased.jpg"
    assert by_id["6"].unbiased_image is None and by_id["6"].biased_image is not None
    one = by_id["1"]
    assert one.unbiased_image is not None and one.biased_image is not None
    assert one.unbiased_image != one.biased_image
    with Image.open(one.biased_image) as im:
        assert im.getpixel((5, 5))[2] > 200  # the blue image, decoded from its bytes
    assert one.response == "response 1" and one.biased_instruction == "biased question 1"
    assert one.meta["task_type"] == "Reasoning"
    errors = {e.item: e.reason for e in result.errors}
    assert set(errors) == {"4", "5"}  # errors for those items only
    assert re.match(r"missing image: (row|line) \d+: field 'unbiased_image'", errors["4"])
    assert "images/0004_unbiased.jpg" in errors["4"]
    assert re.match(r"unknown bias type: (row|line) \d+: .*'made_up_bias'", errors["5"])
    sources = {e.item: e.source for e in result.errors}
    assert all(Path(s).exists() for s in sources.values())  # each error names its file


def _rebuild(tmp_path: Path) -> None:
    (tmp_path / "images").mkdir(exist_ok=True)
    (tmp_path / "images" / "0003_unbiased.jpg").write_bytes(_jpeg("green"))


def test_datasets_json_export(tmp_path: Path) -> None:
    _rebuild(tmp_path)
    path = tmp_path / "test.json"
    rows = _rows(lambda b: base64.b64encode(b).decode())
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = load_mmjudgebias(path, image_store=tmp_path / "store")
    _check(got, tmp_path)


def test_json_array_layout(tmp_path: Path) -> None:
    _rebuild(tmp_path)
    path = tmp_path / "test.json"
    path.write_text(json.dumps(_rows(lambda b: base64.b64encode(b).decode())))
    _check(load_mmjudgebias(path, image_store=tmp_path / "store"), tmp_path)


def test_hf_parquet_files(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    _rebuild(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    rows = _rows(lambda b: b)
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema(
        [(k, pa.int64() if k == "id" else pa.string()) for k in rows[0] if "image" not in k]
        + [("unbiased_image", image_type), ("biased_image", image_type)]
    )
    # Two shards, as the Hub publishes them.
    pq.write_table(pa.Table.from_pylist(rows[:3], schema=schema), data / "test-00000.parquet")
    pq.write_table(pa.Table.from_pylist(rows[3:], schema=schema), data / "test-00001.parquet")
    got = load_mmjudgebias(data, image_root=tmp_path, image_store=tmp_path / "store")
    _check(got, tmp_path)


def test_corrupt_embedded_image_is_an_item_error(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    bad = base64.b64encode(b"not an image at all").decode()
    good = base64.b64encode(_jpeg("red")).decode()
    rows = [
        _row(1, "texture_insertion", {"bytes": bad, "path": None}, {"bytes": good}),
        _row(2, "texture_insertion", {"bytes": good}, {"bytes": good}),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = load_mmjudgebias(path, image_store=tmp_path / "store")
    assert [r.id for r in got.rows] == ["2"]
    assert got.errors[0].item == "1" and got.errors[0].reason.startswith("corrupt image")


def test_path_cells_cannot_escape_the_root(tmp_path: Path) -> None:
    root = tmp_path / "ds"
    root.mkdir()
    path = root / "t.jsonl"
    path.write_text(json.dumps(_row(1, "texture_insertion", "../x.jpg", "../x.jpg")) + "\n")
    got = load_mmjudgebias(path)
    assert not got.rows and "escapes" in got.errors[0].reason


def test_unreadable_file_is_one_data_error_and_a_bad_line_is_that_rows_error(
    tmp_path: Path,
) -> None:
    with pytest.raises(DataError, match="no such file"):
        load_mmjudgebias(tmp_path / "missing.json")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n{oops\n')
    got = load_mmjudgebias(bad)
    assert [e.item for e in got.errors] == ["1", "line 2"]
    assert got.errors[1].reason.startswith("malformed row: line 2: invalid JSON")


def test_an_id_of_the_wrong_type_is_named_as_such_not_as_missing(tmp_path: Path) -> None:
    path = tmp_path / "ids.jsonl"
    rows = [_row(1, "text_dominance", None, None) for _ in range(4)]
    for r, rid in zip(rows, [1.5, True, None, "  "], strict=True):
        r["id"] = rid
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    reasons = [e.reason for e in load_mmjudgebias(path).errors]
    assert reasons == [
        "malformed row: line 1: field 'id': must be text or an integer, got float",
        "malformed row: line 2: field 'id': must be text or an integer, got bool",
        "malformed row: line 3: field 'id': missing",
        "malformed row: line 4: field 'id': missing",
    ]


def test_a_huge_unknown_bias_type_is_cut_in_its_message(tmp_path: Path) -> None:
    path = tmp_path / "types.jsonl"
    path.write_text(json.dumps(_row(1, "B" * 5000, None, None)) + "\n")
    (err,) = load_mmjudgebias(path).errors
    assert err.reason.startswith("unknown bias type: line 1: field 'bias_type': 'BBB")
    assert "(5,000 characters)" in err.reason and len(err.reason) < 400
    assert "expected one of text_dominance" in err.reason
