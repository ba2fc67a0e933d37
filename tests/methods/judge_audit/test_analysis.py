"""The evaluator leaderboard from hand-built records: paired flags against the reference judge,
abstention and unparsed rates per bias type and side (the shared unbiased judgement once), and
the trust ranking with its components, flag mark and rank interval."""

from __future__ import annotations

from typing import Any

import pytest

from memearena.config import RunConfig, parse_config
from memearena.methods.judge_audit.analysis import judge_audit_section
from memearena.methods.judge_audit.records import ScoreLog
from memearena.methods.judge_audit.stages import JudgeAuditOutcome, ScoreRecord, VerdictRecord

ITEMS = [f"m{i:02d}" for i in range(30)]


def _cfg(judges: list[str], reference: str | None = "ref") -> RunConfig:
    return parse_config(
        {
            "run": "t",
            "models": {j: {"provider": "sim"} for j in [*judges, "r1", "r2"]},
            "data": [{"format": "demo"}],
            "judge_audit": {
                "judges": judges,
                "responders": ["r1", "r2"],
                "reference_judge": reference,
                "bootstrap": 400,
            },
        }
    )


def _scores(
    judge: str, bias_type: str, pairs: list[tuple[int | None, int | None]], **kw: Any
) -> list[ScoreRecord]:
    out = []
    for item, (u, b) in zip(ITEMS, pairs, strict=False):
        out.append(
            ScoreRecord(judge, item, bias_type, u, b, kw.get("us", "ok"), kw.get("bs", "ok"), "r1")
        )
    return out


def _row(section: dict[str, Any], judge: str) -> dict[str, Any]:
    return next(r for r in section["leaderboard"] if r["judge"] == judge)


def test_a_judge_is_flagged_on_its_paired_difference_from_the_reference() -> None:
    out = JudgeAuditOutcome(items=len(ITEMS))
    ys = [3 + (i * 7) % 8 for i in range(30)]  # unbiased scores vary a lot across items
    out.scores.extend(_scores("ref", "text_dominance", [(y, 1) for y in ys]))
    out.scores.extend(
        _scores("good", "text_dominance", [(y, 1 + (i % 5 == 0)) for i, y in enumerate(ys)])
    )
    out.scores.extend(_scores("bad", "text_dominance", [(y, max(1, y - 2)) for y in ys]))
    sec = judge_audit_section(_cfg(["ref", "good", "bad"]), out)
    bad, good, ref = _row(sec, "bad"), _row(sec, "good"), _row(sec, "ref")
    assert "text_dominance" in bad["flags"]
    p = bad["paired"]["text_dominance"]
    assert p["difference"] < 0 and p["ci_high"] < 0
    assert "text_dominance" not in good["flags"]  # within the margin of the reference
    assert ref["flags"] == [] and "paired" not in ref  # the reference is the baseline


def test_without_a_reference_the_other_judges_mean_is_the_baseline() -> None:
    out = JudgeAuditOutcome(items=len(ITEMS))
    ys = [8] * 30
    for j in ("a", "b", "c"):
        out.scores.extend(_scores(j, "image_misalignment", [(y, 1) for y in ys]))
    out.scores.extend(_scores("d", "image_misalignment", [(y, 7) for y in ys]))
    sec = judge_audit_section(_cfg(["a", "b", "c", "d"], reference=None), out)
    assert "image_misalignment" in _row(sec, "d")["flags"]
    assert all(_row(sec, j)["flags"] == [] for j in "abc")


def test_rates_are_per_type_and_side_and_the_shared_unbiased_judgement_counts_once() -> None:
    out = JudgeAuditOutcome(items=len(ITEMS))
    # The base triplet is shared by three types: its unbiased judgement is one abstention per
    # item, not three; the biased side abstains on one type only.
    for t in ("text_dominance", "image_dominance", "texture_insertion"):
        bs = "abstained" if t == "image_dominance" else "ok"
        out.scores.extend(_scores("ref", t, [(None, 5)] * 10, us="abstained", bs=bs))
    sec = judge_audit_section(_cfg(["ref"]), out)
    ab = _row(sec, "ref")["abstention"]
    assert ab["unbiased"]["judgements"] == 10 and ab["unbiased"]["value"] == pytest.approx(1.0)
    assert ab["biased"]["judgements"] == 30
    assert ab["biased"]["value"] == pytest.approx(1 / 3)
    assert ab["by_type"]["image_dominance"]["biased"]["value"] == pytest.approx(1.0)
    assert ab["by_type"]["text_dominance"]["biased"]["value"] == pytest.approx(0.0)
    assert ab["by_type"]["text_dominance"]["unbiased"]["judgements"] == 10
    pooled = _row(sec, "ref")["abstention_rate"]
    assert pooled["judgements"] == 40 and pooled["value"] == pytest.approx((10 + 10) / 40)
    assert _row(sec, "ref")["unparsed"]["biased"]["value"] == pytest.approx(0.0)


