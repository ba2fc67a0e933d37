"""``memearena export --table T --format F``: one schema per table, the same in every format,
every table loading in pandas from Parquet and joining to ``calls`` by request hash."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from memearena.cli import app
from memearena.engine.results import MissingExtraError
from memearena.export import export_table, exports_doc, tables

runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]

JOINS = {
    "requests": ["key"],
    "battles": ["request_hash", "request_hash_2"],
    "answers": ["request_hash"],
    "scores": ["request_hash", "original_image_request_hash"],
    "chains": ["request_hash"],
    "audit_scores": ["unbiased_request_hash", "biased_request_hash"],
}
"""Each table's columns naming a request (``audit_scores`` also joins its responses by meme and
responder)."""


def test_every_table_loads_from_parquet_and_joins_to_calls(demo_run: Path, tmp_path: Path) -> None:
    frames = {}
    for table in tables():
        out = tmp_path / f"{table}.parquet"
        result = runner.invoke(
            app,
            ["export", str(demo_run), "--table", table, "--format", "parquet", "--to", str(out)],
        )
        assert result.exit_code == 0, result.output
        frame = pd.read_parquet(out)
        assert list(frame.columns) == [c.name for c in tables()[table].columns], table
        assert len(frame) > 0, table
        frames[table] = frame
    sent = set(frames["calls"]["request_hash"])
    for table, columns in JOINS.items():
        for column in columns:
            named = frames[table][column].dropna()
            # Only a request first reached by another item is unnamed (docs/exports.md).
            assert len(named) >= 0.95 * len(frames[table]), (table, column)
            joined = frames[table].merge(
                frames["calls"], left_on=column, right_on="request_hash", how="inner"
            )
            assert set(named) <= sent and len(joined) >= len(named), (table, column)
    # The Judge audit's scores join its responses by meme and responder.
    responses = frames["answers"][frames["answers"]["method"] == "judge_audit"]
    audit = frames["audit_scores"].dropna(subset=["responder"])
    assert set(zip(audit.meme, audit.responder, strict=True)) <= set(
        zip(responses.meme, responses.model, strict=True)
    )
    # Battles and answers name the same memes, so a battle joins the answers it compared.
    assert set(frames["battles"]["meme"]) <= set(frames["answers"]["meme"])


def test_jsonl_csv_and_parquet_hold_the_same_rows(demo_run: Path, tmp_path: Path) -> None:
    written = {
        fmt: export_table(demo_run, "chains", fmt, tmp_path / f"c.{fmt}")
        for fmt in ("jsonl", "csv", "parquet")
    }
    assert len({n for n, _ in written.values()}) == 1
    jsonl = [json.loads(x) for x in (tmp_path / "c.jsonl").read_text(encoding="utf-8").splitlines()]
    parquet = pd.read_parquet(tmp_path / "c.parquet")
    with (tmp_path / "c.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["request_hash"] for r in jsonl] == list(
        parquet["request_hash"].astype(object).where(parquet["request_hash"].notna(), None)
    )
    assert [r["meme"] for r in rows] == [r["meme"] for r in jsonl]


def _battle_dir(tmp_path: Path, judge: str) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    row = {
        "item": "demo:m01",
        "judge": judge,
        "model_a": "a",
        "model_b": "b",
        "winner": "model_a",
        "requests": ["1" * 64, "2" * 64],
    }
    (run / "battles.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    return run


def test_csv_cells_never_start_a_formula(tmp_path: Path) -> None:
    run = _battle_dir(tmp_path, '=HYPERLINK("http://x","y")')
    export_table(run, "battles", "csv", tmp_path / "b.csv")
    with (tmp_path / "b.csv").open(encoding="utf-8", newline="") as f:
        (row,) = list(csv.DictReader(f))
    assert row["judge"] == "'" + '=HYPERLINK("http://x","y")'
    assert row["request_hash_2"] == "2" * 64 and row["self_judged"] == "False"


def test_without_pyarrow_parquet_is_one_line_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _battle_dir(tmp_path, "j")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(MissingExtraError, match=r"memearena\[parquet\]"):
        export_table(run, "battles", "parquet", None)
    assert not (run / "battles.parquet").exists()


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("labels", "no labels in this run"),
        ("scores", "no Adapt scores in this run"),
        ("battels", "--table: must be one of calls, requests, answers, battles"),
    ],
)
def test_a_table_the_run_lacks_is_one_line(tmp_path: Path, table: str, message: str) -> None:
    run = _battle_dir(tmp_path, "j")
    result = runner.invoke(app, ["export", str(run), "--table", table])
    assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
    assert "Traceback" not in result.output


def test_the_exports_page_documents_every_table() -> None:
    committed = (REPO / "docs" / "exports.md").read_text(encoding="utf-8")
    assert committed == exports_doc(), "stale: python -m memearena.export > docs/exports.md"
    for table in (*tables(), "labels"):
        assert f"`{table}`" in committed


def test_the_calls_schema_is_the_store_s_call_record() -> None:
    from dataclasses import fields

    from memearena.store import CallRecord

    assert [c.name for c in tables()["calls"].columns] == [f.name for f in fields(CallRecord)]
