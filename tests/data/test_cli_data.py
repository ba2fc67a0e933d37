"""``memearena data check CONFIG``: summary table, item errors, exit codes 0 / 1 / 2."""

from __future__ import annotations

from pathlib import Path

import typer
from data_helpers import write_image, write_jsonl
from typer.testing import CliRunner

from memearena.cli.data import check_command

app = typer.Typer()
app.command()(check_command)


def _config(tmp_path: Path, data: str) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(f"models: {{}}\ndata:\n{data}", encoding="utf-8")
    return path


def test_all_items_ok_exits_zero(tmp_path: Path) -> None:
    write_image(tmp_path / "fhm" / "img" / "1.png")
    write_jsonl(
        tmp_path / "fhm" / "dev.jsonl", [{"id": 1, "img": "img/1.png", "label": 1, "text": "t"}]
    )
    cfg = _config(tmp_path, "  - {format: demo}\n  - {format: fhm, path: fhm/dev.jsonl}\n")
    result = CliRunner().invoke(app, [str(cfg)])
    assert result.exit_code == 0, result.output
    assert "demo" in result.stdout and "fhm" in result.stdout
    assert "all 25 items ok" in result.stdout


def test_item_errors_are_listed_and_exit_one(tmp_path: Path) -> None:
    write_image(tmp_path / "d" / "ok.png")
    (tmp_path / "d" / "broken.png").write_bytes(b"")
    rows = [
        {"id": "ok", "img": "ok.png", "label": 0, "text": ""},
        {"id": "gone", "img": "gone.png", "label": 1, "text": ""},
        {"id": "broken", "img": "broken.png", "label": 1, "text": ""},
        "{not json",
    ]
    write_jsonl(tmp_path / "d" / "x.jsonl", rows)
    cfg = _config(tmp_path, "  - {format: fhm, path: d/x.jsonl, skip_bad: true}\n")
    result = CliRunner().invoke(app, [str(cfg)])
    assert result.exit_code == 1, result.output
    out = result.stdout
    assert "3 item error(s)" in out
    for needle in ("gone", "missing image", "broken", "empty image", "line 4", "bad row"):
        assert needle in out


def test_malformed_row_is_an_item_error_and_strict_makes_it_exit_two(tmp_path: Path) -> None:
    write_image(tmp_path / "a.png")
    write_jsonl(
        tmp_path / "x.jsonl",
        [
            {"id": 1, "img": "a.png", "label": "x", "text": ""},
            {"id": 2, "img": "a.png", "label": 1, "text": ""},
        ],
    )
    cfg = _config(tmp_path, "  - {format: fhm, path: x.jsonl}\n")
    result = CliRunner().invoke(app, [str(cfg)])
    assert result.exit_code == 1, result.output
    assert "line 1" in result.stdout and "field 'label'" in result.stdout
    cfg = _config(tmp_path, "  - {format: fhm, path: x.jsonl, strict: true}\n")
    result = CliRunner().invoke(app, [str(cfg)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "x.jsonl:1: field 'label'" in result.stderr


def test_empty_dataset_exits_two_not_all_zero_items_ok(tmp_path: Path) -> None:
    (tmp_path / "x.jsonl").write_text("\n\n", encoding="utf-8")
    result = CliRunner().invoke(app, [str(_config(tmp_path, "  - {format: fhm, path: x.jsonl}\n"))])
    assert result.exit_code == 2
    assert "empty dataset" in result.stderr and "items ok" not in result.stdout


def test_overlapping_splits_are_merged_and_counted(tmp_path: Path) -> None:
    write_image(tmp_path / "img" / "08291.png")
    write_image(tmp_path / "img" / "00007.png")
    write_jsonl(
        tmp_path / "a.jsonl", [{"id": 8291, "img": "img/08291.png", "label": 1, "text": "t"}]
    )
    write_jsonl(
        tmp_path / "b.jsonl",
        [
            {"id": "08291", "img": "img/08291.png", "label": 1, "text": "t"},
            {"id": "00007", "img": "img/00007.png", "label": 0, "text": "u"},
        ],
    )
    data = "  - {format: fhm, path: a.jsonl}\n  - {format: fhm, path: b.jsonl}\n"
    result = CliRunner().invoke(app, [str(_config(tmp_path, data))])
    assert result.exit_code == 0, result.output
    assert "fhm:08291 ×2" in result.stdout and "all 2 items ok" in result.stdout


def test_invalid_config_exits_two(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "  - {format: nope}\n")
    result = CliRunner().invoke(app, [str(cfg)])
    assert result.exit_code == 2 and result.stderr.startswith("error: ")
    missing = CliRunner().invoke(app, [str(tmp_path / "absent.yaml")])
    assert missing.exit_code == 2