def _verdicts(judge: str, p_first: float) -> list[VerdictRecord]:
    out = []
    for k, item in enumerate(ITEMS):
        for first, second in (("r1", "r2"), ("r2", "r1")):
            pref = "A" if (k * 2 + (first == "r2")) % 10 < p_first * 10 else "B"
            out.append(VerdictRecord(judge, "position", item, first, second, pref, 100, 100))
            out.append(VerdictRecord(judge, "verbosity", item, "original", "padded", "A", 100, 300))
            out.append(VerdictRecord(judge, "verbosity", item, "padded", "original", "B", 300, 100))
    return out


def test_trust_ranks_a_position_biased_judge_below_the_clean_reference() -> None:
    out = JudgeAuditOutcome(items=len(ITEMS))
    ys = [8] * 30
    for j in ("ref", "first"):
        out.scores.extend(_scores(j, "text_dominance", [(y, 1) for y in ys]))
        out.scores.extend(_scores(j, "texture_insertion", [(y, y) for y in ys]))
    # "first" has the better BD/BC (it is the same) but prefers the first answer 90% of the time.
    out.verdicts.extend(_verdicts("ref", 0.5) + _verdicts("first", 0.9))
    sec = judge_audit_section(_cfg(["first", "ref"]), out)
    first, ref = _row(sec, "first"), _row(sec, "ref")
    assert "position" in first["flags"]
    assert ref["rank"] == 1 and first["rank"] == 2
    assert first["rank_label"] == "2*" and ref["rank_label"] == "1"
    comps = first["trust"]["components"]
    assert comps["position"] == pytest.approx(0.8) and comps["verbosity"] == pytest.approx(0.0)
    assert comps["bd_bc"] == pytest.approx(0.0)
    assert first["trust"]["value"] == pytest.approx(1 - 0.8 / 3)  # self-enhancement: no data
    assert first["trust"]["entered"] == ["bd_bc", "position", "verbosity"]
    lo, hi = first["rank_ci"]
    assert 1 <= lo <= 2 <= hi <= 2
    assert first["trust"]["ci_low"] <= first["trust"]["value"] <= first["trust"]["ci_high"]
    assert [r["judge"] for r in sec["leaderboard"]] == ["ref", "first"]


def test_score_rows_stream_in_the_order_they_were_scored() -> None:
    from memearena.methods.judge_audit.analysis import iter_score_rows, score_rows

    out = JudgeAuditOutcome(
        scores=ScoreLog(_scores("j", "visual_transformation", [(7, 5), (None, 3)]))
    )
    rows = list(iter_score_rows(out))
    assert rows == score_rows(out)
    assert [(r["id"], r["unbiased_score"], r["biased_score"]) for r in rows] == [
        (ITEMS[0], 7, 5),
        (ITEMS[1], None, 3),
    ]


