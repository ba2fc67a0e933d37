"""``export --table audit_scores``: each score names the request that gave it, so the table
joins to ``calls`` by request hash; a score log written before requests were recorded exports
them as null."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from memearena.export import export_table, table_rows
from memearena.methods.judge_audit.records import ScoreLog, ScoreRecord, VerdictLog, VerdictRecord


def test_audit_scores_join_their_score_calls_by_request_hash(
    demo_run: Path, tmp_path: Path
) -> None:
    export_table(demo_run, "audit_scores", "parquet", tmp_path / "a.parquet")
    export_table(demo_run, "calls", "parquet", tmp_path / "c.parquet")
    audit, calls = pd.read_parquet(tmp_path / "a.parquet"), pd.read_parquet(tmp_path / "c.parquet")
    assert len(audit) > 0
    scores = calls[calls.role == "judge_audit.score"][["request_hash", "model"]].drop_duplicates()
    for side in ("unbiased", "biased"):
        column = f"{side}_request_hash"
        assert audit[column].notna().all(), column
        joined = audit.merge(scores, left_on=column, right_on="request_hash", how="left")
        # Every score joins to a score call of its own judge.
        assert joined["model"].notna().all(), column
        assert (joined["model"] == joined["judge"]).all(), column
    # The perturbed and the unperturbed item are different requests.
    assert (audit.unbiased_request_hash != audit.biased_request_hash).all()


def test_a_score_log_without_requests_exports_them_as_null(tmp_path: Path) -> None:
    row = {
        "id": "m1",
        "bias_type": "text_dominance",
        "unbiased_score": 7,
        "biased_score": 3,
        "judge": "j",
        "responder": "r",
        "status": ["ok", "ok"],
    }
    (tmp_path / "judge_audit_scores.jsonl").write_text(json.dumps(row) + "\n")
    _, rows = table_rows(tmp_path, "audit_scores")
    (got,) = list(rows)
    assert got["meme"] == "m1" and got["unbiased_score"] == 7
    assert got["unbiased_request_hash"] is None and got["biased_request_hash"] is None


def test_the_logs_keep_each_score_s_and_verdict_s_request() -> None:
    # A key ending in zero bytes reads back whole.
    u, b, v = (f"{n:064x}" for n in (256, 2**255 + 5, 3))
    scores = ScoreLog()
    scores.add_pair("m1", "text_dominance", "r", [("j0", 7, "ok", 3, "ok", u, b)])
    scores.add_pair("m1", "text_dominance", "r", [("j1", None, "error", 2.5, "ok")])
    assert list(scores) == [
        ScoreRecord("j0", "m1", "text_dominance", 7, 3, "ok", "ok", "r", u, b),
        ScoreRecord("j1", "m1", "text_dominance", None, 2.5, "error", "ok", "r", None, None),
    ]
    verdicts = VerdictLog([VerdictRecord("j0", "position", "m1", "a", "b", "A", 1, 2, v)])
    verdicts.add("j0", "position", "m1", "b", "a", None, 2, 1)
    assert [x.request for x in verdicts] == [v, None]
