"""MM-JudgeBias and scored-pair files as an attacker writes them: nothing outside the dataset
root is ever opened (an audit hook watches every open), and every bad row is a one-line error
or that row's recorded error, never a traceback; `data check` and the Judge audit read a file
the same way (one loader), BOMs accepted."""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from PIL import Image
from typer.testing import CliRunner

from memearena.cli import app
from memearena.config import DatasetConfig
from memearena.data import load_dataset
from memearena.data.mmjudgebias import load_mmjudgebias

runner = CliRunner()

# ---- an audit hook counting opens under a watched folder ----------------------------------

_WATCHED: list[str] = []
_OPENED: list[str] = []


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and _WATCHED and args and isinstance(args[0], str | bytes | os.PathLike):
        path = os.path.abspath(os.fsdecode(args[0]))
        if any(path.startswith(w) for w in _WATCHED):
            _OPENED.append(path)


sys.addaudithook(_hook)  # cannot be removed: it does nothing unless a folder is watched


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Path]:
    """A folder next to the dataset root, holding a real image: opening it is the leak."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.jpg").write_bytes(_jpeg("red"))
    _WATCHED.append(str(folder.resolve()))
    _OPENED.clear()
    yield folder
    _WATCHED.clear()


def _jpeg(color: str) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (24, 16), color).save(buf, format="JPEG")
    return buf.getvalue()


def _row(row_id: Any, bias_type: str = "visual_transformation", **cells: Any) -> dict[str, Any]:
    return {
        "id": row_id,
        "bias_type": bias_type,
        "response": "a response",
        "unbiased_instruction": "a question",
        "biased_instruction": "a question",
        "unbiased_image": cells.get("unbiased"),
        "biased_image": cells.get("biased"),
    }


def _jsonl(path: Path, lines: list[str], bom: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(("\ufeff" if bom else "") + "".join(line + "\n" for line in lines))
    return path


# ---- traversal -----------------------------------------------------------------------------


def test_ids_and_cells_never_open_a_file_outside_the_dataset_root(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "root"
    (root / "images").mkdir(parents=True)
    secret = outside / "secret"
    # A rebuilt image that is a link to the outside image: the safe join resolves links.
    os.symlink(outside / "secret.jpg", root / "images" / "0009_unbiased.jpg")
    rows = [
        _row("../../outside/secret"),  # id climbing out, null images: the rebuilt name
        _row(str(secret)),  # an absolute id
        _row("..\\..\\outside\\secret"),
        _row(9),  # rebuilt name is a symlink to the outside
        _row(10, unbiased="../outside/secret.jpg", biased="../outside/secret.jpg"),
        _row(11, unbiased={"bytes": None, "path": str(outside / "secret.jpg")}),
        _row(12, unbiased={"path": "images/../../outside/secret.jpg"}),
    ]
    path = _jsonl(root / "jb.jsonl", [json.dumps(r) for r in rows])
    got = load_mmjudgebias(path, image_store=tmp_path / "store")
    assert _OPENED == []
    assert got.rows == []
    assert len(got.errors) == len(rows)
    # data check reads the same file through the same loader: the same refusals.
    checked = load_dataset(DatasetConfig(format="mm-judgebias", path=path))
    assert _OPENED == []
    assert checked.memes == [] and len(checked.errors) == len(rows)
    assert not any((tmp_path / "store").glob("*")) if (tmp_path / "store").exists() else True


# ---- bad rows ------------------------------------------------------------------------------


BAD_LINES = {
    "deep": "[" * 100_000 + "]" * 100_000,
    "long number": json.dumps(_row(1)).replace('"id": 1', '"id": ' + "7" * 5000),
    "long id": json.dumps(_row("7" * 5000)),
    "superscript id": json.dumps(_row("²")),
    "list bias type": json.dumps({**_row(3), "bias_type": ["text_dominance"]}),
    "dict bias type": json.dumps({**_row(4), "bias_type": {"x": 1}}),
    "garbled": '{"id": 5, "bias_type": ',
    "nan": '{"id": 6, "bias_type": "text_dominance", "difficulty": NaN}',
}


def test_every_bad_row_is_that_rows_error_and_the_good_row_loads(tmp_path: Path) -> None:
    root = tmp_path / "root"
    good = _row(100, "text_dominance", unbiased={"bytes": None, "path": "img.jpg"})
    (root).mkdir()
    (root / "img.jpg").write_bytes(_jpeg("blue"))
    lines = [*BAD_LINES.values(), "\ufeff" + json.dumps(good)]  # a BOM on a later line too
    path = _jsonl(root / "jb.jsonl", lines, bom=True)
    got = load_mmjudgebias(path)
    assert [r.id for r in got.rows] == ["100"]
    assert len(got.errors) == len(BAD_LINES)
    assert all("\n" not in e.reason and len(e.reason) < 400 for e in got.errors)


def test_data_check_and_the_audit_accept_and_refuse_the_same_rows(tmp_path: Path) -> None:
    import base64

    root = tmp_path / "root"
    root.mkdir()
    (root / "img.jpg").write_bytes(_jpeg("blue"))
    red = base64.b64encode(_jpeg("red")).decode()
    rows = [
        _row(1, unbiased={"bytes": red, "path": None}, biased={"bytes": None, "path": "img.jpg"}),
        _row(2, "made_up_bias", unbiased={"bytes": red, "path": None}),
        *[json.loads(line) for line in BAD_LINES.values() if line.startswith('{"id": "')],
    ]
    path = _jsonl(root / "jb.jsonl", [json.dumps(r) for r in rows], bom=True)
    audit = load_mmjudgebias(path, image_store=tmp_path / "store")
    config = tmp_path / "c.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "run": "x",
                "models": {"m": {"provider": "sim"}},
                "data": [{"format": "mm-judgebias", "path": str(path)}],
            }
        )
    )
    done = runner.invoke(app, ["data", "check", str(config)])
    assert done.exception is None or isinstance(done.exception, SystemExit), done.output
    assert done.exit_code == 1  # some items failed, listed
    assert [r.id for r in audit.rows] == ["1"]  # the documented {"bytes", "path"} cells load
    for e in audit.errors:
        assert e.item[:40] in done.output  # each refused row is listed (long ids cut)
    assert "unknown bias type" in done.output


# ---- judge-audit metrics -------------------------------------------------------------------

GOOD_SCORE = {"id": "a", "bias_type": "text_dominance", "unbiased_score": 9, "biased_score": 1}


@pytest.mark.parametrize(
    "bad",
    [
        json.dumps({**GOOD_SCORE, "bias_type": ["text_dominance"]}),
        json.dumps({**GOOD_SCORE, "bias_type": {"a": 1}}),
        "[" * 100_000 + "]" * 100_000,
        json.dumps(GOOD_SCORE).replace('"unbiased_score": 9', '"unbiased_score": ' + "9" * 5000),
        json.dumps(GOOD_SCORE).replace('"unbiased_score": 9', '"unbiased_score": NaN'),
    ],
    ids=["list", "dict", "deep", "long number", "nan"],
)
def test_a_bad_metrics_line_is_that_rows_counted_exclusion(tmp_path: Path, bad: str) -> None:
    path = _jsonl(tmp_path / "s.jsonl", [json.dumps(GOOD_SCORE), bad])
    args = ["judge-audit", "metrics", str(path), "--bootstrap", "10"]
    done = runner.invoke(app, [*args, "--json"])
    assert done.exit_code == 0, done.output
    assert not isinstance(done.exception, Exception) or isinstance(done.exception, SystemExit)
    rows = json.loads(done.output)["excluded_rows"]
    assert rows["count"] == 1 and rows["rows"][0]["line"] == 2
    reason = rows["rows"][0]["reason"]
    assert "\n" not in reason and len(reason) < 400
    # A file holding only that line is one line naming it, exit 2, never a traceback.
    alone = _jsonl(tmp_path / "alone.jsonl", [bad])
    done = runner.invoke(app, ["judge-audit", "metrics", str(alone), "--bootstrap", "10"])
    assert done.exit_code == 2, done.output
    assert not isinstance(done.exception, Exception) or isinstance(done.exception, SystemExit)
    lines = [x for x in done.output.splitlines() if x.strip()]
    assert len(lines) == 1 and str(alone) in lines[0] and "line 1" in lines[0]
    assert len(lines[0]) < 600


def test_metrics_accept_a_bom_and_write_strict_json(tmp_path: Path) -> None:
    rows = [GOOD_SCORE, {**GOOD_SCORE, "id": "b", "unbiased_score": 5, "biased_score": 5}]
    path = _jsonl(tmp_path / "s.jsonl", [json.dumps(r) for r in rows], bom=True)
    done = runner.invoke(app, ["judge-audit", "metrics", str(path), "--json", "--bootstrap", "10"])
    assert done.exit_code == 0, done.output

    def refuse(name: str) -> None:
        raise ValueError(f"not strict JSON: {name}")

    doc = json.loads(done.output, parse_constant=refuse)
    assert doc["overall"]["pairs"] == 2