def _mixed_outcome() -> JudgeAuditOutcome:
    """Decimal scores, every status, two responders and families, verdicts of both probes."""
    out = JudgeAuditOutcome(items=len(ITEMS), families={"ref": "fam", "r1": "fam"})
    statuses = ["ok", "ok", "ok", "abstained", "unparsed", "refusal", "error"]
    for k in range(900):
        judge = ["ref", "good", "bad"][k % 3]
        st_u, st_b = statuses[k % 7], statuses[(k // 7) % 7]
        u = None if st_u != "ok" else 1 + (k * 37 % 90) / 10
        b = None if st_b != "ok" else 1 + (k * 53 % 90) / 10
        t = ["text_dominance", "texture_insertion", "unnecessary_image", "image_misalignment"]
        out.scores.add(judge, ITEMS[k % 30], t[k % 4], u, b, st_u, st_b, "r1" if k % 2 else "r2")
    for judge in ("ref", "good", "bad"):
        out.verdicts.extend(_verdicts(judge, 0.7 if judge == "bad" else 0.5))
    return out


def test_the_section_does_not_depend_on_where_the_records_were_spooled(monkeypatch) -> None:
    import memearena.methods.judge_audit.records as records

    cfg = _cfg(["ref", "good", "bad"])
    held = judge_audit_section(cfg, _mixed_outcome())
    monkeypatch.setattr(records, "_FLUSH_BYTES", 256)
    monkeypatch.setattr(records._Spool.chunks, "__defaults__", (13,))
    spooled = judge_audit_section(cfg, _mixed_outcome())
    assert spooled == held
    assert _row(held, "ref")["self_enhancement"]["own"] == ["r1"]


def test_self_enhancement_reads_each_base_triplet_once() -> None:
    # The judge's first score of an item's answer is the base score; unnecessary_image's
    # unbiased side (a text-only triplet) is not one, however it was scored.
    out = JudgeAuditOutcome(items=len(ITEMS), families={"ref": "fam", "r1": "fam"})
    for item in ITEMS:
        for judge, own, other in (("ref", 9, 5), ("good", 5, 5)):
            for responder, y in (("r1", own), ("r2", other)):
                out.scores.add(judge, item, "unnecessary_image", 1, 1, "ok", "ok", responder)
                out.scores.add(judge, item, "text_dominance", y, 1, "ok", "ok", responder)
                out.scores.add(judge, item, "texture_insertion", 2, y, "ok", "ok", responder)
    sec = judge_audit_section(_cfg(["ref", "good"]), out)
    se = _row(sec, "ref")["self_enhancement"]
    assert se["value"] == pytest.approx(4.0) and se["n"] == len(ITEMS)
    assert "self_enhancement" in _row(sec, "ref")["flags"]


def _rounded(x: Any) -> Any:
    if isinstance(x, float):
        return float(f"{x:.10g}")
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_rounded(v) for v in x]
    return x


def test_the_section_does_not_depend_on_the_order_records_arrived() -> None:
    # The document, its key order included, must not change with completion order (a resume,
    # a re-run): only a sum's rounding may (terms added in another order).
    import json
    import random

    out = _mixed_outcome()
    # As in a run: the unbiased triplet one judge scored for several types is one judgement.
    first: dict[tuple[Any, ...], tuple[Any, str]] = {}
    scores = []
    for r in out.scores:
        key = (r.judge, r.item, r.responder, r.bias_type == "unnecessary_image")
        u, us = first.setdefault(key, (r.unbiased, r.unbiased_status))
        scores.append(
            ScoreRecord(r.judge, r.item, r.bias_type, u, r.biased, us, r.biased_status, r.responder)
        )
    verdicts = list(out.verdicts)
    docs = []
    for seed in (1, 2):
        random.Random(seed).shuffle(scores)
        random.Random(seed).shuffle(verdicts)
        o = JudgeAuditOutcome(items=out.items, families=out.families)
        o.scores.extend(scores)
        o.verdicts.extend(verdicts)
        docs.append(json.dumps(_rounded(judge_audit_section(_cfg(["ref", "good", "bad"]), o))))
    assert docs[0] == docs[1]


def test_a_rate_of_zero_keeps_an_interval_over_its_items() -> None:
    # No abstention and no parse failure in 60 judgements over 30 items: the rate is 0, but
    # 30 items cannot rule out a few percent; a percentile bootstrap alone gives [0, 0].
    out = JudgeAuditOutcome(items=len(ITEMS))
    out.scores.extend(_scores("ref", "text_dominance", [(7, 3)] * 30))
    row = _row(judge_audit_section(_cfg(["ref"]), out), "ref")
    for key in ("abstention_rate", "parse_failure_rate"):
        est = row[key]
        assert est["value"] == 0.0 and est["n"] == 30
        assert est["ci_low"] == 0.0 and est["ci_high"] == pytest.approx(0.1135, abs=1e-3)
    side = row["abstention"]["by_type"]["text_dominance"]["biased"]
    assert side["ci_high"] > 0.1
